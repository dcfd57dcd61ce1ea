//! # Prefetching: a double-buffered input pipeline
//!
//! The concept: a training loop's data loader. Each step reads one batch from a device
//! buffer; while it runs, the next batch is uploaded into a *second* buffer on a copy stream,
//! so that the step after it finds its input already there. Two buffers in ping-pong, and
//! events guarding both directions:
//!
//! * `uploaded[slot]` (copy → compute): the step may not read a buffer before its upload ends;
//! * `consumed[slot]` (compute → copy): the upload of batch i+2 may not overwrite the buffer
//!   before the step reading batch i from it is done. Forget this one and a fast copy engine
//!   overwrites a batch still being read: a race that corrupts results only sometimes.
//!
//! The seed technique is the double-buffered (ping-pong) input pipeline of data loaders, as
//! in PyTorch's `data_prefetcher` (a side `torch.cuda.Stream` uploads the next batch while
//! the current one trains, with `wait_stream`/`record_stream` guarding reuse) and the
//! double-buffering pattern of NVIDIA's CUDA samples: two buffers, two streams, and an event
//! in each direction.
//!
//! The "training step" is the compute kernel on the batch followed by an accumulation into a
//! device buffer (`acc += step(batch)`, like gradient accumulation), copied back once at the end.
//!
//! ```text
//! for (int i = 0; i < B; ++i) {
//!   int s = i % 2;
//!   if (i >= 2) cudaStreamWaitEvent(copy, consumed[s]);      // buffer s is free again
//!   cudaMemcpyAsync(d_in[s], h_in + i * n, bytes, H2D, copy);
//!   cudaEventRecord(uploaded[s], copy);
//!   cudaStreamWaitEvent(compute, uploaded[s]);              // batch i is on the device
//!   step<<<g, 256, 0, compute>>>(d_in[s], n, iters);
//!   add<<<g, 256, 0, compute>>>(acc, d_in[s], acc, n);
//!   cudaEventRecord(consumed[s], compute);
//! }
//! cudaMemcpyAsync(h_acc, acc, bytes, D2H, compute);
//! ```
//!
//! Without prefetch everything is on one stream, upload then step, so the copy engine and
//! the SMs take turns. With it, the loop costs about `u + s + (B-1) * max(u, s)` instead of
//! `B * (u + s)` (u: one upload, s: one step): the two-stage pipeline estimate shared with
//! the callback demo ([`crate::demos::callback::pipeline_estimate`]).
//!
//! | CUDA C++                          | streamlab                                  |
//! |-----------------------------------|--------------------------------------------|
//! | `cudaStreamWaitEvent(copy, e)`    | `copy.wait_event(&consumed[slot])`         |
//! | `cudaEventRecord(e, compute)`     | `consumed[slot].record(&compute)`          |
use cust::memory::{DeviceBuffer, LockedBuffer};
use kernels_gpu::math::{add_element, compute_element};

use crate::data::{
    ensure_bitwise_equal, random_inputs, sample_indices, ABS_TOLERANCE, REL_TOLERANCE,
};
use crate::demos::callback::pipeline_estimate;
use crate::demos::compute_transfer::{CLEAR_SPEEDUP, MAX_TOTAL_ELEMENTS};
use crate::demos::estimate::{ensure_bounded, WorkModel};
use crate::demos::{buffer_bytes, check_elements, ensure_host_memory, Options, MAX_ELEMENTS};
use crate::error::{ensure, Error, Result};
use crate::gpu::Gpu;
use crate::memory::{device, pinned, pinned_from};
use crate::report::Report;
use crate::stream::{drain_on_error, Event, Stream};
use crate::timeline::Timeline;
use crate::timing::{interleaved, Stats};

pub const SUMMARY: &str =
    "double-buffered prefetch: upload batch i+1 on a copy stream while step i computes";
pub const FLAGS: &str =
    "--batches (8) --elements (1048576, per batch) --iters (50) --reps --timeline";

pub const DEFAULT_BATCHES: usize = 8;
pub const DEFAULT_ELEMENTS: usize = 1 << 20;
/// Makes one step about as long as one batch's upload (4 MiB) on an H100.
pub const DEFAULT_ITERS: u32 = 50;
/// Device input buffers in ping-pong.
pub const SLOTS: usize = 2;

