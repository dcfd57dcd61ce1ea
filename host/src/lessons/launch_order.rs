//! # Launch order across streams
//!
//! Streams are independent, but the host issues their work one call at a time, a few
//! microseconds a launch: kernels issued to K streams start on the GPU in issue order, one
//! launch gap apart, and run side by side once started. Issue order is a scheduling tool:
//! issue first the work that should start first.
//!
//! The seed technique is the launch-order experiment of stream tutorials:
//!
//! ```text
//! for (int i = 0; i < K; ++i)
//!   sleep_stamped<<<1, 1, 0, s[i]>>>(cycles, stamps + 2 * i);  // %globaltimer at start, end
//! cudaDeviceSynchronize();
//! // start[i] - start[0] grows with i by the launch gap; start[i] < end[i-1]: they overlap
//! ```
//!
//! In Rust: `Stream::new` is `cudaStreamCreate`, `gpu.sleep_stamped(&s, cycles,
//! stamps.slot(i)?)` launches one thread that writes `%globaltimer` (ns) when it starts and
//! when it ends, and `lab::sleep::Stamps` reads them back. The version without the technique
//! issues the same K kernels to one stream, where each waits for the one before.
//!
//! The bound: on one stream K kernels take K sleeps; on K streams about one sleep plus the
//! launch gaps, as long as every stream has a hardware queue of its own: the GPU has
//! `CUDA_DEVICE_MAX_CONNECTIONS` (8 by default, up to 32), and streams beyond that share
//! queues, where a kernel waits for the one ahead of it although their streams are independent.
use serde::Serialize;

use crate::lab::harness::budget::MAX_STREAMS;
use crate::lab::harness::lesson::no_such_version;
use crate::lab::harness::stats::Stats;
use crate::lab::kit::sleep::{
    connections, max_concurrent, serial_ms, span_ms, Stamp, Stamps, OUTLASTS_A_LAUNCH_US,
};
use crate::lab::{args, fixed, t, Checks, Lesson, Measured, Plan, Report, Sample, Text, WorkModel};
use crate::runtime::{Error, Gpu, Result, Stream};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Streams, one kernel each [1..=64]. Try 16: more streams than hardware queues.
    #[arg(long, default_value_t = 8, value_parser = args::whole(1usize..=MAX_STREAMS))]
    pub streams: usize,
    /// Sleep of each kernel, µs [100..=10000000]: far longer than the launch gaps, so all
    /// kernels can overlap. Try 100, the shortest that still shows it.
    #[arg(long, default_value_t = 1000.0, value_parser = args::number(OUTLASTS_A_LAUNCH_US..=1e7))]
    pub sleep_us: f64,
}

/// The parts of a sample, from the GPU's stamps of one run.
pub const GAP_US: &str = "median gap between consecutive starts, µs";
pub const LAST_START_US: &str = "last kernel's start after kernel 0, µs";
/// The start of the last kernel that has a hardware queue of its own, after kernel 0.
pub const SPREAD_US: &str = "queued kernels' start spread, µs";
pub const DURATION_MS: &str = "one kernel, ms";
pub const AT_ONCE: &str = "most kernels running at once";
pub const OUT_OF_ORDER: &str = "starts before an earlier-issued kernel's";
/// Kernels among those with a queue of their own that started only after the one before ended.
pub const WAITED: &str = "queued kernels that waited";

/// What the checks and the explanation need of the run: flags and this process's queues.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Shape {
    pub streams: usize,
    pub connections: usize,
}

pub struct LaunchOrder {
    shape: Shape,
    cycles: u64,
    streams: Vec<Stream>,
    stamps: Stamps,
    /// The stamps of the last run on K streams, for the report's details.
    last: Vec<Stamp>,
}

impl LaunchOrder {
    /// Kernel i, a stamped sleep, on `on[i]`, issued back to back.
    fn issue(&self, gpu: &Gpu, on: &[&Stream]) -> Result<Vec<Stamp>> {
        self.stamps.clear(gpu)?;
        for (i, s) in on.iter().enumerate() {
            gpu.sleep_stamped(s, self.cycles, self.stamps.slot(i)?)?;
        }
        self.stamps.read(gpu)
    }
}

impl Shape {
    /// The kernels that each have a hardware queue of their own.
    pub fn queued(&self) -> usize {
        self.streams.min(self.connections)
    }

