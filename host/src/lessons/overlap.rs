//! # Chunked multi-stream overlap
//!
//! A GPU has copy engines and compute units that can work at the same time, but one stream
//! runs its work in order: copy in, compute, copy out, each waiting for the last. Split the
//! array into K chunks and give each chunk its own stream, and chunk 2 is copied in while
//! chunk 1 computes and chunk 0 is copied out.
//!
//! The seed technique is the "staged concurrent copy and execute" of NVIDIA's CUDA C++
//! Programming Guide and the `processChunk` example of stream tutorials:
//!
//! ```text
//! for (int i = 0; i < K; ++i) {
//!   cudaMemcpyAsync(d + off[i], h + off[i], bytes[i], cudaMemcpyHostToDevice, s[i]);
//!   processChunk<<<grid[i], 256, 0, s[i]>>>(d, off[i], len[i], iters);
//!   cudaMemcpyAsync(out + off[i], d + off[i], bytes[i], cudaMemcpyDeviceToHost, s[i]);
//! }
//! ```
//!
//! In Rust: `s.copy_to_device(input.slice(r)?, dev.slice(r)?)`, `gpu.compute_chunk(s, &dev,
//! r, iters)` and `s.copy_to_host(dev.slice(r)?, out.slice(r)?)`, one stream per chunk.
//!
//! The bound: with H, C and D the whole array's copy-in, compute and copy-out times,
//! `T(K) = (H + C + D)/K + (K-1)/K * max(H, C, D)`: one chunk's full trip, then the slowest
//! stage for the remaining K-1 chunks.
use std::ops::Range;

use kernels_gpu::math::compute_element;
use serde::Serialize;

use crate::lab::budget::{MAX_ELEMENTS, MAX_STREAMS};
use crate::lab::data::{chunk_ranges, random_inputs};
use crate::lab::pipeline::pipeline_bound;
use crate::lab::{args, Checks, Lesson, Measured, Plan, Report, Sample, WorkModel};
use crate::runtime::stream::{fork, join};
use crate::runtime::{DeviceBuffer, Error, Event, Gpu, HostBuffer, Result, Stream};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Array size in floats [1..=4294967295]. Try 1048576 to see fixed costs win.
    #[arg(long, default_value_t = 16 << 20, value_parser = args::whole(1usize..=MAX_ELEMENTS))]
    pub elements: usize,
    /// Streams, one chunk each [1..=64]. Try 2, 4, 32.
    #[arg(long, default_value_t = 8, value_parser = args::whole(1usize..=MAX_STREAMS))]
    pub streams: usize,
    /// sin·cos steps per element [1..=100000]: more makes compute the slowest stage.
    #[arg(long, default_value_t = 100, value_parser = args::whole(1u32..=100_000))]
    pub iters: u32,
}

pub struct Overlap {
    iters: u32,
    chunks: Vec<Range<usize>>,
    streams: Vec<Stream>,
    input: HostBuffer<f32>,
    out_one: HostBuffer<f32>,
    out_many: HostBuffer<f32>,
    dev: DeviceBuffer<f32>,
    marks: [Event; 4],
    fork: Event,
    joins: Vec<Event>,
}

impl Overlap {
    /// The input, for tests that compare every element with the CPU.
    pub fn input(&self) -> Result<Vec<f32>> {
        self.input.to_vec()
    }

    /// The K-stream version's output.
    pub fn output(&self) -> Result<Vec<f32>> {
        self.out_many.to_vec()
    }
}

impl Lesson for Overlap {
    const NAME: &'static str = "overlap";
    const SUMMARY: &'static str =
        "one stream vs K streams each copying in, computing and copying out its chunk";
    type Args = Args;

