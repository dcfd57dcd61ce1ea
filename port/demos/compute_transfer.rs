//! # A transfer stream and a compute stream, linked by events
//!
//! The concept: instead of one stream per chunk (the `overlap` demo), give each *kind* of work
//! its own stream: a transfer stream for the copies and a compute stream for the kernels.
//! Events carry the dependencies between them, batch by batch: batch i may compute once its
//! upload is done, and may be downloaded once its compute is done. Then the upload of batch
//! i+1 runs while batch i computes, and the download of batch i while batch i+1 computes.
//!
//! The seed technique, in CUDA C++:
//!
//! ```text
//! cudaMemcpyAsync(d[0], h[0], bytes, H2D, transfer);  cudaEventRecord(up[0], transfer);
//! for (int i = 0; i < B; ++i) {
//!   cudaStreamWaitEvent(compute, up[i]);
//!   kernel<<<grid, 256, 0, compute>>>(d[i], n, iters);  cudaEventRecord(done[i], compute);
//!   if (i + 1 < B) {                       // upload the next batch before downloading this
//!     cudaMemcpyAsync(d[i+1], h[i+1], bytes, H2D, transfer);  cudaEventRecord(up[i+1], transfer);
//!   }
//!   cudaStreamWaitEvent(transfer, done[i]);
//!   cudaMemcpyAsync(out[i], d[i], bytes, D2H, transfer);
//! }
//! ```
//!
//! Issue order matters: a stream runs in order, so were D2H(i) issued before H2D(i+1), the
//! upload would queue behind a download that waits for compute(i), and the compute stream
//! would starve. The copies share one stream, so uploads and downloads do not overlap each
//! other here; the model `h + c + d + (B-1) * max(h + d, c)` (per-batch times) says what
//! this arrangement can reach at best.
//!
//! | CUDA C++                           | streamlab                               |
//! |------------------------------------|-----------------------------------------|
//! | `cudaEventRecord(up[i], transfer)` | `uploaded[i].record(&transfer)`         |
//! | `cudaStreamWaitEvent(compute, up[i])` | `compute.wait_event(&uploaded[i])`   |
//! | `cudaMemcpyAsync(..., transfer)`   | `unsafe { transfer.copy_to_device(..) }`|
use std::ops::Range;

use cust::memory::{DeviceBuffer, LockedBuffer};
use kernels_gpu::math::compute_element;

use crate::data::{ensure_bitwise_equal, ensure_close_to_reference, random_inputs};
use crate::demos::{buffer_bytes, check_elements, ensure_host_memory, Options, MAX_ELEMENTS};
use crate::error::{ensure, Result};
use crate::gpu::Gpu;
use crate::memory::{device, pinned, pinned_from};
use crate::report::Report;
use crate::stream::{drain_on_error, Event, Stream};
use crate::timeline::Timeline;
use crate::timing::{interleaved, Stats};

use crate::demos::estimate::{ensure_bounded, WorkModel};

pub const SUMMARY: &str =
    "a transfer stream and a compute stream linked by per-batch events vs one stream";
pub const FLAGS: &str =
    "--batches (4) --elements (524288, per batch) --iters (100) --reps --timeline";

pub const DEFAULT_BATCHES: usize = 4;
pub const DEFAULT_ELEMENTS: usize = 524_288;
/// Makes one batch's compute about as long as its upload plus download on an H100.
pub const DEFAULT_ITERS: u32 = 100;
/// The most batches (each has three timing and two dependency events).
pub const MAX_BATCHES: usize = 1024;
/// The most elements over all batches: one device array holds them all (1 GiB).
pub const MAX_TOTAL_ELEMENTS: usize = 1 << 28;
/// A speed-up below this is within run-to-run noise: no claim of overlap is made.
pub const CLEAR_SPEEDUP: f64 = 1.05;

