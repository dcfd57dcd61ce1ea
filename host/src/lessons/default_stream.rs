//! # The legacy default stream
//!
//! Work issued without a stream goes to the legacy default stream (stream `0`), which waits
//! for all earlier work on every *blocking* stream and is waited on by all later work there:
//! one forgotten stream argument can serialize a multi-stream program. A stream created with
//! `cudaStreamNonBlocking` is exempt and runs beside it.
//!
//! The seed technique is the default-stream experiment of stream tutorials:
//!
//! ```text
//! cudaStream_t blocking, non_blocking;
//! cudaStreamCreate(&blocking);                                        // cudaStreamDefault
//! cudaStreamCreateWithFlags(&non_blocking, cudaStreamNonBlocking);
//! sleep_kernel<<<1, 1>>>(cycles);                  // legacy default stream
//! sleep_kernel<<<1, 1, 0, blocking>>>(cycles);     // waits: total = sum
//! sleep_kernel<<<1, 1>>>(cycles);
//! sleep_kernel<<<1, 1, 0, non_blocking>>>(cycles); // runs beside it: total = max
//! ```
//!
//! In Rust: `Stream::legacy_default(&gpu)` is stream `0`, `Stream::new` is `cudaStreamCreate`
//! (blocking), `Stream::non_blocking` is `cudaStreamCreateWithFlags(cudaStreamNonBlocking)`,
//! and `gpu.sleep_stamped` is a one-thread sleep kernel that writes its own start and end time
//! (`%globaltimer`), so the GPU itself says whether the second kernel started before the first
//! ended.
//!
//! The other way out is the per-thread default stream. Two host threads that launch without
//! naming a stream share the one legacy default stream, so their kernels take turns; built
//! with `nvcc --default-stream per-thread`, stream `0` means each thread's own default stream
//! (`cudaStreamPerThread`, `CU_STREAM_PER_THREAD`), and they run side by side:
//!
//! ```text
//! auto work = [] { sleep_kernel<<<1, 1>>>(cycles); cudaStreamSynchronize(0); };
//! std::thread a(work), b(work);   // legacy: one after the other; per-thread: together
//! ```
//!
//! In Rust: two `Worker`s (host threads, each with the context current), each launching on
//! `Stream::legacy(gpu)` (`cudaStreamLegacy`) or `Stream::per_thread_default(gpu)`.
//!
//! The bound: with the blocking stream the pair takes the sum of two sleeps; with the
//! non-blocking stream the larger one, so the ratio approaches 2. The same holds for the two
//! threads: legacy default stream against their per-thread default streams.
use std::sync::{Arc, Barrier};

use serde::Serialize;

use crate::lab::harness::lesson::no_such_version;
use crate::lab::harness::VersionStats;
use crate::lab::kit::sleep::{gap_us, serial_ms, span_ms, Stamp, Stamps, OUTLASTS_A_LAUNCH_US};
use crate::lab::{args, fixed, t, Checks, Lesson, Measured, Plan, Report, Sample, Text, WorkModel};
use crate::runtime::{AsContext, Error, Gpu, Result, Stream, Worker};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Sleep of each kernel, µs [100..=5000000]: far longer than a launch, so overlap or
    /// its absence is plain. Try 100, the shortest that still tells them apart.
    #[arg(long, default_value_t = 5000.0, value_parser = args::number(OUTLASTS_A_LAUNCH_US..=MAX_SLEEP_US))]
    pub sleep_us: f64,
}

/// Sleeps in one repeat in the worst case: all four pairs serialized.
pub const SLEEPS_PER_REPEAT: f64 = 8.0;
/// The longest sleep: eight of them stay within a repeat's time cap.
pub const MAX_SLEEP_US: f64 = 5e6;
/// Host threads of versions 2 and 3, each launching one kernel.
pub const THREADS: usize = 2;
/// The parts of a sample: the second kernel's start minus the first one's end, and the
/// first kernel's own duration.
pub const GAP_US: &str = "2nd start - 1st end, µs";
pub const KERNEL_MS: &str = "one kernel, ms";

