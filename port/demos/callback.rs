//! # Host callbacks: the GPU tells the host "batch i is done"
//!
//! The concept: a host function enqueued on a stream (`cuLaunchHostFunc`) runs on a driver
//! thread as soon as everything queued before it on that stream has finished. Enqueue one
//! after each batch's copy-out and it becomes a doorbell: the host thread does not poll or
//! synchronize, it sleeps on a channel until the GPU rings, and in the meantime it prepares
//! the next batch. The host's work and the GPU's work overlap: a two-stage pipeline.
//!
//! The seed technique is the `cudaLaunchHostFunc` (formerly `cudaStreamAddCallback`) pattern
//! of the CUDA C++ Programming Guide and the `simpleCallback` sample:
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
//! | CUDA C++                          | streamlab                                         |
//! |-----------------------------------|---------------------------------------------------|
//! | `cudaLaunchHostFunc(s, fn, data)` | `stream.launch_host_fn(move \|\| tx.send(i))`     |
//! | `cudaMallocHost` (×2, rotating)   | `memory::pinned(n)` (×2 staging, ×2 results)      |
//! | `cudaStreamSynchronize(s)`        | `stream.synchronize()` (the sequential version)   |
//!
//! Two rules of host functions, both from the driver documentation: the function must not
//! call CUDA (it runs on a driver thread; a CUDA call there may deadlock or fail with
//! `CUDA_ERROR_NOT_PERMITTED`), and later work on its stream waits until it returns, so it
//! should only signal (here: one `mpsc` send) and leave the real work to the host thread.
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cust::memory::{DeviceBuffer, LockedBuffer};
use kernels_gpu::math::compute_element;
use serde::Serialize;

use crate::data::{ensure_bitwise_equal, ensure_close_to_reference};
use crate::demos::compute_transfer::{CLEAR_SPEEDUP, MAX_TOTAL_ELEMENTS};
use crate::demos::estimate::{ensure_bounded, WorkModel};
use crate::demos::{buffer_bytes, check_elements, ensure_host_memory, Options, MAX_ELEMENTS};
use crate::error::{ensure, Error, Result};
use crate::gpu::Gpu;
use crate::memory::{device, pinned};
use crate::report::Report;
use crate::stream::{drain_on_error, Event, Stream};
use crate::timeline::Timeline;
use crate::timing::{host_ms, interleaved, Stats};

pub const SUMMARY: &str =
    "host functions (cuLaunchHostFunc) wake the host to prepare the next batch: a pipeline";
pub const FLAGS: &str =
    "--batches (8) --elements (1048576, per batch) --iters (500) --reps --timeline";

pub const DEFAULT_BATCHES: usize = 8;
pub const DEFAULT_ELEMENTS: usize = 1 << 20;
/// Chosen so one batch's GPU work (copy in, compute, copy out) takes about as long as the
/// host's preparation of a batch on a server CPU (~1 ms each): the pipeline then hides one
/// behind the other almost completely.
pub const DEFAULT_ITERS: u32 = 500;
/// Staging buffers in rotation: batch i+1 is prepared in one while the GPU reads the other.
pub const SLOTS: usize = 2;
/// The most batches (each is one host function call and one wake-up of the host).
pub const MAX_BATCHES: usize = 4096;

