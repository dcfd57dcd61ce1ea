//! # Basics: blocking copies versus one stream with asynchronous copies
//!
//! Copy in, compute, copy out, written with blocking calls, keeps the host thread inside
//! `cudaMemcpy` until the GPU is done. Written on a stream with asynchronous copies from
//! pinned memory, the same three operations are only enqueued: the GPU does the same work in
//! the same time, and the host thread is free to do its own work until it needs the result.
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
//! In Rust: `copy_to_device_sync(&input, &dev)` / `copy_to_host_sync(&dev, &mut out)` are the
//! `cudaMemcpy`s (legacy default stream, `Stream::legacy_default`), `s.copy_to_device` /
//! `s.copy_to_host` the `cudaMemcpyAsync`s, `HostBuffer::pinned_from` the `cudaMallocHost`,
//! `gpu.compute(&s, &dev, iters)` the launch and `done.is_complete()` the `cudaEventQuery`.
//! Both versions use the same pinned buffers, so only where the host spends the time differs
//! (pageable memory is `pinned-vs-pageable`'s lesson).
//!
//! The bound: the GPU time is the same either way; the asynchronous calls should take well
//! under half of it (asserted from [`MIN_GPU_MS_FOR_CLAIM`] of GPU work up).
use std::time::Instant;

use kernels_gpu::math::compute_element;
use serde::Serialize;

use crate::lab::harness::budget::MAX_ELEMENTS;
use crate::lab::harness::data::random_inputs;
use crate::lab::harness::lesson::no_such_version;
use crate::lab::kit::host_batch_log::ms_since;
use crate::lab::{
    args, fixed, t, Checks, Drawing, Lesson, Measured, Plan, Report, Sample, Text, WorkModel,
};
use crate::runtime::memory::{copy_to_device_sync, copy_to_host_sync};
use crate::runtime::{DeviceBuffer, Error, Event, Gpu, HostBuffer, Result, Stream};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Array size in floats [1..=4294967295]. Try 1024 to see per-call costs match the work.
    #[arg(long, default_value_t = 1 << 20, value_parser = args::whole(1usize..=MAX_ELEMENTS))]
    pub elements: usize,
    /// sin·cos steps per element [1..=100000]: more GPU work, more host work meanwhile.
    // The CPU check's tolerance was confirmed on the GPU up to 10,000 steps; 100,000 keeps the
    // CPU reference (1,024 samples x iters) under a second.
    #[arg(long, default_value_t = 1000, value_parser = args::whole(1u32..=100_000))]
    pub iters: u32,
}

/// Below this GPU time the "host was free" claim is not asserted: the enqueue calls
/// themselves (tens of microseconds) are then comparable to the GPU work.
pub const MIN_GPU_MS_FOR_CLAIM: f64 = 0.5;
/// GPU times within this ratio of each other are "the same".
pub const SAME_GPU_TIME: f64 = 1.25;
/// The parts of each sample: host ms inside the calls, host work units done afterwards.
pub const IN_CALLS: &str = "host ms inside the calls";
pub const UNITS: &str = "host work units";

pub struct Basics {
    iters: u32,
    input: HostBuffer<f32>,
    out_blocking: HostBuffer<f32>,
    out_async: HostBuffer<f32>,
    dev: DeviceBuffer<f32>,
    stream: Stream,
    legacy: Stream,
    start: Event,
    stop: Event,
}

impl Basics {
    /// The input, for tests that compare every element with the CPU.
    pub fn input(&self) -> Result<Vec<f32>> {
        self.input.to_vec()
    }

    /// The outputs of the blocking and of the asynchronous version.
    pub fn outputs(&self) -> Result<(Vec<f32>, Vec<f32>)> {
        Ok((self.out_blocking.to_vec()?, self.out_async.to_vec()?))
    }

    /// GPU time between the events, with what the host did: a sample.
    fn sample(&self, in_calls_ms: f64, units: u64) -> Result<Sample> {
        Ok(Sample::ms(self.stop.elapsed_ms(&self.start)?)
            .part(IN_CALLS, in_calls_ms)
            .part(UNITS, units as f64))
    }
}

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

/// Does host work units until `done` has completed: how much the host got done meanwhile.
pub fn host_work_until(done: &Event) -> Result<u64> {
    let (mut units, mut state) = (0u64, 0x1234_5678u64);
    while !done.is_complete()? {
        state = host_work_unit(state);
        units += 1;
    }
    std::hint::black_box(state);
    Ok(units)
}

/// The versions, by their index in [`Lesson::versions`].
pub const BLOCKING_COPIES: usize = 0;
pub const ASYNC_COPIES: usize = 1;

