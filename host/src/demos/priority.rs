//! # Stream priorities
//!
//! The concept: a stream can be created with a priority, and when the GPU's block scheduler
//! has free room on an SM it hands out pending blocks of higher-priority kernels before
//! pending blocks of lower-priority ones. Priority does not preempt: blocks already running
//! finish first. So a short, urgent kernel launched *after* a long one that fills the GPU for
//! many waves still finishes first, one wave later, instead of waiting for every wave.
//!
//! The seed technique, from the CUDA C++ Programming Guide's "Stream Priorities":
//!
//! ```text
//! int least, greatest;
//! cudaDeviceGetStreamPriorityRange(&least, &greatest);       // 0 and -5 on an H100
//! cudaStreamCreateWithPriority(&low,  cudaStreamDefault, least);
//! cudaStreamCreateWithPriority(&high, cudaStreamDefault, greatest);
//! long_kernel<<<many_waves, 256, 0, low>>>(...);
//! urgent_kernel<<<one_wave, 256, 0, high>>>(...);            // finishes first
//! ```
//!
//! In streamlab: `gpu.info.priority_range` is `(least, greatest)`, `Stream::with_priority`
//! is `cudaStreamCreateWithPriority`, both kernels are `gpu.sleep` grids of 256-thread blocks
//! sized in *waves* (SMs x 8 blocks, the 2,048 resident threads of an sm_80/sm_90 SM), and
//! events recorded after each kernel give its finish time relative to a start event.
//! The control runs the same pair on two streams of equal priority.
use serde::Serialize;

use crate::demos::Options;
use crate::error::{ensure, Error, Result};
use crate::gpu::{Gpu, LaunchConfig};
use crate::report::Report;
use crate::stream::{Event, Stream};
use crate::timing::Stats;

pub const SUMMARY: &str =
    "a high-priority kernel launched after a long low-priority one finishes first";
pub const FLAGS: &str =
    "--batches (8: waves of blocks in the low-priority kernel) --sleep-us (500: per block) --reps";

/// Waves of blocks in the long, low-priority kernel.
pub const DEFAULT_WAVES: usize = 8;
/// Waves of blocks in the urgent, high-priority kernel.
pub const HIGH_WAVES: usize = 1;
pub const DEFAULT_SLEEP_US: f64 = 500.0;
pub const MAX_WAVES: usize = 1024;
pub const THREADS_PER_BLOCK: u32 = 256;
/// 2,048 resident threads per SM (sm_80, sm_90) over 256-thread blocks.
pub const BLOCKS_PER_SM: usize = 8;

/// Blocks in `waves` waves on a GPU of `multiprocessors` SMs.
pub fn blocks_for_waves(multiprocessors: i32, waves: usize) -> usize {
    multiprocessors.max(1) as usize * BLOCKS_PER_SM * waves
}

pub fn check_sizes(waves: usize, sleep_us: f64) -> Result<()> {
    ensure((1..=MAX_WAVES).contains(&waves), || {
        format!("--batches (waves of the low-priority kernel) must be from 1 to {MAX_WAVES}, not {waves}")
    })?;
    ensure(
        sleep_us.is_finite() && sleep_us > 0.0 && sleep_us <= 1e7,
        || format!("--sleep-us must be more than 0 and at most 10000000, not {sleep_us}"),
    )
}

/// When each kernel finished, in ms after a start event recorded just before the first.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Finish {
    /// The long kernel, launched first.
    pub first_ms: f64,
    /// The short kernel, launched right after.
    pub second_ms: f64,
}

impl Finish {
    pub fn second_finished_first(&self) -> bool {
        self.second_ms < self.first_ms
    }
}

pub struct Priority {
    pub least: i32,
    pub greatest: i32,
    pub cycles: u64,
    pub low_blocks: usize,
    pub high_blocks: usize,
    low: Stream,
    high: Stream,
    equal_first: Stream,
    equal_second: Stream,
    start: Event,
    first_done: Event,
    second_done: Event,
}

