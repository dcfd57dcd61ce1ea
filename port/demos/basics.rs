//! # Basics: blocking copies versus one stream with asynchronous copies
//!
//! The concept: a CUDA program's simplest shape is copy in, compute, copy out. Written with
//! blocking calls, the host thread sits inside `cudaMemcpy` until the GPU is done; written on
//! a stream with asynchronous copies from pinned memory, the same three operations are only
//! *enqueued*: the calls return at once, the GPU does exactly the same work in the same time,
//! and the host thread is free to do its own work until it needs the result.
//!
//! The seed technique is the first example of every stream tutorial:
//!
//! ```text
//! // blocking: the host waits in each cudaMemcpy
//! cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
//! compute_kernel<<<grid, 256>>>(d, n, iters);
//! cudaMemcpy(out, d, bytes, cudaMemcpyDeviceToHost);
//!
//! // asynchronous: h and out from cudaMallocHost, all three calls return at once
//! cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s);
//! compute_kernel<<<grid, 256, 0, s>>>(d, n, iters);
//! cudaMemcpyAsync(out, d, bytes, cudaMemcpyDeviceToHost, s);
//! cudaEventRecord(done, s);
//! while (cudaEventQuery(done) == cudaErrorNotReady) do_host_work();
//! ```
//!
//! In streamlab: `copy_to_device_sync` / `copy_to_host_sync` are the `cudaMemcpy`s (on the
//! legacy default stream, `Stream::legacy_default()`), `stream.copy_to_device` /
//! `stream.copy_to_host` the `cudaMemcpyAsync`s, `pinned_from` the `cudaMallocHost`,
//! `gpu.compute` the launch and `event.is_complete()` the `cudaEventQuery`. Both versions use
//! the same pinned buffers, so the GPU time is the same and the only difference is where the
//! host thread spends it (pageable memory is `pinned-vs-pageable`'s lesson).
use std::time::Instant;

use cust::memory::{DeviceBuffer, LockedBuffer};
use kernels_gpu::math::compute_element;

use crate::data::{ensure_bitwise_equal, ensure_close_to_reference, random_inputs};
use crate::demos::{buffer_bytes, check_elements, ensure_host_memory, Options, MAX_ELEMENTS};
use crate::error::{ensure, Error, Result};
use crate::gpu::Gpu;
use crate::memory::{copy_to_device_sync, copy_to_host_sync, device, pinned, pinned_from};
use crate::report::Report;
use crate::stream::{drain_on_error, Event, Stream};
use crate::timeline::Timeline;
use crate::timing::{interleaved, Stats};

pub const SUMMARY: &str = "blocking copies + kernel vs the same on one stream with async copies from pinned memory; host work done meanwhile";
pub const FLAGS: &str = "--elements (1048576) --iters (1000) --reps --timeline";

pub const DEFAULT_ELEMENTS: usize = 1 << 20;
/// About 1.7 ms of kernel on an H100/H200 for 1M floats: long enough to see the host work.
pub const DEFAULT_ITERS: u32 = 1000;
/// Below this GPU time the "host was free" claim is not asserted: the enqueue calls
/// themselves (tens of microseconds) are then comparable to the GPU work.
pub const MIN_GPU_MS_FOR_CLAIM: f64 = 0.5;

/// One unit of host work for the host to do while the GPU runs: 1,000 rounds of xorshift
/// (about a microsecond), opaque to the optimizer.
pub fn host_work_unit(state: u64) -> u64 {
    let mut x = state | 1;
    for _ in 0..1000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    std::hint::black_box(x)
}

/// Does host work units until `done` has completed: how much the host got done while the
/// GPU worked. Returns (units, milliseconds spent polling).
pub fn host_work_until(done: &Event) -> Result<(u64, f64)> {
    let t = Instant::now();
    let (mut units, mut state) = (0u64, 0x1234_5678u64);
    while !done.is_complete()? {
        state = host_work_unit(state);
        units += 1;
    }
    std::hint::black_box(state);
    Ok((units, t.elapsed().as_secs_f64() * 1e3))
}

/// The most iterations a run may ask for. The CPU check (data.rs's tolerance, relative 1e-4)
/// was confirmed on the GPU up to 10,000 iterations: `x = sin(x)cos(x)` contracts, so the
/// per-step differences between libdevice and the host do not pile up linearly. Beyond this
/// cap the CPU reference alone (1,024 samples x iters) would take seconds, and the check
/// would be trusted where it was never confirmed.
pub const MAX_ITERS: u32 = 100_000;
/// The most element-iterations one version may compute: about 17 s of kernel on an H100
/// (1M elements x 1,000 iterations take 1.7 ms), so one repeat stays well under a minute.
pub const MAX_WORK: f64 = 1e13;
/// Host memory: the generated input, its pinned copy and two pinned outputs.
pub const HOST_ARRAYS: usize = 4;