impl Basics {
    /// `cudaMemcpy`, kernel, `cudaMemcpy` on the legacy default stream: the host is inside
    /// the second copy until the kernel and the copy are done.
    fn blocking_copies(&mut self, gpu: &Gpu) -> Result<Sample> {
        let legacy = &self.legacy;
        // Borrowed before the clock starts: a borrow first waits for copies in flight.
        let (input, mut out) = (self.input.read()?, self.out_blocking.write()?);
        let t = Instant::now();
        self.start.record(legacy)?;
        copy_to_device_sync(&input[..], &self.dev)?;
        gpu.compute(legacy, &self.dev, self.iters)?;
        copy_to_host_sync(&self.dev, &mut out[..])?;
        self.stop.record(legacy)?;
        let in_calls = ms_since(t);
        let units = host_work_until(&self.stop)?;
        self.sample(in_calls, units)
    }

    /// The same three operations enqueued on one stream from pinned memory; the host then
    /// works until the stop event has completed.
    fn async_copies(&mut self, gpu: &Gpu) -> Result<Sample> {
        let s = &self.stream;
        let t = Instant::now();
        self.start.record(s)?;
        s.copy_to_device(&self.input, &self.dev)?;
        gpu.compute(s, &self.dev, self.iters)?;
        s.copy_to_host(&self.dev, &self.out_async)?;
        self.stop.record(s)?;
        let in_calls = ms_since(t);
        let units = host_work_until(&self.stop)?;
        self.sample(in_calls, units)
    }
}

impl Lesson for Basics {
    const NAME: &'static str = "basics";
    const SUMMARY: &'static str = "blocking copies + kernel vs the same on one stream with async copies from pinned memory; host work done meanwhile";
    const DRAWING: Drawing = Drawing {
        host_row: true,
        note: "The host row holds its driver calls. With async copies they return at once; the host's own work after them is no driver call, so its row stays empty.",
        ..Drawing::PLAIN
    };
    type Args = Args;

