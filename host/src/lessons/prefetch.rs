//! # Prefetching: a double-buffered input pipeline
//!
//! A training loop's data loader: while step i reads its batch from one device buffer, batch
//! i+1 is uploaded into a *second* buffer on a copy stream. Events guard both directions:
//! `uploaded[s]` (a step may not read a buffer before its upload ends) and `consumed[s]`
//! (the upload of batch i+2 may not overwrite the buffer step i still reads; forget it and a
//! fast copy engine corrupts results only sometimes).
//!
//! The seed technique is the ping-pong input pipeline of data loaders (PyTorch's
//! `data_prefetcher`) and the double buffering of NVIDIA's CUDA samples. The "step" is the
//! compute kernel, then `acc += batch` (like gradient accumulation):
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
//! In Rust: `copy.wait_event(&consumed[s])`, `copy.copy_to_device(input.slice(r)?,
//! &slots[s])`, `uploaded[s].record(&copy)`, `compute.wait_event(&uploaded[s])`, then
//! `gpu.compute(..)` and `gpu.vector_add(&compute, &acc, &slots[s], &acc)` on the compute stream.
//!
//! The bound: without prefetch the copy engine and the SMs take turns, `B * (u + s)`
//! (u: one upload, s: one step); with it, the two-stage pipeline `u + s + (B-1) * max(u, s)`.
use kernels_gpu::math::{add_element, compute_element};
use serde::Serialize;

use crate::lab::harness::budget::{CLEAR_SPEEDUP, MAX_ELEMENTS};
use crate::lab::harness::data::{random_inputs, sample_indices, ABS_TOLERANCE, REL_TOLERANCE};
use crate::lab::harness::lesson::no_such_version;
use crate::lab::kit::batches::{pipeline_estimate, total_elements};
use crate::lab::{args, fixed, t, Checks, Lesson, Measured, Plan, Report, Sample, Text, WorkModel};
use crate::runtime::{DeviceBuffer, Error, Event, Gpu, HostBuffer, Result, Stream};

/// The most batches (each has two timing events).
pub const MAX_BATCHES: usize = 4096;
/// Device input buffers in ping-pong.
pub const SLOTS: usize = 2;

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Batches the loop steps through [1..=4096]. Try 1 (nothing to prefetch) or 32.
    #[arg(long, default_value_t = 8, value_parser = args::whole(1usize..=MAX_BATCHES))]
    pub batches: usize,
    /// Floats per batch [1..=4294967295]; all batches together at most 268435456.
    #[arg(long, default_value_t = 1 << 20, value_parser = args::whole(1usize..=MAX_ELEMENTS))]
    pub elements: usize,
    /// sin·cos steps per element [1..=100000]: one step's compute against one batch's upload.
    /// Try 5 or 500 to make one stage dominate; the report gives both times.
    #[arg(long, default_value_t = 50, value_parser = args::whole(1u32..=100_000))]
    pub iters: u32,
}

pub struct Prefetch {
    n: usize,
    batches: usize,
    iters: u32,
    /// Every batch, back to back (pinned, so uploads are truly asynchronous).
    input: HostBuffer<f32>,
    acc_serial: HostBuffer<f32>,
    acc_prefetch: HostBuffer<f32>,
    slots: [DeviceBuffer<f32>; SLOTS],
    acc: DeviceBuffer<f32>,
    copy: Stream,
    compute: Stream,
    uploaded: [Event; SLOTS],
    consumed: [Event; SLOTS],
    /// marks[0] start, marks[2i+1] after upload i, marks[2i+2] after step i, marks[2B+1]
    /// after the final download.
    marks: Vec<Event>,
}

/// The versions, by their index in [`Lesson::versions`].
pub const NO_PREFETCH: usize = 0;
pub const PREFETCH: usize = 1;

impl Prefetch {
    /// The input, every batch back to back, for tests that compare with the CPU.
    pub fn input(&self) -> Result<Vec<f32>> {
        self.input.to_vec()
    }

