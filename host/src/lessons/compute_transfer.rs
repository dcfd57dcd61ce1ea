//! # A transfer stream and a compute stream, linked by events
//!
//! Instead of one stream per chunk (`overlap`), give each *kind* of work its own stream: a
//! transfer stream for the copies and a compute stream for the kernels, with events carrying
//! the dependencies batch by batch. Then the upload of batch i+1 runs while batch i computes,
//! and the download of batch i while batch i+1 computes.
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
//! In Rust: `uploaded[i].record(&transfer)`, `compute.wait_event(&uploaded[i])`,
//! `gpu.compute(&compute, dev.slice(r)?, iters)` and `transfer.copy_to_host(dev.slice(r)?,
//! out.slice(r)?)`. Issue order matters: a stream runs in order, so were D2H(i) issued before
//! H2D(i+1), the upload would queue behind a download that waits for compute(i).
//!
//! The bound: the copies share one stream, so per batch it is busy h + d (copy-in, copy-out)
//! against c of compute, and the best this arrangement reaches is the two-stage pipeline
//! `h + c + d + (B-1) * max(h + d, c)`.
//!
//! The third version is the fix for that shared stream: uploads on an `upload` stream and
//! downloads on a `download` stream, so that each direction's copy engine serves its own
//! queue. A download no longer waits behind the next upload, and the bound becomes the
//! three-stage pipeline `h + c + d + (B-1) * max(h, c, d)`.
use std::ops::Range;

use kernels_gpu::math::compute_element;
use serde::Serialize;

use crate::lab::harness::budget::{CLEAR_SPEEDUP, MAX_ELEMENTS};
use crate::lab::harness::data::{chunk_ranges, random_inputs};
use crate::lab::harness::lesson::no_such_version;
use crate::lab::kit::batches::{pipeline_estimate, total_elements};
use crate::lab::{args, fixed, t, Checks, Lesson, Measured, Plan, Report, Sample, WorkModel};
use crate::runtime::{DeviceBuffer, Event, Gpu, HostBuffer, Result, Stream};

/// The most batches (each has three timing and two dependency events).
pub const MAX_BATCHES: usize = 1024;

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Batches streamed through [1..=1024]. Try 1 to see nothing to overlap, or 16.
    #[arg(long, default_value_t = 4, value_parser = args::whole(1usize..=MAX_BATCHES))]
    pub batches: usize,
    /// Floats per batch [1..=4294967295]; all batches together at most 268435456.
    #[arg(long, default_value_t = 524_288, value_parser = args::whole(1usize..=MAX_ELEMENTS))]
    pub elements: usize,
    /// sin·cos steps per element [1..=100000]: one batch's compute against its upload plus
    /// download. Try 20 or 400 to tip the balance; the report gives both times.
    #[arg(long, default_value_t = 100, value_parser = args::whole(1u32..=100_000))]
    pub iters: u32,
}

pub struct ComputeTransfer {
    iters: u32,
    ranges: Vec<Range<usize>>,
    input: HostBuffer<f32>,
    out_one: HostBuffer<f32>,
    out_two: HostBuffer<f32>,
    out_three: HostBuffer<f32>,
    dev: DeviceBuffer<f32>,
    transfer: Stream,
    compute: Stream,
    /// The third version's streams: uploads and downloads apart.
    upload: Stream,
    download: Stream,
    uploaded: Vec<Event>,
    computed: Vec<Event>,
    /// 3B + 1 timing events of the one-stream version, one between each two operations.
    marks: Vec<Event>,
}

/// The versions, by their index in [`Lesson::versions`].
pub const ONE_STREAM: usize = 0;
pub const TWO_STREAMS: usize = 1;
pub const THREE_STREAMS: usize = 2;

impl ComputeTransfer {
    /// The input, for tests that compare every element with the CPU.
    pub fn input(&self) -> Result<Vec<f32>> {
        self.input.to_vec()
    }

    /// The two-stream version's output.
    pub fn output(&self) -> Result<Vec<f32>> {
        self.out_two.to_vec()
    }

    /// The three-stream version's output.
    pub fn output_three(&self) -> Result<Vec<f32>> {
        self.out_three.to_vec()
    }

    /// Batch i's upload on the transfer stream, then its event.
    fn upload(&self, i: usize) -> Result<()> {
        let r = self.ranges[i].clone();
        self.transfer.copy_to_device(self.input.slice(r.clone())?, self.dev.slice(r)?)?;
        self.uploaded[i].record(&self.transfer)
    }