    fn versions(_: &Args) -> Vec<String> {
        vec!["blocking copies".into(), "async copies, one stream".into()]
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        let one = 2.0 * model.copy_ms(a.elements) + model.compute_ms(a.elements, a.iters);
        Ok(Plan::new()
            // The generated input, its pinned copy and two pinned outputs.
            .host::<f32>(a.elements, 4)?
            .device::<f32>(a.elements, 1)?
            .work(2.0 * one, "--elements x --iters"))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<Basics> {
        let n = a.elements;
        Ok(Basics {
            iters: a.iters,
            input: HostBuffer::pinned_from(gpu, &random_inputs(n, seed))?,
            out_blocking: HostBuffer::pinned(gpu, n)?,
            out_async: HostBuffer::pinned(gpu, n)?,
            dev: DeviceBuffer::zeroed(gpu, n)?,
            stream: Stream::new(gpu, "basics")?,
            legacy: Stream::legacy_default(gpu),
            start: Event::new(gpu)?,
            stop: Event::new(gpu)?,
        })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        match v {
            BLOCKING_COPIES => self.blocking_copies(gpu),
            ASYNC_COPIES => self.async_copies(gpu),
            _ => no_such_version::<Self>(v),
        }
    }

    /// The blocking `cudaMemcpy`s do not go through a `Stream`: a CUPTI recording still has
    /// them (CUPTI sees every copy), the events recorder only the legacy stream's kernel.
    fn streams(&self) -> Vec<&Stream> {
        vec![&self.legacy, &self.stream]
    }

    fn verify(&mut self, _gpu: &Gpu, m: &Measured, checks: &mut Checks) -> Result<()> {
        let (blocking, asynchronous, input) =
            (self.out_blocking.read()?, self.out_async.read()?, self.input.read()?);
        checks.bitwise("async == blocking, bit for bit", &asynchronous, &blocking);
        checks.approx("GPU vs CPU reference (approx)", &asynchronous, 1024, |i| {
            compute_element(input[i], self.iters)
        });
        checks.concurrency("async calls freed the host", host_was_free(m));
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        interpret(m, r);
    }
}

/// Why the "host was free" claim cannot be asserted for these measurements, if it cannot.
pub fn host_claim_not_asserted(m: &Measured) -> Option<Text> {
    let gpu_ms = m.with().time.median;
    let min = MIN_GPU_MS_FOR_CLAIM.to_string();
    (gpu_ms < MIN_GPU_MS_FOR_CLAIM).then(|| t!("basics.too_short", ms = fixed(gpu_ms, 3), min))
}

/// The lesson's claim: the asynchronous calls return well before the GPU is done (under half
/// its time inside the calls) and the host gets more work done than when blocking.
pub fn host_was_free(m: &Measured) -> Result<Text> {
    if let Some(why) = host_claim_not_asserted(m) {
        return Ok(t!("check.not_asserted", why));
    }
    let (blocking, asynchronous) = (m.without(), m.with());
    let (in_calls, gpu_ms) = (asynchronous.part(IN_CALLS), asynchronous.time.median);
    let (units, blocking_units) = (asynchronous.part(UNITS), blocking.part(UNITS));
    if in_calls < 0.5 * gpu_ms && units > blocking_units {
        let ([calls, ms], [units, blocking]) =
            ([in_calls, gpu_ms].map(|v| fixed(v, 3)), [units, blocking_units].map(|v| fixed(v, 0)));
        Ok(t!("basics.free", calls, ms, units, blocking))
    } else {
        let ([calls, gpu], [units, blocking]) =
            ([in_calls, gpu_ms].map(|v| fixed(v, 3)), [units, blocking_units].map(|v| fixed(v, 0)));
        Err(Error::Verification(t!("error.basics.host_not_free", calls, gpu, units, blocking)))
    }
}

/// The figures and what they mean (a free function, so tests can feed it made-up data).
pub fn interpret(m: &Measured, r: &mut Report) {
    let (b, a) = (m.without(), m.with());
    let (b_ms, a_ms) = (b.time.median, a.time.median);
    let ratio = a_ms / b_ms;
    r.figure("async / blocking GPU time", ratio, "x")
        .figure("blocking: host time inside the calls", b.part(IN_CALLS), "ms")
        .figure("async: host time inside the calls", a.part(IN_CALLS), "ms")
        .figure("blocking: host work units done while the GPU ran", b.part(UNITS), "units")
        .figure("async: host work units done while the GPU ran", a.part(UNITS), "units");
    let not_asserted = host_claim_not_asserted(m);
    let same_time = (1.0 / SAME_GPU_TIME..=SAME_GPU_TIME).contains(&ratio);
    let ([b_ms, a_ms], ratio) = ([b_ms, a_ms].map(|v| fixed(v, 3)), fixed(ratio, 2));
    r.explain(if not_asserted.is_some() {
        t!("basics.gpu_tiny", b_ms, a_ms)
    } else if same_time {
        t!("basics.gpu_same", b_ms, a_ms)
    } else {
        t!("basics.gpu_differs", b_ms, a_ms, ratio)
    });
    let [b_calls, a_calls] = [b, a].map(|v| fixed(v.part(IN_CALLS), 3));
    let [b_units, a_units] = [b, a].map(|v| fixed(v.part(UNITS), 0));
    let figures = t!("basics.figures", b_calls, b_units, a_calls, a_units);
    r.explain(match not_asserted {
        Some(why) => t!("basics.host_no_claim", figures, why),
        None if host_was_free(m).is_ok() => t!("basics.host_free", figures),
        None => t!("basics.host_held", figures),
    });
    r.explain(t!("basics.pinned"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

    // What the flag checks refuse is tested in tests/basics.rs.

    #[test]
    fn host_work_is_deterministic_and_not_trivial() {
        assert_eq!(host_work_unit(7), host_work_unit(7));
        assert_ne!(host_work_unit(7), host_work_unit(8));
        assert_ne!(host_work_unit(7), 7);
    }

    /// Blocking: 2 ms of GPU, all of it in the calls, no host work; async as given.
    fn measured(async_gpu: f64, async_in_calls: f64, async_units: f64) -> Measured {
        let blocking = Sample::ms(2.0).part(IN_CALLS, 2.0).part(UNITS, 0.0);
        let asynchronous =
            Sample::ms(async_gpu).part(IN_CALLS, async_in_calls).part(UNITS, async_units);
        Measured::from_samples(
            Basics::versions(&args_from::<Basics>(&[]).unwrap()),
            vec![vec![blocking], vec![asynchronous]],
        )
    }

    fn told(m: &Measured) -> String {
        let mut r = Report::new("basics", "", "");
        interpret(m, &mut r);
        r.interpretation.join("\n")
    }

    #[test]
    fn the_claim_needs_a_free_host_and_enough_gpu_work() {
        assert!(host_was_free(&measured(2.0, 0.03, 1500.0)).is_ok());
        assert!(host_was_free(&measured(2.0, 1.9, 1500.0)).is_err());
        assert!(host_was_free(&measured(2.0, 0.03, 0.0)).is_err());
        let note = host_was_free(&measured(0.01, 0.03, 0.0)).unwrap().en();
        assert!(note.starts_with("not asserted"), "{note}");
    }

    #[test]
    fn interpretation_follows_the_data() {
        let free = told(&measured(2.0, 0.03, 1500.0));
        assert!(free.contains("about the same time") && free.contains("only enqueue"), "{free}");
        let held = told(&measured(2.0, 1.9, 0.0));
        assert!(held.contains("but did not here") && !held.contains("only enqueue"), "{held}");
        let short = told(&measured(0.01, 0.03, 0.0));
        assert!(short.contains("Not a claim here") && short.contains("per-call costs"), "{short}");
        let drift = told(&measured(4.0, 0.03, 1500.0));
        assert!(drift.contains("suspect clocks"), "{drift}");
    }
}
