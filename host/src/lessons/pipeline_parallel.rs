//! # Pipeline parallelism on two GPUs
//!
//! A model too large for one GPU is split into stages: stage 0 on GPU 0, stage 1 on GPU 1,
//! the activations sent between them. Push one micro-batch through both stages at a time
//! and each GPU idles while the other works. Let GPU 0 run ahead to the next micro-batch
//! as soon as it has sent the last one's activations (GPipe's schedule), and after the
//! first micro-batch fills the pipe both GPUs work at once until the last one drains it.
//!
//! The seed (section 5 of the stream-overlap notes):
//!
//! ```text
//! for (m = 0; m < M; ++m) {
//!   cudaSetDevice(0); stage0<<<g, 256, 0, s0>>>(act0 + m*n, ...);  cudaEventRecord(done0[m], s0);
//!   cudaStreamWaitEvent(copy, done0[m]);
//!   cudaMemcpyPeerAsync(act1 + m*n, 1, act0 + m*n, 0, bytes, copy);  cudaEventRecord(sent[m], copy);
//!   cudaSetDevice(1); cudaStreamWaitEvent(s1, sent[m]);  stage1<<<g, 256, 0, s1>>>(act1 + m*n, ...);
//!   // naive: cudaStreamWaitEvent(s0, done1[m]) here, so GPU 0 waits for GPU 1
//! }
//! ```
//!
//! In Rust: `gpu0.compute_chunk(&s0, &act0, m, iters)`, `done0[m].record(&s0)`,
//! `copy.wait_event(&done0[m])`, `copy.copy_peer(act0.slice(m)?, act1.slice(m)?)`, and so on;
//! events recorded on one GPU's stream and waited for on the other's order the two devices.
//!
//! The bound, with t0, tc, t1 the time of one micro-batch's stage 0, copy and stage 1: the
//! first micro-batch's whole trip, then the slowest step for the other M − 1,
//! `t0 + tc + t1 + (M − 1)·max(t0, tc, t1)`; with equal stages and a small copy, GPipe's
//! `(M + S − 1)·t_stage` for S = 2 stages.
use std::ops::Range;

use kernels_gpu::math::compute_element;
use serde::Serialize;

use crate::lab::harness::budget::MAX_ELEMENTS;
use crate::lab::harness::data::{chunk_ranges, random_inputs};
use crate::lab::harness::lesson::no_such_version;
use crate::lab::kit::devices;
use crate::lab::kit::stream_pipeline::{pipeline_bound, Bracket};
use crate::lab::record::span::named;
use crate::lab::{args, fixed, t, Checks, Lesson, Measured, Plan, Report, Sample, WorkModel};
use crate::runtime::memory::copy_to_device_landed;
use crate::runtime::{peer, AsContext, DeviceBuffer, Event, Gpu, Result, Stream};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Micro-batches M [1..=64]. Try 1 (nothing to overlap) and 32 (fill and drain matter less).
    #[arg(long, default_value_t = 8, value_parser = args::whole(1usize..=64))]
    pub micro_batches: usize,
    /// Floats of activations per micro-batch [1..=268435456].
    #[arg(long, default_value_t = 1 << 22, value_parser = args::whole(1usize..=MAX_ELEMENTS / 16))]
    pub elements: usize,
    /// sin·cos steps per element in each stage [1..=100000]. Try 5: the copy becomes the slowest step.
    #[arg(long, default_value_t = 50, value_parser = args::whole(1u32..=100_000))]
    pub iters: u32,
}

/// Parts of the naive version: all micro-batches' stage 0, copy and stage 1, in ms.
pub const STAGE0: &str = "stage 0";
pub const COPY: &str = "copy";
pub const STAGE1: &str = "stage 1";

pub struct PipelineParallel {
    peer: Gpu,
    iters: u32,
    batches: Vec<Range<usize>>,
    input: DeviceBuffer<f32>,
    inputs: Vec<f32>,
    /// Stage 0's activations on GPU 0, stage 1's on GPU 1 (its output).
    act: [DeviceBuffer<f32>; 2],
    /// Stage 0's stream on GPU 0, the copy stream on GPU 0, stage 1's stream on GPU 1.
    streams: [Stream; 3],
    /// Per micro-batch: stage 0 done, activations sent, stage 1 done.
    done0: Vec<Event>,
    sent: Vec<Event>,
    done1: Vec<Event>,
    /// Per micro-batch, two timing events around each step (naive version only).
    marks: Vec<[Event; 6]>,
    bracket: Bracket,
    /// The outputs of each version (public for the tests).
    pub outputs: Vec<Vec<f32>>,
}