    /// Every batch on the compute stream: copy in, compute, copy out, in turn. The parts are
    /// the per-batch phase times h, c and d.
    fn one_stream(&mut self, gpu: &Gpu) -> Result<Sample> {
        let (s, m) = (&self.compute, &self.marks);
        m[0].record(s)?;
        for (i, r) in self.ranges.iter().enumerate() {
            let dev = self.dev.slice(r.clone())?;
            s.copy_to_device(self.input.slice(r.clone())?, dev.clone())?;
            m[3 * i + 1].record(s)?;
            gpu.compute(s, dev.clone(), self.iters)?;
            m[3 * i + 2].record(s)?;
            s.copy_to_host(dev, self.out_one.slice(r.clone())?)?;
            m[3 * i + 3].record(s)?;
        }
        let b = self.ranges.len();
        m[3 * b].synchronize()?;
        let (mut h, mut c, mut d) = (0.0, 0.0, 0.0);
        for w in (0..b).map(|i| &m[3 * i..3 * i + 4]) {
            h += w[1].elapsed_ms(&w[0])?;
            c += w[2].elapsed_ms(&w[1])?;
            d += w[3].elapsed_ms(&w[2])?;
        }
        let bf = b as f64;
        Ok(Sample::ms(h + c + d).part("h", h / bf).part("c", c / bf).part("d", d / bf))
    }

    /// Copies on the transfer stream, kernels on the compute stream, events in between.
    fn two_streams(&mut self, gpu: &Gpu) -> Result<Sample> {
        let b = self.ranges.len();
        let (start, stop) = (&self.marks[0], &self.marks[3 * b]);
        // Everything is after `start` on the transfer stream: the compute stream's first
        // kernel waits for the first upload, which follows `start`.
        start.record(&self.transfer)?;
        self.upload(0)?;
        for (i, r) in self.ranges.iter().enumerate() {
            let dev = self.dev.slice(r.clone())?;
            self.compute.wait_event(&self.uploaded[i])?;
            gpu.compute(&self.compute, dev.clone(), self.iters)?;
            self.computed[i].record(&self.compute)?;
            if i + 1 < b {
                self.upload(i + 1)?; // before D2H(i), so it does not queue behind it
            }
            self.transfer.wait_event(&self.computed[i])?;
            self.transfer.copy_to_host(dev, self.out_two.slice(r.clone())?)?;
        }
        // The last download waited for the last compute: `stop` on the transfer stream
        // follows all work on both streams.
        stop.record(&self.transfer)?;
        stop.synchronize()?;
        Ok(Sample::ms(stop.elapsed_ms(start)?))
    }

    /// Uploads on the upload stream, kernels on the compute stream, downloads on the download
    /// stream: the two directions no longer queue behind each other.
    fn three_streams(&mut self, gpu: &Gpu) -> Result<Sample> {
        let b = self.ranges.len();
        let (start, stop) = (&self.marks[0], &self.marks[3 * b]);
        start.record(&self.upload)?;
        for (i, r) in self.ranges.iter().enumerate() {
            let dev = self.dev.slice(r.clone())?;
            self.upload.copy_to_device(self.input.slice(r.clone())?, dev.clone())?;
            self.uploaded[i].record(&self.upload)?;
        }
        for (i, r) in self.ranges.iter().enumerate() {
            let dev = self.dev.slice(r.clone())?;
            self.compute.wait_event(&self.uploaded[i])?;
            gpu.compute(&self.compute, dev.clone(), self.iters)?;
            self.computed[i].record(&self.compute)?;
            self.download.wait_event(&self.computed[i])?;
            self.download.copy_to_host(dev, self.out_three.slice(r.clone())?)?;
        }
        // The last download waited for the last compute, which waited for the last upload,
        // which followed `start`: `stop` on the download stream follows everything.
        stop.record(&self.download)?;
        stop.synchronize()?;
        Ok(Sample::ms(stop.elapsed_ms(start)?))
    }
}

impl Lesson for ComputeTransfer {
    const NAME: &'static str = "compute-transfer";
    const SUMMARY: &'static str =
        "a transfer stream and a compute stream linked by per-batch events vs one stream";
    type Args = Args;

