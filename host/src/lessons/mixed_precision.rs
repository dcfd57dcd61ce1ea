//! # Mixed precision: 16-bit compute on one stream, the FP32 master copy on another
//!
//! Mixed-precision training computes each layer in 16 bits (bfloat16 or binary16) and keeps an
//! f32 master copy of the weights, where updates too small for a 16-bit weight still add up.
//! Each step's update of the master copy and its cast back to 16 bits can run on a second
//! stream while the compute stream works on the next batch; events link the two.
//!
//! The seed technique (one stream computes in FP16/BF16, another keeps the FP32 master weights
//! and hides the conversion), in CUDA C++ with `cuda_bf16.h`:
//!
//! ```text
//! cast<<<g, 256, 0, compute>>>(master, w16[0], n);                  // weights of step 0
//! for (int i = 0; i < B; ++i) {
//!   if (i >= 2) cudaStreamWaitEvent(compute, cast_done[(i - 1) % 2]); // step i's weights cast
//!   layer<<<g, 256, 0, compute>>>(w16[max(i - 1, 0) % 2], x[i], grad[i % 2], n, iters);
//!   cudaEventRecord(computed[i % 2], compute);
//!   if (i >= 1) {                       // gradient i-1, while step i computes
//!     cudaStreamWaitEvent(side, computed[(i - 1) % 2]);
//!     update<<<g, 256, 0, side>>>(master, grad[(i - 1) % 2], n, lr);  // master -= lr * g
//!     cast<<<g, 256, 0, side>>>(master, w16[i % 2], n);                // __float2bfloat16_rn
//!     cudaEventRecord(cast_done[i % 2], side);
//!   }
//! }                                     // then the last update and cast, and a join
//! ```
//!
//! In Rust: `gpu.half_layer(&compute, ..)`, `side.wait_event(&computed[s])`,
//! `gpu.master_update(&side, &master, &grad[s], lr, format)`, `gpu.cast_to_half(&side, ..)`.
//!
//! Step i uses the weights updated up to gradient i-2: a one-step delay, without which step i
//! would wait for update i-1 and nothing could overlap. 16-bit values live in `u16` (Rust's
//! `f16` is unstable, and there is no `bf16`): bf16 rounds by integer arithmetic on the bits,
//! f16 by PTX `cvt.rn.f16.f32` (inline assembly); `kernels_gpu::math` holds both and their CPU
//! twins, so the CPU reference rounds exactly as the GPU does.
//!
//! The bound: one stream takes `B * (c + u)` (c: one layer step, u: update and cast); two take
//! at best `c + (B-1) * max(c, u) + u`, if the two kernels can share the GPU. After its checks
//! the lesson times each kernel beside the other (`probe.rs`) and reports the same bound with
//! those times beside the free one: what lies above the free bound splits into SM and memory
//! sharing and scheduling (`lab::kit::contention`).
pub mod probe;

use kernels_gpu::math::train_delayed_as;
use serde::Serialize;

use crate::lab::harness::budget::{CLEAR_SPEEDUP, MAX_ELEMENTS};
use crate::lab::harness::data::{random_inputs, sample_indices};
use crate::lab::harness::lesson::no_such_version;
use crate::lab::kit::batches::{pipeline_estimate, total_elements};
use crate::lab::record::span::Work;
use crate::lab::{
    args, fixed, t, Checks, Drawing, Lesson, Measured, Plan, Report, Sample, WorkModel,
};
use crate::runtime::{DeviceBuffer, Event, Gpu, HalfFormat, HostBuffer, Result, Stream};
use probe::{Overlap, LESSON_ROUNDS};