/// The best the two-stream arrangement can do with per-batch copy-in `h`, compute `c` and
/// copy-out `d` (ms) over `b` batches: one batch's whole trip, then for each other batch the
/// slower of the transfer stream's share (h + d, serialized on one stream) and the compute.
pub fn pipeline_model(h: f64, c: f64, d: f64, b: usize) -> f64 {
    h + c + d + b.saturating_sub(1) as f64 * (h + d).max(c)
}

/// Checks sizes and work without a GPU: element and batch counts, the host memory for the
/// input (generated in a `Vec`, then pinned) and both outputs, and the work of one repeat
/// (one-stream and two-stream run) under `model`.
pub fn check_sizes(n: usize, batches: usize, iters: u32, model: &WorkModel) -> Result<()> {
    check_elements(n, MAX_ELEMENTS)?;
    ensure((1..=MAX_BATCHES).contains(&batches), || {
        format!("--batches must be from 1 to {MAX_BATCHES}, not {batches}")
    })?;
    let total = n.checked_mul(batches).filter(|&t| t <= MAX_TOTAL_ELEMENTS);
    ensure(total.is_some(), || {
        format!(
            "--batches {batches} x --elements {n} is more than the {MAX_TOTAL_ELEMENTS} floats this demo keeps on the device"
        )
    })?;
    let per_batch = 2.0 * model.copy_ms(n) + model.compute_ms(n, iters);
    ensure_bounded(
        "compute-transfer",
        2.0 * batches as f64 * per_batch,
        &format!("--batches {batches} x --elements {n} x --iters {iters}"),
    )?;
    ensure_host_memory(
        buffer_bytes::<f32>(n, 4 * batches)?,
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

/// The same checks for the GPU present, plus its free device memory.
pub fn validate(gpu: &Gpu, n: usize, batches: usize, iters: u32) -> Result<()> {
    check_sizes(n, batches, iters, &WorkModel::for_gpu(gpu))?;
    gpu.ensure_device_memory(
        buffer_bytes::<f32>(n, batches)?,
        &format!("{batches} batches of {n} floats"),
    )
}

/// Summed per-phase GPU times of the one-stream version (ms).
#[derive(Debug, Clone, Copy)]
pub struct Phases {
    pub h: f64,
    pub c: f64,
    pub d: f64,
}

impl Phases {
    pub fn total(&self) -> f64 {
        self.h + self.c + self.d
    }
}

/// Both versions' buffers, streams and events, allocated once.
pub struct ComputeTransfer {
    pub n: usize,
    pub batches: usize,
    pub iters: u32,
    pub input: LockedBuffer<f32>,
    pub out_sequential: LockedBuffer<f32>,
    pub out_pipelined: LockedBuffer<f32>,
    dev: DeviceBuffer<f32>,
    transfer: Stream,
    compute: Stream,
    uploaded: Vec<Event>,
    computed: Vec<Event>,
    /// 3B + 1 timing events of the one-stream version, one between each two operations.
    marks: Vec<Event>,
}

impl ComputeTransfer {
    pub fn new(gpu: &Gpu, n: usize, batches: usize, iters: u32, seed: u64) -> Result<Self> {
        validate(gpu, n, batches, iters)?;
        let total = n * batches;
        let events = |k: usize| {
            (0..k)
                .map(|_| Event::without_timing())
                .collect::<Result<Vec<_>>>()
        };
        Ok(ComputeTransfer {
            n,
            batches,
            iters,
            input: pinned_from(&random_inputs(total, seed))?,
            out_sequential: pinned(total)?,
            out_pipelined: pinned(total)?,
            dev: device(total)?,
            transfer: Stream::new("transfer")?,
            compute: Stream::new("compute")?,
            uploaded: events(batches)?,
            computed: events(batches)?,
            marks: (0..=3 * batches)
                .map(|_| Event::new())
                .collect::<Result<Vec<_>>>()?,
        })
    }

    fn range(&self, i: usize) -> Range<usize> {
        i * self.n..(i + 1) * self.n
    }

    /// Every batch on the compute stream: copy in, compute, copy out, in turn.
    pub fn run_sequential(&mut self, gpu: &Gpu) -> Result<Phases> {
        drain_on_error(|| self.sequential_inner(gpu))
    }

    fn sequential_inner(&mut self, gpu: &Gpu) -> Result<Phases> {
        let s = &self.compute;
        self.marks[0].record(s)?;
        for i in 0..self.batches {
            let r = self.range(i);
            let dev = self.dev.index(r.clone());
            // SAFETY: `input` and `out_sequential` are owned by `self`, held by this
            // `&mut self` call until the last mark is synchronized below; on an error,
            // `run_sequential`'s `drain_on_error` synchronizes the context before returning.
            unsafe { s.copy_to_device(&self.input[r.clone()], &dev)? };
            self.marks[3 * i + 1].record(s)?;
            gpu.compute(s, &dev, self.iters)?;
            self.marks[3 * i + 2].record(s)?;
            // SAFETY: as above.
            unsafe { s.copy_to_host(&dev, &mut self.out_sequential[r])? };
            self.marks[3 * i + 3].record(s)?;
        }
        self.marks[3 * self.batches].synchronize()?;
        let mut p = Phases {
            h: 0.0,
            c: 0.0,
            d: 0.0,
        };
        for i in 0..self.batches {
            let m = &self.marks[3 * i..3 * i + 4];
            p.h += m[1].elapsed_ms(&m[0])?;
            p.c += m[2].elapsed_ms(&m[1])?;
            p.d += m[3].elapsed_ms(&m[2])?;
        }
        Ok(p)
    }

    /// Copies on the transfer stream, kernels on the compute stream, events in between.
    /// Returns the GPU time in ms.
    pub fn run_pipelined(&mut self, gpu: &Gpu) -> Result<f64> {
        drain_on_error(|| self.pipelined_inner(gpu))
    }

    fn upload(&self, i: usize) -> Result<()> {
        let r = self.range(i);
        // SAFETY: `input` is owned by `self` and borrowed by the `&mut self` caller until
        // the stop event (after every copy) has been synchronized; on an error,
        // `run_pipelined`'s `drain_on_error` synchronizes the context before returning.
        unsafe {
            self.transfer
                .copy_to_device(&self.input[r.clone()], &self.dev.index(r))?
        };
        self.uploaded[i].record(&self.transfer)
    }

    fn pipelined_inner(&mut self, gpu: &Gpu) -> Result<f64> {
        let (start, stop) = (&self.marks[0], &self.marks[3 * self.batches]);
        // Everything below is after `start` on the transfer stream: the compute stream's
        // first kernel waits for the first upload, which follows `start`.
        start.record(&self.transfer)?;
        self.upload(0)?;
        for i in 0..self.batches {
            let r = self.range(i);
            let dev = self.dev.index(r.clone());
            self.compute.wait_event(&self.uploaded[i])?;
            gpu.compute(&self.compute, &dev, self.iters)?;
            self.computed[i].record(&self.compute)?;
            if i + 1 < self.batches {
                self.upload(i + 1)?; // before D2H(i), so it does not queue behind it
            }
            self.transfer.wait_event(&self.computed[i])?;
            // SAFETY: `out_pipelined` is owned by `self`, held by this `&mut self` call
            // until the stop event, recorded after this copy, has been synchronized; on an
            // error, `run_pipelined`'s `drain_on_error` synchronizes the context first.
            unsafe {
                self.transfer
                    .copy_to_host(&dev, &mut self.out_pipelined[r])?
            };
        }
        // The last download waited for the last compute: `stop` on the transfer stream
        // follows all work on both streams.
        stop.record(&self.transfer)?;
        stop.synchronize()?;
        stop.elapsed_ms(start)
    }

    pub fn check_bitwise(&self) -> Result<String> {
        ensure_bitwise_equal(
            "two-stream vs one-stream output",
            &self.out_pipelined,
            &self.out_sequential,
        )?;
        Ok(format!(
            "all {} elements identical",
            self.out_pipelined.len()
        ))
    }

    pub fn check_reference(&self, samples: usize) -> Result<String> {
        let checked = ensure_close_to_reference(
            "two-stream output vs CPU",
            &self.out_pipelined,
            samples,
            |i| compute_element(self.input[i], self.iters),
        )?;
        Ok(format!("{checked} sampled elements within tolerance"))
    }

    /// One more two-stream run with a timeline on both streams.
    pub fn timeline(&mut self, gpu: &Gpu) -> Result<String> {
        let timeline = Timeline::attach(&[&self.transfer, &self.compute]);
        let run = self.run_pipelined(gpu).map(drop);
        timeline.finish(&[&self.transfer, &self.compute], run, &self.marks[0])
    }
}

/// Medians of both versions over `reps` interleaved runs after a warm-up.
pub struct Measured {
    pub sequential: Stats,
    pub pipelined: Stats,
    /// Per-batch phase medians of the one-stream version.
    pub per_batch: Phases,
}

pub fn measure(gpu: &Gpu, ct: &mut ComputeTransfer, reps: usize) -> Result<Measured> {
    let (seq, pipe) = interleaved(
        ct,
        reps,
        |ct| ct.run_sequential(gpu),
        |ct| ct.run_pipelined(gpu),
    )?;
    let b = ct.batches as f64;
    Ok(Measured {
        sequential: Stats::of_each(&seq, Phases::total),
        pipelined: Stats::of(&pipe),
        per_batch: Phases {
            h: Stats::of_each(&seq, |p| p.h / b).median,
            c: Stats::of_each(&seq, |p| p.c / b).median,
            d: Stats::of_each(&seq, |p| p.d / b).median,
        },
    })
}

pub fn run(gpu: &Gpu, opts: &Options) -> Result<Report> {
    let n = opts.elements.unwrap_or(DEFAULT_ELEMENTS);
    let batches = opts.batches.unwrap_or(DEFAULT_BATCHES);
    let iters = opts.iters.unwrap_or(DEFAULT_ITERS);
    let mut ct = ComputeTransfer::new(gpu, n, batches, iters, opts.seed)?;
    let m = measure(gpu, &mut ct, opts.reps)?;
    let p = m.per_batch;
    let model = pipeline_model(p.h, p.c, p.d, batches);

    let mut r = Report::new(
        "compute-transfer",
        "a transfer stream and a compute stream, linked by events",
        &gpu.info.name,
    );
    r.param("batches", batches)
        .param("elements_per_batch", n)
        .param("iters", iters)
        .param("reps", opts.reps);
    r.figure("copy-in, per batch", p.h, "ms")
        .figure("compute, per batch", p.c, "ms")
        .figure("copy-out, per batch", p.d, "ms")
        .figure("one stream, median", m.sequential.median, "ms")
        .figure(
            "transfer + compute streams, median",
            m.pipelined.median,
            "ms",
        )
        .figure("speed-up", m.sequential.median / m.pipelined.median, "x")
        .figure("model h+c+d + (B-1) max(h+d, c)", model, "ms")
        .figure("measured / model", m.pipelined.median / model, "x");
    r.detail("one_stream_ms", m.sequential)
        .detail("two_streams_ms", m.pipelined);
    if opts.timeline {
        r.timeline = Some(ct.timeline(gpu)?);
    }
    r.check("two streams == one stream, bit for bit", ct.check_bitwise());
    r.check("GPU vs CPU reference (approx)", ct.check_reference(4096));
    let speedup = m.sequential.median / m.pipelined.median;
    r.explain(if batches == 1 {
        format!(
            "With one batch there is nothing to overlap: both versions run its copy-in, compute and copy-out in turn ({:.3} ms on one stream, {:.3} ms on two). Use --batches 2 or more to let the next upload run during this compute.",
            m.sequential.median, m.pipelined.median
        )
    } else if speedup >= CLEAR_SPEEDUP {
        format!(
            "One stream runs each batch's copy-in, compute and copy-out back to back ({:.3} ms). With a transfer stream and a compute stream, later batches upload while earlier ones compute: {:.3} ms, {speedup:.2}x faster.",
            m.sequential.median, m.pipelined.median
        )
    } else {
        format!(
            "Two streams gained nothing measurable here ({:.3} ms vs {:.3} ms on one stream, {speedup:.2}x): the best this arrangement allows is {model:.3} ms, at most {:.3} ms less than one stream; larger --elements or --iters give the overlap more to hide.",
            m.pipelined.median,
            m.sequential.median,
            (m.sequential.median - model).max(0.0)
        )
    });
    let (pace, slower) = if p.h + p.d >= p.c {
        ("the transfer stream", p.h + p.d)
    } else {
        ("the compute stream", p.c)
    };
    r.explain(format!(
        "Events are the only links: compute(i) waits for up(i), D2H(i) for done(i). Uploads and downloads share the transfer stream, so per batch it is busy h + d = {:.3} ms against c = {:.3} ms of compute: {pace} ({slower:.3} ms a batch) bounds the pace (model {model:.3} ms; measured {:.2}x that).",
        p.h + p.d,
        p.c,
        m.pipelined.median / model
    ));
    r.explain("Issue order is part of the design: H2D(i+1) is issued before D2H(i), which waits for compute(i); the other way round the upload would queue behind that wait.");
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demos::testing::{batch_opts as opts, refusal};

    #[test]
    fn model_is_the_plain_sum_for_one_batch() {
        assert_eq!(pipeline_model(1.0, 2.0, 1.0, 1), 4.0);
    }

    #[test]
    fn model_is_paced_by_the_slower_stream() {
        // Compute-bound: c > h + d.
        assert_eq!(pipeline_model(1.0, 3.0, 1.0, 4), 5.0 + 3.0 * 3.0);
        // Transfer-bound: h + d > c.
        assert_eq!(pipeline_model(1.0, 1.0, 1.0, 4), 3.0 + 3.0 * 2.0);
        // Never worse than sequential, never better than the busier stream's total.
        for (h, c, d, b) in [(0.5, 1.0, 0.5, 8), (0.1, 2.0, 0.3, 3), (1.0, 0.2, 1.0, 5)] {
            let m = pipeline_model(h, c, d, b);
            let bf = b as f64;
            assert!(m <= bf * (h + c + d) + 1e-12);
            assert!(m >= (bf * (h + d)).max(bf * c) - 1e-12);
        }
    }

    #[test]
    fn options_accept_the_defaults_and_refuse_hostile_flags() {
        check_options(&Options::default()).unwrap();
        check_options(&opts(1, 1, 0)).unwrap();
        assert!(refusal(check_options, &opts(0, 4, 100)).contains("--elements"));
        assert!(refusal(check_options, &opts(1 << 20, 0, 100)).contains("--batches"));
        assert!(refusal(check_options, &opts(1 << 20, MAX_BATCHES + 1, 100)).contains("--batches"));
        assert!(refusal(check_options, &opts(100_000_000, 1024, 100)).contains("--batches 1024"));
        assert!(refusal(check_options, &opts(MAX_ELEMENTS + 1, 1, 100)).contains("--elements"));
        assert!(refusal(check_options, &opts(usize::MAX, usize::MAX, 100)).contains("--"));
        // 524,288 elements x 4 batches x 2^32 iterations: hours of compute.
        assert!(refusal(check_options, &opts(DEFAULT_ELEMENTS, 4, u32::MAX)).contains("estimated"));
    }
}