/// Sizes a user can ask for, checked without a GPU: elements, iterations, the work they make
/// together, and host memory.
pub fn check_sizes(n: usize, iters: u32) -> Result<()> {
    check_elements(n, MAX_ELEMENTS)?;
    ensure((1..=MAX_ITERS).contains(&iters), || {
        format!("--iters must be from 1 to {MAX_ITERS}, not {iters}")
    })?;
    let work = n as f64 * iters as f64;
    ensure(work <= MAX_WORK, || {
        format!(
            "--elements {n} x --iters {iters} is {work:.1e} element-iterations, more than the {MAX_WORK:.0e} that keep one repeat under a minute"
        )
    })?;
    ensure_host_memory(
        buffer_bytes::<f32>(n, HOST_ARRAYS)?,
        &format!("{HOST_ARRAYS} host arrays of {n} floats"),
    )
}

/// Checks the flags this demo reads, before the GPU is touched.
pub fn check_options(opts: &Options) -> Result<()> {
    check_sizes(
        opts.elements.unwrap_or(DEFAULT_ELEMENTS),
        opts.iters.unwrap_or(DEFAULT_ITERS),
    )
}

/// The same checks, plus device memory.
pub fn validate(gpu: &Gpu, n: usize, iters: u32) -> Result<()> {
    check_sizes(n, iters)?;
    gpu.ensure_device_memory(
        buffer_bytes::<f32>(n, 1)?,
        &format!("an array of {n} floats"),
    )
}

/// One run of either version.
#[derive(Debug, Clone, Copy)]
pub struct Run {
    /// GPU time from the first copy's start to the last copy's end (events).
    pub gpu_ms: f64,
    /// Host time spent inside the CUDA calls that issue the work.
    pub host_in_calls_ms: f64,
    /// Host work units completed after the calls returned, until the work was done.
    pub host_units: u64,
}

/// Buffers, stream and events of both versions, allocated once, outside every timed region.
pub struct Basics {
    pub n: usize,
    pub iters: u32,
    pub input: LockedBuffer<f32>,
    /// Output of the blocking version.
    pub out_blocking: LockedBuffer<f32>,
    /// Output of the asynchronous version.
    pub out_async: LockedBuffer<f32>,
    dev: DeviceBuffer<f32>,
    stream: Stream,
    legacy: Stream,
    start: Event,
    stop: Event,
}

impl Basics {
    pub fn new(gpu: &Gpu, n: usize, iters: u32, seed: u64) -> Result<Basics> {
        validate(gpu, n, iters)?;
        Ok(Basics {
            n,
            iters,
            input: pinned_from(&random_inputs(n, seed))?,
            out_blocking: pinned(n)?,
            out_async: pinned(n)?,
            dev: device(n)?,
            stream: Stream::new("basics")?,
            legacy: Stream::legacy_default(),
            start: Event::new()?,
            stop: Event::new()?,
        })
    }

    /// `cudaMemcpy`, kernel, `cudaMemcpy`, all on the legacy default stream: the host is
    /// inside the second copy until the kernel and the copy are done.
    pub fn run_blocking(&mut self, gpu: &Gpu) -> Result<Run> {
        let legacy = &self.legacy;
        let t = Instant::now();
        self.start.record(legacy)?;
        copy_to_device_sync(&self.input, &self.dev)?;
        gpu.compute(legacy, &self.dev, self.iters)?;
        copy_to_host_sync(&self.dev, &mut self.out_blocking)?;
        self.stop.record(legacy)?;
        let host_in_calls_ms = t.elapsed().as_secs_f64() * 1e3;
        let (host_units, _) = host_work_until(&self.stop)?;
        Ok(Run {
            gpu_ms: self.stop.elapsed_ms(&self.start)?,
            host_in_calls_ms,
            host_units,
        })
    }