/// The versions, by their index in [`Lesson::versions`].
pub const ONE_AT_A_TIME: usize = 0;
pub const PIPELINED: usize = 1;

impl PipelineParallel {
    /// Every micro-batch through both stages; with `naive`, GPU 0 waits for GPU 1 to finish
    /// micro-batch m before it starts m + 1.
    fn run(&self, gpu: &Gpu, naive: bool) -> Result<Sample> {
        let [s0, copy, s1] = &self.streams;
        let ms = self.bracket.time(&self.streams, || {
            for (m, r) in self.batches.iter().enumerate() {
                named("micro-batch", m, || -> Result<()> {
                    let mark = |i: usize, s: &Stream| {
                        if naive {
                            self.marks[m][i].record(s)
                        } else {
                            Ok(())
                        }
                    };
                    mark(0, s0)?;
                    s0.copy_on_device(self.input.slice(r.clone())?, self.act[0].slice(r.clone())?)?;
                    gpu.compute_chunk(s0, &self.act[0], r.clone(), self.iters)?;
                    mark(1, s0)?;
                    self.done0[m].record(s0)?;
                    copy.wait_event(&self.done0[m])?;
                    mark(2, copy)?;
                    copy.copy_peer(self.act[0].slice(r.clone())?, self.act[1].slice(r.clone())?)?;
                    mark(3, copy)?;
                    self.sent[m].record(copy)?;
                    s1.wait_event(&self.sent[m])?;
                    mark(4, s1)?;
                    self.peer.compute_chunk(s1, &self.act[1], r.clone(), self.iters)?;
                    mark(5, s1)?;
                    if naive {
                        self.done1[m].record(s1)?;
                        s0.wait_event(&self.done1[m])?;
                    }
                    Ok(())
                })?;
            }
            Ok(())
        })?;
        if !naive {
            return Ok(Sample::ms(ms));
        }
        let step = |i: usize| -> Result<f64> {
            self.marks.iter().map(|m| m[i + 1].elapsed_ms(&m[i])).sum()
        };
        Ok(Sample::ms(ms).part(STAGE0, step(0)?).part(COPY, step(2)?).part(STAGE1, step(4)?))
    }
}

impl Lesson for PipelineParallel {
    const NAME: &'static str = "pipeline-parallel";
    const SUMMARY: &'static str =
        "two pipeline stages on two GPUs: one micro-batch at a time vs GPU 0 running ahead (GPipe)";
    type Args = Args;