/// The learning rate, 2^-12: a power of two, so `lr * g` is exact and GPU and CPU agree.
pub const LEARNING_RATE: f32 = 1.0 / 4096.0;
/// The CPU reference's budget: sampled elements x steps x iters at most this (under a second).
pub const REFERENCE_WORK: usize = 1 << 26;

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Micro-batches, one layer step each [1..=1024]. Try 1: nothing to overlap.
    #[arg(long, default_value_t = 8, value_parser = args::whole(1usize..=1024))]
    pub batches: usize,
    /// Weights = floats per batch [1..=4294967295]; all batches at most 268435456.
    #[arg(long, default_value_t = 1 << 22, value_parser = args::whole(1usize..=MAX_ELEMENTS))]
    pub elements: usize,
    /// Cell steps per element in the layer [1..=10000]: the layer's compute. Try 1 or 64.
    #[arg(long, default_value_t = 8, value_parser = args::whole(1u32..=10_000))]
    pub iters: u32,
    /// The 16-bit format the layer computes in.
    #[arg(long, value_enum, default_value_t = HalfFormat::Bf16)]
    pub format: HalfFormat,
    /// The layer's grid, in % of the 256-thread blocks the GPU holds at once [1..=100]. Try 100.
    #[arg(long, default_value_t = 50, value_parser = args::whole(1u32..=100))]
    pub layer_share: u32,
}

pub struct MixedPrecision {
    a: Args,
    blocks: u32,
    input: Vec<f32>,
    initial: DeviceBuffer<f32>,
    batches: DeviceBuffer<f32>,
    master: DeviceBuffer<f32>,
    w16: [DeviceBuffer<u16>; 2],
    grad: [DeviceBuffer<u16>; 2],
    /// Per version: the final master copy and the final 16-bit weights.
    masters: [HostBuffer<f32>; 2],
    weights: [HostBuffer<u16>; 2],
    compute: Stream,
    side: Stream,
    computed: [Event; 2],
    cast_done: [Event; 2],
    /// marks[0] start, marks[2i+1] after layer step i, marks[2i+2] after the update and cast.
    marks: Vec<Event>,
    lost: Option<(usize, usize)>, // (lost, all) sampled updates, from `verify` for `explain`
    /// Each kernel alone and beside the other (two steps or more), from `verify` for `explain`.
    overlap: Option<Overlap>,
}

/// The versions, by their index in [`Lesson::versions`].
pub const ONE_STREAM: usize = 0;
pub const SIDE_STREAM: usize = 1;

impl MixedPrecision {
    /// The initial weights: the input generator's [-π, π) scaled by 1/8 (exact), |w| < 0.4.
    pub fn initial_weights(n: usize, seed: u64) -> Vec<f32> {
        random_inputs(n, seed ^ 0xA5A5).into_iter().map(|x| x * 0.125).collect()
    }

    /// Version `v`'s final master copy and 16-bit weights.
    pub fn output(&self, v: usize) -> Result<(Vec<f32>, Vec<u16>)> {
        Ok((self.masters[v].to_vec()?, self.weights[v].to_vec()?))
    }

    /// Layer step i on the compute stream, with the weights of gradient i-2 (see the doc).
    fn layer(&self, gpu: &Gpu, i: usize) -> Result<()> {
        let batch = self.batches.slice(i * self.a.elements..(i + 1) * self.a.elements)?;
        let (w, g) = (&self.w16[i.saturating_sub(1) % 2], &self.grad[i % 2]);
        gpu.half_layer(&self.compute, w, batch, g, self.a.iters, self.a.format, self.blocks)
    }

    /// The FP32 update with gradient k, then the cast of the weights of step k + 2.
    fn update_and_cast(&self, gpu: &Gpu, s: &Stream, k: usize) -> Result<()> {
        let format = self.a.format;
        gpu.master_update(s, &self.master, &self.grad[k % 2], LEARNING_RATE, format)?;
        gpu.cast_to_half(s, &self.master, &self.w16[(k + 1) % 2], format)
    }

