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
//! sized in *waves* (SMs x the 256-thread blocks one SM holds at once,
//! `gpu.resident_blocks_per_sm(256)`: 8 on sm_80/sm_90), and events recorded after each kernel
//! give its finish time relative to a start event.
//! The control runs the same pair on two streams of equal priority.
use serde::Serialize;

use crate::demos::{check_common, check_sleep_us, Options};
use crate::error::{ensure, Error, Result};
use crate::gpu::{Gpu, LaunchConfig};
use crate::report::Report;
use crate::stream::{Event, Stream};
use crate::timing::Stats;

pub const SUMMARY: &str =
    "a high-priority kernel launched after a long low-priority one finishes first";
pub const FLAGS: &str =
    "--batches (8: waves of blocks in the low-priority kernel) --sleep-us (500 per block, 100 or more) --reps";

/// Waves of blocks in the long, low-priority kernel.
pub const DEFAULT_WAVES: usize = 8;
/// Waves of blocks in the urgent, high-priority kernel.
pub const HIGH_WAVES: usize = 1;
pub const DEFAULT_SLEEP_US: f64 = 500.0;
/// A wave must last far longer than the few microseconds between the two launches and the
/// time the scheduler takes to hand out a wave of blocks, or the low-priority kernel has
/// already moved on when the urgent one arrives and the order says nothing about priority.
pub const MIN_SLEEP_US: f64 = 100.0;
/// One repeat (both cases) may take at most this long, so a run stays bounded.
pub const MAX_REPEAT_SECONDS: f64 = 60.0;
pub const MAX_WAVES: usize = 1024;
pub const THREADS_PER_BLOCK: u32 = 256;

/// Blocks in `waves` waves on a GPU of `multiprocessors` SMs holding `blocks_per_sm` blocks.
pub fn blocks_for_waves(multiprocessors: i32, blocks_per_sm: u32, waves: usize) -> usize {
    multiprocessors.max(1) as usize * blocks_per_sm.max(1) as usize * waves
}

/// The longest sleep that keeps one repeat under [`MAX_REPEAT_SECONDS`]: each of the two
/// cases keeps the GPU busy for `waves + HIGH_WAVES` waves of one sleep each.
pub fn max_sleep_us(waves: usize) -> f64 {
    let sleeps = 2.0 * (waves + HIGH_WAVES) as f64;
    (MAX_REPEAT_SECONDS * 1e6 / sleeps).floor()
}

/// Checks the waves and the sleep, without a GPU.
pub fn check_sizes(waves: usize, sleep_us: f64) -> Result<()> {
    ensure((1..=MAX_WAVES).contains(&waves), || {
        format!("--batches (waves of the low-priority kernel) must be from 1 to {MAX_WAVES}, not {waves}")
    })?;
    check_sleep_us(
        sleep_us,
        MIN_SLEEP_US,
        max_sleep_us(waves),
        &format!(
            "a wave must outlast a launch, and {} waves a repeat must stay under {MAX_REPEAT_SECONDS} s",
            2 * (waves + HIGH_WAVES)
        ),
    )
}