pub struct DefaultStream {
    cycles: u64,
    legacy: Stream,
    blocking: Stream,
    non_blocking: Stream,
    stamps: Stamps,
    /// Two host threads, each with its own stamps.
    threads: Vec<Worker<Stamps>>,
}

impl DefaultStream {
    /// A stamped sleep on the legacy default stream, then one on `second`: from the first
    /// start to the last end, by the GPU's own stamps.
    fn pair(&self, gpu: &Gpu, second: &Stream) -> Result<Sample> {
        self.stamps.clear(gpu)?;
        gpu.sleep_stamped(&self.legacy, self.cycles, self.stamps.slot(0)?)?;
        gpu.sleep_stamped(second, self.cycles, self.stamps.slot(1)?)?;
        let s = self.stamps.read(gpu)?;
        Ok(Sample::ms(span_ms(&s))
            .part(GAP_US, gap_us(s[0], s[1]))
            .part(KERNEL_MS, (s[0][1] - s[0][0]) as f64 / 1e6))
    }

    /// Each host thread launches a stamped sleep on its default stream (`per_thread`:
    /// `CU_STREAM_PER_THREAD`, else `CU_STREAM_LEGACY`) at the same moment (a barrier), and
    /// waits for it. From the first start to the last end, by the GPU's own stamps.
    fn two_threads(&self, per_thread: bool) -> Result<Sample> {
        let (cycles, barrier) = (self.cycles, Arc::new(Barrier::new(self.threads.len())));
        let launch = |w: &Worker<Stamps>| {
            let barrier = Arc::clone(&barrier);
            w.run(move |gpu, stamps| -> Result<Stamp> {
                let s =
                    if per_thread { Stream::per_thread_default(gpu) } else { Stream::legacy(gpu) };
                let cleared = stamps.clear(gpu);
                barrier.wait(); // every thread gets here, so none waits forever
                cleared?;
                gpu.sleep_stamped(&s, cycles, stamps.slot(0)?)?;
                s.synchronize()?;
                Ok(stamps.read(gpu)?[0])
            })
        };
        let replies = self.threads.iter().map(launch).collect::<Result<Vec<_>>>()?;
        let mut s = replies.into_iter().map(|r| r.wait()?).collect::<Result<Vec<Stamp>>>()?;
        s.sort_unstable(); // by start: which thread's kernel ran first is not fixed
        Ok(Sample::ms(span_ms(&s))
            .part(GAP_US, gap_us(s[0], s[1]))
            .part(KERNEL_MS, (s[0][1] - s[0][0]) as f64 / 1e6))
    }
}

/// In every repeat of `v` the later kernel started after the earlier one ended (`waited`),
/// or before it ended: how many repeats, or which did not.
fn every_repeat(v: &VersionStats, waited: bool, what: Text) -> Result<usize> {
    let gaps = v.part_stats(GAP_US);
    let gap = gaps.map_or(f64::NAN, |s| if waited { s.min } else { s.max });
    if (waited && gap >= 0.0) || (!waited && gap < 0.0) {
        Ok(v.time.count)
    } else if waited {
        let us = fixed(-gap, 1);
        Err(Error::Verification(t!("error.default_stream.later_started_early", what, us)))
    } else {
        let us = fixed(gap, 1);
        Err(Error::Verification(t!("error.default_stream.later_waited", what, us)))
    }
}

/// Two host threads on the legacy default stream: their kernels never overlapped.
pub fn check_threads_took_turns(m: &Measured) -> Result<Text> {
    let what = t!("error.default_stream.one_after_the_other");
    every_repeat(m.version(TWO_THREADS_LEGACY), true, what)
        .map(|n| t!("default_stream.threads_took_turns", n))
}

