//! # Chunked multi-stream overlap
//!
//! A GPU's copy engines and SMs can work at once, but one stream runs its work in order: copy
//! in, compute, copy out. Split the array into K chunks, one stream each, and chunk 2 is
//! copied in while chunk 1 computes and chunk 0 is copied out.
//!
//! The seed: "staged concurrent copy and execute" (CUDA C++ Best Practices Guide):
//!
//! ```text
//! for (int i = 0; i < K; ++i) {
//!   cudaMemcpyAsync(d + off[i], h + off[i], bytes[i], cudaMemcpyHostToDevice, s[i]);
//!   processChunk<<<grid[i], 256, 0, s[i]>>>(d, off[i], len[i], iters);
//!   cudaMemcpyAsync(out + off[i], d + off[i], bytes[i], cudaMemcpyDeviceToHost, s[i]);
//! }
//! ```
//!
//! In Rust: `s.copy_to_device(input.slice(r)?, dev.slice(r)?)`, `gpu.compute_chunk(s, dev,
//! r, iters)` and `s.copy_to_host(dev.slice(r)?, out.slice(r)?)`, one stream per chunk.
//!
//! The bound, with H, C, D the whole array's copy-in, compute, copy-out times: one chunk's
//! full trip, then the slowest stage for the other K-1, `T(K) = (H+C+D)/K + (K-1)/K·max(H,C,D)`.
mod issue_order;

use kernels_gpu::math::compute_element;
use serde::Serialize;

use crate::lab::harness::budget::{ensure_a_chunk_per_stream, MAX_ELEMENTS, MAX_STREAMS};
use crate::lab::harness::data::{chunk_ranges, random_inputs};
use crate::lab::harness::lesson::no_such_version;
use crate::lab::kit::stream_pipeline::{Bracket, Phases};
use crate::lab::record::span::named;
use crate::lab::{args, fixed, t, Checks, Lesson, Measured, Plan, Report, Sample, WorkModel};
use crate::runtime::{DeviceBuffer, Event, Gpu, HostBuffer, Result, Stream};
pub use issue_order::IssueOrder;
use issue_order::Step;

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
    /// The order the K-stream version's work is issued in: depth (chunk by chunk) or breadth
    /// (every copy-in, every kernel, every copy-out). Try both, with --timeline.
    #[arg(long, value_enum, default_value_t = IssueOrder::Depth)]
    pub issue_order: IssueOrder,
}

pub struct Overlap {
    iters: u32,
    issue_order: IssueOrder,
    chunks: Vec<std::ops::Range<usize>>,
    streams: Vec<Stream>,
    /// The input, then the one-stream and the K-stream outputs (public for the tests).
    pub host: [HostBuffer<f32>; 3],
    dev: DeviceBuffer<f32>,
    marks: Vec<Event>,
    bracket: Bracket,
}

/// The versions, by their index in [`Lesson::versions`].
pub const ONE_STREAM: usize = 0;
pub const CHUNKED: usize = 1;

impl Overlap {
    /// The whole array on one stream: copy in, compute, copy out, an event between phases.
    fn one_stream(&mut self, gpu: &Gpu) -> Result<Sample> {
        let (s, [input, out, _]) = (&self.streams[0], &self.host);
        let (m0, m1, m2, m3) = (&self.marks[0], &self.marks[1], &self.marks[2], &self.marks[3]);
        m0.record(s)?;
        s.copy_to_device(input, &self.dev)?;
        m1.record(s)?;
        gpu.compute(s, &self.dev, self.iters)?;
        m2.record(s)?;
        s.copy_to_host(&self.dev, out)?;
        m3.record(s)?;
        m3.synchronize()?;
        let (h, c, d) = (m1.elapsed_ms(m0)?, m2.elapsed_ms(m1)?, m3.elapsed_ms(m2)?);
        Ok(Sample::ms(h + c + d).part("H", h).part("C", c).part("D", d))
    }