/// Checks the flags this demo reads, before the GPU is touched.
pub fn check_options(opts: &Options) -> Result<()> {
    check_common(opts)?;
    check_sizes(
        opts.batches.unwrap_or(DEFAULT_WAVES),
        opts.sleep_us.unwrap_or(DEFAULT_SLEEP_US),
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
        let per_sm = gpu.resident_blocks_per_sm(THREADS_PER_BLOCK);
        let low_blocks = blocks_for_waves(sms, per_sm, waves);
        ensure(low_blocks <= i32::MAX as usize, || {
            format!("--batches {waves} makes a grid of {low_blocks} blocks on this GPU, more than one launch takes")
        })?;
        Ok(Priority {
            least,
            greatest,
            cycles: gpu.cycles_for_micros(sleep_us),
            low_blocks,
            high_blocks: blocks_for_waves(sms, per_sm, HIGH_WAVES),
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

/// Why "the high-priority kernel finishes first" cannot be claimed, if it cannot: a device
/// with one priority level, or a low kernel of one wave (all its blocks are running when the
/// urgent kernel arrives, and priority never preempts).
pub fn high_first_not_asserted(range: (i32, i32), waves: usize) -> Option<&'static str> {
    if range.0 == range.1 {
        Some("this device has a single stream priority")
    } else if waves < 2 {
        Some("with one wave every low-priority block is already running when the high-priority kernel arrives, and priority does not preempt")
    } else {
        None
    }
}

/// The high-priority kernel finished first in every repeat, where that can be claimed.
pub fn check_high_first(runs: &[Finish], range: (i32, i32), waves: usize) -> Result<String> {
    if let Some(why) = high_first_not_asserted(range, waves) {
        return Ok(format!("not asserted: {why}"));
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
    let range = (p.least, p.greatest);
    let high_first = check_high_first(&m.prioritized, range, waves);
    let high_first_held = high_first.is_ok();
    let in_order = check_equal_in_order(&m.equal);
    let in_order_held = in_order.is_ok();
    r.check("high-priority kernel finished first", high_first);
    r.check("control: at equal priority the 2nd finished last", in_order);

    r.explain(format!(
        "The long kernel ({} blocks, {waves} waves of {sleep_us} µs) fills every SM; the short one ({} blocks, one wave) is launched right after on a stream of priority {} (greatest) vs {} (least).",
        p.low_blocks, p.high_blocks, p.greatest, p.least
    ));
    let order = if high < low { "before" } else { "after" };
    r.explain(match high_first_not_asserted(range, waves) {
        Some(why) => format!(
            "Not a claim here ({why}): the short kernel is done at {high:.3} ms, {order} the long one at {low:.3} ms.{}",
            if waves < 2 { " Try --batches 2 or more." } else { "" }
        ),
        None if high_first_held => format!(
            "With priorities, the short kernel is done at {high:.3} ms, before the long one at {low:.3} ms: as soon as the first wave's blocks retire, the scheduler hands the free slots to the high-priority kernel's pending blocks before the low-priority ones."
        ),
        None => format!(
            "With priorities the short kernel should be done first, but not in every repeat (median {high:.3} ms, {order} the long one at {low:.3} ms): see the failed check."
        ),
    });
    let equal_order = if second > first { "after" } else { "before" };
    r.explain(if in_order_held {
        format!(
            "At equal priority the short kernel's blocks queue behind all of the long kernel's and it is done last ({second:.3} ms vs {first:.3} ms). Priority reorders pending blocks only: it never preempts a running block."
        )
    } else {
        format!(
            "At equal priority the short kernel finished first in some repeat (median {second:.3} ms, {equal_order} the long one at {first:.3} ms): the blocks were not handed out in launch order here; see the failed check."
        )
    });
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waves_are_the_resident_blocks_of_every_sm() {
        assert_eq!(blocks_for_waves(132, 8, 8), 8448);
        assert_eq!(blocks_for_waves(132, 8, 1), 1056);
        assert_eq!(blocks_for_waves(132, 6, 1), 792);
        assert_eq!(blocks_for_waves(0, 0, 1), 1);
    }

    #[test]
    fn sleeps_outlast_a_launch_and_bound_a_repeat() {
        assert!(check_sizes(DEFAULT_WAVES, DEFAULT_SLEEP_US).is_ok());
        assert!(check_sizes(8, 0.001).is_err());
        assert!(check_sizes(8, MIN_SLEEP_US).is_ok());
        // 1024 waves: 2050 waves a repeat, so at most 29,268 µs each.
        assert_eq!(max_sleep_us(1024), 29268.0);
        assert!(check_sizes(1024, 1e7).is_err());
        assert!(check_sizes(1024, 29268.0).is_ok());
        assert!(check_sizes(0, 500.0).is_err());
        assert!(check_sizes(MAX_WAVES + 1, 500.0).is_err());
        assert!(check_sizes(8, f64::NAN).is_err());
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
