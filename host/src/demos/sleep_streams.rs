//! # SleepKernel on one stream versus one stream each
//!
//! The concept: kernels on different streams *may* run at the same time, but only if the GPU
//! has room for them. A kernel whose grid fills every SM leaves nothing for a kernel from
//! another stream, which then starts only as the first one's last blocks drain: little or no
//! gain. A kernel of one block leaves all the other SMs idle, and K such kernels on K streams
//! run side by side: close to K times faster.
//!
//! The seed technique is the SleepKernel experiment of stream tutorials: the same kernel
//! launched K times on one stream, then once on each of K streams, each launch with its own
//! copy in before and copy out after:
//!
//! ```text
//! for (int i = 0; i < K; ++i) {            // one stream: s[i] = s[0]; K streams: s[i]
//!   cudaMemcpyAsync(d + off[i], h + off[i], bytes, cudaMemcpyHostToDevice, s[i]);
//!   SleepKernel<<<grid, block, 0, s[i]>>>(cycles);   // grid 64x64 of 16x16, or 1 of 1
//!   cudaMemcpyAsync(out + off[i], d + off[i], bytes, cudaMemcpyDeviceToHost, s[i]);
//! }
//! ```
//!
//! In streamlab: `Stream::new` is `cudaStreamCreate`, `gpu.sleep(&s, config, cycles)` the
//! launch, `s.copy_to_device` / `s.copy_to_host` the `cudaMemcpyAsync`s, and the fork/join
//! events (`cudaEventRecord` + `cudaStreamWaitEvent`) let two events on stream 0 time every
//! stream's work.
use std::ops::Range;

use cust::memory::{DeviceBuffer, LockedBuffer};
use serde::Serialize;

use crate::data::{ensure_bitwise_equal, random_inputs};
use crate::demos::overlap::chunk_ranges;
use crate::demos::Options;
use crate::error::{ensure, Error, Result};
use crate::gpu::{Gpu, LaunchConfig};
use crate::memory::{device, pinned, pinned_from};
use crate::report::Report;
use crate::stream::{Event, Stream};
use crate::timeline::{render, Timeline};
use crate::timing::Stats;

pub const SUMMARY: &str = "SleepKernel 4x on one stream vs once on each of 4 streams, with a full grid and with one block";
pub const FLAGS: &str =
    "--elements (1048576, split over the launches) --streams (4) --sleep-us (2000) --reps --timeline";

pub const DEFAULT_ELEMENTS: usize = 1 << 20;
pub const DEFAULT_STREAMS: usize = 4;
/// Each block sleeps 2 ms: a one-block kernel takes 2 ms, a full-grid one about 4 waves of it.
pub const DEFAULT_SLEEP_US: f64 = 2000.0;
pub const MAX_STREAMS: usize = 64;
/// The hardware work queues a context gets by default (`CUDA_DEVICE_MAX_CONNECTIONS`):
/// streams beyond it share a queue, and their work serializes.
pub const DEFAULT_CONNECTIONS: usize = 8;

/// The two regimes of the experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Grid {
    /// 64x64 blocks of 16x16 threads: 4,096 blocks of 256, several waves on any GPU.
    Full,
    /// One block of one thread: one SM busy, the rest idle.
    Small,
}

impl Grid {
    pub fn config(self) -> LaunchConfig {
        match self {
            Grid::Full => LaunchConfig::new((64, 64, 1), (16, 16, 1)),
            Grid::Small => LaunchConfig::new((1, 1, 1), (1, 1, 1)),
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Grid::Full => "full grid (64x64 blocks of 16x16)",
            Grid::Small => "small grid (1 block)",
        }
    }
}

/// The speed-up the small grid must beat with `k` streams, or `None` when there is nothing
/// to claim (one stream). The ideal is `k`, but only `DEFAULT_CONNECTIONS` queues run at
/// once; half the ideal leaves room for launch and copy costs.
pub fn small_grid_claim(k: usize) -> Option<f64> {
    (k >= 2).then(|| (k.min(DEFAULT_CONNECTIONS) as f64 / 2.0).max(1.3))
}