/// Two host threads, each on its per-thread default stream: their kernels always overlapped.
pub fn check_threads_overlapped(m: &Measured) -> Result<Text> {
    let what = t!("error.default_stream.one_before_the_other");
    every_repeat(m.version(TWO_THREADS_PER_THREAD), false, what)
        .map(|n| t!("default_stream.threads_overlapped", n))
}

/// The blocking pair never overlapped: in every repeat the second kernel started after the
/// first ended (the smallest gap is not negative).
pub fn check_blocking_waited(m: &Measured) -> Result<Text> {
    let gap = m.without().part_stats(GAP_US).map_or(f64::NAN, |s| s.min);
    if gap >= 0.0 {
        Ok(t!("default_stream.waited", n = m.without().time.count))
    } else {
        let us = fixed(-gap, 1);
        Err(Error::Verification(t!("error.default_stream.kernel_started_early", us)))
    }
}

/// The non-blocking pair always overlapped: in every repeat the second kernel started
/// before the first ended (the largest gap is negative).
pub fn check_non_blocking_overlapped(m: &Measured) -> Result<Text> {
    let gap = m.with().part_stats(GAP_US).map_or(f64::NAN, |s| s.max);
    if gap < 0.0 {
        Ok(t!("default_stream.overlapped", n = m.with().time.count))
    } else {
        let us = fixed(gap, 1);
        Err(Error::Verification(t!("error.default_stream.kernel_waited", us)))
    }
}

/// The legacy default stream, then a blocking stream: the second waits for the first.
pub const BLOCKING: usize = 0;
/// The legacy default stream, then a non-blocking stream: they run side by side.
pub const NON_BLOCKING: usize = 1;
/// Two host threads on the legacy default stream.
pub const TWO_THREADS_LEGACY: usize = 2;
/// Two host threads, each on its per-thread default stream.
pub const TWO_THREADS_PER_THREAD: usize = 3;

impl Lesson for DefaultStream {
    const NAME: &'static str = "default-stream";
    const SUMMARY: &'static str =
        "the legacy default stream serializes blocking streams; a non-blocking stream, or each host thread's per-thread default stream, overlaps";
    type Args = Args;

    fn versions(_: &Args) -> Vec<String> {
        let versions = [
            "legacy + blocking stream",
            "legacy + non-blocking stream",
            "2 host threads, legacy default stream",
            "2 host threads, per-thread default streams",
        ];
        versions.iter().map(|v| v.to_string()).collect()
    }

    fn plan(a: &Args, _: &WorkModel) -> Result<Plan> {
        Ok(Plan::new().work(serial_ms(SLEEPS_PER_REPEAT, a.sleep_us), "--sleep-us"))
    }

    fn setup(gpu: &Gpu, a: &Args, _seed: u64) -> Result<DefaultStream> {
        Ok(DefaultStream {
            cycles: gpu.info.cycles_for_micros(a.sleep_us),
            legacy: Stream::legacy_default(gpu),
            blocking: Stream::new(gpu, "blocking")?,
            non_blocking: Stream::non_blocking(gpu, "non-blocking")?,
            stamps: Stamps::new(gpu, 2)?,
            threads: (0..THREADS)
                .map(|i| {
                    let name = format!("default-stream thread {i}");
                    Worker::spawn(&name, gpu.context().ordinal(), |gpu| Stamps::new(gpu, 1))
                })
                .collect::<Result<_>>()?,
        })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        match v {
            BLOCKING => self.pair(gpu, &self.blocking),
            NON_BLOCKING => self.pair(gpu, &self.non_blocking),
            TWO_THREADS_LEGACY => self.two_threads(false),
            TWO_THREADS_PER_THREAD => self.two_threads(true),
            _ => no_such_version::<Self>(v),
        }
    }

    fn streams(&self) -> Vec<&Stream> {
        vec![&self.legacy, &self.blocking, &self.non_blocking]
    }

