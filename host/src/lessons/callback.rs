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
//! sequential version. The pipelined version gives slot i % 2 a stream of its own, chained to
//! the other by an event so the batches still run one after another. The third version queues
//! every batch on one stream, as the C++ above does, which keeps them in order by itself:
//! reading a result waits for the event its buffer recorded after its copy, not for batch i+1
//! queued behind it, so one stream pipelines too.
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
/// The pipelined versions' parts: batches i+1 prepared before batch i's host function ran,
/// and how long the host waited in `read()` for a result, per batch.
pub const AHEAD: &str = "batches prepared ahead";
pub const READ_WAIT: &str = "host wait to read a result, per batch, ms";

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
    pub out_one_stream: Vec<f32>,
    /// The last pipelined run's events, in time order.
    pub events: Vec<HostEvent>,
    /// The last one-stream run's events, in time order.
    pub events_one_stream: Vec<HostEvent>,
    /// One stream per slot (the sequential version uses the first).
    streams: [Stream; SLOTS],
    /// The one stream of the third version.
    one_stream: Stream,
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
pub const ONE_STREAM: usize = 2;

/// Where the pipelined versions queue the batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Queueing {
    /// Slot i % 2's stream, after an event recorded behind batch i-1 on the other.
    StreamPerSlot,
    /// One stream for every batch: its order is the batches' order.
    OneStream,
}

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
            self.enqueue(gpu, s, 0)?;
            self.gpu_end.record(s)?;
            s.synchronize()?;
            gpu_ms += self.gpu_end.elapsed_ms(&self.gpu_start)?;
            self.out_sequential[i * n..(i + 1) * n].copy_from_slice(&self.results[0].read()?);
        }
        let b = self.batches as f64;
        Ok(Sample::ms(ms_since(start)).part(PREPARE, prepare_ms / b).part(GPU_WORK, gpu_ms / b))
    }

    /// While the GPU works on batch i, the host prepares batch i+1 and queues it behind,
    /// then sleeps until batch i's host function rings and consumes its results. Each slot
    /// has a stream of its own.
    fn pipelined(&mut self, gpu: &Gpu) -> Result<Sample> {
        let mut out = std::mem::take(&mut self.out_pipelined);
        let run = self.pipeline(gpu, Queueing::StreamPerSlot, &mut out);
        self.out_pipelined = out;
        let (sample, events) = run?;
        self.events = events;
        Ok(sample)
    }

    /// The same pipeline with every batch on one stream. Reading batch i's result waits for
    /// the event its buffer recorded after the copy out, done when the doorbell rang, and not
    /// for batch i+1, queued behind it on the same stream.
    fn one_stream(&mut self, gpu: &Gpu) -> Result<Sample> {
        let mut out = std::mem::take(&mut self.out_one_stream);
        let run = self.pipeline(gpu, Queueing::OneStream, &mut out);
        self.out_one_stream = out;
        let (sample, events) = run?;
        self.events_one_stream = events;
        Ok(sample)
    }

    /// Runs the pipeline with the batches queued as `queueing` says, writing every batch's
    /// result into `out`: the sample and the run's events, in time order.
    fn pipeline(
        &self,
        gpu: &Gpu,
        queueing: Queueing,
        out: &mut [f32],
    ) -> Result<(Sample, Vec<HostEvent>)> {
        let (tx, rx) = mpsc::channel::<(usize, f64)>();
        let start = Instant::now();
        let mut events = Vec::with_capacity(4 * self.batches);
        let mut read_wait_ms = 0.0;
        self.submit(gpu, queueing, 0, start, &tx, &mut events)?;
        for i in 0..self.batches {
            if i + 1 < self.batches {
                // Slot (i+1) % 2 last held batch i-1, consumed in the previous iteration.
                self.submit(gpu, queueing, i + 1, start, &tx, &mut events)?;
            }
            let (done, at) = rx.recv_timeout(self.timeout).map_err(|_| {
                Error::Internal(format!(
                    "the host function of batch {i} did not run within {:.0} s, 20 times the estimate for one batch plus 30 s: the stream is stuck",
                    self.timeout.as_secs_f64()
                ))
            })?;
            if done != i {
                return Err(Error::Verification(t!("error.callback.wrong_batch", i, done)));
            }
            events.push(HostEvent::at(at, "callback", i));
            let (n, slot) = (self.n, i % SLOTS);
            // Waits for the event after this batch's copy out, which the callback says is done.
            let (result, wait_ms) = host_ms(|| self.results[slot].read());
            read_wait_ms += wait_ms;
            out[i * n..(i + 1) * n].copy_from_slice(&result?);
            events.push(HostEvent::now(start, "consumed", i));
        }
        let total = ms_since(start);
        // Callbacks are stamped on the driver thread and arrive late: order by time.
        events.sort_by(|a, b| a.ms.total_cmp(&b.ms));
        let ahead = batches_prepared_ahead(&events, self.batches);
        let sample = Sample::ms(total)
            .part(AHEAD, ahead as f64)
            .part(READ_WAIT, read_wait_ms / self.batches as f64);
        Ok((sample, events))
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
        vec![
            "sequential (prepare, run, synchronize)".into(),
            "pipelined with callbacks".into(),
            "one stream, host function doorbell".into(),
        ]
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        let total = total_elements(a.batches, a.elements, "floats of results")?;
        let ms = 3.0 * a.batches as f64 * batch_estimate_ms(a.elements, a.iters, model);
        Ok(Plan::new()
            .host::<f32>(total, 3)?
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
            out_one_stream: vec![0.0; n * a.batches],
            events: Vec::new(),
            events_one_stream: Vec::new(),
            streams: [Stream::new(gpu, "slot 0")?, Stream::new(gpu, "slot 1")?],
            one_stream: Stream::new(gpu, "one stream")?,
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
            ONE_STREAM => self.one_stream(gpu),
            _ => no_such_version::<Self>(v),
        }
    }

    fn streams(&self) -> Vec<&Stream> {
        self.streams.iter().chain([&self.one_stream]).collect()
    }

    fn drawn(&self) -> Vec<usize> {
        vec![SEQUENTIAL, PIPELINED, ONE_STREAM]
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
        checks.bitwise(
            "one stream == sequential, bit for bit",
            &self.out_one_stream,
            &self.out_sequential,
        );
        checks.approx(
            "one stream: GPU vs CPU reference (approx)",
            &self.out_one_stream,
            4096,
            |k| compute_element(batch_value(seed, k / n, k % n), iters),
        );
        checks.record(
            "one stream: event order (prepared, enqueued, callback, consumed)",
            check_event_order(&self.events_one_stream, self.batches),
        );
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        interpret(m, &self.events, self.batches, r);
        interpret_one_stream(m, &self.events_one_stream, self.batches, r);
    }
}