    /// One run's stamps, in issue order, as a sample: from the first start to the last end.
    pub fn sample(&self, s: &[Stamp]) -> Sample {
        let queued = self.queued().min(s.len());
        let start = |i: usize| (s[i][0] as f64 - s[0][0] as f64) / 1e3;
        let gaps: Vec<f64> = (1..s.len()).map(|i| start(i) - start(i - 1)).collect();
        let durations: Vec<f64> = s.iter().map(|k| (k[1] - k[0]) as f64 / 1e6).collect();
        let out_of_order = (1..s.len()).filter(|&i| s[i][0] < s[i - 1][0]).count();
        let waited = (1..queued).filter(|&i| s[i][0] >= s[i - 1][1]).count();
        Sample::ms(span_ms(s))
            .part(GAP_US, gaps.first().map_or(0.0, |_| Stats::of(&gaps).median))
            .part(LAST_START_US, start(s.len() - 1))
            .part(SPREAD_US, start(queued - 1))
            .part(DURATION_MS, Stats::of(&durations).median)
            .part(AT_ONCE, max_concurrent(s) as f64)
            .part(OUT_OF_ORDER, out_of_order as f64)
            .part(WAITED, waited as f64)
    }
}

/// The versions, by their index in [`Lesson::versions`].
pub const ONE_STREAM: usize = 0;
pub const K_STREAMS: usize = 1;

impl LaunchOrder {
    /// All K kernels on stream 0: each starts when the one before ends.
    fn one_stream(&mut self, gpu: &Gpu) -> Result<Sample> {
        let first = &self.streams[0];
        let stamps = self.issue(gpu, &vec![first; self.streams.len()])?;
        Ok(self.shape.sample(&stamps))
    }

    /// Kernel i on stream i: each starts a launch gap after the one before.
    fn k_streams(&mut self, gpu: &Gpu) -> Result<Sample> {
        let stamps = self.issue(gpu, &self.streams.iter().collect::<Vec<_>>())?;
        let sample = self.shape.sample(&stamps);
        self.last = stamps;
        Ok(sample)
    }
}

impl Lesson for LaunchOrder {
    const NAME: &'static str = "launch-order";
    const SUMMARY: &'static str =
        "kernels issued to several streams start in issue order, a launch gap apart, and overlap";
    type Args = Args;

    fn versions(a: &Args) -> Vec<String> {
        vec![format!("{}x on one stream", a.streams), format!("{} streams", a.streams)]
    }

    fn plan(a: &Args, _: &WorkModel) -> Result<Plan> {
        // One stream: K sleeps in a row. K streams: as many in a row as share a queue.
        let sleeps = a.streams + a.streams.div_ceil(connections());
        Ok(Plan::new().work(serial_ms(sleeps as f64, a.sleep_us), "--streams x --sleep-us"))
    }

    fn setup(gpu: &Gpu, a: &Args, _seed: u64) -> Result<LaunchOrder> {
        Ok(LaunchOrder {
            shape: Shape { streams: a.streams, connections: connections() },
            cycles: gpu.info.cycles_for_micros(a.sleep_us),
            streams: (0..a.streams)
                .map(|i| Stream::new(gpu, format!("order-{i}")))
                .collect::<Result<_>>()?,
            stamps: Stamps::new(gpu, a.streams)?,
            last: Vec::new(),
        })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        match v {
            ONE_STREAM => self.one_stream(gpu),
            K_STREAMS => self.k_streams(gpu),
            _ => no_such_version::<Self>(v),
        }
    }

    fn streams(&self) -> Vec<&Stream> {
        self.streams.iter().collect()
    }

    fn verify(&mut self, _gpu: &Gpu, m: &Measured, checks: &mut Checks) -> Result<()> {
        checks.record("one stream: one kernel at a time", check_one_at_a_time(m));
        checks.record("starts in issue order", check_order(m));
        checks.concurrency("kernels overlapped", self.shape.check_overlap(m));
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        r.param("cycles", self.cycles).detail("stamps_ns_last_run", &self.last);
        self.shape.interpret(m, r);
    }
}

/// Whether part `name` of version `v` stayed within `ok` in every repeat (its largest value
/// is checked; NaN, a missing part, never passes).
fn every_repeat(m: &Measured, v: usize, name: &str, ok: impl Fn(f64) -> bool) -> Option<f64> {
    let most = m.version(v).part_stats(name).map_or(f64::NAN, |s| s.max);
    (!ok(most)).then_some(most)
}