    /// The same three operations enqueued on one stream from pinned memory; the host then
    /// works until the stop event has completed.
    pub fn run_async(&mut self, gpu: &Gpu) -> Result<Run> {
        let s = &self.stream;
        let (host_in_calls_ms, host_units) = drain_on_error(|| {
            let t = Instant::now();
            self.start.record(s)?;
            // SAFETY: `input` and `out_async` belong to `self`, held mutably by this call,
            // which returns only after the stop event (recorded after both copies) has
            // completed, or, on an error, after `drain_on_error` has synchronized the context.
            unsafe { s.copy_to_device(&self.input, &self.dev)? };
            gpu.compute(s, &self.dev, self.iters)?;
            // SAFETY: as above.
            unsafe { s.copy_to_host(&self.dev, &mut self.out_async)? };
            self.stop.record(s)?;
            let host_in_calls_ms = t.elapsed().as_secs_f64() * 1e3;
            let (units, _) = host_work_until(&self.stop)?;
            Ok((host_in_calls_ms, units))
        })?;
        Ok(Run {
            gpu_ms: self.stop.elapsed_ms(&self.start)?,
            host_in_calls_ms,
            host_units,
        })
    }

    /// Bit-for-bit equality of the two versions' outputs.
    pub fn check_bitwise(&self) -> Result<String> {
        ensure_bitwise_equal(
            "async vs blocking output",
            &self.out_async,
            &self.out_blocking,
        )?;
        Ok(format!("all {} elements identical", self.n))
    }

    /// The asynchronous output against `compute_element` on the CPU, at `samples` indices,
    /// with data.rs's tolerances.
    pub fn check_reference(&self, samples: usize) -> Result<String> {
        let checked =
            ensure_close_to_reference("async output vs CPU", &self.out_async, samples, |i| {
                compute_element(self.input[i], self.iters)
            })?;
        Ok(format!("{checked} sampled elements within tolerance"))
    }

    /// One more asynchronous run with a timeline on the stream.
    pub fn timeline(&mut self, gpu: &Gpu) -> Result<String> {
        let timeline = Timeline::attach(&[&self.stream]);
        let run = self.run_async(gpu).map(drop);
        timeline.finish(&[&self.stream], run, &self.start)
    }
}

/// Medians of both versions over `reps` interleaved repeats, after one warm-up of each.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    pub blocking_gpu: Stats,
    pub async_gpu: Stats,
    pub blocking_in_calls_ms: f64,
    pub async_in_calls_ms: f64,
    pub blocking_units: f64,
    pub async_units: f64,
}

pub fn measure(gpu: &Gpu, b: &mut Basics, reps: usize) -> Result<Measured> {
    let (blocking, asynchronous) =
        interleaved(b, reps, |b| b.run_blocking(gpu), |b| b.run_async(gpu))?;
    let median = |runs: &[Run], f: fn(&Run) -> f64| Stats::of_each(runs, f).median;
    Ok(Measured {
        blocking_gpu: Stats::of_each(&blocking, |r| r.gpu_ms),
        async_gpu: Stats::of_each(&asynchronous, |r| r.gpu_ms),
        blocking_in_calls_ms: median(&blocking, |r| r.host_in_calls_ms),
        async_in_calls_ms: median(&asynchronous, |r| r.host_in_calls_ms),
        blocking_units: median(&blocking, |r| r.host_units as f64),
        async_units: median(&asynchronous, |r| r.host_units as f64),
    })
}

/// Why the "host was free" claim cannot be asserted for these measurements, if it cannot.
pub fn host_claim_not_asserted(m: &Measured) -> Option<String> {
    (m.async_gpu.median < MIN_GPU_MS_FOR_CLAIM).then(|| {
        format!(
            "{:.3} ms of GPU work is too short (the claim needs >= {MIN_GPU_MS_FOR_CLAIM} ms; raise --iters)",
            m.async_gpu.median
        )
    })
}

/// GPU times within this ratio of each other are "the same".
pub const SAME_GPU_TIME: f64 = 1.25;

/// The demo's claim: the asynchronous calls return well before the GPU is done (less than
/// half its time inside the calls) and the host gets more work done than when blocking.
pub fn check_host_was_free(m: &Measured) -> Result<String> {
    if let Some(why) = host_claim_not_asserted(m) {
        return Ok(format!("not asserted: {why}"));
    }
    if m.async_in_calls_ms < 0.5 * m.async_gpu.median && m.async_units > m.blocking_units {
        Ok(format!(
            "async calls took {:.3} ms of {:.3} ms GPU time; host work units {:.0} (async) vs {:.0} (blocking)",
            m.async_in_calls_ms, m.async_gpu.median, m.async_units, m.blocking_units
        ))
    } else {
        Err(Error::Verification(format!(
            "the async version did not free the host: {:.3} ms inside the calls for {:.3} ms of GPU time, {:.0} host work units vs {:.0} when blocking",
            m.async_in_calls_ms, m.async_gpu.median, m.async_units, m.blocking_units
        )))
    }
}

