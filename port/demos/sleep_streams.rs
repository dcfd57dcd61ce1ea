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
use crate::demos::launch_order::connections;
use crate::demos::overlap::chunk_ranges;
use crate::demos::{
    buffer_bytes, check_elements, check_sleep_us, ensure_host_memory, Options, MAX_ELEMENTS,
    MAX_STREAMS,
};
use crate::error::{ensure, Error, Result};
use crate::gpu::{Gpu, LaunchConfig};
use crate::memory::{device, pinned, pinned_from};
use crate::report::Report;
use crate::stream::{drain_on_error, Event, Stream};
use crate::timeline::{render, Timeline};
use crate::timing::{interleaved, Stats};

pub const SUMMARY: &str = "SleepKernel 4x on one stream vs once on each of 4 streams, with a full grid and with one block";
pub const FLAGS: &str =
    "--elements (1048576, split over the launches) --streams (4) --sleep-us (2000, 10 or more) --reps --timeline";

pub const DEFAULT_ELEMENTS: usize = 1 << 20;
pub const DEFAULT_STREAMS: usize = 4;
/// Each block sleeps 2 ms: a one-block kernel takes 2 ms, a full-grid one about 4 waves of it.
pub const DEFAULT_SLEEP_US: f64 = 2000.0;
/// Below this a sleep is not much longer than its own launch. (Where the copies dominate,
/// the claim is not asserted anyway; see [`check_claim`].)
pub const MIN_SLEEP_US: f64 = 10.0;
/// One repeat (both grids, both versions) may take at most this long, estimated from the
/// sleeps, so a run stays bounded.
pub const MAX_REPEAT_SECONDS: f64 = 60.0;
/// Blocks in the full grid (64 x 64).
pub const FULL_GRID_BLOCKS: usize = 64 * 64;
/// Threads per block of the full grid (16 x 16).
pub const FULL_GRID_THREADS: u32 = 16 * 16;
/// The waves of the full grid assumed before a GPU is known (an H100/H200: 4,096 blocks over
/// 132 SMs x 8 resident 256-thread blocks); once the GPU is known its own count is used.
pub const ASSUMED_FULL_GRID_WAVES: usize = 4;

/// Host memory the demo needs: the generated input, its pinned copy and two pinned outputs.
pub const HOST_ARRAYS: usize = 4;
/// Device memory: one array per version.
pub const DEVICE_ARRAYS: usize = 2;
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

/// The speed-up the small grid must beat with `k` streams on `connections` hardware queues,
/// or `None` when there is nothing to claim (one stream). The ideal is `k`, but only
/// `connections` queues run at once; half the ideal leaves room for launch and copy costs.
pub fn small_grid_claim(k: usize, connections: usize) -> Option<f64> {
    (k >= 2).then(|| (k.min(connections) as f64 / 2.0).max(1.3))
}

/// How many waves the 4,096-block full grid takes on a GPU of `multiprocessors` SMs holding
/// `blocks_per_sm` blocks each (fractional: 3.9 means three full waves and a partial one).
pub fn full_grid_waves(multiprocessors: i32, blocks_per_sm: u32) -> f64 {
    let resident = multiprocessors.max(1) as f64 * blocks_per_sm.max(1) as f64;
    FULL_GRID_BLOCKS as f64 / resident
}

/// The longest sleep that keeps one repeat under [`MAX_REPEAT_SECONDS`]. In the worst case
/// (no overlap at all) a repeat runs, one after another, `2k` full-grid kernels of
/// `full_waves` sleeps each and `2k` one-block kernels of one sleep.
pub fn max_sleep_us(k: usize, full_waves: usize) -> f64 {
    let sleeps = 2.0 * k.max(1) as f64 * (full_waves.max(1) + 1) as f64;
    (MAX_REPEAT_SECONDS * 1e6 / sleeps).floor()
}