    fn versions(_: &Args) -> Vec<String> {
        vec![
            "one stream".into(),
            "transfer + compute streams".into(),
            "upload + compute + download streams".into(),
        ]
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        let total = total_elements(a.batches, a.elements, "floats on the device")?;
        let per_batch = 2.0 * model.copy_ms(a.elements) + model.compute_ms(a.elements, a.iters);
        // The input is generated in a Vec, then pinned; three pinned outputs.
        Ok(Plan::new()
            .host::<f32>(total, 5)?
            .device::<f32>(total, 1)?
            .work(3.0 * a.batches as f64 * per_batch, "--batches x --elements x --iters"))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<ComputeTransfer> {
        let total = a.batches * a.elements;
        let events =
            |k: usize| (0..k).map(|_| Event::without_timing(gpu)).collect::<Result<Vec<_>>>();
        Ok(ComputeTransfer {
            iters: a.iters,
            ranges: chunk_ranges(total, a.batches),
            input: HostBuffer::pinned_from(gpu, &random_inputs(total, seed))?,
            out_one: HostBuffer::pinned(gpu, total)?,
            out_two: HostBuffer::pinned(gpu, total)?,
            out_three: HostBuffer::pinned(gpu, total)?,
            dev: DeviceBuffer::zeroed(gpu, total)?,
            transfer: Stream::new(gpu, "transfer")?,
            compute: Stream::new(gpu, "compute")?,
            upload: Stream::new(gpu, "upload")?,
            download: Stream::new(gpu, "download")?,
            uploaded: events(a.batches)?,
            computed: events(a.batches)?,
            marks: (0..=3 * a.batches).map(|_| Event::new(gpu)).collect::<Result<_>>()?,
        })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        match v {
            ONE_STREAM => self.one_stream(gpu),
            TWO_STREAMS => self.two_streams(gpu),
            THREE_STREAMS => self.three_streams(gpu),
            _ => no_such_version::<Self>(v),
        }
    }

    fn streams(&self) -> Vec<&Stream> {
        vec![&self.transfer, &self.compute, &self.upload, &self.download]
    }

    /// All three: the third shows the fix for the shared transfer stream.
    fn drawn(&self) -> Vec<usize> {
        vec![ONE_STREAM, TWO_STREAMS, THREE_STREAMS]
    }

    fn verify(&mut self, _gpu: &Gpu, _m: &Measured, checks: &mut Checks) -> Result<()> {
        let (one, two, input) = (self.out_one.read()?, self.out_two.read()?, self.input.read()?);
        let three = self.out_three.read()?;
        checks.bitwise("two streams == one stream, bit for bit", &two, &one);
        checks.bitwise("three streams == one stream, bit for bit", &three, &one);
        checks.approx("GPU vs CPU reference (approx)", &two, 4096, |i| {
            compute_element(input[i], self.iters)
        });
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        interpret(self.ranges.len(), m, r);
    }
}

/// The figures and interpretation for `b` batches, from the measurements alone.
pub fn interpret(b: usize, m: &Measured, r: &mut Report) {
    let one = m.without();
    let (h, c, d) = (one.part("h"), one.part("c"), one.part("d"));
    let phases = (h, c, d);
    // The transfer stream's share h + d is one stage, the compute c the other.
    let model = pipeline_estimate(h + d, c, b);
    let (seq, two, speedup) = (one.time.median, m.with().time.median, m.speedup());
    r.figure("copy-in, per batch", h, "ms")
        .figure("compute, per batch", c, "ms")
        .figure("copy-out, per batch", d, "ms")
        .figure("model h+c+d + (B-1) max(h+d, c)", model, "ms")
        .figure("measured / model", two / model, "x");
    let (x, off) = (fixed(speedup, 2), fixed(two / model, 2));
    let (pace, slower) = if h + d >= c {
        (t!("compute_transfer.transfer_stream"), h + d)
    } else {
        (t!("compute_transfer.compute_stream"), c)
    };
    let [save, seq, two, model, hd, c, slower] =
        [(seq - model).max(0.0), seq, two, model, h + d, c, slower].map(|v| fixed(v, 3));
    r.explain(if b == 1 {
        t!("compute_transfer.one_batch", seq, two)
    } else if speedup >= CLEAR_SPEEDUP {
        t!("compute_transfer.faster", seq, two, x)
    } else {
        t!("compute_transfer.little", two, seq, x, model, save)
    });
    r.explain(t!("compute_transfer.links", hd, c, pace, slower, model, off));
    r.explain(t!("compute_transfer.issue_order"));
    if let Some(three) = m.versions.get(THREE_STREAMS) {
        explain_three_streams(b, phases, m.with().time.median, three.time.median, r);
    }
}

/// The third version against its own bound, h + c + d + (B-1) max(h, c, d), and against the
/// two-stream version whose shared transfer stream it splits.
fn explain_three_streams(
    b: usize,
    (h, c, d): (f64, f64, f64),
    two: f64,
    three: f64,
    r: &mut Report,
) {
    let model = h + c + d + (b as f64 - 1.0) * h.max(c).max(d);
    r.figure("three streams: model h+c+d + (B-1) max(h, c, d)", model, "ms")
        .figure("three streams: measured / model", three / model, "x")
        .figure("two streams / three streams", two / three, "x");
    let [two, three, model] = [two, three, model].map(|v| fixed(v, 3));
    r.explain(t!("compute_transfer.three_streams", two, three, model));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

    /// The lesson's model, h + c + d + (B-1) max(h + d, c), as the shared estimate gives it.
    fn model(h: f64, c: f64, d: f64, b: usize) -> f64 {
        pipeline_estimate(h + d, c, b)
    }

    #[test]
    fn model_is_the_plain_sum_for_one_batch() {
        assert_eq!(model(1.0, 2.0, 1.0, 1), 4.0);
    }

    #[test]
    fn model_is_paced_by_the_slower_stream() {
        // Compute-bound: c > h + d.
        assert_eq!(model(1.0, 3.0, 1.0, 4), 5.0 + 3.0 * 3.0);
        // Transfer-bound: h + d > c.
        assert_eq!(model(1.0, 1.0, 1.0, 4), 3.0 + 3.0 * 2.0);
        // Never worse than one stream, never better than the busier stream's total.
        for (h, c, d, b) in [(0.5, 1.0, 0.5, 8), (0.1, 2.0, 0.3, 3), (1.0, 0.2, 1.0, 5)] {
            let (m, bf) = (model(h, c, d, b), b as f64);
            assert!(m <= bf * (h + c + d) + 1e-12);
            assert!(m >= (bf * (h + d)).max(bf * c) - 1e-12);
        }
    }

    fn measured(seq: f64, two: f64, (h, c, d): (f64, f64, f64)) -> Measured {
        measured_three(seq, two, two, (h, c, d))
    }

    fn measured_three(seq: f64, two: f64, three: f64, (h, c, d): (f64, f64, f64)) -> Measured {
        let one = Sample::ms(seq).part("h", h).part("c", c).part("d", d);
        let names = ComputeTransfer::versions(&args_from::<ComputeTransfer>(&[]).unwrap());
        let runs = vec![vec![one], vec![Sample::ms(two)], vec![Sample::ms(three)]];
        Measured::from_samples(names, runs)
    }

    #[test]
    fn three_streams_are_set_against_the_three_stage_bound() {
        // Transfer-bound: h + d = 2.0 paces two streams, max(h, c, d) = 1.0 paces three.
        let (lines, r) = lines(4, &measured_three(12.0, 9.0, 6.5, (1.0, 0.5, 1.0)));
        let model = 2.5 + 3.0 * 1.0;
        assert_eq!(r.value("three streams: model h+c+d + (B-1) max(h, c, d)"), Some(model));
        assert_eq!(r.value("three streams: measured / model"), Some(6.5 / model));
        assert_eq!(r.value("two streams / three streams"), Some(9.0 / 6.5));
        let last = lines.last().unwrap();
        assert!(last.contains("6.500 ms against 9.000 ms"), "{lines:?}");
        assert!(last.contains("is 5.500 ms"), "{lines:?}");
    }

    fn lines(b: usize, m: &Measured) -> (Vec<String>, Report) {
        let mut r = Report::new("t", "t", "t");
        interpret(b, m, &mut r);
        (r.interpretation.clone(), r)
    }

    #[test]
    fn interpretation_follows_the_data() {
        // One batch: nothing to overlap, whatever the times say.
        let (one, _) = lines(1, &measured(4.0, 3.0, (1.0, 2.0, 1.0)));
        assert!(one[0].contains("nothing to overlap"), "{one:?}");
        assert!(!one.iter().any(|l| l.contains("x faster")), "{one:?}");
        // A clear gain, compute-bound: the compute stream sets the pace.
        let (fast, r) = lines(4, &measured(16.0, 9.5, (0.5, 3.0, 0.5)));
        assert!(fast[0].contains("x faster"), "{fast:?}");
        assert!(fast[1].contains("the compute stream (3.000 ms"), "{fast:?}");
        assert_eq!(r.value("model h+c+d + (B-1) max(h+d, c)"), Some(4.0 + 9.0));
        // No clear gain, transfer-bound: says what the best could have saved.
        let (slow, _) = lines(4, &measured(8.0, 7.9, (1.0, 0.5, 0.5)));
        assert!(slow[0].contains("little or nothing"), "{slow:?}");
        assert!(!slow[0].contains("x faster"), "{slow:?}");
        assert!(slow[1].contains("the transfer stream (1.500 ms"), "{slow:?}");
    }
}