/// Element `j` of batch `batch`: what the host "prepares", a splitmix64 hash of
/// (seed, batch, j) mapped to [-π, π). Deterministic, so both versions and the CPU reference
/// see the same data, and costly enough (~1 ns an element) to be real host work.
pub fn batch_value(seed: u64, batch: usize, j: usize) -> f32 {
    let mut z = seed
        ^ (batch as u64).wrapping_mul(0xA24B_AED4_963E_E407)
        ^ (j as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let bits = (z >> 40) as f32; // 24 random bits: exactly representable
    bits / (1u32 << 24) as f32 * 2.0 * std::f32::consts::PI - std::f32::consts::PI
}

/// The host's preparation of one batch: fills `out` with [`batch_value`]s.
pub fn prepare_batch(seed: u64, batch: usize, out: &mut [f32]) {
    for (j, x) in out.iter_mut().enumerate() {
        *x = batch_value(seed, batch, j);
    }
}

/// The time a perfect two-stage pipeline takes for `b` batches when the first stage takes
/// `p` and the second `g` per batch (ms): the first batch's first stage, then the slower
/// stage for the other b-1 batches, then the last batch's second stage. Here the stages are
/// the host's preparation and the GPU's work; the prefetch demo uses it for upload and step.
pub fn pipeline_estimate(p: f64, g: f64, b: usize) -> f64 {
    p + (b.saturating_sub(1)) as f64 * p.max(g) + g
}

/// One batch's estimated host preparation plus GPU work (copy in, compute, copy out), ms.
pub fn batch_estimate_ms(n: usize, iters: u32, model: &WorkModel) -> f64 {
    model.prepare_ms(n) + 2.0 * model.copy_ms(n) + model.compute_ms(n, iters)
}

/// How long the host waits for one batch's host function before giving up: a safety net
/// against a stream that never reaches it, far beyond what the batch should take (the
/// options were bounded by [`check_sizes`] from the same estimate).
pub fn callback_timeout(batch_estimate_ms: f64) -> Duration {
    Duration::from_secs_f64(30.0 + 20.0 * batch_estimate_ms.max(0.0) / 1e3)
}

/// Checks sizes and work without a GPU: element and batch counts, the host memory for both
/// versions' results and the pinned staging and result buffers, and the work of one repeat
/// (a sequential and a pipelined run) under `model`.
pub fn check_sizes(n: usize, batches: usize, iters: u32, model: &WorkModel) -> Result<()> {
    check_elements(n, MAX_ELEMENTS)?;
    ensure((1..=MAX_BATCHES).contains(&batches), || {
        format!("--batches must be from 1 to {MAX_BATCHES}, not {batches}")
    })?;
    let total = n.checked_mul(batches).filter(|&t| t <= MAX_TOTAL_ELEMENTS);
    ensure(total.is_some(), || {
        format!(
            "--batches {batches} x --elements {n} is more than the {MAX_TOTAL_ELEMENTS} floats of results this demo keeps"
        )
    })?;
    ensure_bounded(
        "callback",
        2.0 * batches as f64 * batch_estimate_ms(n, iters, model),
        &format!("--batches {batches} x --elements {n} x --iters {iters}"),
    )?;
    ensure_host_memory(
        buffer_bytes::<f32>(n, 2 * batches + 2 * SLOTS)?,
        &format!("{batches} batches of {n} floats"),
    )
}

/// Checks the flags this demo reads, before the GPU is touched.
pub fn check_options(opts: &Options) -> Result<()> {
    check_sizes(
        opts.elements.unwrap_or(DEFAULT_ELEMENTS),
        opts.batches.unwrap_or(DEFAULT_BATCHES),
        opts.iters.unwrap_or(DEFAULT_ITERS),
        &WorkModel::H100,
    )
}

/// The same checks for the GPU present, plus its free device memory (one batch).
pub fn validate(gpu: &Gpu, n: usize, batches: usize, iters: u32) -> Result<()> {
    check_sizes(n, batches, iters, &WorkModel::for_gpu(gpu))?;
    gpu.ensure_device_memory(
        buffer_bytes::<f32>(n, 1)?,
        &format!("a batch of {n} floats"),
    )
}

/// One thing that happened on the host side of the pipelined run, in ms since its start.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostEvent {
    pub ms: f64,
    /// "prepared i", "enqueued i", "callback i" (stamped on the driver thread) or "consumed i".
    pub what: String,
}

impl HostEvent {
    fn new(ms: f64, what: &str, batch: usize) -> HostEvent {
        HostEvent {
            ms,
            what: format!("{what} {batch}"),
        }
    }
}

