//! # Host callbacks: the GPU tells the host "batch i is done"
//!
//! A host function enqueued on a stream (`cuLaunchHostFunc`) runs on a driver thread once all
//! earlier work on it is done. After each batch's copy-out it is a doorbell: the host prepares
//! the next batch while the GPU works on this one, then sleeps until it rings.
//!
//! The seed technique is `cudaLaunchHostFunc` (formerly `cudaStreamAddCallback`) in NVIDIA's
//! CUDA C++ Programming Guide and its `simpleCallback` sample:
//!
//! ```text
//! void CUDART_CB done(void* data) { signal(((Batch*)data)->index); }   // no CUDA calls here!
//! for (int i = 0; i < B; ++i) {
//!   prepare(h_in[i % 2], i);                                            // host work
//!   cudaMemcpyAsync(d, h_in[i % 2], bytes, cudaMemcpyHostToDevice, s);
//!   kernel<<<grid, 256, 0, s>>>(d, n, iters);
//!   cudaMemcpyAsync(h_out[i % 2], d, bytes, cudaMemcpyDeviceToHost, s);
//!   cudaLaunchHostFunc(s, done, &batch[i]);
//!   wait_for_signal(i - 1); consume(h_out[(i - 1) % 2]);
//! }
//! ```
//!
//! In Rust: `s.launch_host_fn(move || { tx.send(i); })` (no CUDA call in it), two
//! `HostBuffer::pinned` staging and two result buffers in rotation, `s.synchronize()` in the
//! sequential version. Slot i % 2 has its own stream, chained to the other by an event so the
//! batches still run one after another: reading a host buffer waits for the stream its copies
//! are in flight on, and on one stream that would include batch i+1, already queued.
//!
//! The bound: with host preparation P and GPU work G per batch, B batches take at least
//! `P + (B-1) max(P, G) + G` (`lab::batches::pipeline_estimate`).
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kernels_gpu::math::compute_element;
use serde::Serialize;

use crate::lab::harness::budget::{CLEAR_SPEEDUP, MAX_ELEMENTS};
use crate::lab::harness::lesson::no_such_version;
use crate::lab::harness::stats::host_ms;
use crate::lab::kit::batches::{pipeline_estimate, total_elements};
use crate::lab::kit::host_batch_log::{
    batch_value, batches_prepared_ahead, check_event_order, ms_since, order_line, prepare_batch,
    HostEvent,
};
use crate::lab::{
    args, fixed, t, Checks, Drawing, Lesson, Measured, Plan, Report, Sample, WorkModel,
};
use crate::runtime::{DeviceBuffer, Error, Event, Gpu, HostBuffer, Result, Stream};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Batches [1..=4096]. Try 1: nothing to pipeline.
    #[arg(long, default_value_t = 8, value_parser = args::whole(1usize..=MAX_BATCHES))]
    pub batches: usize,
    /// Floats per batch [1..=4294967295]; all batches together at most 268435456.
    #[arg(long, default_value_t = 1 << 20, value_parser = args::whole(1usize..=MAX_ELEMENTS))]
    pub elements: usize,
    /// sin·cos steps per element [1..=100000]: the GPU's share of a batch against the host's
    /// preparation. Try 50 (host-bound) or 5000 (GPU-bound); the report gives both per batch.
    #[arg(long, default_value_t = 500, value_parser = args::whole(1u32..=100_000))]
    pub iters: u32,
}

/// The most batches (each is one host function and one wake-up of the host).
pub const MAX_BATCHES: usize = 4096;
/// Buffers in rotation: batch i+1 is prepared in one while the GPU reads the other.
pub const SLOTS: usize = 2;
/// The sequential version's parts: host preparation and GPU work of one batch, ms.
pub const PREPARE: &str = "host prepare per batch, ms";
pub const GPU_WORK: &str = "GPU work per batch, ms";
/// The pipelined version's part: batches i+1 prepared before batch i's host function ran.
pub const AHEAD: &str = "batches prepared ahead";

/// One batch's estimated host preparation plus GPU work (copy in, compute, copy out), ms.
pub fn batch_estimate_ms(n: usize, iters: u32, model: &WorkModel) -> f64 {
    model.prepare_ms(n) + 2.0 * model.copy_ms(n) + model.compute_ms(n, iters)
}