    fn verify(&mut self, _gpu: &Gpu, m: &Measured, checks: &mut Checks) -> Result<()> {
        checks.record(
            "blocking stream waited for the legacy default stream",
            check_blocking_waited(m),
        );
        checks.concurrency("non-blocking stream overlapped it", check_non_blocking_overlapped(m));
        checks.record(
            "2 threads on the legacy default stream took turns",
            check_threads_took_turns(m),
        );
        checks.concurrency(
            "2 threads' per-thread default streams overlapped",
            check_threads_overlapped(m),
        );
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        r.param("cycles", self.cycles);
        interpret(m, r);
    }
}

/// The figures and what they mean, from the measurements alone.
pub fn interpret(m: &Measured, r: &mut Report) {
    let (blocking, non_blocking) = (m.without(), m.with());
    let kernel_ms = blocking.part(KERNEL_MS);
    r.figure("one kernel alone (GPU stamps)", kernel_ms, "ms")
        .figure("blocking: 2nd started after the 1st ended by", blocking.part(GAP_US), "µs")
        .figure(
            "non-blocking: 2nd started before the 1st ended by",
            -non_blocking.part(GAP_US),
            "µs",
        );
    let serial = fixed(blocking.time.median, 3);
    let beside = fixed(non_blocking.time.median, 3);
    let kernel = fixed(kernel_ms, 3);
    r.explain(if check_blocking_waited(m).is_ok() {
        t!("default_stream.serialized", serial, kernel)
    } else {
        t!("default_stream.not_serialized", serial, kernel)
    });
    r.explain(if check_non_blocking_overlapped(m).is_ok() {
        t!("default_stream.side_by_side", beside, serial)
    } else {
        t!("default_stream.not_side_by_side", beside)
    });
    r.explain(t!("default_stream.legacy"));
    r.explain(t!("default_stream.per_thread"));
    interpret_threads(m, r);
}