/// Checks the order a pipelined run's events must have: every batch was prepared, enqueued,
/// called back and consumed in that order, and the callbacks came in batch order (a stream
/// runs its host functions in the order they were enqueued).
pub fn check_event_order(events: &[HostEvent], batches: usize) -> Result<String> {
    let at = |what: &str, i: usize| -> Result<f64> {
        let name = format!("{what} {i}");
        events
            .iter()
            .find(|e| e.what == name)
            .map(|e| e.ms)
            .ok_or_else(|| Error::Verification(format!("no event \"{name}\" was recorded")))
    };
    let mut last_callback = f64::NEG_INFINITY;
    for i in 0..batches {
        let (p, e, c, u) = (
            at("prepared", i)?,
            at("enqueued", i)?,
            at("callback", i)?,
            at("consumed", i)?,
        );
        if !(p <= e && e <= c && c <= u) {
            return Err(Error::Verification(format!(
                "batch {i}: prepared {p:.3}, enqueued {e:.3}, callback {c:.3}, consumed {u:.3} ms are out of order"
            )));
        }
        if c < last_callback {
            return Err(Error::Verification(format!(
                "callback {i} at {c:.3} ms came before the previous batch's at {last_callback:.3} ms"
            )));
        }
        last_callback = c;
    }
    Ok(format!(
        "{batches} batches: prepared <= enqueued <= callback <= consumed, callbacks in batch order"
    ))
}

/// How many batches i+1 were prepared before batch i's host function ran: the host's
/// preparation hidden behind the GPU's work, counted from a pipelined run's events (out of
/// `batches - 1`; batches whose events are missing do not count).
pub fn batches_prepared_ahead(events: &[HostEvent], batches: usize) -> usize {
    let at = |name: String| events.iter().find(|e| e.what == name).map(|e| e.ms);
    (1..batches)
        .filter(|&i| {
            matches!(
                (at(format!("prepared {i}")), at(format!("callback {}", i - 1))),
                (Some(p), Some(c)) if p < c
            )
        })
        .count()
}

/// Per-batch timings of the sequential version, in ms (sums over batches are B times these).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SequentialTimes {
    /// Host wall time of the whole run.
    pub total_ms: f64,
    /// Host time spent preparing, summed over batches.
    pub prepare_ms: f64,
    /// GPU time (events) of copy-in + compute + copy-out, summed over batches.
    pub gpu_ms: f64,
}

/// Both versions' buffers, allocated once (allocation synchronizes the device).
pub struct CallbackPipeline {
    pub n: usize,
    pub batches: usize,
    pub iters: u32,
    pub seed: u64,
    /// Every batch's result, in order, from the sequential version.
    pub out_sequential: Vec<f32>,
    /// The same from the pipelined version.
    pub out_pipelined: Vec<f32>,
    stream: Stream,
    staging: [LockedBuffer<f32>; SLOTS],
    results: [LockedBuffer<f32>; SLOTS],
    dev: DeviceBuffer<f32>,
    gpu_start: Event,
    gpu_end: Event,
    /// How long the pipelined version waits for one host function (a safety net).
    callback_timeout: Duration,
}

impl CallbackPipeline {
    pub fn new(gpu: &Gpu, n: usize, batches: usize, iters: u32, seed: u64) -> Result<Self> {
        validate(gpu, n, batches, iters)?;
        let estimate = batch_estimate_ms(n, iters, &WorkModel::for_gpu(gpu));
        Ok(CallbackPipeline {
            n,
            batches,
            iters,
            seed,
            out_sequential: vec![0.0; n * batches],
            out_pipelined: vec![0.0; n * batches],
            stream: Stream::new("callback")?,
            staging: [pinned(n)?, pinned(n)?],
            results: [pinned(n)?, pinned(n)?],
            dev: device(n)?,
            gpu_start: Event::new()?,
            gpu_end: Event::new()?,
            callback_timeout: callback_timeout(estimate),
        })
    }