pub fn run(gpu: &Gpu, opts: &Options) -> Result<Report> {
    let n = opts.elements.unwrap_or(DEFAULT_ELEMENTS);
    let iters = opts.iters.unwrap_or(DEFAULT_ITERS);
    let mut b = Basics::new(gpu, n, iters, opts.seed)?;
    let m = measure(gpu, &mut b, opts.reps)?;

    let mut r = Report::new(
        "basics",
        "blocking copies vs one stream with async copies from pinned memory",
        &gpu.info.name,
    );
    r.param("elements", n)
        .param("iters", iters)
        .param("reps", opts.reps);
    r.figure("blocking: GPU time, median", m.blocking_gpu.median, "ms")
        .figure("async: GPU time, median", m.async_gpu.median, "ms")
        .figure(
            "async / blocking GPU time",
            m.async_gpu.median / m.blocking_gpu.median,
            "x",
        )
        .figure(
            "blocking: host time inside the calls",
            m.blocking_in_calls_ms,
            "ms",
        )
        .figure(
            "async: host time inside the calls",
            m.async_in_calls_ms,
            "ms",
        )
        .figure(
            "blocking: host work units done while the GPU ran",
            m.blocking_units,
            "units",
        )
        .figure(
            "async: host work units done while the GPU ran",
            m.async_units,
            "units",
        );
    r.detail("blocking_gpu_ms", m.blocking_gpu)
        .detail("async_gpu_ms", m.async_gpu);
    if opts.timeline {
        r.timeline = Some(b.timeline(gpu)?);
    }
    r.check("async == blocking, bit for bit", b.check_bitwise());
    r.check("GPU vs CPU reference (approx)", b.check_reference(1024));
    let claim = check_host_was_free(&m);
    let claim_held = claim.is_ok();
    r.check("async calls freed the host", claim);
    let ratio = m.async_gpu.median / m.blocking_gpu.median;
    r.explain(if host_claim_not_asserted(&m).is_some() {
        format!(
            "The GPU does the same work either way ({:.3} ms blocking, {:.3} ms async), but so little that per-call costs weigh as much as the work itself.",
            m.blocking_gpu.median, m.async_gpu.median
        )
    } else if (1.0 / SAME_GPU_TIME..=SAME_GPU_TIME).contains(&ratio) {
        format!(
            "The GPU does the same work either way in about the same time ({:.3} ms blocking, {:.3} ms async): copy in, compute, copy out, in order.",
            m.blocking_gpu.median, m.async_gpu.median
        )
    } else {
        format!(
            "The GPU does the same work either way, yet the times differ ({:.3} ms blocking, {:.3} ms async, {ratio:.2}x): the work does not explain that, so suspect clocks or other load on the GPU.",
            m.blocking_gpu.median, m.async_gpu.median
        )
    });
    let figures = format!(
        "blocking, {:.3} ms inside the calls and ~{:.0} units of host work done meanwhile; async, {:.3} ms and ~{:.0} units (about 1 µs each)",
        m.blocking_in_calls_ms, m.blocking_units, m.async_in_calls_ms, m.async_units
    );
    r.explain(match host_claim_not_asserted(&m) {
        Some(why) => format!("Host: {figures}. Not a claim here: {why}."),
        None if claim_held => format!(
            "Blocking, the host sits inside cudaMemcpy until the GPU is done; async, the calls only enqueue and the host works until the stop event completes: {figures}."
        ),
        None => format!(
            "The async calls should return at once and leave the host free, but did not here ({figures}): see the failed check."
        ),
    });
    r.explain("Asynchrony needs pinned memory: from pageable memory the driver stages the copy and the call holds the host (see `streamlab run pinned-vs-pageable`).");
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_iterations_and_work_are_bounded() {
        assert!(check_sizes(DEFAULT_ELEMENTS, DEFAULT_ITERS).is_ok());
        assert!(check_sizes(1, 1).is_ok());
        assert!(check_sizes(0, 1).is_err());
        assert!(check_sizes(1, 0).is_err());
        assert!(check_sizes(1, MAX_ITERS).is_ok());
        assert!(check_sizes(1, MAX_ITERS + 1).is_err());
        assert!(check_sizes(MAX_ELEMENTS + 1, 1).is_err());
        // 2^30 elements x 100,000 iterations: about half an hour of kernel on an H100.
        let e = check_sizes(1 << 30, MAX_ITERS).unwrap_err();
        assert!(e.to_string().contains("element-iterations"), "{e}");
    }

    #[test]
    fn host_work_is_deterministic_and_not_trivial() {
        assert_eq!(host_work_unit(7), host_work_unit(7));
        assert_ne!(host_work_unit(7), host_work_unit(8));
        assert_ne!(host_work_unit(7), 7);
    }
}