    /// Chunk i on stream i, named so a recorded slice reads "chunk 3 copy-in", timed across
    /// all streams (`Bracket`: they fork from stream 0 before and join it after), its steps
    /// issued depth or breadth first (`--issue-order`).
    fn chunked(&mut self, gpu: &Gpu) -> Result<Sample> {
        let ([input, _, out], dev) = (&self.host, &self.dev);
        let ms = self.bracket.time(&self.streams, || {
            self.issue_order.issue(self.chunks.len(), |i, step| {
                let (s, r) = (&self.streams[i], self.chunks[i].clone());
                named("chunk", i, || match step {
                    Step::CopyIn => s.copy_to_device(input.slice(r.clone())?, dev.slice(r)?),
                    Step::Compute => gpu.compute_chunk(s, dev, r, self.iters),
                    Step::CopyOut => s.copy_to_host(dev.slice(r.clone())?, out.slice(r)?),
                })
            })
        })?;
        Ok(Sample::ms(ms))
    }
}

impl Lesson for Overlap {
    const NAME: &'static str = "overlap";
    const SUMMARY: &'static str =
        "one stream vs K streams each copying in, computing and copying out its chunk";
    type Args = Args;

    fn versions(a: &Args) -> Vec<String> {
        vec!["one stream".into(), a.issue_order.version_name(a.streams)]
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        ensure_a_chunk_per_stream(a.streams, a.elements)?;
        let one_run = 2.0 * model.copy_ms(a.elements) + model.compute_ms(a.elements, a.iters);
        Ok(Plan::new()
            .host::<f32>(a.elements, 4)? // the generated input, then the three pinned buffers
            .device::<f32>(a.elements, 1)?
            .work(2.0 * one_run, "--elements x --iters"))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<Overlap> {
        let (n, pinned) = (a.elements, || HostBuffer::pinned(gpu, a.elements));
        Ok(Overlap {
            iters: a.iters,
            issue_order: a.issue_order,
            chunks: chunk_ranges(n, a.streams),
            streams: (0..a.streams)
                .map(|i| Stream::new(gpu, format!("overlap-{i}")))
                .collect::<Result<_>>()?,
            host: [HostBuffer::pinned_from(gpu, &random_inputs(n, seed))?, pinned()?, pinned()?],
            dev: DeviceBuffer::zeroed(gpu, n)?,
            marks: (0..4).map(|_| Event::new(gpu)).collect::<Result<_>>()?,
            bracket: Bracket::new(gpu, a.streams)?,
        })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        match v {
            ONE_STREAM => self.one_stream(gpu),
            CHUNKED => self.chunked(gpu),
            _ => no_such_version::<Self>(v),
        }
    }

    fn streams(&self) -> Vec<&Stream> {
        self.streams.iter().collect()
    }

    fn verify(&mut self, _gpu: &Gpu, _m: &Measured, checks: &mut Checks) -> Result<()> {
        let (input, one, many) = (self.host[0].read()?, self.host[1].read()?, self.host[2].read()?);
        checks.bitwise("async == sync, bit for bit", &many, &one);
        let reference = |i: usize| compute_element(input[i], self.iters);
        checks.approx("GPU vs CPU reference (approx)", &many, 4096, reference);
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        let (k, phases, many) = (self.streams.len(), Phases::of(m.without()), m.with().time.median);
        phases.figures(k, many, r);
        let off = format!("{:+.1}", (many / phases.bound(k) - 1.0) * 100.0); // over the bound, %
        let [one, ms, tk] = [m.without().time.median, many, phases.bound(k)].map(|v| fixed(v, 3));
        r.explain(t!("overlap.serial", ms = one));
        if k == 1 {
            r.explain(t!("overlap.one_stream"));
        } else if m.speedup() > 1.0 {
            r.explain(t!("overlap.faster", k, ms, x = fixed(m.speedup(), 2)));
            r.explain(t!("overlap.bound", stage = phases.slowest(), rest = k - 1, k, tk, off));
        } else {
            r.explain(t!("overlap.slower", k, ms, one, chunk = self.chunks[0].len(), tk));
        }
        r.explain(t!("overlap.sweep"));
    }
}