/// Sizes a user can ask for, checked before anything is allocated.
pub fn check_sizes(n: usize, k: usize, sleep_us: f64) -> Result<()> {
    ensure(n > 0, || "--elements must be at least 1".into())?;
    ensure((1..=MAX_STREAMS).contains(&k), || {
        format!("--streams must be from 1 to {MAX_STREAMS}, not {k}")
    })?;
    ensure(k <= n, || {
        format!(
            "--streams {k} is more than --elements {n}: every launch copies at least one element"
        )
    })?;
    ensure(
        sleep_us.is_finite() && sleep_us > 0.0 && sleep_us <= 1e7,
        || format!("--sleep-us must be more than 0 and at most 10000000, not {sleep_us}"),
    )
}

/// Buffers, streams and events of both versions, allocated once. Each version has its own
/// device buffer, so one version's copies cannot hide a missing copy of the other.
pub struct SleepStreams {
    pub n: usize,
    pub cycles: u64,
    pub chunks: Vec<Range<usize>>,
    pub streams: Vec<Stream>,
    pub input: LockedBuffer<f32>,
    pub out_one: LockedBuffer<f32>,
    pub out_multi: LockedBuffer<f32>,
    dev_one: DeviceBuffer<f32>,
    dev_multi: DeviceBuffer<f32>,
    start: Event,
    stop: Event,
    fork: Event,
    joins: Vec<Event>,
}

impl SleepStreams {
    pub fn new(gpu: &Gpu, n: usize, k: usize, sleep_us: f64, seed: u64) -> Result<SleepStreams> {
        check_sizes(n, k, sleep_us)?;
        gpu.ensure_device_memory(2 * n * 4, &format!("two arrays of {n} floats"))?;
        let streams = (0..k)
            .map(|i| Stream::new(format!("sleep-{i}")))
            .collect::<Result<Vec<_>>>()?;
        Ok(SleepStreams {
            n,
            cycles: gpu.cycles_for_micros(sleep_us),
            chunks: chunk_ranges(n, k),
            input: pinned_from(&random_inputs(n, seed))?,
            out_one: pinned(n)?,
            out_multi: pinned(n)?,
            dev_one: device(n)?,
            dev_multi: device(n)?,
            start: Event::new()?,
            stop: Event::new()?,
            fork: Event::without_timing()?,
            joins: (1..k)
                .map(|_| Event::without_timing())
                .collect::<Result<Vec<_>>>()?,
            streams,
        })
    }

    /// K times copy in, sleep, copy out, all on stream 0. Returns the GPU time in ms.
    pub fn run_one_stream(&mut self, gpu: &Gpu, grid: Grid) -> Result<f64> {
        let s = &self.streams[0];
        let enqueued = (|| -> Result<()> {
            self.start.record(s)?;
            for range in &self.chunks {
                // SAFETY: `input`/`out_one` belong to `self`, held mutably by this call, which
                // returns only after the stop event (after every copy) has completed or the
                // stream was drained on error.
                unsafe {
                    s.copy_to_device(
                        &self.input[range.clone()],
                        &self.dev_one.index(range.clone()),
                    )?
                };
                gpu.sleep(s, grid.config(), self.cycles)?;
                // SAFETY: as above.
                unsafe {
                    s.copy_to_host(
                        &self.dev_one.index(range.clone()),
                        &mut self.out_one[range.clone()],
                    )?
                };
            }
            self.stop.record(s)?;
            self.stop.synchronize()
        })();
        if enqueued.is_err() {
            let _ = s.synchronize();
        }
        enqueued?;
        self.stop.elapsed_ms(&self.start)
    }