impl Callback {
    /// Copy in, compute, copy out of `slot`'s buffers on `s`.
    fn enqueue(&self, gpu: &Gpu, s: &Stream, slot: usize) -> Result<()> {
        s.copy_to_device(&self.staging[slot], &self.dev)?;
        gpu.compute(s, &self.dev, self.iters)?;
        s.copy_to_host(&self.dev, &self.results[slot])
    }

    /// Prepares batch `i` in slot i % 2 and queues it after batch i-1, then its doorbell.
    fn submit(
        &self,
        gpu: &Gpu,
        queueing: Queueing,
        i: usize,
        start: Instant,
        tx: &mpsc::Sender<(usize, f64)>,
        events: &mut Vec<HostEvent>,
    ) -> Result<()> {
        let slot = i % SLOTS;
        prepare_batch(self.seed, i, &mut self.staging[slot].write()?);
        events.push(HostEvent::now(start, "prepared", i));
        let s = match queueing {
            Queueing::StreamPerSlot => &self.streams[slot],
            Queueing::OneStream => &self.one_stream,
        };
        if queueing == Queueing::StreamPerSlot && i > 0 {
            s.wait_event(&self.done[(i - 1) % SLOTS])?;
        }
        self.enqueue(gpu, s, slot)?;
        // Stamped before the host function is enqueued: it may run at once.
        events.push(HostEvent::now(start, "enqueued", i));
        let tx = tx.clone();
        s.launch_host_fn(move || {
            let _ = tx.send((i, ms_since(start)));
        })?;
        match queueing {
            Queueing::StreamPerSlot => self.done[slot].record(s),
            Queueing::OneStream => Ok(()),
        }
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

/// What the one-stream version shows beside the other two: its time, and how long reading a
/// result held the host, against a batch's GPU work (what a wait for the next batch, queued
/// behind it on the same stream, would have cost).
pub fn interpret_one_stream(m: &Measured, events: &[HostEvent], batches: usize, r: &mut Report) {
    let (one_stream, two_streams) = (m.version(ONE_STREAM), m.version(PIPELINED));
    let (one_ms, two_ms) = (one_stream.time.median, two_streams.time.median);
    let seq_ms = m.without().time.median;
    let (read_one, read_two) = (one_stream.part(READ_WAIT), two_streams.part(READ_WAIT));
    let work_ms = m.without().part(GPU_WORK);
    let ahead = batches_prepared_ahead(events, batches);
    r.figure("one stream: host wait to read a result, per batch", read_one, "ms")
        .figure("two streams: host wait to read a result, per batch", read_two, "ms")
        .figure(
            "one stream: batches prepared before the previous batch's callback (last run)",
            ahead as f64,
            "batches",
        );
    if batches == 1 {
        // Nothing queued behind the only batch: the first line of the explanation says so.
        return;
    }
    let two = fixed(two_ms, 3);
    let than_two = if two_ms / one_ms >= CLEAR_SPEEDUP {
        t!("callback.one_stream_faster_than_two", x = fixed(two_ms / one_ms, 2), two)
    } else if one_ms / two_ms >= CLEAR_SPEEDUP {
        t!("callback.one_stream_slower_than_two", x = fixed(one_ms / two_ms, 2), two)
    } else {
        t!("callback.one_stream_as_two", two, clear = fixed(CLEAR_SPEEDUP, 2))
    };
    let x = fixed(seq_ms / one_ms, 2);
    let [one, seq] = [one_ms, seq_ms].map(|v| fixed(v, 3));
    r.explain(if seq_ms / one_ms >= CLEAR_SPEEDUP {
        t!("callback.one_stream_gain", one, x, seq, than_two)
    } else {
        t!("callback.one_stream_no_gain", one, x, seq, than_two)
    });
    let [wait, work] = [read_one, work_ms].map(|v| fixed(v, 3));
    r.explain(if read_one < 0.5 * work_ms {
        t!("callback.read_waits_for_its_copy", wait, work)
    } else {
        t!("callback.read_waited_long", wait, work)
    });
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

    /// Medians of the three versions: times in ms, and the one-stream read wait.
    fn measured(seq: f64, pipe: f64, one: f64, read_one: f64) -> Measured {
        let runs = vec![
            vec![Sample::ms(seq).part(PREPARE, 1.0).part(GPU_WORK, 1.0)],
            vec![Sample::ms(pipe).part(AHEAD, 1.0).part(READ_WAIT, 0.01)],
            vec![Sample::ms(one).part(AHEAD, 1.0).part(READ_WAIT, read_one)],
        ];
        let names = Callback::versions(&args_from::<Callback>(&[]).unwrap());
        Measured::from_samples(names, runs)
    }

    fn told(seq: f64, pipe: f64, events: &[HostEvent], batches: usize) -> String {
        let mut r = Report::new("callback", "", "");
        interpret(&measured(seq, pipe, pipe, 0.01), events, batches, &mut r);
        r.interpretation.join("\n")
    }

    fn told_one_stream(seq: f64, pipe: f64, one: f64, read_one: f64, batches: usize) -> String {
        let mut r = Report::new("callback", "", "");
        let m = measured(seq, pipe, one, read_one);
        interpret_one_stream(&m, &good(), batches, &mut r);
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

    #[test]
    fn the_one_stream_version_is_told_from_its_own_figures() {
        // As fast as two streams, and the read held the host far less than a batch's GPU work
        // (1 ms here): it waited for its own copy only.
        let same = told_one_stream(4.0, 3.0, 3.1, 0.01, 2);
        assert!(same.contains("3.100 ms, 1.29x faster than sequential"), "{same}");
        assert!(same.contains("as fast as the two streams' 3.000 ms (within 1.10x)"), "{same}");
        assert!(same.contains("0.010 ms a batch") && same.contains("only for"), "{same}");
        // Slower than two streams, no clear gain, and a read as long as a batch's GPU work.
        let slow = told_one_stream(4.0, 3.0, 3.9, 0.9, 2);
        assert!(slow.contains("gained nothing clear") && slow.contains("1.30x slower"), "{slow}");
        assert!(slow.contains("0.900 ms a batch") && !slow.contains("only for"), "{slow}");
        let fast = told_one_stream(4.0, 3.5, 3.0, 0.01, 2);
        assert!(fast.contains("1.17x faster than the two streams"), "{fast}");
        // One batch: figures only, no claim about a queue behind it.
        assert!(told_one_stream(2.0, 2.0, 2.0, 0.01, 1).is_empty());
    }
}