    /// The prefetching version's accumulator.
    pub fn output(&self) -> Result<Vec<f32>> {
        self.acc_prefetch.to_vec()
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

    /// Upload batch i, then step on it, on one stream; one buffer suffices. The parts are
    /// the per-batch upload and step times.
    fn upload_then_step(&mut self, gpu: &Gpu) -> Result<Sample> {
        let (s, m, b) = (&self.compute, &self.marks, self.batches);
        m[0].record(s)?;
        self.reset(gpu)?;
        for i in 0..b {
            s.copy_to_device(self.input.slice(i * self.n..(i + 1) * self.n)?, &self.slots[0])?;
            m[2 * i + 1].record(s)?;
            self.step(gpu, 0)?;
            m[2 * i + 2].record(s)?;
        }
        s.copy_to_host(&self.acc, &self.acc_serial)?;
        m[2 * b + 1].record(s)?;
        m[2 * b + 1].synchronize()?;
        let (mut upload, mut step) = (0.0, 0.0);
        for i in 0..b {
            upload += m[2 * i + 1].elapsed_ms(&m[2 * i])?;
            step += m[2 * i + 2].elapsed_ms(&m[2 * i + 1])?;
        }
        Ok(Sample::ms(m[2 * b + 1].elapsed_ms(&m[0])?)
            .part("upload", upload / b as f64)
            .part("step", step / b as f64))
    }

    /// Uploads on the copy stream into slot i % 2, steps on the compute stream, events in
    /// both directions.
    fn double_buffered(&mut self, gpu: &Gpu) -> Result<Sample> {
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
            self.copy.copy_to_device(
                self.input.slice(i * self.n..(i + 1) * self.n)?,
                &self.slots[slot],
            )?;
            self.uploaded[slot].record(&self.copy)?;
            self.compute.wait_event(&self.uploaded[slot])?;
            self.step(gpu, slot)?;
            self.consumed[slot].record(&self.compute)?;
        }
        self.compute.copy_to_host(&self.acc, &self.acc_prefetch)?;
        stop.record(&self.compute)?;
        stop.synchronize()?;
        Ok(Sample::ms(stop.elapsed_ms(start)?))
    }
}

impl Lesson for Prefetch {
    const NAME: &'static str = "prefetch";
    const SUMMARY: &'static str =
        "double-buffered prefetch: upload batch i+1 on a copy stream while step i computes";
    type Args = Args;

    fn versions(_: &Args) -> Vec<String> {
        vec!["no prefetch (upload, then step)".into(), "double-buffered prefetch".into()]
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        let n = a.elements;
        let total = total_elements(a.batches, n, "floats of input pinned")?;
        let per_batch = model.copy_ms(n) + model.compute_ms(n, a.iters) + model.elementwise_ms(n);
        // The input is generated in a Vec, then pinned; two accumulators.
        Ok(Plan::new()
            .host::<f32>(total, 2)?
            .host::<f32>(n, 2)?
            .device::<f32>(n, SLOTS + 1)?
            .work(2.0 * a.batches as f64 * per_batch, "--batches x --elements x --iters"))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<Prefetch> {
        let n = a.elements;
        let event = || Event::without_timing(gpu);
        Ok(Prefetch {
            n,
            batches: a.batches,
            iters: a.iters,
            input: HostBuffer::pinned_from(gpu, &random_inputs(n * a.batches, seed))?,
            acc_serial: HostBuffer::pinned(gpu, n)?,
            acc_prefetch: HostBuffer::pinned(gpu, n)?,
            slots: [DeviceBuffer::zeroed(gpu, n)?, DeviceBuffer::zeroed(gpu, n)?],
            acc: DeviceBuffer::zeroed(gpu, n)?,
            copy: Stream::new(gpu, "copy")?,
            compute: Stream::new(gpu, "compute")?,
            uploaded: [event()?, event()?],
            consumed: [event()?, event()?],
            marks: (0..2 * a.batches + 2).map(|_| Event::new(gpu)).collect::<Result<_>>()?,
        })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        match v {
            NO_PREFETCH => self.upload_then_step(gpu),
            PREFETCH => self.double_buffered(gpu),
            _ => no_such_version::<Self>(v),
        }
    }

    fn streams(&self) -> Vec<&Stream> {
        vec![&self.copy, &self.compute]
    }

    fn verify(&mut self, _gpu: &Gpu, _m: &Measured, checks: &mut Checks) -> Result<()> {
        let (serial, prefetch, input) =
            (self.acc_serial.read()?, self.acc_prefetch.read()?, self.input.read()?);
        checks.bitwise("prefetch == no prefetch, bit for bit", &prefetch, &serial);
        checks.record(
            "GPU vs CPU reference (approx)",
            check_accumulator(&prefetch, &input, self.iters, 2048),
        );
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        interpret(self.batches, m, r);
    }
}

/// The CPU's accumulation for element `j` over every batch of `input` (`n` floats each), in
/// the GPU's order, and the sum of the terms' magnitudes (what the sum's rounding scales with).
pub fn reference_element(input: &[f32], n: usize, iters: u32, j: usize) -> (f32, f32) {
    let (mut acc, mut magnitude) = (0.0f32, 0.0f32);
    for batch in input.chunks_exact(n) {
        let term = compute_element(batch[j], iters);
        acc = add_element(acc, term);
        magnitude += term.abs();
    }
    (acc, magnitude)
}

/// Compares the accumulator with the CPU at up to `samples` elements. Each term may differ
/// from the CPU's by `REL_TOLERANCE` of itself (lab/data.rs explains that bound), so a sum by
/// `REL_TOLERANCE` of the sum of the terms' magnitudes (the sum itself can be near zero when
/// terms cancel), plus `ABS_TOLERANCE`.
pub fn check_accumulator(acc: &[f32], input: &[f32], iters: u32, samples: usize) -> Result<Text> {
    for &j in &sample_indices(acc.len(), samples) {
        let (expected, magnitude) = reference_element(input, acc.len(), iters, j);
        let tolerance = REL_TOLERANCE * magnitude + ABS_TOLERANCE;
        if !approx::abs_diff_eq!(acc[j], expected, epsilon = tolerance) {
            let (gpu, cpu, tolerance) =
                (format!("{:e}", acc[j]), format!("{expected:e}"), format!("{tolerance:e}"));
            return Err(Error::Verification(t!(
                "error.prefetch.accumulator_off",
                j,
                gpu,
                cpu,
                tolerance
            )));
        }
    }
    let checked = samples.min(acc.len());
    Ok(t!("check.approx", n = checked))
}

/// The figures and interpretation for `batches` batches, from the measurements alone.
pub fn interpret(batches: usize, m: &Measured, r: &mut Report) {
    let one = m.without();
    let (upload, step) = (one.part("upload"), one.part("step"));
    let model = pipeline_estimate(upload, step, batches);
    let (serial, prefetch, speedup) = (one.time.median, m.with().time.median, m.speedup());
    r.figure("upload, per batch", upload, "ms")
        .figure("training step, per batch", step, "ms")
        .figure("model u + s + (B-1) max(u, s)", model, "ms");
    let (slower, faster) = if upload >= step {
        (t!("prefetch.the_upload"), t!("prefetch.the_step"))
    } else {
        (t!("prefetch.the_step"), t!("prefetch.the_upload"))
    };
    let (x, off) = (fixed(speedup, 2), fixed(prefetch / model, 2));
    let [hideable, longest, save, upload, step, serial, prefetch, model] = [
        upload.min(step),
        upload.max(step),
        (serial - model).max(0.0),
        upload,
        step,
        serial,
        prefetch,
        model,
    ]
    .map(|v| fixed(v, 3));
    r.explain(if batches == 1 {
        t!("prefetch.one_batch", serial, prefetch)
    } else if speedup >= CLEAR_SPEEDUP {
        t!("prefetch.faster", batches, upload, step, serial, prefetch, x)
    } else {
        t!("prefetch.little", prefetch, serial, x, faster, hideable, longest, slower, model, save)
    });
    r.explain(t!("prefetch.two_events"));
    r.explain(t!("prefetch.pace", slower, model, off, faster, hideable));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

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
        let acc: Vec<f32> = (0..n).map(|j| reference_element(&input, n, iters, j).0).collect();
        assert!(check_accumulator(&acc, &input, iters, 64).is_ok());
        // A skipped batch is far outside the tolerance.
        let missing_one: Vec<f32> =
            (0..n).map(|j| reference_element(&input[..n * (batches - 1)], n, iters, j).0).collect();
        assert!(check_accumulator(&missing_one, &input, iters, 64).is_err());
    }