/// How long the host waits for one host function: a safety net against a stream that never
/// reaches it, far beyond the batch's estimate (which the plan bounded).
pub fn callback_timeout(batch_estimate_ms: f64) -> Duration {
    Duration::from_secs_f64(30.0 + 20.0 * batch_estimate_ms.max(0.0) / 1e3)
}

pub struct Callback {
    batches: usize,
    n: usize,
    iters: u32,
    seed: u64,
    /// Every batch's result, in order, from each version.
    pub out_sequential: Vec<f32>,
    pub out_pipelined: Vec<f32>,
    /// The last pipelined run's events, in time order.
    pub events: Vec<HostEvent>,
    streams: [Stream; SLOTS],
    /// Recorded after each slot's host function: the next batch waits for it.
    done: [Event; SLOTS],
    staging: [HostBuffer<f32>; SLOTS],
    results: [HostBuffer<f32>; SLOTS],
    dev: DeviceBuffer<f32>,
    gpu_start: Event,
    gpu_end: Event,
    timeout: Duration,
}

/// The versions, by their index in [`Lesson::versions`].
pub const SEQUENTIAL: usize = 0;
pub const PIPELINED: usize = 1;

impl Callback {
    /// Prepare, run, synchronize, consume; batch after batch. Host and GPU take turns.
    fn sequential(&mut self, gpu: &Gpu) -> Result<Sample> {
        let (n, s) = (self.n, &self.streams[0]);
        let (mut prepare_ms, mut gpu_ms) = (0.0, 0.0);
        let start = Instant::now();
        for i in 0..self.batches {
            let mut staging = self.staging[0].write()?;
            prepare_ms += host_ms(|| prepare_batch(self.seed, i, &mut staging)).1;
            drop(staging);
            self.gpu_start.record(s)?;
            self.enqueue(gpu, 0)?;
            self.gpu_end.record(s)?;
            s.synchronize()?;
            gpu_ms += self.gpu_end.elapsed_ms(&self.gpu_start)?;
            self.out_sequential[i * n..(i + 1) * n].copy_from_slice(&self.results[0].read()?);
        }
        let b = self.batches as f64;
        Ok(Sample::ms(ms_since(start)).part(PREPARE, prepare_ms / b).part(GPU_WORK, gpu_ms / b))
    }

    /// While the GPU works on batch i, the host prepares batch i+1 and queues it behind,
    /// then sleeps until batch i's host function rings and consumes its results.
    fn pipelined(&mut self, gpu: &Gpu) -> Result<Sample> {
        let (tx, rx) = mpsc::channel::<(usize, f64)>();
        let start = Instant::now();
        let mut events = Vec::with_capacity(4 * self.batches);
        self.submit(gpu, 0, start, &tx, &mut events)?;
        for i in 0..self.batches {
            if i + 1 < self.batches {
                // Slot (i+1) % 2 last held batch i-1, consumed in the previous iteration.
                self.submit(gpu, i + 1, start, &tx, &mut events)?;
            }
            let (done, at) = rx.recv_timeout(self.timeout).map_err(|_| {
                Error::Internal(format!(
                    "the host function of batch {i} did not run within {:.0} s, 20 times the estimate for one batch plus 30 s: the stream is stuck",
                    self.timeout.as_secs_f64()
                ))
            })?;
            if done != i {
                return Err(Error::Verification(format!(
                    "expected the callback of batch {i}, got batch {done}'s"
                )));
            }
            events.push(HostEvent::at(at, "callback", i));
            let (n, slot) = (self.n, i % SLOTS);
            // Waits only for this slot's stream, which the callback says is done.
            self.out_pipelined[i * n..(i + 1) * n].copy_from_slice(&self.results[slot].read()?);
            events.push(HostEvent::now(start, "consumed", i));
        }
        let total = ms_since(start);
        // Callbacks are stamped on the driver thread and arrive late: order by time.
        events.sort_by(|a, b| a.ms.total_cmp(&b.ms));
        let ahead = batches_prepared_ahead(&events, self.batches);
        self.events = events;
        Ok(Sample::ms(total).part(AHEAD, ahead as f64))
    }
}