    /// Launch i with its copies on stream i; streams 1..K fork from and join into stream 0,
    /// so the two events on stream 0 bracket all of it. Returns the GPU time in ms.
    pub fn run_multi_stream(&mut self, gpu: &Gpu, grid: Grid) -> Result<f64> {
        let first = &self.streams[0];
        let enqueued = (|| -> Result<()> {
            self.start.record(first)?;
            self.fork.record(first)?;
            for s in &self.streams[1..] {
                s.wait_event(&self.fork)?;
            }
            for (s, range) in self.streams.iter().zip(&self.chunks) {
                // SAFETY: disjoint ranges of `input`/`out_multi`, owned by `self` and held by
                // this call until the stop event (after the joins) has completed or every
                // stream was drained on error.
                unsafe {
                    s.copy_to_device(
                        &self.input[range.clone()],
                        &self.dev_multi.index(range.clone()),
                    )?
                };
                gpu.sleep(s, grid.config(), self.cycles)?;
                // SAFETY: as above.
                unsafe {
                    s.copy_to_host(
                        &self.dev_multi.index(range.clone()),
                        &mut self.out_multi[range.clone()],
                    )?
                };
            }
            for (s, join) in self.streams[1..].iter().zip(&self.joins) {
                join.record(s)?;
                first.wait_event(join)?;
            }
            self.stop.record(first)?;
            self.stop.synchronize()
        })();
        if enqueued.is_err() {
            for s in &self.streams {
                let _ = s.synchronize();
            }
        }
        enqueued?;
        self.stop.elapsed_ms(&self.start)
    }

    /// Both versions' copies round-tripped the input, bit for bit.
    pub fn check_round_trip(&self) -> Result<String> {
        ensure_bitwise_equal("one-stream output vs input", &self.out_one, &self.input)?;
        ensure_bitwise_equal("multi-stream output vs input", &self.out_multi, &self.input)?;
        ensure_bitwise_equal(
            "multi-stream vs one-stream output",
            &self.out_multi,
            &self.out_one,
        )?;
        Ok(format!(
            "all {} elements came back identical in both versions",
            self.n
        ))
    }

    /// One more multi-stream run of `grid` with a timeline on every stream.
    pub fn timeline(&mut self, gpu: &Gpu, grid: Grid) -> Result<String> {
        let timeline = std::rc::Rc::new(Timeline::new());
        for s in &self.streams {
            s.attach_timeline(&timeline);
        }
        let result = self.run_multi_stream(gpu, grid);
        for s in &self.streams {
            s.detach_timeline();
        }
        result?;
        Ok(render(&timeline.resolve(&self.start)?, 72))
    }
}

/// One regime's medians.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Regime {
    pub one: Stats,
    pub multi: Stats,
}