    fn versions(a: &Args) -> Vec<String> {
        vec![
            "one micro-batch at a time".into(),
            format!("pipelined, {} micro-batches", a.micro_batches),
        ]
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        let n = a.elements * a.micro_batches;
        Ok(Plan::new()
            .gpus(2)
            .host::<f32>(n, 4)?
            .device::<f32>(n, 2)? // on GPU 0: the input and stage 0's activations
            .work(
                4.0 * (model.compute_ms(n, a.iters) + model.copy_ms(n)),
                "--micro-batches x --elements x --iters",
            ))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<PipelineParallel> {
        let (m, n) = (a.micro_batches, a.elements * a.micro_batches);
        let peer = devices::others(gpu, 1)?.remove(0);
        if peer::link(gpu.context(), peer.context())?.access {
            peer::enable_access(gpu.context(), peer.context())?;
        }
        let inputs = random_inputs(n, seed);
        let streams = [
            Stream::non_blocking(gpu, "stage 0")?,
            Stream::non_blocking(gpu, "activations to GPU 1")?,
            Stream::non_blocking(&peer, "stage 1")?,
        ];
        let events =
            |on: &Gpu| (0..m).map(|_| Event::without_timing(on)).collect::<Result<Vec<_>>>();
        let timed = |on: &Gpu| Event::new(on);
        Ok(PipelineParallel {
            iters: a.iters,
            batches: chunk_ranges(n, m),
            input: DeviceBuffer::from_slice(gpu, &inputs)?,
            act: [DeviceBuffer::zeroed(gpu, n)?, DeviceBuffer::zeroed(&peer, n)?],
            done0: events(gpu)?,
            sent: events(gpu)?,
            done1: events(&peer)?,
            marks: (0..m)
                .map(|_| {
                    Ok([
                        timed(gpu)?,
                        timed(gpu)?,
                        timed(gpu)?,
                        timed(gpu)?,
                        timed(&peer)?,
                        timed(&peer)?,
                    ])
                })
                .collect::<Result<_>>()?,
            bracket: Bracket::for_streams(&streams)?,
            streams,
            inputs,
            outputs: Vec::new(),
            peer,
        })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        match v {
            ONE_AT_A_TIME => self.run(gpu, true),
            PIPELINED => self.run(gpu, false),
            _ => no_such_version::<Self>(v),
        }
    }

    fn streams(&self) -> Vec<&Stream> {
        self.streams.iter().collect()
    }

    /// Each version's output, then both stages on GPU 0 alone, then the CPU.
    fn verify(&mut self, gpu: &Gpu, _m: &Measured, checks: &mut Checks) -> Result<()> {
        self.outputs.clear();
        let n = self.inputs.len();
        for naive in [true, false] {
            // NaN first: a version that wrote nothing cannot pass on the last one's output.
            copy_to_device_landed(&vec![f32::NAN; n], &self.act[1])?;
            self.run(gpu, naive)?;
            self.outputs.push(self.act[1].to_vec()?);
        }
        let s0 = &self.streams[0];
        s0.copy_on_device(&self.input, &self.act[0])?;
        gpu.compute_chunk(s0, &self.act[0], 0..n, self.iters)?;
        gpu.compute_chunk(s0, &self.act[0], 0..n, self.iters)?;
        s0.synchronize()?;
        let one_gpu = self.act[0].to_vec()?;
        checks.bitwise(
            "pipelined == one micro-batch at a time, bit for bit",
            &self.outputs[1],
            &self.outputs[0],
        );
        checks.bitwise(
            "two GPUs == both stages on GPU 0 alone, bit for bit",
            &self.outputs[1],
            &one_gpu,
        );
        let (x, it) = (&self.inputs, self.iters);
        checks.approx("GPU vs CPU reference (approx)", &self.outputs[1], 4096, |i| {
            compute_element(compute_element(x[i], it), it)
        });
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        let (naive, piped, k) = (m.without(), m.with().time.median, self.batches.len());
        let (t0, tc, t1) = (naive.part(STAGE0), naive.part(COPY), naive.part(STAGE1));
        let bound = pipeline_bound(t0, tc, t1, k);
        r.figure("bound t0 + tc + t1 + (M-1)·max", bound, "ms");
        let slowest = if tc >= t0.max(t1) {
            t!("pipeline_parallel.the_copy")
        } else if t0 >= t1 {
            t!("pipeline_parallel.stage0")
        } else {
            t!("pipeline_parallel.stage1")
        };
        let (x, off) = (fixed(m.speedup(), 2), format!("{:+.1}", (piped / bound - 1.0) * 100.0));
        let [naive, t0, tc, t1, piped, bound] =
            [naive.time.median, t0, tc, t1, piped, bound].map(|v| fixed(v, 3));
        r.explain(t!("pipeline_parallel.naive", naive, k, t0, tc, t1));
        if k == 1 {
            r.explain(t!("pipeline_parallel.one"));
            return;
        }
        r.explain(t!("pipeline_parallel.piped", piped, x, off, bound));
        r.explain(t!("pipeline_parallel.fill", rest = k - 1, slowest));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

    #[test]
    fn flags_are_checked_before_the_gpu() {
        let plan = |f: &[&str]| {
            PipelineParallel::plan(&args_from::<PipelineParallel>(f)?, &WorkModel::H100)
        };
        let p = plan(&[]).unwrap();
        assert!(p.admit(None).is_ok());
        assert_eq!(p.gpus, 2);
        let e = args_from::<PipelineParallel>(&["--micro-batches", "65"]).unwrap_err().to_string();
        assert!(e.contains("whole number from 1 to 64"), "{e}");
    }
}
