//! # Stream priorities
//!
//! When an SM has room, the block scheduler hands out pending blocks of higher-priority
//! streams' kernels before those of lower-priority ones; it never preempts a running block.
//! So a short, urgent kernel launched just after a long one that fills the GPU for many waves
//! is done one wave later, instead of after every wave.
//!
//! The seed technique is "Stream Priorities" in NVIDIA's CUDA C++ Programming Guide:
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
//! In Rust: `gpu.info.priority_range` is `(least, greatest)`, `Stream::with_priority(&gpu,
//! name, p)` is `cudaStreamCreateWithPriority`, both kernels are `gpu.sleep` grids of
//! 1024-thread blocks sized in waves (SMs x the blocks one SM holds at once), and an event
//! after each kernel gives its finish time after a start event. Why 1024 threads: recording
//! with CUPTI (`--timeline`, `--trace`, `--svg`) makes every wave of smaller blocks about
//! 47 µs longer on an H200 (`benches/recorder_cost.rs waves`), and the picture would show it.
//! The version without priorities runs the same pair on two streams of equal priority.
//!
//! The bound: with priorities the urgent kernel is done after about 2 waves (the one running
//! when it arrives, then its own); without, after all `--waves` + 1.
use serde::Serialize;

use crate::lab::harness::lesson::no_such_version;
use crate::lab::kit::sleep::{serial_ms, OUTLASTS_A_LAUNCH_US};
use crate::lab::{
    args, fixed, t, Checks, Drawing, Lesson, Measured, Plan, Report, Sample, Text, WorkModel,
};
use crate::runtime::{DeviceInfo, Error, Event, Gpu, LaunchConfig, Result, Stream};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Waves of blocks in the long, low-priority kernel [1..=1024]. Try 1: every block is
    /// already running when the urgent kernel arrives, and priority cannot preempt them.
    #[arg(long, visible_alias = "batches", default_value_t = 8, value_parser = args::whole(1usize..=MAX_WAVES))]
    pub waves: usize,
    /// Sleep of every block, µs [100..=10000000]: a wave must outlast the launches. Try 100.
    #[arg(long, default_value_t = 500.0, value_parser = args::number(OUTLASTS_A_LAUNCH_US..=1e7))]
    pub sleep_us: f64,
}

/// The most waves `--waves` takes.
pub const MAX_WAVES: usize = 1024;
/// Waves of blocks in the urgent, high-priority kernel.
pub const HIGH_WAVES: usize = 1;
/// Threads per block: large, so that recording the run does not slow it (module doc).
pub const THREADS_PER_BLOCK: u32 = 1024;

/// Blocks of [`THREADS_PER_BLOCK`] the whole GPU holds at once, from the model's count of
/// 256-thread blocks (before the GPU is touched).
fn wave_of(model: &WorkModel) -> usize {
    (model.blocks_per_wave * 256 / THREADS_PER_BLOCK as usize).max(1)
}

/// Blocks of [`THREADS_PER_BLOCK`] this GPU holds at once: SMs x the blocks one SM holds.
fn wave_on(info: &DeviceInfo) -> usize {
    info.multiprocessors.max(1) as usize * info.resident_blocks_per_sm(THREADS_PER_BLOCK) as usize
}
/// The parts of a sample: when the long kernel was done, and the short one's finish minus
/// the long one's (negative: the short one finished first).
pub const LONG_DONE: &str = "long kernel done at, ms";
pub const SHORT_MINUS_LONG: &str = "short - long finish, ms";

/// What the explanation needs of the run: the flags and this GPU's facts.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Shape {
    pub waves: usize,
    pub sleep_us: f64,
    /// (least, greatest) stream priority.
    pub range: (i32, i32),
    pub low_blocks: usize,
    pub high_blocks: usize,
}

pub struct Priority {
    shape: Shape,
    cycles: u64,
    low: Stream,
    high: Stream,
    equal_first: Stream,
    equal_second: Stream,
    start: Event,
    first_done: Event,
    second_done: Event,
}

/// The versions, by their index in [`Lesson::versions`].
pub const EQUAL: usize = 0;
pub const HIGH: usize = 1;