    /// Copy in, compute, copy out of `slot`'s buffers on the stream.
    fn enqueue_batch(&mut self, gpu: &Gpu, slot: usize) -> Result<()> {
        // SAFETY: `staging[slot]` and `results[slot]` belong to `self`, borrowed mutably by
        // the caller, which does not touch them (nor return) until a host function or a
        // synchronize enqueued after these copies has reported the batch done; on an error,
        // `run_sequential`/`run_pipelined` return only after `drain_on_error` has
        // synchronized the context.
        unsafe { self.stream.copy_to_device(&self.staging[slot], &self.dev)? };
        gpu.compute(&self.stream, &self.dev, self.iters)?;
        // SAFETY: as above.
        unsafe {
            self.stream
                .copy_to_host(&self.dev, &mut self.results[slot])?
        };
        Ok(())
    }

    /// Prepare, run, synchronize, consume; batch after batch. Host and GPU take turns.
    pub fn run_sequential(&mut self, gpu: &Gpu) -> Result<SequentialTimes> {
        drain_on_error(|| self.sequential_inner(gpu))
    }

    fn sequential_inner(&mut self, gpu: &Gpu) -> Result<SequentialTimes> {
        let (mut prepare_ms, mut gpu_ms) = (0.0, 0.0);
        let start = Instant::now();
        for i in 0..self.batches {
            let ((), ms) = host_ms(|| prepare_batch(self.seed, i, &mut self.staging[0]));
            prepare_ms += ms;
            self.gpu_start.record(&self.stream)?;
            self.enqueue_batch(gpu, 0)?;
            self.gpu_end.record(&self.stream)?;
            self.stream.synchronize()?;
            gpu_ms += self.gpu_end.elapsed_ms(&self.gpu_start)?;
            self.out_sequential[i * self.n..(i + 1) * self.n].copy_from_slice(&self.results[0]);
        }
        Ok(SequentialTimes {
            total_ms: start.elapsed().as_secs_f64() * 1e3,
            prepare_ms,
            gpu_ms,
        })
    }

    /// The pipeline: while the GPU works on batch i, the host prepares batch i+1 in the other
    /// staging buffer and queues it behind batch i, then sleeps until batch i's host function
    /// rings. Returns the host wall time and the timestamped events.
    pub fn run_pipelined(&mut self, gpu: &Gpu) -> Result<(f64, Vec<HostEvent>)> {
        drain_on_error(|| self.pipelined_inner(gpu))
    }

    fn pipelined_inner(&mut self, gpu: &Gpu) -> Result<(f64, Vec<HostEvent>)> {
        let (tx, rx) = mpsc::channel::<(usize, f64)>();
        let start = Instant::now();
        let since = move || start.elapsed().as_secs_f64() * 1e3;
        let mut events = Vec::with_capacity(4 * self.batches);

        // Prepare and queue batch `i` in slot i % 2, followed by its doorbell.
        let submit = |me: &mut Self, i: usize, events: &mut Vec<HostEvent>| -> Result<()> {
            let slot = i % SLOTS;
            prepare_batch(me.seed, i, &mut me.staging[slot]);
            events.push(HostEvent::new(since(), "prepared", i));
            me.enqueue_batch(gpu, slot)?;
            // Stamped before the host function is enqueued: it may run at once.
            events.push(HostEvent::new(since(), "enqueued", i));
            let tx = tx.clone();
            // The host function only stamps the time and sends; no CUDA call (see the module
            // documentation), and it returns at once so the stream is not held up.
            me.stream.launch_host_fn(move || {
                let _ = tx.send((i, since()));
            })?;
            Ok(())
        };

        submit(self, 0, &mut events)?;
        for i in 0..self.batches {
            if i + 1 < self.batches {
                // Slot (i+1) % 2 last held batch i-1, consumed at the end of the previous
                // iteration: free to refill while the GPU works on batch i.
                submit(self, i + 1, &mut events)?;
            }
            let timeout = self.callback_timeout;
            let (done, at) = rx.recv_timeout(timeout).map_err(|_| {
                Error::Internal(format!(
                    "the host function of batch {i} did not run within {:.0} s, 20 times the estimate for one batch plus 30 s: the stream is stuck",
                    timeout.as_secs_f64()
                ))
            })?;
            if done != i {
                // A stream runs its host functions in the order they were enqueued.
                return Err(Error::Verification(format!(
                    "expected the callback of batch {i}, got batch {done}'s"
                )));
            }
            events.push(HostEvent::new(at, "callback", i));
            // The callback ran after the copy-out of batch i completed: its results are in.
            let slot = i % SLOTS;
            self.out_pipelined[i * self.n..(i + 1) * self.n].copy_from_slice(&self.results[slot]);
            events.push(HostEvent::new(since(), "consumed", i));
        }
        let total = since();
        // Callbacks are stamped on the driver thread and arrive late: order by time.
        events.sort_by(|a, b| a.ms.total_cmp(&b.ms));
        Ok((total, events))
    }