/// The most batches (each has two timing events).
pub const MAX_BATCHES: usize = 4096;

/// Checks sizes and work without a GPU: element and batch counts, the host memory for the
/// input (generated in a `Vec`, then pinned) and both accumulators, and the work of one
/// repeat (a run without and one with prefetch) under `model`.
pub fn check_sizes(n: usize, batches: usize, iters: u32, model: &WorkModel) -> Result<()> {
    check_elements(n, MAX_ELEMENTS)?;
    ensure((1..=MAX_BATCHES).contains(&batches), || {
        format!("--batches must be from 1 to {MAX_BATCHES}, not {batches}")
    })?;
    let total = n.checked_mul(batches).filter(|&t| t <= MAX_TOTAL_ELEMENTS);
    ensure(total.is_some(), || {
        format!(
            "--batches {batches} x --elements {n} is more than the {MAX_TOTAL_ELEMENTS} floats of input this demo keeps pinned"
        )
    })?;
    let per_batch = model.copy_ms(n) + model.compute_ms(n, iters) + model.elementwise_ms(n);
    ensure_bounded(
        "prefetch",
        2.0 * batches as f64 * per_batch,
        &format!("--batches {batches} x --elements {n} x --iters {iters}"),
    )?;
    ensure_host_memory(
        buffer_bytes::<f32>(n, 2 * batches + 2)?,
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

/// The same checks for the GPU present, plus its free device memory (two input slots and
/// the accumulator).
pub fn validate(gpu: &Gpu, n: usize, batches: usize, iters: u32) -> Result<()> {
    check_sizes(n, batches, iters, &WorkModel::for_gpu(gpu))?;
    gpu.ensure_device_memory(
        buffer_bytes::<f32>(n, SLOTS + 1)?,
        &format!("{} buffers of {n} floats", SLOTS + 1),
    )
}

/// The CPU's accumulation for element `j`, in the GPU's order, and the sum of the terms'
/// magnitudes (what the rounding error of the sum scales with).
pub fn reference_element(
    input: &[f32],
    n: usize,
    batches: usize,
    iters: u32,
    j: usize,
) -> (f32, f32) {
    let (mut acc, mut magnitude) = (0.0f32, 0.0f32);
    for b in 0..batches {
        let term = compute_element(input[b * n + j], iters);
        acc = add_element(acc, term);
        magnitude += term.abs();
    }
    (acc, magnitude)
}

/// Compares the accumulator with the CPU at sampled elements. Each term may differ from the
/// CPU's by `REL_TOLERANCE` of itself (data.rs explains that bound for one element), so a sum
/// of terms may differ by `REL_TOLERANCE` of the sum of their magnitudes (the sum itself can
/// be near zero when terms cancel), plus `ABS_TOLERANCE`.
pub fn check_accumulator(
    acc: &[f32],
    input: &[f32],
    batches: usize,
    iters: u32,
    samples: usize,
) -> Result<String> {
    let n = acc.len();
    let indices = sample_indices(n, samples);
    for &j in &indices {
        let (expected, magnitude) = reference_element(input, n, batches, iters, j);
        let tolerance = REL_TOLERANCE * magnitude + ABS_TOLERANCE;
        if !approx::abs_diff_eq!(acc[j], expected, epsilon = tolerance) {
            return Err(Error::Verification(format!(
                "accumulator element {j} is {:e} on the GPU, {expected:e} on the CPU (tolerance {tolerance:e})",
                acc[j]
            )));
        }
    }
    Ok(format!(
        "{} sampled elements within tolerance",
        indices.len()
    ))
}

/// Per-batch GPU times of the no-prefetch version (ms).
#[derive(Debug, Clone, Copy)]
pub struct SerialTimes {
    pub total: f64,
    /// Summed over batches.
    pub upload: f64,
    pub step: f64,
}

/// Both versions' buffers, streams and events, allocated once.
pub struct Prefetch {
    pub n: usize,
    pub batches: usize,
    pub iters: u32,
    /// Every batch, back to back (pinned, so uploads are truly asynchronous).
    pub input: LockedBuffer<f32>,
    pub acc_serial: LockedBuffer<f32>,
    pub acc_prefetch: LockedBuffer<f32>,
    slots: [DeviceBuffer<f32>; SLOTS],
    acc: DeviceBuffer<f32>,
    copy: Stream,
    compute: Stream,
    uploaded: [Event; SLOTS],
    consumed: [Event; SLOTS],
    /// Timing events: marks[0] start, marks[2i+1] after upload i, marks[2i+2] after step i,
    /// marks[2B+1] after the final download.
    marks: Vec<Event>,
}

impl Prefetch {
    pub fn new(gpu: &Gpu, n: usize, batches: usize, iters: u32, seed: u64) -> Result<Self> {
        validate(gpu, n, batches, iters)?;
        Ok(Prefetch {
            n,
            batches,
            iters,
            input: pinned_from(&random_inputs(n * batches, seed))?,
            acc_serial: pinned(n)?,
            acc_prefetch: pinned(n)?,
            slots: [device(n)?, device(n)?],
            acc: device(n)?,
            copy: Stream::new("copy")?,
            compute: Stream::new("compute")?,
            uploaded: [Event::without_timing()?, Event::without_timing()?],
            consumed: [Event::without_timing()?, Event::without_timing()?],
            marks: (0..2 * batches + 2)
                .map(|_| Event::new())
                .collect::<Result<Vec<_>>>()?,
        })
    }

    fn batch(&self, i: usize) -> &[f32] {
        &self.input[i * self.n..(i + 1) * self.n]
    }

    /// The training step on `slot`: compute in place, then `acc += slot`.
    fn step(&self, gpu: &Gpu, slot: usize) -> Result<()> {
        gpu.compute(&self.compute, &self.slots[slot], self.iters)?;
        gpu.vector_add(&self.compute, &self.acc, &self.slots[slot], &self.acc)
    }

    /// acc = 0 (x * 0 + 0 is +0 for the finite values it holds).
    fn reset(&self, gpu: &Gpu) -> Result<()> {
        gpu.scale(&self.compute, &self.acc, 0.0, 0.0)
    }

    /// No prefetch: upload batch i, then step on it, on one stream; one buffer suffices.
    pub fn run_serial(&mut self, gpu: &Gpu) -> Result<SerialTimes> {
        drain_on_error(|| self.serial_inner(gpu))
    }

    fn serial_inner(&mut self, gpu: &Gpu) -> Result<SerialTimes> {
        let s = &self.compute;
        let m = &self.marks;
        m[0].record(s)?;
        self.reset(gpu)?;
        for i in 0..self.batches {
            // SAFETY: `input` is owned by `self`, held by this `&mut self` call until the
            // last mark is synchronized below; on an error, `run_serial`'s
            // `drain_on_error` synchronizes the context before returning.
            unsafe { s.copy_to_device(self.batch(i), &self.slots[0])? };
            m[2 * i + 1].record(s)?;
            self.step(gpu, 0)?;
            m[2 * i + 2].record(s)?;
        }
        // SAFETY: as above, for `acc_serial`.
        unsafe { s.copy_to_host(&self.acc, &mut self.acc_serial)? };
        let last = &m[2 * self.batches + 1];
        last.record(s)?;
        last.synchronize()?;
        let mut t = SerialTimes {
            total: last.elapsed_ms(&m[0])?,
            upload: 0.0,
            step: 0.0,
        };
        for i in 0..self.batches {
            t.upload += m[2 * i + 1].elapsed_ms(&m[2 * i])?;
            t.step += m[2 * i + 2].elapsed_ms(&m[2 * i + 1])?;
        }
        Ok(t)
    }

    /// Double-buffered: uploads on the copy stream into slot i % 2, steps on the compute
    /// stream, events in both directions. Returns the GPU time in ms.
    pub fn run_prefetch(&mut self, gpu: &Gpu) -> Result<f64> {
        drain_on_error(|| self.prefetch_inner(gpu))
    }

    fn prefetch_inner(&mut self, gpu: &Gpu) -> Result<f64> {
        let (start, stop) = (&self.marks[0], &self.marks[2 * self.batches + 1]);
        start.record(&self.compute)?;
        self.reset(gpu)?;
        // The copy stream starts after `start`, so `stop - start` covers its work too.
        self.copy.wait_event(start)?;
        for i in 0..self.batches {
            let slot = i % SLOTS;
            if i >= SLOTS {
                // Do not overwrite batch i-2 while its step may still be reading it.
                self.copy.wait_event(&self.consumed[slot])?;
            }
            // SAFETY: `input` is owned by `self`, held by this `&mut self` call until `stop`
            // (after the compute stream's wait for every upload) has been synchronized; on
            // an error, `run_prefetch`'s `drain_on_error` synchronizes the context first.
            unsafe { self.copy.copy_to_device(self.batch(i), &self.slots[slot])? };
            self.uploaded[slot].record(&self.copy)?;
            self.compute.wait_event(&self.uploaded[slot])?;
            self.step(gpu, slot)?;
            self.consumed[slot].record(&self.compute)?;
        }
        // SAFETY: `acc_prefetch` is owned by `self`, held until `stop` is synchronized (or,
        // on an error, until `drain_on_error` has synchronized the context).
        unsafe {
            self.compute
                .copy_to_host(&self.acc, &mut self.acc_prefetch)?
        };
        stop.record(&self.compute)?;
        stop.synchronize()?;
        stop.elapsed_ms(start)
    }

    pub fn check_bitwise(&self) -> Result<String> {
        ensure_bitwise_equal(
            "prefetch vs no-prefetch accumulator",
            &self.acc_prefetch,
            &self.acc_serial,
        )?;
        Ok(format!("all {} elements identical", self.n))
    }

    pub fn check_reference(&self, samples: usize) -> Result<String> {
        check_accumulator(
            &self.acc_prefetch,
            &self.input,
            self.batches,
            self.iters,
            samples,
        )
    }

    /// One more prefetching run with a timeline on both streams.
    pub fn timeline(&mut self, gpu: &Gpu) -> Result<String> {
        let timeline = Timeline::attach(&[&self.copy, &self.compute]);
        let run = self.run_prefetch(gpu).map(drop);
        timeline.finish(&[&self.copy, &self.compute], run, &self.marks[0])
    }
}

pub struct Measured {
    pub serial: Stats,
    pub prefetch: Stats,
    /// Per-batch medians of the no-prefetch version.
    pub upload: f64,
    pub step: f64,
}

pub fn measure(gpu: &Gpu, p: &mut Prefetch, reps: usize) -> Result<Measured> {
    let (serial, prefetch) = interleaved(p, reps, |p| p.run_serial(gpu), |p| p.run_prefetch(gpu))?;
    let b = p.batches as f64;
    Ok(Measured {
        serial: Stats::of_each(&serial, |t| t.total),
        prefetch: Stats::of(&prefetch),
        upload: Stats::of_each(&serial, |t| t.upload / b).median,
        step: Stats::of_each(&serial, |t| t.step / b).median,
    })
}

pub fn run(gpu: &Gpu, opts: &Options) -> Result<Report> {
    let n = opts.elements.unwrap_or(DEFAULT_ELEMENTS);
    let batches = opts.batches.unwrap_or(DEFAULT_BATCHES);
    let iters = opts.iters.unwrap_or(DEFAULT_ITERS);
    let mut p = Prefetch::new(gpu, n, batches, iters, opts.seed)?;
    let m = measure(gpu, &mut p, opts.reps)?;
    let model = pipeline_estimate(m.upload, m.step, batches);

    let mut r = Report::new(
        "prefetch",
        "double-buffered prefetch of the next batch",
        &gpu.info.name,
    );
    r.param("batches", batches)
        .param("elements_per_batch", n)
        .param("iters", iters)
        .param("reps", opts.reps);
    r.figure("upload, per batch", m.upload, "ms")
        .figure("training step, per batch", m.step, "ms")
        .figure(
            "no prefetch (upload, then step), median",
            m.serial.median,
            "ms",
        )
        .figure("double-buffered prefetch, median", m.prefetch.median, "ms")
        .figure("speed-up", m.serial.median / m.prefetch.median, "x")
        .figure("model u + s + (B-1) max(u, s)", model, "ms");
    r.detail("no_prefetch_ms", m.serial)
        .detail("prefetch_ms", m.prefetch);
    if opts.timeline {
        r.timeline = Some(p.timeline(gpu)?);
    }
    r.check("prefetch == no prefetch, bit for bit", p.check_bitwise());
    r.check("GPU vs CPU reference (approx)", p.check_reference(2048));
    let speedup = m.serial.median / m.prefetch.median;
    let (slower, faster) = if m.upload >= m.step {
        ("the upload", "the step")
    } else {
        ("the step", "the upload")
    };
    let hideable = m.upload.min(m.step);
    r.explain(if batches == 1 {
        format!(
            "With one batch there is no next batch to prefetch: both versions upload, then step ({:.3} ms without the second buffer, {:.3} ms with it). Use --batches 2 or more.",
            m.serial.median, m.prefetch.median
        )
    } else if speedup >= CLEAR_SPEEDUP {
        format!(
            "Without prefetch each step waits for its own upload: {batches} x (upload {:.3} + step {:.3} ms) = {:.3} ms measured. With two buffers, later batches upload on the copy stream while earlier steps run: {:.3} ms, {speedup:.2}x faster.",
            m.upload, m.step, m.serial.median, m.prefetch.median
        )
    } else {
        format!(
            "Prefetching gained nothing measurable here ({:.3} ms vs {:.3} ms without, {speedup:.2}x): {faster} takes {hideable:.3} ms a batch against {:.3} ms for {slower}, and even a perfect overlap ({model:.3} ms) would save at most {:.3} ms.",
            m.prefetch.median,
            m.serial.median,
            m.upload.max(m.step),
            (m.serial.median - model).max(0.0)
        )
    });
    r.explain("Two events per buffer guard it: the step waits for its upload (uploaded[s]), and the upload of batch i+2 waits for step i to finish reading the same buffer (consumed[s]); without the second the copy engine could overwrite a batch still in use.");
    r.explain(format!(
        "Here {slower} is the slower stage and sets the pace (model {model:.3} ms, measured {:.2}x that); prefetching can hide at most {faster} ({hideable:.3} ms a batch), so it pays most when the two are about equal.",
        m.prefetch.median / model
    ));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demos::testing::{batch_opts as opts, refusal};

    #[test]
    fn the_shared_estimate_hides_the_faster_stage() {
        assert_eq!(pipeline_estimate(1.0, 2.0, 1), 3.0);
        assert_eq!(pipeline_estimate(1.0, 2.0, 8), 3.0 + 7.0 * 2.0);
        assert_eq!(pipeline_estimate(2.0, 1.0, 8), 3.0 + 7.0 * 2.0);
    }

    #[test]
    fn accumulator_check_scales_tolerance_with_the_terms() {
        let (n, batches, iters) = (64, 4, 10);
        let input = random_inputs(n * batches, 3);
        let acc: Vec<f32> = (0..n)
            .map(|j| reference_element(&input, n, batches, iters, j).0)
            .collect();
        assert!(check_accumulator(&acc, &input, batches, iters, 64).is_ok());
        // A skipped batch is far outside the tolerance.
        let missing_one: Vec<f32> = (0..n)
            .map(|j| reference_element(&input, n, batches - 1, iters, j).0)
            .collect();
        assert!(check_accumulator(&missing_one, &input, batches, iters, 64).is_err());
    }

    #[test]
    fn options_accept_the_defaults_and_refuse_hostile_flags() {
        check_options(&Options::default()).unwrap();
        check_options(&opts(1, 1, 0)).unwrap();
        assert!(refusal(check_options, &opts(0, 8, 50)).contains("--elements"));
        assert!(refusal(check_options, &opts(1 << 20, 0, 50)).contains("--batches"));
        assert!(refusal(check_options, &opts(1, MAX_BATCHES + 1, 50)).contains("--batches"));
        assert!(refusal(check_options, &opts(100_000_000, 1024, 50)).contains("--batches 1024"));
        assert!(refusal(check_options, &opts(MAX_ELEMENTS + 1, 1, 50)).contains("--elements"));
        assert!(refusal(check_options, &opts(usize::MAX, usize::MAX, 50)).contains("--"));
        assert!(refusal(check_options, &opts(DEFAULT_ELEMENTS, 8, u32::MAX)).contains("estimated"));
    }
}