/// Checks sizes, the sleep and host memory, without a GPU. `full_waves` is the whole waves
/// of the full grid: [`ASSUMED_FULL_GRID_WAVES`] before the GPU is known.
pub fn check_sizes(n: usize, k: usize, sleep_us: f64, full_waves: usize) -> Result<()> {
    check_elements(n, MAX_ELEMENTS)?;
    ensure((1..=MAX_STREAMS).contains(&k), || {
        format!("--streams must be from 1 to {MAX_STREAMS}, not {k}")
    })?;
    ensure(k <= n, || {
        format!(
            "--streams {k} is more than --elements {n}: every launch copies at least one element"
        )
    })?;
    check_sleep_us(
        sleep_us,
        MIN_SLEEP_US,
        max_sleep_us(k, full_waves),
        &format!(
            "a sleep must outlast its launch, and {k} streams with a {full_waves}-wave full grid must stay under {MAX_REPEAT_SECONDS} s a repeat"
        ),
    )?;
    ensure_host_memory(
        buffer_bytes::<f32>(n, HOST_ARRAYS)?,
        &format!("{HOST_ARRAYS} host arrays of {n} floats"),
    )
}

/// Checks the flags this demo reads, before the GPU is touched.
pub fn check_options(opts: &Options) -> Result<()> {
    check_sizes(
        opts.elements.unwrap_or(DEFAULT_ELEMENTS),
        opts.streams.unwrap_or(DEFAULT_STREAMS),
        opts.sleep_us.unwrap_or(DEFAULT_SLEEP_US),
        ASSUMED_FULL_GRID_WAVES,
    )
}