    pub fn check_bitwise(&self) -> Result<String> {
        ensure_bitwise_equal(
            "pipelined vs sequential output",
            &self.out_pipelined,
            &self.out_sequential,
        )?;
        Ok(format!(
            "all {} elements identical",
            self.out_pipelined.len()
        ))
    }

    pub fn check_reference(&self, samples: usize) -> Result<String> {
        let n = self.n;
        let checked = ensure_close_to_reference(
            "pipelined output vs CPU",
            &self.out_pipelined,
            samples,
            |k| compute_element(batch_value(self.seed, k / n, k % n), self.iters),
        )?;
        Ok(format!("{checked} sampled elements within tolerance"))
    }

    /// One more pipelined run with a timeline on the stream (the host functions themselves
    /// do not appear: they are not copies or kernels).
    pub fn timeline(&mut self, gpu: &Gpu) -> Result<String> {
        self.gpu_start.record(&self.stream)?;
        let timeline = Timeline::attach(&[&self.stream]);
        let run = self
            .run_pipelined(gpu)
            .and_then(|_| self.stream.synchronize());
        timeline.finish(&[&self.stream], run, &self.gpu_start)
    }
}

/// Medians over `reps` interleaved runs of both versions, after one warm-up of each.
pub struct Measured {
    pub sequential: Stats,
    pub pipelined: Stats,
    /// Per batch, ms.
    pub prepare_per_batch: f64,
    pub gpu_per_batch: f64,
    /// The events of the last pipelined run.
    pub events: Vec<HostEvent>,
}

pub fn measure(gpu: &Gpu, p: &mut CallbackPipeline, reps: usize) -> Result<Measured> {
    let (seq, mut pipe) =
        interleaved(p, reps, |p| p.run_sequential(gpu), |p| p.run_pipelined(gpu))?;
    let b = p.batches as f64;
    Ok(Measured {
        sequential: Stats::of_each(&seq, |s| s.total_ms),
        pipelined: Stats::of_each(&pipe, |(ms, _)| *ms),
        prepare_per_batch: Stats::of_each(&seq, |s| s.prepare_ms / b).median,
        gpu_per_batch: Stats::of_each(&seq, |s| s.gpu_ms / b).median,
        // The event log of the last pipelined run.
        events: pipe.pop().map(|(_, events)| events).unwrap_or_default(),
    })
}