    /// Resets and casts the master copy (untimed), runs `run`, keeps the results as version `v`'s.
    fn around(&self, gpu: &Gpu, v: usize, run: impl FnOnce() -> Result<Sample>) -> Result<Sample> {
        self.compute.copy_on_device(&self.initial, &self.master)?;
        gpu.cast_to_half(&self.compute, &self.master, &self.w16[0], self.a.format)?;
        let sample = run()?;
        self.compute.copy_to_host(&self.master, &self.masters[v])?;
        self.compute.copy_to_host(&self.w16[self.a.batches % 2], &self.weights[v])?;
        Ok(sample)
    }

    /// Layer step, then the update and cast it allows, on one stream; parts: their times a step.
    fn one_stream(&mut self, gpu: &Gpu) -> Result<Sample> {
        let (s, m, b) = (&self.compute, &self.marks, self.a.batches);
        self.around(gpu, 0, || {
            m[0].record(s)?;
            for i in 0..b {
                self.layer(gpu, i)?;
                m[2 * i + 1].record(s)?;
                if i >= 1 {
                    self.update_and_cast(gpu, s, i - 1)?;
                }
                m[2 * i + 2].record(s)?;
            }
            self.update_and_cast(gpu, s, b - 1)?;
            m[2 * b + 1].record(s)?;
            m[2 * b + 1].synchronize()?;
            // The layer steps' spans; the rest of the total is update and cast.
            let layer: f64 =
                (0..b).map(|i| m[2 * i + 1].elapsed_ms(&m[2 * i])).sum::<Result<_>>()?;
            let total = m[2 * b + 1].elapsed_ms(&m[0])?;
            let bf = b as f64;
            Ok(Sample::ms(total).part("layer", layer / bf).part("update", (total - layer) / bf))
        })
    }

    /// Layer steps on the compute stream, each update and cast on the side stream, with events.
    fn side_stream(&mut self, gpu: &Gpu) -> Result<Sample> {
        let (compute, side, b) = (&self.compute, &self.side, self.a.batches);
        let (start, stop) = (&self.marks[0], &self.marks[2 * b + 1]);
        self.around(gpu, 1, || {
            start.record(compute)?;
            side.wait_event(start)?;
            for i in 0..b {
                if i >= 2 {
                    compute.wait_event(&self.cast_done[(i - 1) % 2])?;
                }
                self.layer(gpu, i)?;
                self.computed[i % 2].record(compute)?;
                if i >= 1 {
                    side.wait_event(&self.computed[(i - 1) % 2])?;
                    self.update_and_cast(gpu, side, i - 1)?;
                    self.cast_done[i % 2].record(side)?;
                }
            }
            side.wait_event(&self.computed[(b - 1) % 2])?;
            self.update_and_cast(gpu, side, b - 1)?;
            self.cast_done[b % 2].record(side)?;
            compute.wait_event(&self.cast_done[b % 2])?;
            stop.record(compute)?;
            stop.synchronize()?;
            Ok(Sample::ms(stop.elapsed_ms(start)?))
        })
    }
}

impl Lesson for MixedPrecision {
    const NAME: &'static str = "mixed-precision";
    const SUMMARY: &'static str = "16-bit layer steps on one stream; the FP32 master update and the cast on another, hidden behind the next step";
    const DRAWING: Drawing = Drawing {
        kernels: &[
            ("half_layer_kernel", "layer step (16-bit)"),
            ("master_update_kernel", "FP32 master update"),
            ("cast_to_half_kernel", "cast to 16 bits"),
        ],
        untimed: Some(Work::CopyToHost),
        note: "Not drawn: the copy of the results to the host after the timed steps. Untimed: the master copy's reset and first cast, first on the compute row.",
        ..Drawing::PLAIN
    };
    type Args = Args;