/// The control: on one stream no two kernels ever ran at once.
pub fn check_one_at_a_time(m: &Measured) -> Result<Text> {
    match every_repeat(m, ONE_STREAM, AT_ONCE, |n| n <= 1.0) {
        None => Ok(t!("launch_order.one_at_a_time", n = m.without().time.count)),
        Some(n) => Err(Error::Verification(t!("error.launch_order.at_once", n = fixed(n, 0)))),
    }
}

/// Every repeat on K streams started its kernels in issue order.
pub fn check_order(m: &Measured) -> Result<Text> {
    match every_repeat(m, K_STREAMS, OUT_OF_ORDER, |n| n == 0.0) {
        None => Ok(t!("launch_order.in_order", n = m.with().time.count)),
        Some(n) => Err(Error::Verification(t!("error.launch_order.out_of_order", n = fixed(n, 0)))),
    }
}

impl Shape {
    /// Within the first `connections` streams (each with its own hardware queue) every
    /// kernel started before the previous one ended, in every repeat.
    pub fn check_overlap(&self, m: &Measured) -> Result<Text> {
        let (k, upto) = (self.streams, self.queued());
        if k < 2 {
            return Ok(t!("check.not_asserted", why = t!("launch_order.one_kernel")));
        }
        if let Some(waited) = every_repeat(m, K_STREAMS, WAITED, |n| n == 0.0) {
            let waited = fixed(waited, 0);
            return Err(Error::Verification(t!("error.launch_order.waited", waited, upto)));
        }
        if k > self.connections {
            let (queues, most) = (self.connections, fixed(m.with().part(AT_ONCE), 0));
            return Ok(t!("launch_order.overlapped_shared", upto, k, queues, most));
        }
        Ok(t!("launch_order.overlapped", upto))
    }