impl Priority {
    /// The long kernel on `first`, then the short one on `second`; the time is when the
    /// short one was done.
    fn pair(&self, gpu: &Gpu, first: &Stream, second: &Stream) -> Result<Sample> {
        let grid =
            |blocks: usize| LaunchConfig::new((blocks as u32, 1, 1), (THREADS_PER_BLOCK, 1, 1));
        self.start.record(first)?;
        gpu.sleep(first, grid(self.shape.low_blocks), self.cycles)?;
        self.first_done.record(first)?;
        gpu.sleep(second, grid(self.shape.high_blocks), self.cycles)?;
        self.second_done.record(second)?;
        self.first_done.synchronize()?;
        self.second_done.synchronize()?;
        let long = self.first_done.elapsed_ms(&self.start)?;
        let short = self.second_done.elapsed_ms(&self.start)?;
        Ok(Sample::ms(short).part(LONG_DONE, long).part(SHORT_MINUS_LONG, short - long))
    }

    /// The long kernel, then the short one, on two streams of the least priority.
    fn equal_priority(&mut self, gpu: &Gpu) -> Result<Sample> {
        self.pair(gpu, &self.equal_first, &self.equal_second)
    }

    /// The long kernel on the least priority, then the short one on the greatest.
    fn high_priority(&mut self, gpu: &Gpu) -> Result<Sample> {
        self.pair(gpu, &self.low, &self.high)
    }
}

impl Lesson for Priority {
    const NAME: &'static str = "priority";
    const SUMMARY: &'static str =
        "a high-priority kernel launched after a long low-priority one finishes first";
    const DRAWING: Drawing = Drawing {
        rows: &[
            ("equal priority 1", "long kernel"),
            ("equal priority 2", "short kernel"),
            ("low priority", "long kernel, low priority"),
            ("high priority", "short kernel, high priority"),
        ],
        measure: Some((
            "short kernel done at",
            &[
                ("equal priority: short kernel done at", "equal priority"),
                ("high priority: short kernel done at", "high priority"),
            ],
        )),
        ..Drawing::PLAIN
    };
    type Args = Args;

    fn versions(_: &Args) -> Vec<String> {
        vec![
            "equal priority: short kernel done at".into(),
            "high priority: short kernel done at".into(),
        ]
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        let blocks = wave_of(model).saturating_mul(a.waves);
        if blocks > i32::MAX as usize {
            let waves = a.waves;
            return Err(Error::InvalidInput(t!("error.priority.grid_too_large", waves, blocks)));
        }
        // Each version keeps the GPU busy for `waves + HIGH_WAVES` waves of one sleep each.
        let sleeps = 2.0 * (a.waves + HIGH_WAVES) as f64;
        Ok(Plan::new().work(serial_ms(sleeps, a.sleep_us), "--waves x --sleep-us"))
    }

    fn setup(gpu: &Gpu, a: &Args, _seed: u64) -> Result<Priority> {
        let (least, greatest) = gpu.info.priority_range;
        let wave = wave_on(&gpu.info);
        let stream = |name: &str, p| Stream::with_priority(gpu, name, p);
        Ok(Priority {
            shape: Shape {
                waves: a.waves,
                sleep_us: a.sleep_us,
                range: (least, greatest),
                low_blocks: wave * a.waves,
                high_blocks: wave * HIGH_WAVES,
            },
            cycles: gpu.info.cycles_for_micros(a.sleep_us),
            low: stream("low priority", least)?,
            high: stream("high priority", greatest)?,
            equal_first: stream("equal priority 1", least)?,
            equal_second: stream("equal priority 2", least)?,
            start: Event::new(gpu)?,
            first_done: Event::new(gpu)?,
            second_done: Event::new(gpu)?,
        })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        match v {
            EQUAL => self.equal_priority(gpu),
            HIGH => self.high_priority(gpu),
            _ => no_such_version::<Self>(v),
        }
    }

    fn streams(&self) -> Vec<&Stream> {
        vec![&self.equal_first, &self.equal_second, &self.low, &self.high]
    }

    fn verify(&mut self, _gpu: &Gpu, m: &Measured, checks: &mut Checks) -> Result<()> {
        checks.concurrency("high-priority kernel finished first", self.shape.check_high_first(m));
        checks.record("control: at equal priority the 2nd finished last", check_equal_in_order(m));
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        self.shape.interpret(m, r);
    }
}