    fn measured(serial: f64, prefetch: f64, upload: f64, step: f64) -> Measured {
        let one = Sample::ms(serial).part("upload", upload).part("step", step);
        let names = Prefetch::versions(&args_from::<Prefetch>(&[]).unwrap());
        Measured::from_samples(names, vec![vec![one], vec![Sample::ms(prefetch)]])
    }

    fn lines(batches: usize, m: &Measured) -> (Vec<String>, Report) {
        let mut r = Report::new("t", "t", "t");
        interpret(batches, m, &mut r);
        (r.interpretation.clone(), r)
    }

    #[test]
    fn interpretation_follows_the_data() {
        // One batch: nothing to prefetch, whatever the times say.
        let (one, _) = lines(1, &measured(2.0, 1.0, 1.0, 1.0));
        assert!(one[0].contains("no next batch"), "{one:?}");
        assert!(!one.iter().any(|l| l.contains("x faster")), "{one:?}");
        // A clear gain with equal stages.
        let (fast, r) = lines(8, &measured(16.0, 9.2, 1.0, 1.0));
        assert!(fast[0].contains("x faster"), "{fast:?}");
        assert_eq!(r.value("model u + s + (B-1) max(u, s)"), Some(9.0));
        // No clear gain: the upload is tiny next to the step, which sets the pace.
        let (slow, _) = lines(8, &measured(8.8, 8.6, 0.1, 1.0));
        assert!(slow[0].contains("little or nothing"), "{slow:?}");
        assert!(slow[0].contains("the upload takes 0.100 ms"), "{slow:?}");
        assert!(slow[2].starts_with("Here the step is the slower stage"), "{slow:?}");
    }
}