    /// The figures and what they mean.
    pub fn interpret(&self, m: &Measured, r: &mut Report) {
        let (k, connections, upto) = (self.streams, self.connections, self.queued());
        let many = m.with();
        let (gap, duration, concurrent) =
            (many.part(GAP_US), many.part(DURATION_MS), many.part(AT_ONCE));
        let spread_us = many.part(SPREAD_US);
        r.param("hardware_queues", connections);
        r.figure("one kernel's duration", duration, "ms")
            .figure("median gap between consecutive starts", gap, "µs")
            .figure("most kernels running at once, median", concurrent, "kernels")
            .figure(
                &format!("kernel {} (stream {}): start after kernel 0", k - 1, k - 1),
                many.part(LAST_START_US),
                "µs",
            );
        let (ms, spread, most) = (fixed(duration, 3), fixed(spread_us, 1), fixed(concurrent, 0));
        r.explain(if k == 1 {
            t!("launch_order.one_kernel_line", ms)
        } else if check_order(m).is_ok() {
            t!("launch_order.gap", gap = fixed(gap, 1))
        } else {
            t!("launch_order.out_of_order")
        });
        if k > 1 && self.check_overlap(m).is_ok() {
            let compared = if duration * 1e3 > spread_us {
                t!("launch_order.longer", ms, spread)
            } else {
                t!("launch_order.spread", spread, ms)
            };
            r.explain(t!("launch_order.side_by_side", upto, compared));
        } else if k > 1 {
            r.explain(t!("launch_order.not_side_by_side", most, k));
        }
        if k > 1 {
            let (one, x) = (fixed(m.without().time.median, 3), fixed(m.speedup(), 2));
            r.explain(if check_one_at_a_time(m).is_ok() {
                t!("launch_order.one_stream", k, one, x)
            } else {
                t!("launch_order.one_stream_broken")
            });
        }
        r.explain(if k > connections {
            let why = if concurrent <= connections as f64 {
                t!("launch_order.queue_bound")
            } else {
                t!("launch_order.more_than_queues")
            };
            t!("launch_order.shared", k, connections, most, why)
        } else {
            t!("launch_order.own_queue", connections, next = (connections + 8).min(MAX_STREAMS))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

    fn shape(streams: usize) -> Shape {
        Shape { streams, connections: 8 }
    }

    /// One repeat of each version, from their stamps.
    fn measured(s: &Shape, one: &[Stamp], many: &[Stamp]) -> Measured {
        let flags = ["--streams".to_string(), s.streams.to_string()];
        let names =
            LaunchOrder::versions(&args_from::<LaunchOrder>(&[&flags[0], &flags[1]]).unwrap());
        Measured::from_samples(names, vec![vec![s.sample(one)], vec![s.sample(many)]])
    }

    const SERIAL: [Stamp; 3] = [[100, 1_000_100], [1_000_200, 2_000_200], [2_000_300, 3_000_300]];
    const BESIDE: [Stamp; 3] = [[100, 1_000_100], [5_100, 1_005_100], [10_100, 1_010_100]];

    #[test]
    fn samples_read_gaps_order_and_overlap_from_the_stamps() {
        let s = shape(3).sample(&BESIDE);
        let part = |n| s.parts.iter().find(|(p, _)| *p == n).unwrap().1;
        assert!((s.ms - 1.01).abs() < 1e-12);
        assert_eq!((part(GAP_US), part(LAST_START_US), part(SPREAD_US)), (5.0, 10.0, 10.0));
        assert_eq!((part(DURATION_MS), part(AT_ONCE)), (1.0, 3.0));
        assert_eq!((part(OUT_OF_ORDER), part(WAITED)), (0.0, 0.0));
        let s = shape(3).sample(&SERIAL);
        let part = |n| s.parts.iter().find(|(p, _)| *p == n).unwrap().1;
        assert_eq!((part(AT_ONCE), part(WAITED)), (1.0, 2.0));
        // Kernel 1 started before kernel 0: one out of order.
        let swapped = shape(2).sample(&[[200, 900], [100, 800]]);
        assert_eq!(swapped.parts.iter().find(|(p, _)| *p == OUT_OF_ORDER).unwrap().1, 1.0);
        // With 2 queues only the first 2 kernels are expected to overlap.
        let two_queues = Shape { streams: 3, connections: 2 }.sample(&[[0, 10], [5, 15], [15, 25]]);
        assert_eq!(two_queues.parts.iter().find(|(p, _)| *p == WAITED).unwrap().1, 0.0);
    }

    #[test]
    fn checks_follow_the_stamps() {
        let s = shape(3);
        let good = measured(&s, &SERIAL, &BESIDE);
        assert!(check_one_at_a_time(&good).is_ok() && check_order(&good).is_ok());
        assert!(s.check_overlap(&good).is_ok());
        assert!((good.speedup() - 3.0002 / 1.01).abs() < 1e-9);
        let bad = measured(&s, &BESIDE, &SERIAL);
        assert!(check_one_at_a_time(&bad).is_err() && s.check_overlap(&bad).is_err());
        let one = measured(&shape(1), &SERIAL[..1], &SERIAL[..1]);
        assert!(shape(1).check_overlap(&one).unwrap().en().starts_with("not asserted"));
        let out_of_order = measured(&shape(2), &SERIAL[..2], &[[200, 900], [100, 800]]);
        assert!(check_order(&out_of_order).is_err());
    }

    /// What the flag checks refuse is tested in tests/launch_order.rs.
    #[test]
    fn a_repeat_is_one_stream_of_sleeps_then_as_many_as_share_a_queue() {
        // 64 streams: 64 sleeps on one stream plus ceil(64 / queues) on 64 streams.
        let a = args_from::<LaunchOrder>(&["--streams", "64", "--sleep-us", "1e6"]).unwrap();
        let p = LaunchOrder::plan(&a, &WorkModel::H100).unwrap();
        assert_eq!(p.ms_per_repeat, (64 + 64usize.div_ceil(connections())) as f64 * 1e3);
    }

    fn told(s: &Shape, m: &Measured) -> String {
        let mut r = Report::new("launch-order", "", "");
        s.interpret(m, &mut r);
        r.interpretation.join("\n")
    }

    #[test]
    fn interpretation_follows_the_data() {
        let good = told(&shape(3), &measured(&shape(3), &SERIAL, &BESIDE));
        assert!(
            good.contains("about 5.0 µs after")
                && good.contains("ran side by side")
                && good.contains("one after another"),
            "{good}"
        );
        assert!(good.contains("try --streams 16"), "{good}");
        let bad = told(&shape(3), &measured(&shape(3), &BESIDE, &SERIAL));
        assert!(
            bad.contains("Not every kernel") && bad.contains("a stream's order forbids"),
            "{bad}"
        );
        assert!(!bad.contains("ran side by side"), "{bad}");
        let one = told(&shape(1), &measured(&shape(1), &SERIAL[..1], &SERIAL[..1]));
        assert!(one.contains("One stream, one kernel") && !one.contains("side by side"), "{one}");
        let queues = Shape { streams: 3, connections: 2 };
        let shared = told(&queues, &measured(&queues, &SERIAL, &[[0, 10], [5, 15], [15, 25]]));
        assert!(
            shared.contains("on 2 hardware queues") && shared.contains("no more than the queues"),
            "{shared}"
        );
    }
}