/// The control: at equal priority the kernel launched second finished last in every repeat.
pub fn check_equal_in_order(m: &Measured) -> Result<Text> {
    let v = m.without();
    match v.part_stats(SHORT_MINUS_LONG).map(|s| s.min) {
        Some(d) if d >= 0.0 => Ok(t!("priority.equal_in_order", n = v.time.count)),
        _ => {
            let (second, first) = (fixed(v.time.median, 3), fixed(v.part(LONG_DONE), 3));
            Err(Error::Verification(t!("error.priority.equal_out_of_order", second, first)))
        }
    }
}

impl Shape {
    /// Why "the high-priority kernel finishes first" cannot be claimed, if it cannot: a
    /// device with one priority level, or a long kernel of one wave (all its blocks are
    /// running when the urgent kernel arrives, and priority never preempts).
    pub fn not_asserted(&self) -> Option<Text> {
        if self.range.0 == self.range.1 {
            Some(t!("priority.single_priority"))
        } else if self.waves < 2 {
            Some(t!("priority.one_wave"))
        } else {
            None
        }
    }

    /// The high-priority kernel finished first in every repeat, where that can be claimed.
    pub fn check_high_first(&self, m: &Measured) -> Result<Text> {
        if let Some(why) = self.not_asserted() {
            return Ok(t!("check.not_asserted", why));
        }
        let v = m.with();
        match v.part_stats(SHORT_MINUS_LONG).map(|s| s.max) {
            Some(d) if d < 0.0 => Ok(t!("priority.high_first", n = v.time.count)),
            _ => {
                let (high, low) = (fixed(v.time.median, 3), fixed(v.part(LONG_DONE), 3));
                Err(Error::Verification(t!("error.priority.high_not_first", high, low)))
            }
        }
    }