impl Regime {
    pub fn speedup(&self) -> f64 {
        self.one.median / self.multi.median
    }
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Measured {
    pub full: Regime,
    pub small: Regime,
}

/// Both regimes, both versions, `reps` interleaved repeats after one warm-up of each.
pub fn measure(gpu: &Gpu, s: &mut SleepStreams, reps: usize) -> Result<Measured> {
    for grid in [Grid::Full, Grid::Small] {
        s.run_one_stream(gpu, grid)?;
        s.run_multi_stream(gpu, grid)?;
    }
    let mut t = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..reps.max(1) {
        t[0].push(s.run_one_stream(gpu, Grid::Full)?);
        t[1].push(s.run_multi_stream(gpu, Grid::Full)?);
        t[2].push(s.run_one_stream(gpu, Grid::Small)?);
        t[3].push(s.run_multi_stream(gpu, Grid::Small)?);
    }
    Ok(Measured {
        full: Regime {
            one: Stats::of(&t[0]),
            multi: Stats::of(&t[1]),
        },
        small: Regime {
            one: Stats::of(&t[2]),
            multi: Stats::of(&t[3]),
        },
    })
}

/// The demo's claim: one-block kernels on K streams run side by side (speed-up above
/// [`small_grid_claim`]) and gain more than full-grid ones. Asserted only when the sleeps
/// dominate the one-stream time (not the copies): otherwise there is nothing to overlap.
pub fn check_claim(m: &Measured, k: usize, sleep_ms: f64) -> Result<String> {
    let Some(threshold) = small_grid_claim(k) else {
        return Ok("not asserted: one stream has nothing to run beside".into());
    };
    let kernel_share = k as f64 * sleep_ms / m.small.one.median;
    if kernel_share < 0.8 {
        return Ok(format!(
            "not asserted: the sleeps are only {:.0}% of the one-stream time (copies dominate; raise --sleep-us)",
            kernel_share * 100.0
        ));
    }
    let (small, full) = (m.small.speedup(), m.full.speedup());
    if small > threshold && small > full {
        Ok(format!(
            "small grid {small:.2}x > {threshold:.2}x and > full grid {full:.2}x"
        ))
    } else {
        Err(Error::Verification(format!(
            "expected the small grid to gain more than {threshold:.2}x and more than the full grid; got small {small:.2}x, full {full:.2}x"
        )))
    }
}

/// Checks the flags this demo reads, before the GPU is touched.
pub fn check_options(opts: &Options) -> Result<()> {
    super::check_common(opts)
}

pub fn run(gpu: &Gpu, opts: &Options) -> Result<Report> {
    let n = opts.elements.unwrap_or(DEFAULT_ELEMENTS);
    let k = opts.streams.unwrap_or(DEFAULT_STREAMS);
    let sleep_us = opts.sleep_us.unwrap_or(DEFAULT_SLEEP_US);
    let mut s = SleepStreams::new(gpu, n, k, sleep_us, opts.seed)?;
    let m = measure(gpu, &mut s, opts.reps)?;
    let sleep_ms = sleep_us / 1e3;

    let mut r = Report::new(
        "sleep-streams",
        "SleepKernel on one stream vs one stream each",
        &gpu.info.name,
    );
    r.param("elements", n)
        .param("streams", k)
        .param("sleep_us", sleep_us)
        .param("cycles", s.cycles)
        .param("reps", opts.reps);
    for (grid, regime) in [(Grid::Full, m.full), (Grid::Small, m.small)] {
        let label = grid.label();
        r.figure(
            &format!("{label}: {k}x on one stream"),
            regime.one.median,
            "ms",
        )
        .figure(&format!("{label}: {k} streams"), regime.multi.median, "ms")
        .figure(&format!("{label}: speed-up"), regime.speedup(), "x");
    }
    r.detail("measured_ms", m);
    if opts.timeline {
        r.timeline = Some(s.timeline(gpu, Grid::Small)?);
    }
    r.check(
        "copies round-trip bit for bit (both versions)",
        s.check_round_trip(),
    );
    r.check(
        "small grid overlaps across streams",
        check_claim(&m, k, sleep_ms),
    );
    let resident = gpu.info.multiprocessors.max(1) as f64 * 8.0;
    r.explain(format!(
        "Full grid: 4096 blocks of 256 threads are ~{:.1} waves of {} resident blocks ({} SMs x 8): every SM is busy, so another stream's kernel only fills the last wave's gaps ({:.2}x).",
        4096.0 / resident, resident, gpu.info.multiprocessors, m.full.speedup()
    ));
    r.explain(format!(
        "Small grid: one block occupies one SM and leaves {} idle, so {k} one-block kernels on {k} streams run side by side ({:.2}x of an ideal {k}x).",
        gpu.info.multiprocessors - 1,
        m.small.speedup()
    ));
    r.explain(format!(
        "Streams give concurrency only where resources are free; beyond {DEFAULT_CONNECTIONS} streams, CUDA_DEVICE_MAX_CONNECTIONS (default {DEFAULT_CONNECTIONS}) hardware queues are shared and streams serialize again."
    ));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_scale_with_streams_up_to_the_connection_count() {
        assert_eq!(small_grid_claim(1), None);
        assert_eq!(small_grid_claim(2), Some(1.3));
        assert_eq!(small_grid_claim(4), Some(2.0));
        assert_eq!(small_grid_claim(8), Some(4.0));
        assert_eq!(small_grid_claim(64), Some(4.0));
    }

    #[test]
    fn grids_are_the_tutorials() {
        let full = Grid::Full.config();
        assert_eq!((full.grid, full.block), ((64, 64, 1), (16, 16, 1)));
        let small = Grid::Small.config();
        assert_eq!((small.grid, small.block), ((1, 1, 1), (1, 1, 1)));
    }
}
