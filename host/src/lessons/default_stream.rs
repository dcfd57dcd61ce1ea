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
//! ended. The other way out is the per-thread default stream (`nvcc --default-stream
//! per-thread`, `CU_STREAM_PER_THREAD`): stream `0` then behaves like an ordinary stream.
//!
//! The bound: with the blocking stream the pair takes the sum of two sleeps; with the
//! non-blocking stream the larger one, so the ratio approaches 2.
use serde::Serialize;

use crate::lab::sleep::{gap_us, serial_ms, span_ms, Stamps, OUTLASTS_A_LAUNCH_US};
use crate::lab::{args, fixed, t, Checks, Lesson, Measured, Plan, Report, Sample, Text, WorkModel};
use crate::runtime::{Error, Gpu, Result, Stream};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Sleep of each kernel, µs [100..=10000000]: far longer than a launch, so overlap or
    /// its absence is plain. Try 100, the shortest that still tells them apart.
    #[arg(long, default_value_t = 5000.0, value_parser = args::number(OUTLASTS_A_LAUNCH_US..=1e7))]
    pub sleep_us: f64,
}

/// Sleeps in one repeat in the worst case: both pairs serialized.
pub const SLEEPS_PER_REPEAT: f64 = 4.0;
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
}

/// The blocking pair never overlapped: in every repeat the second kernel started after the
/// first ended (the smallest gap is not negative).
pub fn check_blocking_waited(m: &Measured) -> Result<Text> {
    let gap = m.without().part_stats(GAP_US).map_or(f64::NAN, |s| s.min);
    if gap >= 0.0 {
        Ok(t!("default_stream.waited", n = m.without().time.count))
    } else {
        Err(Error::Verification(format!("in some repeat the blocking stream's kernel started {:.1} µs before the legacy one ended", -gap)))
    }
}

/// The non-blocking pair always overlapped: in every repeat the second kernel started
/// before the first ended (the largest gap is negative).
pub fn check_non_blocking_overlapped(m: &Measured) -> Result<Text> {
    let gap = m.with().part_stats(GAP_US).map_or(f64::NAN, |s| s.max);
    if gap < 0.0 {
        Ok(t!("default_stream.overlapped", n = m.with().time.count))
    } else {
        Err(Error::Verification(format!("in some repeat the non-blocking stream's kernel waited {gap:.1} µs after the legacy one ended")))
    }
}

impl Lesson for DefaultStream {
    const NAME: &'static str = "default-stream";
    const SUMMARY: &'static str =
        "the legacy default stream serializes blocking streams; a non-blocking stream overlaps it";
    type Args = Args;

    fn versions(_: &Args) -> Vec<String> {
        vec!["legacy + blocking stream".into(), "legacy + non-blocking stream".into()]
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
        })
    }

    /// The legacy default stream, then a blocking stream: the second waits for the first.
    fn without(&mut self, gpu: &Gpu) -> Result<Sample> {
        self.pair(gpu, &self.blocking)
    }

    /// The legacy default stream, then a non-blocking stream: they run side by side.
    fn with(&mut self, gpu: &Gpu) -> Result<Sample> {
        self.pair(gpu, &self.non_blocking)
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
    let (serial, beside) = (blocking.time.median, non_blocking.time.median);
    let kernel = blocking.part(KERNEL_MS);
    r.figure("one kernel alone (GPU stamps)", kernel, "ms")
        .figure("blocking: 2nd started after the 1st ended by", blocking.part(GAP_US), "µs")
        .figure(
            "non-blocking: 2nd started before the 1st ended by",
            -non_blocking.part(GAP_US),
            "µs",
        );
    let [serial, beside, kernel] = [serial, beside, kernel].map(|v| fixed(v, 3));
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

    fn plan(flags: &[&str]) -> Result<()> {
        DefaultStream::plan(&args_from::<DefaultStream>(flags)?, &WorkModel::H100)?.admit(None)
    }

    /// Samples of the two versions from (start, end) stamps of each kernel pair.
    fn measured(blocking: &[[[u64; 2]; 2]], non_blocking: &[[[u64; 2]; 2]]) -> Measured {
        let sample = |p: &[[u64; 2]; 2]| {
            Sample::ms(span_ms(p))
                .part(GAP_US, gap_us(p[0], p[1]))
                .part(KERNEL_MS, (p[0][1] - p[0][0]) as f64 / 1e6)
        };
        Measured::from_samples(
            DefaultStream::versions(&args_from::<DefaultStream>(&[]).unwrap()),
            vec![blocking.iter().map(sample).collect(), non_blocking.iter().map(sample).collect()],
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

    #[test]
    fn sleeps_outlast_a_launch_and_bound_a_repeat() {
        assert!(plan(&[]).is_ok());
        assert!(plan(&["--sleep-us", "100"]).is_ok());
        assert!(plan(&["--sleep-us", "1e7"]).is_ok());
        for flags in [
            ["--sleep-us", "99"],
            ["--sleep-us", "NaN"],
            ["--sleep-us", "inf"],
            ["--sleep-us", "-1"],
            ["--sleep-us", "1e9"],
        ] {
            let e = plan(&flags).unwrap_err().to_string();
            assert!(
                e.contains("--sleep-us") && e.contains("number from 100 to 10000000"),
                "{flags:?}: {e}"
            );
        }
        // Four sleeps a repeat: 10 s each stays under the cap, and the plan says so.
        let a = args_from::<DefaultStream>(&["--sleep-us", "1e7"]).unwrap();
        let p = DefaultStream::plan(&a, &WorkModel::H100).unwrap();
        assert_eq!(p.ms_per_repeat, 40_000.0);
    }

    fn told(m: &Measured) -> String {
        let mut r = Report::new("default-stream", "", "");
        interpret(m, &mut r);
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
}