    /// The figures and what they mean.
    pub fn interpret(&self, m: &Measured, r: &mut Report) {
        let (least, greatest) = self.range;
        let waves = self.waves;
        r.param("low_priority_blocks", self.low_blocks)
            .param("high_priority_blocks", self.high_blocks)
            .param("least_priority", least)
            .param("greatest_priority", greatest);
        let low_ms = m.with().part(LONG_DONE);
        let high_ms = m.with().time.median;
        let first_ms = m.without().part(LONG_DONE);
        let second_ms = m.without().time.median;
        r.figure("prioritized: long low-priority kernel done at", low_ms, "ms")
            .figure("prioritized: short high-priority kernel done at", high_ms, "ms")
            .figure("equal priority: long kernel (1st) done at", first_ms, "ms")
            .figure("equal priority: short kernel (2nd) done at", second_ms, "ms");
        let (low_blocks, high_blocks, sleep) = (self.low_blocks, self.high_blocks, self.sleep_us);
        let sleep = sleep.to_string();
        r.explain(t!("priority.setup", low_blocks, waves, sleep, high_blocks, greatest, least));
        let order = if high_ms < low_ms { t!("priority.before") } else { t!("priority.after") };
        let equal_order =
            if second_ms > first_ms { t!("priority.after") } else { t!("priority.before") };
        let high = fixed(high_ms, 3);
        let low = fixed(low_ms, 3);
        let first = fixed(first_ms, 3);
        let second = fixed(second_ms, 3);
        r.explain(match self.not_asserted() {
            Some(why) => {
                let hint = if waves < 2 { t!("priority.try_waves") } else { "".to_string().into() };
                t!("priority.no_claim", why, high, order, low, hint)
            }
            None if self.check_high_first(m).is_ok() => t!("priority.high_done_first", high, low),
            None => t!("priority.not_every_repeat", high, order, low),
        });
        r.explain(if check_equal_in_order(m).is_ok() {
            t!("priority.equal_last", second, first)
        } else {
            t!("priority.equal_first", second, equal_order, first)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

    fn shape(waves: usize, range: (i32, i32)) -> Shape {
        Shape {
            waves,
            sleep_us: 500.0,
            range,
            low_blocks: wave_of(&WorkModel::H100) * waves,
            high_blocks: wave_of(&WorkModel::H100),
        }
    }

    /// (long done, short done) of each repeat, equal priority then prioritized.
    fn measured(equal: &[(f64, f64)], prioritized: &[(f64, f64)]) -> Measured {
        let runs = |r: &[(f64, f64)]| {
            r.iter()
                .map(|&(long, short)| {
                    Sample::ms(short).part(LONG_DONE, long).part(SHORT_MINUS_LONG, short - long)
                })
                .collect()
        };
        Measured::from_samples(
            Priority::versions(&args_from::<Priority>(&[]).unwrap()),
            vec![runs(equal), runs(prioritized)],
        )
    }

    const IN_ORDER: (f64, f64) = (4.0, 4.5);
    const HIGH_FIRST: (f64, f64) = (4.5, 1.0);

    /// A device's facts: `sms` SMs of `threads` resident threads each.
    fn device(sms: i32, threads: i32) -> crate::runtime::DeviceInfo {
        crate::runtime::DeviceInfo {
            ordinal: 0,
            name: "test".into(),
            compute_capability: (9, 0),
            multiprocessors: sms,
            max_threads_per_multiprocessor: threads,
            total_memory_bytes: 0,
            free_memory_bytes: 0,
            clock_khz: 1_980_000,
            memory_clock_khz: 0,
            memory_bus_width_bits: 0,
            l2_cache_bytes: 0,
            concurrent_kernels: true,
            async_engine_count: 2,
            device_overlap: true,
            priority_range: (0, -5),
            driver_version: 0,
            ptx_arch: "sm_90".into(),
            ptx_choice: String::new(),
        }
    }

    #[test]
    fn waves_are_the_resident_blocks_of_every_sm() {
        // Judged before the GPU: an H100's 132 SMs x 2 blocks of 1024 threads.
        assert_eq!(wave_of(&WorkModel::H100), 264);
        // On the GPU, from its facts: an sm_89 part's SM holds 1536 threads, one such block.
        assert_eq!(wave_on(&device(132, 2048)), 264);
        assert_eq!(wave_on(&device(58, 1536)), 58);
    }

    // What the flag checks refuse is tested in tests/priority.rs.

    #[test]
    fn checks_follow_finish_order() {
        let s = shape(8, (0, -5));
        assert!(s.check_high_first(&measured(&[IN_ORDER], &[HIGH_FIRST])).is_ok());
        assert!(s.check_high_first(&measured(&[IN_ORDER], &[HIGH_FIRST, IN_ORDER])).is_err());
        let single = shape(8, (0, 0)).check_high_first(&measured(&[IN_ORDER], &[IN_ORDER]));
        assert!(single.unwrap().en().starts_with("not asserted"));
        let one_wave = shape(1, (0, -5)).check_high_first(&measured(&[IN_ORDER], &[IN_ORDER]));
        assert!(one_wave.unwrap().en().starts_with("not asserted"));
        assert!(check_equal_in_order(&measured(&[IN_ORDER], &[HIGH_FIRST])).is_ok());
        assert!(check_equal_in_order(&measured(&[IN_ORDER, HIGH_FIRST], &[HIGH_FIRST])).is_err());
    }

    fn told(s: &Shape, m: &Measured) -> String {
        let mut r = Report::new("priority", "", "");
        s.interpret(m, &mut r);
        r.interpretation.join("\n")
    }

    #[test]
    fn interpretation_follows_the_data() {
        let good = told(&shape(8, (0, -5)), &measured(&[IN_ORDER], &[HIGH_FIRST]));
        assert!(good.contains("hands the free slots") && good.contains("never preempts"), "{good}");
        let bad = told(&shape(8, (0, -5)), &measured(&[HIGH_FIRST], &[IN_ORDER]));
        assert!(
            bad.contains("but not in every repeat")
                && bad.contains("finished first in some repeat"),
            "{bad}"
        );
        let one = told(&shape(1, (0, -5)), &measured(&[IN_ORDER], &[IN_ORDER]));
        assert!(one.contains("Not a claim here") && one.contains("Try --waves 2"), "{one}");
        assert!(!one.contains("hands the free slots"), "{one}");
        let single = told(&shape(8, (0, 0)), &measured(&[IN_ORDER], &[IN_ORDER]));
        assert!(
            single.contains("single stream priority") && !single.contains("Try --waves"),
            "{single}"
        );
    }
}