    fn versions(a: &Args) -> Vec<String> {
        vec!["one stream".into(), format!("{} streams", a.streams)]
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        if a.streams > a.elements {
            return Err(Error::InvalidInput(format!(
                "--streams {} is more than --elements {}: every stream needs at least one element",
                a.streams, a.elements
            )));
        }
        let (copy, compute) = (
            model.copy_ms(a.elements),
            model.compute_ms(a.elements, a.iters),
        );
        Ok(Plan::new()
            .host::<f32>(a.elements, 4)?
            .device::<f32>(a.elements, 1)?
            .work(2.0 * (2.0 * copy + compute), "--elements x --iters"))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<Overlap> {
        let n = a.elements;
        Ok(Overlap {
            iters: a.iters,
            chunks: chunk_ranges(n, a.streams),
            streams: (0..a.streams)
                .map(|i| Stream::new(gpu, format!("overlap-{i}")))
                .collect::<Result<_>>()?,
            input: HostBuffer::pinned_from(gpu, &random_inputs(n, seed))?,
            out_one: HostBuffer::pinned(gpu, n)?,
            out_many: HostBuffer::pinned(gpu, n)?,
            dev: DeviceBuffer::zeroed(gpu, n)?,
            marks: [
                Event::new(gpu)?,
                Event::new(gpu)?,
                Event::new(gpu)?,
                Event::new(gpu)?,
            ],
            fork: Event::without_timing(gpu)?,
            joins: (1..a.streams)
                .map(|_| Event::without_timing(gpu))
                .collect::<Result<_>>()?,
        })
    }

    /// The whole array on one stream: copy in, compute, copy out, an event between phases.
    fn without(&mut self, gpu: &Gpu) -> Result<Sample> {
        let s = &self.streams[0];
        let [m0, m1, m2, m3] = &self.marks;
        m0.record(s)?;
        s.copy_to_device(&self.input, &self.dev)?;
        m1.record(s)?;
        gpu.compute(s, &self.dev, self.iters)?;
        m2.record(s)?;
        s.copy_to_host(&self.dev, &self.out_one)?;
        m3.record(s)?;
        m3.synchronize()?;
        let (h, c, d) = (m1.elapsed_ms(m0)?, m2.elapsed_ms(m1)?, m3.elapsed_ms(m2)?);
        Ok(Sample::ms(h + c + d).part("H", h).part("C", c).part("D", d))
    }

    /// Chunk i on stream i. The other streams fork from stream 0 and join back into it, so
    /// the two timing events on stream 0 bracket every stream's work.
    fn with(&mut self, gpu: &Gpu) -> Result<Sample> {
        let (first, rest) = (
            &self.streams[0],
            self.streams[1..].iter().collect::<Vec<_>>(),
        );
        let (start, stop) = (&self.marks[0], &self.marks[3]);
        start.record(first)?;
        fork(&self.fork, first, &rest)?;
        for (s, r) in self.streams.iter().zip(&self.chunks) {
            s.copy_to_device(self.input.slice(r.clone())?, self.dev.slice(r.clone())?)?;
            gpu.compute_chunk(s, &self.dev, r.clone(), self.iters)?;
            s.copy_to_host(self.dev.slice(r.clone())?, self.out_many.slice(r.clone())?)?;
        }
        join(&self.joins, first, &rest)?;
        stop.record(first)?;
        stop.synchronize()?;
        Ok(Sample::ms(stop.elapsed_ms(start)?))
    }

    fn streams(&self) -> Vec<&Stream> {
        self.streams.iter().collect()
    }

    fn verify(&mut self, _gpu: &Gpu, _m: &Measured, checks: &mut Checks) -> Result<()> {
        let (one, many, input) = (
            self.out_one.read()?,
            self.out_many.read()?,
            self.input.read()?,
        );
        checks.bitwise("async == sync, bit for bit", &many, &one);
        checks.approx("GPU vs CPU reference (approx)", &many, 4096, |i| {
            compute_element(input[i], self.iters)
        });
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        let k = self.streams.len();
        let one = m.without();
        let (h, c, d) = (one.part("H"), one.part("C"), one.part("D"));
        let bound = pipeline_bound(h, c, d, k);
        let many = m.with().time.median;
        r.figure("H: copy-in, whole array", h, "ms")
            .figure("C: compute, whole array", c, "ms")
            .figure("D: copy-out, whole array", d, "ms")
            .figure("bound T(K)", bound, "ms")
            .figure("measured / bound", many / bound, "x");
        let slowest = [("copy-in", h), ("compute", c), ("copy-out", d)]
            .into_iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map_or("compute", |(name, _)| name);
        r.explain(format!(
            "One stream runs H, C and D back to back ({:.3} ms): each stage waits for the one before.",
            one.time.median
        ));
        if k == 1 {
            r.explain("With --streams 1 there is nothing to overlap: both versions do the same work in the same order, and the bound is the plain sum. Try --streams 8.");
        } else if m.speedup() > 1.0 {
            r.explain(format!(
                "With {k} streams the copy engines move chunk i+1 in and chunk i-1 out while chunk i computes: {many:.3} ms, {:.2}x faster.",
                m.speedup()
            ));
            r.explain(format!(
                "The slowest stage ({slowest}) sets the pace: the bound is one chunk's full trip plus {}/{k} of the slowest stage, {bound:.3} ms; the measured time is {:+.1}% from it.",
                k - 1,
                (many / bound - 1.0) * 100.0
            ));
        } else {
            r.explain(format!(
                "Here {k} streams were not faster ({many:.3} ms against {:.3}): with chunks of about {} elements, each copy's and launch's fixed cost outweighs what overlap hides (bound {bound:.3} ms). Try more --elements or fewer --streams.",
                one.time.median,
                self.chunks[0].len()
            ));
        }
        r.explain("`streamlab run stream-sweep` measures this for K = 1, 2, 4, ... 64 and finds the best K.");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

    #[test]
    fn bound_matches_the_formula() {
        // One stream: the bound is the plain sum.
        assert_eq!(pipeline_bound(1.0, 2.0, 1.0, 1), 4.0);
        // 8 streams: 4/8 + 7/8 * 2.
        assert!((pipeline_bound(1.0, 2.0, 1.0, 8) - 2.25).abs() < 1e-12);
        // Many streams approach the slowest stage.
        assert!((pipeline_bound(1.0, 2.0, 1.0, 1_000_000) - 2.0).abs() < 1e-5);
    }

    #[test]
    fn flags_are_checked_before_the_gpu() {
        let plan = |flags: &[&str]| {
            Overlap::plan(&args_from::<Overlap>(flags)?, &WorkModel::H100)?.admit(None)
        };
        assert!(plan(&[]).is_ok());
        let e = plan(&["--streams", "9", "--elements", "8"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--streams 9 is more than --elements 8"), "{e}");
        let e = args_from::<Overlap>(&["--streams", "65"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("whole number from 1 to 64"), "{e}");
        let e = plan(&["--elements", "4294967295", "--iters", "100000"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("per repeat"), "{e}");
    }
}