impl Priority {
    pub fn new(gpu: &Gpu, waves: usize, sleep_us: f64) -> Result<Priority> {
        check_sizes(waves, sleep_us)?;
        let (least, greatest) = gpu.info.priority_range;
        let sms = gpu.info.multiprocessors;
        Ok(Priority {
            least,
            greatest,
            cycles: gpu.cycles_for_micros(sleep_us),
            low_blocks: blocks_for_waves(sms, waves),
            high_blocks: blocks_for_waves(sms, HIGH_WAVES),
            low: Stream::with_priority("low priority", least)?,
            high: Stream::with_priority("high priority", greatest)?,
            equal_first: Stream::with_priority("equal priority 1", least)?,
            equal_second: Stream::with_priority("equal priority 2", least)?,
            start: Event::new()?,
            first_done: Event::new()?,
            second_done: Event::new()?,
        })
    }

    fn config(blocks: usize) -> LaunchConfig {
        LaunchConfig::new((blocks as u32, 1, 1), (THREADS_PER_BLOCK, 1, 1))
    }

    /// The long kernel on one stream, then the short one on another; `prioritized` picks
    /// the low/high pair, otherwise two streams of equal priority.
    pub fn run_case(&mut self, gpu: &Gpu, prioritized: bool) -> Result<Finish> {
        let (first, second) = if prioritized {
            (&self.low, &self.high)
        } else {
            (&self.equal_first, &self.equal_second)
        };
        self.start.record(first)?;
        gpu.sleep(first, Self::config(self.low_blocks), self.cycles)?;
        self.first_done.record(first)?;
        gpu.sleep(second, Self::config(self.high_blocks), self.cycles)?;
        self.second_done.record(second)?;
        self.first_done.synchronize()?;
        self.second_done.synchronize()?;
        Ok(Finish {
            first_ms: self.first_done.elapsed_ms(&self.start)?,
            second_ms: self.second_done.elapsed_ms(&self.start)?,
        })
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub prioritized: Vec<Finish>,
    pub equal: Vec<Finish>,
}

fn median(runs: &[Finish], f: fn(&Finish) -> f64) -> f64 {
    Stats::of(&runs.iter().map(f).collect::<Vec<_>>()).median
}

pub fn measure(gpu: &Gpu, p: &mut Priority, reps: usize) -> Result<Measured> {
    p.run_case(gpu, true)?;
    p.run_case(gpu, false)?;
    let mut m = Measured {
        prioritized: Vec::new(),
        equal: Vec::new(),
    };
    for _ in 0..reps.max(1) {
        m.prioritized.push(p.run_case(gpu, true)?);
        m.equal.push(p.run_case(gpu, false)?);
    }
    Ok(m)
}

/// The high-priority kernel finished first in every repeat. Not asserted where it cannot
/// hold: a device with one priority level, or a low kernel of one wave (all its blocks are
/// running when the urgent kernel arrives, and priority never preempts).
pub fn check_high_first(runs: &[Finish], range: (i32, i32), waves: usize) -> Result<String> {
    if range.0 == range.1 {
        return Ok("not asserted: this device has a single stream priority".into());
    }
    if waves < 2 {
        return Ok("not asserted: with one wave every low-priority block is already running when the high-priority kernel arrives, and priority does not preempt".into());
    }
    match runs.iter().position(|f| !f.second_finished_first()) {
        None => Ok(format!(
            "in all {} repeats the high-priority kernel finished first",
            runs.len()
        )),
        Some(i) => Err(Error::Verification(format!(
            "repeat {i}: the high-priority kernel finished at {:.3} ms, after the low-priority one at {:.3} ms",
            runs[i].second_ms, runs[i].first_ms
        ))),
    }
}

/// The control: at equal priority the kernel launched second finished last in every repeat.
pub fn check_equal_in_order(runs: &[Finish]) -> Result<String> {
    match runs.iter().position(Finish::second_finished_first) {
        None => Ok(format!(
            "in all {} repeats the second kernel finished after the first",
            runs.len()
        )),
        Some(i) => Err(Error::Verification(format!(
            "repeat {i}: at equal priority the second kernel finished at {:.3} ms, before the first at {:.3} ms",
            runs[i].second_ms, runs[i].first_ms
        ))),
    }
}

/// Checks the flags this demo reads, before the GPU is touched.
pub fn check_options(opts: &Options) -> Result<()> {
    super::check_common(opts)
}

pub fn run(gpu: &Gpu, opts: &Options) -> Result<Report> {
    let waves = opts.batches.unwrap_or(DEFAULT_WAVES);
    let sleep_us = opts.sleep_us.unwrap_or(DEFAULT_SLEEP_US);
    let mut p = Priority::new(gpu, waves, sleep_us)?;
    let m = measure(gpu, &mut p, opts.reps)?;

    let mut r = Report::new("priority", "stream priorities", &gpu.info.name);
    r.param("waves", waves)
        .param("low_priority_blocks", p.low_blocks)
        .param("high_priority_blocks", p.high_blocks)
        .param("sleep_us", sleep_us)
        .param("least_priority", p.least)
        .param("greatest_priority", p.greatest)
        .param("reps", opts.reps);
    let (low, high) = (
        median(&m.prioritized, |f| f.first_ms),
        median(&m.prioritized, |f| f.second_ms),
    );
    let (first, second) = (
        median(&m.equal, |f| f.first_ms),
        median(&m.equal, |f| f.second_ms),
    );
    r.figure("prioritized: long low-priority kernel done at", low, "ms")
        .figure(
            "prioritized: short high-priority kernel done at",
            high,
            "ms",
        )
        .figure("equal priority: long kernel (1st) done at", first, "ms")
        .figure("equal priority: short kernel (2nd) done at", second, "ms");
    r.detail("finish_ms", &m);
    r.check(
        "high-priority kernel finished first",
        check_high_first(&m.prioritized, (p.least, p.greatest), waves),
    );
    r.check(
        "control: at equal priority the 2nd finished last",
        check_equal_in_order(&m.equal),
    );
    r.explain(format!(
        "The long kernel ({} blocks, {waves} waves of {sleep_us} µs) fills every SM; the short one ({} blocks) is launched right after on a stream of priority {} (greatest) vs {} (least).",
        p.low_blocks, p.high_blocks, p.greatest, p.least
    ));
    r.explain(format!(
        "With priorities, the short kernel is done at {high:.3} ms, the long one at {low:.3} ms: as soon as the first wave's blocks retire, the scheduler hands the free slots to the high-priority kernel's pending blocks before the low-priority ones."
    ));
    r.explain(format!(
        "At equal priority the short kernel's blocks queue behind all of the long kernel's and it is done last ({second:.3} ms vs {first:.3} ms). Priority reorders pending blocks only: it never preempts a running block."
    ));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waves_are_eight_blocks_per_sm() {
        assert_eq!(blocks_for_waves(132, 8), 8448);
        assert_eq!(blocks_for_waves(132, 1), 1056);
        assert_eq!(blocks_for_waves(0, 1), 8);
    }

    #[test]
    fn checks_follow_finish_order() {
        let high_first = Finish {
            first_ms: 4.5,
            second_ms: 1.0,
        };
        let in_order = Finish {
            first_ms: 4.0,
            second_ms: 4.5,
        };
        assert!(check_high_first(&[high_first], (0, -5), 8).is_ok());
        assert!(check_high_first(&[high_first, in_order], (0, -5), 8).is_err());
        assert!(check_high_first(&[in_order], (0, 0), 8)
            .unwrap()
            .starts_with("not asserted"));
        assert!(check_high_first(&[in_order], (0, -5), 1)
            .unwrap()
            .starts_with("not asserted"));
        assert!(check_equal_in_order(&[in_order]).is_ok());
        assert!(check_equal_in_order(&[high_first]).is_err());
    }
}