impl Lesson for Callback {
    const NAME: &'static str = "callback";
    const SUMMARY: &'static str =
        "host functions (cuLaunchHostFunc) wake the host to prepare the next batch: a pipeline";
    const DRAWING: Drawing = Drawing {
        note: "Between the batches the host prepares the next one: no driver call, so not drawn.",
        ..Drawing::PLAIN
    };
    type Args = Args;

    fn versions(_: &Args) -> Vec<String> {
        vec!["sequential (prepare, run, synchronize)".into(), "pipelined with callbacks".into()]
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        let total = total_elements(a.batches, a.elements, "floats of results")?;
        let ms = 2.0 * a.batches as f64 * batch_estimate_ms(a.elements, a.iters, model);
        Ok(Plan::new()
            .host::<f32>(total, 2)?
            .host::<f32>(a.elements, 2 * SLOTS)?
            .device::<f32>(a.elements, 1)?
            .work(ms, "--batches x --elements x --iters"))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<Callback> {
        let (n, model) = (a.elements, WorkModel::for_device(&gpu.info));
        Ok(Callback {
            batches: a.batches,
            n,
            iters: a.iters,
            seed,
            out_sequential: vec![0.0; n * a.batches],
            out_pipelined: vec![0.0; n * a.batches],
            events: Vec::new(),
            streams: [Stream::new(gpu, "slot 0")?, Stream::new(gpu, "slot 1")?],
            done: [Event::without_timing(gpu)?, Event::without_timing(gpu)?],
            staging: [HostBuffer::pinned(gpu, n)?, HostBuffer::pinned(gpu, n)?],
            results: [HostBuffer::pinned(gpu, n)?, HostBuffer::pinned(gpu, n)?],
            dev: DeviceBuffer::zeroed(gpu, n)?,
            gpu_start: Event::new(gpu)?,
            gpu_end: Event::new(gpu)?,
            timeout: callback_timeout(batch_estimate_ms(n, a.iters, &model)),
        })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        match v {
            SEQUENTIAL => self.sequential(gpu),
            PIPELINED => self.pipelined(gpu),
            _ => no_such_version::<Self>(v),
        }
    }

    fn streams(&self) -> Vec<&Stream> {
        self.streams.iter().collect()
    }

    fn verify(&mut self, _gpu: &Gpu, _m: &Measured, checks: &mut Checks) -> Result<()> {
        let (n, seed, iters) = (self.n, self.seed, self.iters);
        checks.bitwise(
            "pipelined == sequential, bit for bit",
            &self.out_pipelined,
            &self.out_sequential,
        );
        checks.approx("GPU vs CPU reference (approx)", &self.out_pipelined, 4096, |k| {
            compute_element(batch_value(seed, k / n, k % n), iters)
        });
        checks.record(
            "event order (prepared, enqueued, callback, consumed)",
            check_event_order(&self.events, self.batches),
        );
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        interpret(m, &self.events, self.batches, r);
    }
}

impl Callback {
    /// Copy in, compute, copy out of `slot`'s buffers on `slot`'s stream.
    fn enqueue(&self, gpu: &Gpu, slot: usize) -> Result<()> {
        let s = &self.streams[slot];
        s.copy_to_device(&self.staging[slot], &self.dev)?;
        gpu.compute(s, &self.dev, self.iters)?;
        s.copy_to_host(&self.dev, &self.results[slot])
    }