pub fn run(gpu: &Gpu, opts: &Options) -> Result<Report> {
    let n = opts.elements.unwrap_or(DEFAULT_ELEMENTS);
    let batches = opts.batches.unwrap_or(DEFAULT_BATCHES);
    let iters = opts.iters.unwrap_or(DEFAULT_ITERS);
    let mut p = CallbackPipeline::new(gpu, n, batches, iters, opts.seed)?;
    let m = measure(gpu, &mut p, opts.reps)?;
    let estimate = pipeline_estimate(m.prepare_per_batch, m.gpu_per_batch, batches);
    let ahead = batches_prepared_ahead(&m.events, batches);

    let mut r = Report::new(
        "callback",
        "host callbacks (cuLaunchHostFunc) pipeline host and GPU work",
        &gpu.info.name,
    );
    r.param("batches", batches)
        .param("elements_per_batch", n)
        .param("iters", iters)
        .param("reps", opts.reps);
    r.figure("host prepare, per batch", m.prepare_per_batch, "ms")
        .figure(
            "GPU copy-in + compute + copy-out, per batch",
            m.gpu_per_batch,
            "ms",
        )
        .figure(
            "sequential (prepare, run, synchronize), median",
            m.sequential.median,
            "ms",
        )
        .figure("pipelined with callbacks, median", m.pipelined.median, "ms")
        .figure("speed-up", m.sequential.median / m.pipelined.median, "x")
        .figure("perfect-overlap estimate", estimate, "ms");
    r.figure(
        "batches prepared before the previous batch's callback (last run)",
        ahead as f64,
        "batches",
    );
    // The first events of the last pipelined run, as a few readable lines.
    for e in m.events.iter().take(10) {
        r.figure(&format!("at: {}", e.what), e.ms, "ms");
    }
    r.detail("sequential_ms", m.sequential)
        .detail("pipelined_ms", m.pipelined)
        .detail("events", &m.events);
    if opts.timeline {
        r.timeline = Some(p.timeline(gpu)?);
    }
    r.check("pipelined == sequential, bit for bit", p.check_bitwise());
    r.check("GPU vs CPU reference (approx)", p.check_reference(4096));
    r.check(
        "event order (prepared, enqueued, callback, consumed)",
        check_event_order(&m.events, batches),
    );
    let speedup = m.sequential.median / m.pipelined.median;
    let (prep, work) = (m.prepare_per_batch, m.gpu_per_batch);
    r.explain(if batches == 1 {
        format!(
            "With one batch there is nothing to pipeline: the host prepares it ({prep:.3} ms), the GPU runs it ({work:.3} ms) and the host function wakes the host ({:.3} ms sequential, {:.3} ms with the callback). Use --batches 2 or more.",
            m.sequential.median, m.pipelined.median
        )
    } else if speedup >= CLEAR_SPEEDUP {
        format!(
            "Sequentially the host prepares ({prep:.3} ms a batch) while the GPU idles, then waits while the GPU works ({work:.3} ms): {:.3} ms for {batches} batches. Pipelined, the host prepares and queues the next batch before it sleeps until the host function rings: {:.3} ms, {speedup:.2}x faster (perfect overlap: {estimate:.3} ms).",
            m.sequential.median, m.pipelined.median
        )
    } else {
        format!(
            "The pipeline gained nothing measurable here ({:.3} ms vs {:.3} ms sequential, {speedup:.2}x): host preparation takes {prep:.3} ms a batch and the GPU {work:.3} ms, and even a perfect overlap ({estimate:.3} ms) would save at most {:.3} ms.",
            m.pipelined.median,
            m.sequential.median,
            (m.sequential.median - estimate).max(0.0)
        )
    });
    let order: Vec<String> = m
        .events
        .iter()
        .take(8)
        .map(|e| format!("{} ({:.2})", e.what, e.ms))
        .collect();
    let overlapped = if batches == 1 {
        "one batch, so no preparation could overlap GPU work".to_string()
    } else if ahead == batches - 1 {
        "every batch i+1 was prepared before batch i's host function ran: the host worked while the GPU did".to_string()
    } else if ahead == 0 {
        "no batch was prepared before the previous batch's host function ran: the GPU finished each batch before the host had the next one ready".to_string()
    } else {
        format!(
            "{ahead} of {} batches were prepared before the previous batch's host function ran",
            batches - 1
        )
    };
    r.explain(format!(
        "Order of events in the last pipelined run (ms): {} ... : {overlapped}.",
        order.join(", ")
    ));
    r.explain("The host function runs on a driver thread: it must not call CUDA (that may deadlock or fail), and later work on its stream waits until it returns, so it only sends a message; the host thread does the rest.");
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demos::testing::{batch_opts as opts, refusal};

    fn ev(ms: f64, what: &str) -> HostEvent {
        HostEvent {
            ms,
            what: what.into(),
        }
    }

    #[test]
    fn batch_values_are_deterministic_distinct_and_in_range() {
        let mut a = vec![0.0; 1000];
        let mut b = vec![0.0; 1000];
        prepare_batch(7, 3, &mut a);
        prepare_batch(7, 3, &mut b);
        assert_eq!(a, b);
        prepare_batch(7, 4, &mut b);
        assert_ne!(a, b, "batches must differ");
        let pi = std::f32::consts::PI;
        assert!(a.iter().all(|x| (-pi..pi).contains(x)));
        assert!(a.iter().any(|&x| x < -1.0) && a.iter().any(|&x| x > 1.0));
    }

    #[test]
    fn estimate_is_sum_for_one_batch_and_the_slow_stage_for_many() {
        assert_eq!(pipeline_estimate(1.0, 2.0, 1), 3.0);
        assert_eq!(pipeline_estimate(1.0, 2.0, 8), 1.0 + 7.0 * 2.0 + 2.0);
        assert_eq!(pipeline_estimate(3.0, 1.0, 4), 3.0 + 9.0 + 1.0);
    }

    #[test]
    fn event_order_accepts_a_pipeline_and_rejects_disorder() {
        let good = [
            ev(1.0, "prepared 0"),
            ev(1.1, "enqueued 0"),
            ev(2.0, "prepared 1"),
            ev(2.1, "enqueued 1"),
            ev(2.5, "callback 0"),
            ev(2.6, "consumed 0"),
            ev(3.5, "callback 1"),
            ev(3.6, "consumed 1"),
        ];
        assert!(check_event_order(&good, 2).is_ok());
        // A callback before its batch was enqueued.
        let mut bad = good.to_vec();
        bad[4].ms = 1.05;
        assert!(check_event_order(&bad, 2).is_err());
        // Callbacks out of batch order.
        let mut swapped = good.to_vec();
        swapped[6].ms = 2.4;
        swapped[7].ms = 2.45;
        assert!(check_event_order(&swapped, 2).is_err());
        // A missing event.
        assert!(check_event_order(&good[..7], 2).is_err());
        // Consumed before its callback rang.
        let mut early = good.to_vec();
        early[5].ms = 2.4;
        assert!(check_event_order(&early, 2).is_err());
        // Batch 1 was prepared (2.0) before batch 0's callback (2.5).
        assert_eq!(batches_prepared_ahead(&good, 2), 1);
        let mut late = good.to_vec();
        late[2].ms = 2.55;
        assert_eq!(batches_prepared_ahead(&late, 2), 0);
        assert_eq!(batches_prepared_ahead(&good, 1), 0);
    }

    #[test]
    fn options_accept_the_defaults_and_refuse_hostile_flags() {
        check_options(&Options::default()).unwrap();
        check_options(&opts(1, 1, 0)).unwrap();
        assert!(refusal(check_options, &opts(0, 8, 500)).contains("--elements"));
        assert!(refusal(check_options, &opts(1 << 20, 0, 500)).contains("--batches"));
        assert!(refusal(check_options, &opts(1, MAX_BATCHES + 1, 500)).contains("--batches"));
        assert!(refusal(check_options, &opts(100_000_000, 1024, 500)).contains("--batches 1024"));
        assert!(refusal(check_options, &opts(MAX_ELEMENTS + 1, 1, 500)).contains("--elements"));
        assert!(refusal(check_options, &opts(usize::MAX, usize::MAX, 500)).contains("--"));
        // The review's case: one batch of 2^28 elements for a million iterations would
        // compute for minutes; it is refused up front instead of timing out.
        assert!(refusal(check_options, &opts(268_435_456, 1, 1_000_000)).contains("estimated"));
    }

    #[test]
    fn the_callback_timeout_is_far_beyond_the_estimate() {
        let model = WorkModel::H100;
        let batch = batch_estimate_ms(DEFAULT_ELEMENTS, DEFAULT_ITERS, &model);
        assert!((0.1..10.0).contains(&batch), "{batch} ms");
        assert!(callback_timeout(batch) >= Duration::from_secs(30));
        // The largest batch the options allow still gets 20 times its estimate.
        assert!(callback_timeout(60_000.0) >= Duration::from_secs(1200));
    }
}