    fn versions(_: &Args) -> Vec<String> {
        vec!["one stream".into(), "update and cast on a side stream".into()]
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        let (n, b) = (a.elements, a.batches);
        let total = total_elements(b, n, "floats of batches on the device")?;
        let layer = model.compute_ms(n, a.iters) * 100.0 / a.layer_share as f64;
        let work = 2.0 * b as f64 * (layer + 2.0 * model.elementwise_ms(n));
        Ok(Plan::new()
            .host::<f32>(total + 3 * n, 1)?
            .host::<u16>(n, 2)?
            .device::<f32>(total + 2 * n, 1)?
            .device::<u16>(n, 4)?
            .work(work, "--batches x --elements x --iters / --layer-share"))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<MixedPrecision> {
        let n = a.elements;
        let input = random_inputs(a.batches * n, seed);
        let resident =
            gpu.info.multiprocessors.max(1) as u32 * gpu.info.resident_blocks_per_sm(256);
        let blocks = (resident * a.layer_share / 100).clamp(1, n.div_ceil(256) as u32);
        let (f32s, u16s) = (|| HostBuffer::pinned(gpu, n), || DeviceBuffer::zeroed(gpu, n));
        let event = || Event::without_timing(gpu);
        Ok(MixedPrecision {
            a: a.clone(),
            blocks,
            initial: DeviceBuffer::from_slice(gpu, &Self::initial_weights(n, seed))?,
            batches: DeviceBuffer::from_slice(gpu, &input)?,
            input,
            master: DeviceBuffer::zeroed(gpu, n)?,
            w16: [u16s()?, u16s()?],
            grad: [u16s()?, u16s()?],
            masters: [f32s()?, f32s()?],
            weights: [HostBuffer::pinned(gpu, n)?, HostBuffer::pinned(gpu, n)?],
            compute: Stream::new(gpu, "compute")?,
            side: Stream::new(gpu, "master-copy")?,
            computed: [event()?, event()?],
            cast_done: [event()?, event()?],
            marks: (0..2 * a.batches + 2).map(|_| Event::new(gpu)).collect::<Result<_>>()?,
            lost: None,
            overlap: None,
        })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        match v {
            ONE_STREAM => self.one_stream(gpu),
            SIDE_STREAM => self.side_stream(gpu),
            _ => no_such_version::<Self>(v),
        }
    }

    fn streams(&self) -> Vec<&Stream> {
        vec![&self.compute, &self.side]
    }

    fn verify(&mut self, device: &Gpu, _m: &Measured, checks: &mut Checks) -> Result<()> {
        let ((master0, w0), (master1, w1)) = (self.output(0)?, self.output(1)?);
        let widen = |w: &[u16]| w.iter().map(|&b| self.a.format.widen(b)).collect::<Vec<_>>();
        checks.bitwise("master copy, bit for bit: side stream == one stream", &master1, &master0);
        checks.bitwise(
            "16-bit weights, bit for bit: side stream == one stream",
            &widen(&w1),
            &widen(&w0),
        );
        // The CPU trains sampled elements with the kernels' own rounding: the same bits are due.
        let (initial, f) = (self.initial.to_vec()?, self.a.format);
        let limit = (REFERENCE_WORK / (self.a.batches * self.a.iters as usize)).clamp(16, 4096);
        let (mut gpu, mut cpu, mut lost) = (Vec::new(), Vec::new(), (0, 0));
        for j in sample_indices(self.a.elements, limit) {
            let column = self.input.iter().skip(j).step_by(self.a.elements).copied();
            let t = train_delayed_as(f.code(), initial[j], column, self.a.iters, LEARNING_RATE);
            gpu.extend([master1[j], f.widen(w1[j])]);
            cpu.extend([t.master, f.widen(t.weight)]);
            lost = (lost.0 + t.lost, lost.1 + t.updates);
        }
        let name = "GPU vs CPU reference, master and 16-bit weight, bit for bit";
        checks.bitwise(name, &gpu, &cpu);
        checks.approx("GPU vs CPU reference (approx)", &gpu, usize::MAX, |k| cpu[k]);
        self.lost = Some(lost);
        // Last, since it overwrites the master copy: the kernels timed beside each other.
        if self.a.batches >= 2 {
            self.overlap = Some(self.probe_overlap(device, LESSON_ROUNDS)?);
        }
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        interpret(&self.a, self.lost, self.overlap.as_ref(), m, r);
    }
}

/// The figures and interpretation for flags `a`, from the measurements, the sampled CPU
/// training (`lost`: updates below half an ulp of the 16-bit weight, of all updates) and the
/// probe of the kernels beside each other (`overlap`, two steps or more) alone.
pub fn interpret(
    a: &Args,
    lost: Option<(usize, usize)>,
    overlap: Option<&Overlap>,
    m: &Measured,
    r: &mut Report,
) {
    let (one, steps, name) = (m.without(), a.batches, a.format.name());
    let (c_ms, u_ms) = (one.part("layer"), one.part("update"));
    let bound_ms = pipeline_estimate(c_ms, u_ms, steps);
    let (serial_ms, side_ms, speedup) = (one.time.median, m.with().time.median, m.speedup());
    // "per step", not "per micro-batch" (recordings before 2026-11-26 say that): each batch
    // ends with its own update, so it is a training step, not a slice of one.
    r.figure(&format!("layer step in {name}, per step"), c_ms, "ms")
        .figure("FP32 update + cast, per step", u_ms, "ms")
        .figure("bound c + (B-1) max(c, u) + u", bound_ms, "ms")
        .figure("measured / bound", side_ms / bound_ms, "x");
    let (x, of_bound, share) = (fixed(speedup, 2), fixed(side_ms / bound_ms, 2), a.layer_share);
    let room = serial_ms > CLEAR_SPEEDUP * bound_ms;
    let save = fixed((serial_ms - bound_ms).max(0.0), 3);
    let serial = fixed(serial_ms, 3);
    let side = fixed(side_ms, 3);
    let c = fixed(c_ms, 3);
    let u = fixed(u_ms, 3);
    let bound = fixed(bound_ms, 3);
    r.explain(if steps == 1 {
        t!("mixed_precision.one_batch", serial, side)
    } else if speedup >= CLEAR_SPEEDUP {
        t!("mixed_precision.faster", steps, c, u, serial, side, x, of_bound, bound)
    } else if room {
        t!("mixed_precision.gained_little", side, serial, x, bound, share)
    } else {
        t!("mixed_precision.little_to_hide", side, serial, x, u, c, bound, save)
    });
    r.explain(t!("mixed_precision.delay"));
    if let Some((lost, updates)) = lost.filter(|&(_, u)| u > 0) {
        let pct = 100.0 * lost as f64 / updates as f64;
        r.figure(&format!("updates below half a {name} ulp (sampled)"), pct, "%");
        let so = if lost * 2 >= updates {
            t!("mixed_precision.vanished")
        } else {
            t!("mixed_precision.survived")
        };
        r.explain(t!("mixed_precision.master", pct = fixed(pct, 1), format = name.to_string(), so));
    }
    if let Some(o) = overlap.filter(|_| steps >= 2) {
        contention(o, c_ms, u_ms, side_ms, r);
    }
}

/// The bound with the times beside each other, and the side stream's gap split with it.
fn contention(o: &Overlap, c: f64, u: f64, side: f64, r: &mut Report) {
    let split = o.split(c, u, side);
    r.figure("layer step beside update + cast / alone (probed)", o.layer_stretch(), "x")
        .figure("update + cast beside a layer step / alone (probed)", o.update_stretch(), "x")
        .figure("bound with times beside (contention-aware)", split.aware, "ms")
        .figure("measured / bound with times beside", side / split.aware, "x")
        .figure("gap: SM and memory sharing", split.sharing(), "ms")
        .figure("gap: scheduling", split.scheduling(), "ms");
    let which = if split.mostly_sharing() {
        t!("mixed_precision.mostly_sharing")
    } else {
        t!("mixed_precision.mostly_scheduling")
    };
    let ms = |v: f64| fixed(v, 3);
    r.explain(t!(
        "mixed_precision.split",
        rounds = LESSON_ROUNDS,
        sc = fixed(o.layer_stretch(), 2),
        su = fixed(o.update_stretch(), 2),
        aware = ms(split.aware),
        bound = ms(split.free),
        gap = ms(split.gap()),
        side = ms(side),
        sharing = ms(split.sharing()),
        sched = ms(split.scheduling()),
        which
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;
    use crate::text::Lang;

    fn args(flags: &[&str]) -> Args {
        args_from::<MixedPrecision>(flags).unwrap()
    }

    /// What it refuses is tested with the other flags, in tests/mixed_precision.rs.
    #[test]
    fn the_plan_counts_every_buffer() {
        let p = MixedPrecision::plan(&args(&[]), &WorkModel::H100).unwrap();
        let n = 1usize << 22;
        // Host: 8 batches, initial weights, two masters (f32); two weight copies (u16).
        assert_eq!(p.host_bytes, (8 * n + 3 * n) * 4 + 2 * n * 2);
        assert_eq!(p.device_bytes, (8 * n + 2 * n) * 4 + 4 * n * 2);
    }

    fn measured(serial: f64, side: f64, layer: f64, update: f64) -> Measured {
        let one = Sample::ms(serial).part("layer", layer).part("update", update);
        let names = MixedPrecision::versions(&args(&[]));
        Measured::from_samples(names, vec![vec![one], vec![Sample::ms(side)]])
    }

    fn told(flags: &[&str], lost: Option<(usize, usize)>, m: &Measured) -> Report {
        told_with(flags, lost, None, m)
    }

    fn told_with(
        flags: &[&str],
        lost: Option<(usize, usize)>,
        overlap: Option<&Overlap>,
        m: &Measured,
    ) -> Report {
        let mut r = Report::new("t", "t", "t");
        interpret(&args(flags), lost, overlap, m, &mut r);
        assert_eq!(r.messages.len(), r.interpretation.len());
        r.assert_chinese(
            &[],
            m.versions.iter().map(|v| v.name.as_str()).chain([MixedPrecision::SUMMARY]),
        );
        r
    }

    #[test]
    fn interpretation_follows_the_data() {
        // One step: nothing to hide, whatever the times say.
        let r = told(&["--batches", "1"], None, &measured(2.0, 1.0, 1.0, 1.0));
        assert!(r.interpretation[0].contains("no next step"), "{:?}", r.interpretation);
        assert!(!r.interpretation.iter().any(|l| l.contains("x faster")));
        // A clear gain: 8 x (1 + 1) against the bound 1 + 7 + 1.
        let r = told(&[], Some((90, 100)), &measured(16.0, 9.5, 1.0, 1.0));
        assert!(r.interpretation[0].contains("1.68x faster"), "{:?}", r.interpretation);
        assert_eq!(r.value("bound c + (B-1) max(c, u) + u"), Some(9.0));
        assert!(r.interpretation[2].contains("90.0%") && r.interpretation[2].contains("vanished"));
        // Room to gain but none taken: the layer's share of the GPU is named.
        let r = told(&["--layer-share", "100"], Some((1, 100)), &measured(16.0, 15.5, 1.0, 1.0));
        assert!(r.interpretation[0].contains("100% of the blocks"), "{:?}", r.interpretation);
        assert!(r.interpretation[2].contains("would have survived"), "{:?}", r.interpretation);
        // Nothing worth hiding: the update is tiny next to the layer.
        let r = told(&[], Some((0, 0)), &measured(8.8, 8.7, 1.0, 0.1));
        assert!(r.interpretation[0].starts_with("Little to hide"), "{:?}", r.interpretation);
        assert_eq!(r.interpretation.len(), 2, "no updates: no claim about them");
        // f16: the format named in the figures and the master-copy line, in both languages.
        let r = told(&["--format", "f16"], Some((3, 4)), &measured(16.0, 9.5, 1.0, 1.0));
        assert_eq!(r.value("updates below half a f16 ulp (sampled)"), Some(75.0));
        let master = &r.interpretation[2];
        assert!(master.contains("75.0%") && master.contains("f16 weight"), "{master}");
        let zh = r.messages[2].render(Lang::Zh);
        assert!(zh.contains("75.0%") && zh.contains("f16 权重") && zh.contains("舍入"), "{zh}");
    }

    fn overlap(steps: usize, layer_beside: f64, update_beside: f64) -> Overlap {
        Overlap {
            layer_alone: 0.5,
            update_alone: 0.5,
            layer_beside,
            update_beside,
            idle: 0.0,
            total: 0.0,
            steps,
        }
    }

    #[test]
    fn the_gap_splits_into_sharing_and_scheduling() {
        // c = u = 1, B = 8: the free bound is 9. Beside each other the layer step took 1.25x
        // and the update 1.5x: the bound with times beside is 1 + 7 x 1.5 + 1 = 12.5.
        let m = measured(16.0, 13.0, 1.0, 1.0);
        let o = overlap(8, 0.625, 0.75);
        let r = told_with(&[], Some((90, 100)), Some(&o), &m);
        assert_eq!(r.value("bound c + (B-1) max(c, u) + u"), Some(9.0));
        assert_eq!(r.value("layer step beside update + cast / alone (probed)"), Some(1.25));
        assert_eq!(r.value("update + cast beside a layer step / alone (probed)"), Some(1.5));
        assert_eq!(r.value("bound with times beside (contention-aware)"), Some(12.5));
        assert_eq!(r.value("measured / bound with times beside"), Some(13.0 / 12.5));
        let (sharing, scheduling) =
            (r.value("gap: SM and memory sharing").unwrap(), r.value("gap: scheduling").unwrap());
        assert_eq!((sharing, scheduling), (3.5, 0.5));
        assert_eq!(sharing + scheduling, 13.0 - 9.0, "the parts add up to measured - bound");
        // The existing lines keep their places; the split comes last, in both languages.
        assert!(r.interpretation[2].contains("90.0%"), "{:?}", r.interpretation);
        let split = r.interpretation.last().unwrap();
        assert!(split.contains("1.25x") && split.contains("1.50x"), "{split}");
        assert!(split.contains("12.500 ms, not 9.000"), "{split}");
        assert!(split.contains("3.500 ms is SM and memory sharing"), "{split}");
        assert!(split.contains("0.500 ms scheduling"), "{split}");
        assert!(split.contains("Most of it is sharing"), "{split}");
        let zh = r.messages.last().unwrap().render(Lang::Zh);
        assert!(zh.contains("12.500") && zh.contains("3.500") && zh.contains("共享"), "{zh}");

        // No slowdown beside: both bounds are 9, and all of the gap is scheduling.
        let r = told_with(&[], None, Some(&overlap(8, 0.5, 0.5)), &m);
        assert_eq!(r.value("bound with times beside (contention-aware)"), Some(9.0));
        assert_eq!(r.value("gap: SM and memory sharing"), Some(0.0));
        assert_eq!(r.value("gap: scheduling"), Some(4.0));
        let split = r.interpretation.last().unwrap();
        assert!(split.contains("Most of it is scheduling"), "{split}");

        // One step, or no probe: no bound with times beside, no split.
        let one = measured(2.0, 2.0, 1.0, 1.0);
        let r = told_with(&["--batches", "1"], None, Some(&overlap(1, 0.0, 0.0)), &one);
        assert_eq!(r.value("gap: scheduling"), None);
        let r = told(&[], None, &m);
        assert_eq!(r.value("bound with times beside (contention-aware)"), None);
    }
}