    /// Prepares batch `i` in slot i % 2 and queues it after batch i-1, then its doorbell.
    fn submit(
        &self,
        gpu: &Gpu,
        i: usize,
        start: Instant,
        tx: &mpsc::Sender<(usize, f64)>,
        events: &mut Vec<HostEvent>,
    ) -> Result<()> {
        let slot = i % SLOTS;
        prepare_batch(self.seed, i, &mut self.staging[slot].write()?);
        events.push(HostEvent::now(start, "prepared", i));
        let s = &self.streams[slot];
        if i > 0 {
            s.wait_event(&self.done[(i - 1) % SLOTS])?;
        }
        self.enqueue(gpu, slot)?;
        // Stamped before the host function is enqueued: it may run at once.
        events.push(HostEvent::now(start, "enqueued", i));
        let tx = tx.clone();
        s.launch_host_fn(move || {
            let _ = tx.send((i, ms_since(start)));
        })?;
        self.done[slot].record(s)
    }
}

/// The figures and what they mean, from the medians and the last pipelined run's events.
pub fn interpret(m: &Measured, events: &[HostEvent], batches: usize, r: &mut Report) {
    let (seq, pipe) = (m.without().time.median, m.with().time.median);
    let (prep, work) = (m.without().part(PREPARE), m.without().part(GPU_WORK));
    let estimate = pipeline_estimate(prep, work, batches);
    let ahead = batches_prepared_ahead(events, batches);
    r.figure("host prepare, per batch", prep, "ms")
        .figure("GPU copy-in + compute + copy-out, per batch", work, "ms")
        .figure("perfect-overlap estimate", estimate, "ms")
        .figure(
            "batches prepared before the previous batch's callback (last run)",
            ahead as f64,
            "batches",
        );
    for e in events.iter().take(10) {
        r.figure(&format!("at: {}", e.what), e.ms, "ms");
    }
    r.detail("events", events);
    let (speedup, x) = (m.speedup(), fixed(m.speedup(), 2));
    let [save, prep, work, seq, pipe, estimate] =
        [(seq - estimate).max(0.0), prep, work, seq, pipe, estimate].map(|v| fixed(v, 3));
    r.explain(if batches == 1 {
        t!("callback.one_batch", prep, work, seq, pipe)
    } else if speedup >= CLEAR_SPEEDUP {
        t!("callback.faster", prep, work, seq, batches, pipe, x, estimate)
    } else {
        t!("callback.no_gain", pipe, seq, x, prep, work, estimate, save)
    });
    r.explain(order_line(events, batches));
    r.explain(t!("callback.driver_thread"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

    fn good() -> Vec<HostEvent> {
        [(1.0, "prepared", 0), (1.1, "enqueued", 0), (2.0, "prepared", 1)]
            .iter()
            .chain(&[(2.1, "enqueued", 1), (2.5, "callback", 0), (2.6, "consumed", 0)])
            .chain(&[(3.5, "callback", 1), (3.6, "consumed", 1)])
            .map(|&(ms, what, i)| HostEvent::at(ms, what, i))
            .collect()
    }

    // What the flag checks refuse is tested in tests/callback.rs, with a GPU and without.

    #[test]
    fn the_callback_timeout_is_far_beyond_the_estimate() {
        let batch = batch_estimate_ms(1 << 20, 500, &WorkModel::H100);
        assert!((0.1..10.0).contains(&batch), "{batch} ms");
        assert!(callback_timeout(batch) >= Duration::from_secs(30));
        // The largest batch the plan allows (a whole repeat's cap) still gets 20 times it.
        let cap_ms = crate::lab::harness::budget::MAX_SECONDS_PER_REPEAT * 1e3;
        assert!(callback_timeout(cap_ms) >= Duration::from_secs_f64(20.0 * cap_ms / 1e3));
    }

    fn told(seq: f64, pipe: f64, events: &[HostEvent], batches: usize) -> String {
        let runs = vec![
            vec![Sample::ms(seq).part(PREPARE, 1.0).part(GPU_WORK, 1.0)],
            vec![Sample::ms(pipe).part(AHEAD, 1.0)],
        ];
        let names = Callback::versions(&args_from::<Callback>(&[]).unwrap());
        let mut r = Report::new("callback", "", "");
        interpret(&Measured::from_samples(names, runs), events, batches, &mut r);
        r.interpretation.join("\n")
    }

    #[test]
    fn interpretation_follows_the_data() {
        let fast = told(4.0, 3.0, &good(), 2);
        assert!(
            fast.contains("1.33x faster") && fast.contains("every batch i+1 was prepared"),
            "{fast}"
        );
        let mut late = good();
        late[2].ms = 2.55;
        let slow = told(4.0, 3.9, &late, 2);
        assert!(
            slow.contains("gained nothing clear") && slow.contains("no batch was prepared"),
            "{slow}"
        );
        let one = told(2.0, 2.0, &good()[..2], 1);
        assert!(one.contains("nothing to pipeline") && !one.contains("x faster"), "{one}");
    }
}