/// The same checks with this GPU's own full-grid waves, plus device memory.
pub fn validate(gpu: &Gpu, n: usize, k: usize, sleep_us: f64) -> Result<()> {
    let waves = full_grid_waves(
        gpu.info.multiprocessors,
        gpu.resident_blocks_per_sm(FULL_GRID_THREADS),
    );
    check_sizes(n, k, sleep_us, waves.ceil() as usize)?;
    gpu.ensure_device_memory(
        buffer_bytes::<f32>(n, DEVICE_ARRAYS)?,
        &format!("{DEVICE_ARRAYS} device arrays of {n} floats"),
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
        validate(gpu, n, k, sleep_us)?;
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
        drain_on_error(|| {
            self.start.record(s)?;
            for range in &self.chunks {
                // SAFETY: `input`/`out_one` belong to `self`, held mutably by this call, which
                // returns only after the stop event (recorded after every copy) has completed,
                // or, on an error, after `drain_on_error` has synchronized the context.
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
        })?;
        self.stop.elapsed_ms(&self.start)
    }

    /// Launch i with its copies on stream i; streams 1..K fork from and join into stream 0,
    /// so the two events on stream 0 bracket all of it. Returns the GPU time in ms.
    pub fn run_multi_stream(&mut self, gpu: &Gpu, grid: Grid) -> Result<f64> {
        let first = &self.streams[0];
        drain_on_error(|| {
            self.start.record(first)?;
            self.fork.record(first)?;
            for s in &self.streams[1..] {
                s.wait_event(&self.fork)?;
            }
            for (s, range) in self.streams.iter().zip(&self.chunks) {
                // SAFETY: disjoint ranges of `input`/`out_multi`, owned by `self` and held by
                // this call until the stop event (after the joins of every stream) has
                // completed, or, on an error, until `drain_on_error` has synchronized the
                // context.
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
        })?;
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
    let mut regime = |grid| -> Result<Regime> {
        let (one, multi) = interleaved(
            &mut *s,
            reps,
            |s| s.run_one_stream(gpu, grid),
            |s| s.run_multi_stream(gpu, grid),
        )?;
        Ok(Regime {
            one: Stats::of(&one),
            multi: Stats::of(&multi),
        })
    };
    Ok(Measured {
        full: regime(Grid::Full)?,
        small: regime(Grid::Small)?,
    })
}

/// Share of the one-stream time spent sleeping, for a regime whose launches sleep
/// `sleeps_per_launch` times each (the rest is copies and launch costs).
pub fn sleep_share(one_stream_ms: f64, k: usize, sleeps_per_launch: f64, sleep_ms: f64) -> f64 {
    k as f64 * sleeps_per_launch * sleep_ms / one_stream_ms
}

/// Below this share of sleeping in the one-stream time, the copies set the pace and the
/// small-grid claim is not asserted: there is little kernel time to overlap.
pub const MIN_SLEEP_SHARE: f64 = 0.8;

/// Why the small-grid claim cannot be asserted for these measurements, if it cannot.
pub fn claim_not_asserted(m: &Measured, k: usize, sleep_ms: f64) -> Option<String> {
    if k < 2 {
        return Some("one stream has nothing to run beside".into());
    }
    let share = sleep_share(m.small.one.median, k, 1.0, sleep_ms);
    (share < MIN_SLEEP_SHARE).then(|| {
        format!(
            "the sleeps are only {:.0}% of the one-stream time (copies dominate; raise --sleep-us)",
            share * 100.0
        )
    })
}

/// The demo's claim: one-block kernels on K streams run side by side (speed-up above
/// [`small_grid_claim`]) and gain more than full-grid ones. Asserted only with two or more
/// streams and when the sleeps dominate the one-stream time (not the copies).
pub fn check_claim(m: &Measured, k: usize, sleep_ms: f64, connections: usize) -> Result<String> {
    if let Some(why) = claim_not_asserted(m, k, sleep_ms) {
        return Ok(format!("not asserted: {why}"));
    }
    let Some(threshold) = small_grid_claim(k, connections) else {
        return Err(Error::Internal(format!(
            "sleep-streams: no claim for {k} streams after the one-stream case was excluded"
        )));
    };
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

pub fn run(gpu: &Gpu, opts: &Options) -> Result<Report> {
    let n = opts.elements.unwrap_or(DEFAULT_ELEMENTS);
    let k = opts.streams.unwrap_or(DEFAULT_STREAMS);
    let sleep_us = opts.sleep_us.unwrap_or(DEFAULT_SLEEP_US);
    let mut s = SleepStreams::new(gpu, n, k, sleep_us, opts.seed)?;
    let m = measure(gpu, &mut s, opts.reps)?;
    let sleep_ms = sleep_us / 1e3;
    let connections = connections();
    let sms = gpu.info.multiprocessors;
    let blocks_per_sm = gpu.resident_blocks_per_sm(FULL_GRID_THREADS);
    let waves = full_grid_waves(sms, blocks_per_sm);

    let mut r = Report::new(
        "sleep-streams",
        "SleepKernel on one stream vs one stream each",
        &gpu.info.name,
    );
    r.param("elements", n)
        .param("streams", k)
        .param("sleep_us", sleep_us)
        .param("cycles", s.cycles)
        .param("hardware_queues", connections)
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
    r.figure("full grid: waves of resident blocks", waves, "waves");
    r.detail("measured_ms", m);
    if opts.timeline {
        r.timeline = Some(s.timeline(gpu, Grid::Small)?);
    }
    r.check(
        "copies round-trip bit for bit (both versions)",
        s.check_round_trip(),
    );
    let claim = check_claim(&m, k, sleep_ms, connections);
    let claim_held = claim.is_ok();
    r.check("small grid overlaps across streams", claim);

    let (full, small) = (m.full.speedup(), m.small.speedup());
    let full_share = sleep_share(m.full.one.median, k, waves.ceil(), sleep_ms);
    let resident = format!(
        "{} resident blocks ({sms} SMs x {blocks_per_sm})",
        sms.max(1) as u32 * blocks_per_sm
    );
    r.explain(if k < 2 {
        format!("Full grid: 4096 blocks of 256 threads are {waves:.1} waves of {resident}; with one stream there is no other kernel to fill its gaps.")
    } else if full_share < MIN_SLEEP_SHARE {
        format!("Full grid: the sleeps are only {:.0}% of the one-stream time, so copies and launches set the pace and its {full:.2}x says little about kernels; raise --sleep-us.", full_share * 100.0)
    } else if waves < 1.0 {
        format!("Full grid: this GPU holds all 4096 blocks at once ({resident}), so even full-grid kernels on different streams can run side by side: {full:.2}x.")
    } else if full < 1.25 {
        format!("Full grid: 4096 blocks of 256 threads are {waves:.1} waves of {resident}: every SM is busy, so another stream's kernel only fills the last wave's gaps ({full:.2}x).")
    } else {
        format!("Full grid: 4096 blocks of 256 threads are {waves:.1} waves of {resident}, yet streams gained {full:.2}x: the next stream's blocks take SMs as soon as the last wave frees them.")
    });
    let ideal = k.min(connections);
    r.explain(match claim_not_asserted(&m, k, sleep_ms) {
        Some(why) => format!("Small grid: {small:.2}x, not a claim here: {why}."),
        None if claim_held => format!(
            "Small grid: one block occupies one SM and leaves {} idle, so {k} one-block kernels on {k} streams run side by side: {small:.2}x of an ideal {ideal}x.",
            sms - 1
        ),
        None => format!(
            "Small grid: one-block kernels on {k} streams should run side by side (ideal {ideal}x), but gained only {small:.2}x here (full grid {full:.2}x): see the failed check."
        ),
    });
    r.explain(if k > connections {
        format!("Here {k} streams share {connections} hardware queues (CUDA_DEVICE_MAX_CONNECTIONS): streams on one queue serialize again, so the ideal is {connections}x, not {k}x. Streams give concurrency only where the GPU has free resources and free queues.")
    } else {
        format!("Streams give concurrency only where the GPU has free resources; beyond {connections} streams (CUDA_DEVICE_MAX_CONNECTIONS hardware queues) streams share queues and serialize again.")
    });
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_scale_with_streams_up_to_the_connection_count() {
        assert_eq!(small_grid_claim(1, 8), None);
        assert_eq!(small_grid_claim(2, 8), Some(1.3));
        assert_eq!(small_grid_claim(4, 8), Some(2.0));
        assert_eq!(small_grid_claim(8, 8), Some(4.0));
        assert_eq!(small_grid_claim(64, 8), Some(4.0));
        // CUDA_DEVICE_MAX_CONNECTIONS=32: 32 queues.
        assert_eq!(small_grid_claim(64, 32), Some(16.0));
        assert_eq!(small_grid_claim(8, 2), Some(1.3));
    }

    #[test]
    fn full_grid_waves_follow_the_resident_blocks() {
        // H100/H200: 132 SMs x 8 blocks of 256 = 1056 resident, 4096 blocks = 3.9 waves.
        assert!((full_grid_waves(132, 8) - 3.878).abs() < 1e-3);
        assert_eq!(full_grid_waves(512, 8), 1.0);
        assert_eq!(full_grid_waves(0, 0), 4096.0);
    }

    #[test]
    fn sizes_sleeps_and_memory_are_bounded() {
        let w = ASSUMED_FULL_GRID_WAVES;
        assert!(check_sizes(DEFAULT_ELEMENTS, DEFAULT_STREAMS, DEFAULT_SLEEP_US, w).is_ok());
        // 2^62 elements (whose byte count would wrap to 0) are refused, not wrapped.
        let e = check_sizes(1 << 62, 4, DEFAULT_SLEEP_US, w).unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{e}");
        assert!(check_sizes(0, 1, DEFAULT_SLEEP_US, w).is_err());
        assert!(check_sizes(3, 4, DEFAULT_SLEEP_US, w).is_err());
        assert!(check_sizes(100, 65, DEFAULT_SLEEP_US, w).is_err());
        assert!(check_sizes(100, 4, 1.0, w).is_err());
        assert!(check_sizes(100, 4, f64::NAN, w).is_err());
        // 4 streams, 4 waves: 40 sleeps a repeat, so 1.5 s each at most.
        assert_eq!(max_sleep_us(4, 4), 1.5e6);
        assert!(check_sizes(100, 4, 1.5e6, w).is_ok());
        assert!(check_sizes(100, 4, 1e7, w).is_err());
    }

    #[test]
    fn claim_is_asserted_only_with_streams_and_sleeps_to_overlap() {
        let regime = |one: f64, multi: f64| Regime {
            one: Stats::of(&[one]),
            multi: Stats::of(&[multi]),
        };
        let good = Measured {
            full: regime(32.0, 31.0),
            small: regime(8.1, 2.1),
        };
        assert!(check_claim(&good, 4, 2.0, 8).is_ok());
        let no_overlap = Measured {
            full: regime(32.0, 31.0),
            small: regime(8.1, 7.9),
        };
        assert!(check_claim(&no_overlap, 4, 2.0, 8).is_err());
        // 4 sleeps of 0.01 ms in 8 ms: the copies dominate, nothing is claimed.
        let note = check_claim(&no_overlap, 4, 0.01, 8).unwrap();
        assert!(note.starts_with("not asserted"), "{note}");
        let one = check_claim(&no_overlap, 1, 2.0, 8).unwrap();
        assert!(one.starts_with("not asserted"), "{one}");
    }

    #[test]
    fn grids_are_the_tutorials() {
        let full = Grid::Full.config();
        assert_eq!((full.grid, full.block), ((64, 64, 1), (16, 16, 1)));
        let small = Grid::Small.config();
        assert_eq!((small.grid, small.block), ((1, 1, 1), (1, 1, 1)));
    }
}