/// The figures and what they mean for the two host threads.
pub fn interpret_threads(m: &Measured, r: &mut Report) {
    let legacy = m.version(TWO_THREADS_LEGACY);
    let per_thread = m.version(TWO_THREADS_PER_THREAD);
    let (serial_ms, beside_ms) = (legacy.time.median, per_thread.time.median);
    let (after, before) = (legacy.part(GAP_US), -per_thread.part(GAP_US));
    r.figure("2 threads, legacy: later started after the earlier ended by", after, "µs")
        .figure("2 threads, per-thread: later started before the earlier ended by", before, "µs")
        .figure("2 threads: legacy over per-thread", serial_ms / beside_ms, "x");
    let x = fixed(serial_ms / beside_ms, 2);
    let serial = fixed(serial_ms, 3);
    let beside = fixed(beside_ms, 3);
    r.explain(if check_threads_took_turns(m).is_ok() {
        t!("default_stream.threads_serialized", serial)
    } else {
        t!("default_stream.threads_not_serialized", serial)
    });
    r.explain(if check_threads_overlapped(m).is_ok() {
        t!("default_stream.threads_side_by_side", beside, x)
    } else {
        t!("default_stream.threads_not_side_by_side", beside, serial)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

    /// Samples of the four versions from (start, end) stamps of each kernel pair: the two
    /// threads' pairs are the stream pairs' unless given.
    fn measured(blocking: &[[[u64; 2]; 2]], non_blocking: &[[[u64; 2]; 2]]) -> Measured {
        measured_threads(blocking, non_blocking, blocking, non_blocking)
    }

    fn measured_threads(
        blocking: &[[[u64; 2]; 2]],
        non_blocking: &[[[u64; 2]; 2]],
        legacy: &[[[u64; 2]; 2]],
        per_thread: &[[[u64; 2]; 2]],
    ) -> Measured {
        let sample = |p: &[[u64; 2]; 2]| {
            Sample::ms(span_ms(p))
                .part(GAP_US, gap_us(p[0], p[1]))
                .part(KERNEL_MS, (p[0][1] - p[0][0]) as f64 / 1e6)
        };
        let runs = [blocking, non_blocking, legacy, per_thread];
        Measured::from_samples(
            DefaultStream::versions(&args_from::<DefaultStream>(&[]).unwrap()),
            runs.iter().map(|r| r.iter().map(sample).collect()).collect(),
        )
    }

    const SERIAL: [[u64; 2]; 2] = [[1_000, 6_000_000], [6_002_000, 11_000_000]];
    const BESIDE: [[u64; 2]; 2] = [[1_000, 5_001_000], [4_000, 5_004_000]];

    #[test]
    fn checks_hold_only_when_every_repeat_agrees() {
        let good = measured(&[SERIAL, SERIAL], &[BESIDE, BESIDE]);
        assert!(check_blocking_waited(&good).is_ok());
        assert!(check_non_blocking_overlapped(&good).is_ok());
        let mixed = measured(&[SERIAL, BESIDE], &[BESIDE, SERIAL]);
        let e = check_blocking_waited(&mixed).unwrap_err().to_string();
        assert!(e.contains("4997.0 µs before"), "{e}");
        let e = check_non_blocking_overlapped(&mixed).unwrap_err().to_string();
        assert!(e.contains("waited 2.0 µs"), "{e}");
        assert!((good.speedup() - 10.999 / 5.003).abs() < 1e-9);
    }

    /// What the flag checks refuse is tested in tests/default_stream.rs.
    #[test]
    fn eight_of_the_longest_sleeps_a_repeat_stay_under_the_cap() {
        let a = args_from::<DefaultStream>(&["--sleep-us", "5e6"]).unwrap();
        let p = DefaultStream::plan(&a, &WorkModel::H100).unwrap();
        assert_eq!(p.ms_per_repeat, 40_000.0);
        assert!(p.admit(None).is_ok());
    }

    fn told(m: &Measured) -> String {
        let mut r = Report::new("default-stream", "", "");
        interpret(m, &mut r);
        let checks = [
            check_blocking_waited(m),
            check_non_blocking_overlapped(m),
            check_threads_took_turns(m),
            check_threads_overlapped(m),
        ];
        r.assert_chinese(
            &checks.into_iter().flatten().collect::<Vec<_>>(),
            m.versions.iter().map(|v| v.name.as_str()),
        );
        r.interpretation.join("\n")
    }

    #[test]
    fn interpretation_follows_the_data() {
        let good = told(&measured(&[SERIAL], &[BESIDE]));
        assert!(
            good.contains("waited for the first in every repeat")
                && good.contains("they ran side by side"),
            "{good}"
        );
        let bad = told(&measured(&[BESIDE], &[SERIAL]));
        assert!(
            bad.contains("should not allow") && bad.contains("but it waited in some repeat"),
            "{bad}"
        );
        assert!(!bad.contains("in every repeat"), "{bad}");
    }

    #[test]
    fn the_threads_checks_and_interpretation_follow_the_data() {
        let good = measured_threads(&[SERIAL], &[BESIDE], &[SERIAL, SERIAL], &[BESIDE, BESIDE]);
        assert!(check_threads_took_turns(&good).unwrap().en().contains("in all 2 repeats"));
        assert!(check_threads_overlapped(&good).is_ok());
        let text = told(&good);
        assert!(text.contains("waited for the other's in every repeat"), "{text}");
        assert!(
            text.contains("side by side in every repeat") && text.contains("2.20x less"),
            "{text}"
        );
        // One repeat each way wrong: both checks fail, and the text does not claim them.
        let bad = measured_threads(&[SERIAL], &[BESIDE], &[SERIAL, BESIDE], &[BESIDE, SERIAL]);
        let e = check_threads_took_turns(&bad).unwrap_err().to_string();
        assert!(e.contains("4997.0 µs before"), "{e}");
        let e = check_threads_overlapped(&bad).unwrap_err().to_string();
        assert!(e.contains("waited 2.0 µs"), "{e}");
        let text = told(&bad);
        assert!(
            text.contains("overlapped in some repeat") && text.contains("one waited"),
            "{text}"
        );
        assert!(!text.contains("side by side in every repeat"), "{text}");
    }
}
