//! # Launch order across streams
//!
//! The concept: streams are independent, but the host issues their work one call at a time,
//! and each launch costs the host a few microseconds. So kernels issued to K streams start on
//! the GPU in the order they were issued, one launch gap apart, and run side by side once
//! started. Issue order is therefore a scheduling tool: issue the work that should start
//! first, first.
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
//! In streamlab: `Stream::new` is `cudaStreamCreate`, `gpu.sleep_stamped` launches one thread
//! that writes `%globaltimer` (ns) when it starts and when it ends into a `device::<u64>(2)`
//! buffer per kernel, read back with `copy_to_host_sync` (`cudaMemcpy`).
//!
//! The GPU has `CUDA_DEVICE_MAX_CONNECTIONS` hardware work queues (8 by default, up to 32):
//! with more streams than that, streams share a queue, and a kernel waits for the one ahead
//! of it in its queue even though their streams are independent.
use cust::memory::DeviceBuffer;
use serde::Serialize;

use crate::demos::Options;
use crate::error::{ensure, Error, Result};
use crate::gpu::Gpu;
use crate::memory::{copy_to_device_sync, copy_to_host_sync, device};
use crate::report::Report;
use crate::stream::Stream;
use crate::timing::Stats;

pub const SUMMARY: &str =
    "kernels issued to several streams start in issue order, a launch gap apart, and overlap";
pub const FLAGS: &str = "--streams (8) --sleep-us (1000) --reps";

pub const DEFAULT_STREAMS: usize = 8;
/// 1 ms per kernel: far longer than 64 launch gaps, so all kernels can overlap.
pub const DEFAULT_SLEEP_US: f64 = 1000.0;
pub const MAX_STREAMS: usize = 64;
pub const DEFAULT_CONNECTIONS: usize = 8;

/// The hardware queues this process gets: `CUDA_DEVICE_MAX_CONNECTIONS` if set, else 8.
pub fn connections() -> usize {
    parse_connections(std::env::var("CUDA_DEVICE_MAX_CONNECTIONS").ok().as_deref())
}

/// `CUDA_DEVICE_MAX_CONNECTIONS`'s value as the driver reads it: 1 to 32, else the default.
pub fn parse_connections(value: Option<&str>) -> usize {
    value
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|c| (1..=32).contains(c))
        .unwrap_or(DEFAULT_CONNECTIONS)
}

pub fn check_sizes(k: usize, sleep_us: f64) -> Result<()> {
    ensure((1..=MAX_STREAMS).contains(&k), || {
        format!("--streams must be from 1 to {MAX_STREAMS}, not {k}")
    })?;
    ensure(
        sleep_us.is_finite() && sleep_us > 0.0 && sleep_us <= 1e7,
        || format!("--sleep-us must be more than 0 and at most 10000000, not {sleep_us}"),
    )
}

/// One kernel per stream, in issue order: `[start_ns, end_ns]` as the GPU stamped them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Launches {
    pub stamps: Vec<[u64; 2]>,
}

impl Launches {
    /// Fails unless every kernel wrote a start and an end (stamps are zeroed before a run).
    pub fn from_stamps(stamps: Vec<[u64; 2]>) -> Result<Launches> {
        ensure(!stamps.is_empty(), || "no kernels were launched".into())?;
        if let Some(i) = stamps.iter().position(|s| s[0] == 0 || s[1] < s[0]) {
            return Err(Error::Verification(format!(
                "kernel {i}'s stamps {:?} are not a start and an end: did it run?",
                stamps[i]
            )));
        }
        Ok(Launches { stamps })
    }

    /// Each kernel's start, in µs after the first kernel's start (negative if earlier).
    pub fn offsets_us(&self) -> Vec<f64> {
        let first = self.stamps[0][0] as f64;
        self.stamps
            .iter()
            .map(|s| (s[0] as f64 - first) / 1e3)
            .collect()
    }

    /// Start of kernel i minus start of kernel i-1, in µs.
    pub fn gaps_us(&self) -> Vec<f64> {
        self.stamps
            .windows(2)
            .map(|w| (w[1][0] as f64 - w[0][0] as f64) / 1e3)
            .collect()
    }

    /// Starts never go backwards in issue order (equal stamps allowed: the timer's
    /// resolution may be coarser than a launch gap).
    pub fn in_issue_order(&self) -> bool {
        self.stamps.windows(2).all(|w| w[0][0] <= w[1][0])
    }

    /// The first kernel among `0..upto` that started only after the previous one ended.
    pub fn first_serialized(&self, upto: usize) -> Option<usize> {
        (1..upto.min(self.stamps.len())).find(|&i| self.stamps[i][0] >= self.stamps[i - 1][1])
    }

    /// How many kernels started only after the previous one ended.
    pub fn serialized_count(&self) -> usize {
        (1..self.stamps.len())
            .filter(|&i| self.stamps[i][0] >= self.stamps[i - 1][1])
            .count()
    }

    /// Each kernel's duration, in ms.
    pub fn durations_ms(&self) -> Vec<f64> {
        self.stamps
            .iter()
            .map(|s| (s[1] - s[0]) as f64 / 1e6)
            .collect()
    }
}

pub struct LaunchOrder {
    pub cycles: u64,
    pub streams: Vec<Stream>,
    stamps: Vec<DeviceBuffer<u64>>,
}

impl LaunchOrder {
    pub fn new(gpu: &Gpu, k: usize, sleep_us: f64) -> Result<LaunchOrder> {
        check_sizes(k, sleep_us)?;
        Ok(LaunchOrder {
            cycles: gpu.cycles_for_micros(sleep_us),
            streams: (0..k)
                .map(|i| Stream::new(format!("order-{i}")))
                .collect::<Result<Vec<_>>>()?,
            stamps: (0..k)
                .map(|_| device::<u64>(2))
                .collect::<Result<Vec<_>>>()?,
        })
    }

    /// One stamped sleep per stream, issued back to back, then the stamps.
    pub fn run_once(&mut self, gpu: &Gpu) -> Result<Launches> {
        for s in &self.stamps {
            copy_to_device_sync(&[0u64, 0], s)?;
        }
        // The zeroing copies must land before any kernel writes its stamps.
        gpu.synchronize()?;
        for (s, stamps) in self.streams.iter().zip(&self.stamps) {
            gpu.sleep_stamped(s, self.cycles, stamps)?;
        }
        gpu.synchronize()?;
        let mut all = Vec::with_capacity(self.stamps.len());
        for s in &self.stamps {
            let mut pair = [0u64; 2];
            copy_to_host_sync(s, &mut pair)?;
            all.push(pair);
        }
        Launches::from_stamps(all)
    }
}

pub fn measure(gpu: &Gpu, o: &mut LaunchOrder, reps: usize) -> Result<Vec<Launches>> {
    o.run_once(gpu)?;
    (0..reps.max(1)).map(|_| o.run_once(gpu)).collect()
}

/// Every repeat started its kernels in issue order.
pub fn check_order(runs: &[Launches]) -> Result<String> {
    match runs.iter().position(|l| !l.in_issue_order()) {
        None => Ok(format!(
            "in all {} repeats the kernels started in issue order",
            runs.len()
        )),
        Some(i) => Err(Error::Verification(format!(
            "repeat {i}: starts out of issue order, offsets {:?} µs",
            runs[i].offsets_us()
        ))),
    }
}

/// Within the first `connections` streams (each with its own hardware queue) every kernel
/// started before the previous one ended, in every repeat.
pub fn check_overlap(runs: &[Launches], connections: usize) -> Result<String> {
    let k = runs.first().map_or(0, |l| l.stamps.len());
    if k < 2 {
        return Ok("not asserted: one kernel has nothing to overlap".into());
    }
    let upto = k.min(connections);
    for (r, l) in runs.iter().enumerate() {
        if let Some(i) = l.first_serialized(upto) {
            return Err(Error::Verification(format!(
                "repeat {r}: kernel {i} started {:.1} µs after kernel {} ended",
                (l.stamps[i][0] as f64 - l.stamps[i - 1][1] as f64) / 1e3,
                i - 1
            )));
        }
    }
    let mut detail =
        format!("each of the first {upto} kernels started before the previous one ended");
    if k > connections {
        let waited = Stats::of(
            &runs
                .iter()
                .map(|l| l.serialized_count() as f64)
                .collect::<Vec<_>>(),
        )
        .median;
        detail.push_str(&format!(
            "; beyond {connections} streams (shared hardware queues) {waited:.0} kernels waited for an earlier one (median)"
        ));
    }
    Ok(detail)
}

/// Checks the flags this demo reads, before the GPU is touched.
pub fn check_options(opts: &Options) -> Result<()> {
    super::check_common(opts)
}

pub fn run(gpu: &Gpu, opts: &Options) -> Result<Report> {
    let k = opts.streams.unwrap_or(DEFAULT_STREAMS);
    let sleep_us = opts.sleep_us.unwrap_or(DEFAULT_SLEEP_US);
    let mut o = LaunchOrder::new(gpu, k, sleep_us)?;
    let runs = measure(gpu, &mut o, opts.reps)?;
    let connections = connections();

    let offsets: Vec<f64> = (0..k)
        .map(|i| Stats::of(&runs.iter().map(|l| l.offsets_us()[i]).collect::<Vec<_>>()).median)
        .collect();
    let gaps: Vec<f64> = runs.iter().flat_map(Launches::gaps_us).collect();
    let median_gap = if gaps.is_empty() {
        0.0
    } else {
        Stats::of(&gaps).median
    };
    let durations: Vec<f64> = runs.iter().flat_map(Launches::durations_ms).collect();
    let duration = Stats::of(&durations).median;

    let mut r = Report::new(
        "launch-order",
        "launch order across streams",
        &gpu.info.name,
    );
    r.param("streams", k)
        .param("sleep_us", sleep_us)
        .param("cycles", o.cycles)
        .param("hardware_queues", connections)
        .param("reps", opts.reps);
    r.figure("one kernel's duration", duration, "ms").figure(
        "median gap between consecutive starts",
        median_gap,
        "µs",
    );
    for (i, offset) in offsets.iter().enumerate() {
        r.figure(
            &format!("kernel {i} (stream {i}): start after kernel 0"),
            *offset,
            "µs",
        );
    }
    r.detail("stamps_ns", &runs);
    r.check("starts in issue order", check_order(&runs));
    r.check("kernels overlapped", check_overlap(&runs, connections));
    r.explain(format!(
        "Each kernel starts about {median_gap:.1} µs after the one issued before it: that is the host's launch cost, paid one launch at a time, so the GPU sees the work in issue order."
    ));
    r.explain(format!(
        "All of them then run side by side (each lasts {duration:.3} ms, far longer than the {:.1} µs spread of the starts): streams give concurrency, the host's issue order gives the start order.",
        offsets.last().copied().unwrap_or(0.0)
    ));
    r.explain(format!(
        "With more than CUDA_DEVICE_MAX_CONNECTIONS streams ({connections} here) streams share hardware queues, and a kernel waits for the one ahead of it in its queue: try --streams 16."
    ));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_follow_the_environment_variable_rules() {
        assert_eq!(parse_connections(None), 8);
        assert_eq!(parse_connections(Some("32")), 32);
        assert_eq!(parse_connections(Some(" 4 ")), 4);
        assert_eq!(parse_connections(Some("0")), 8);
        assert_eq!(parse_connections(Some("33")), 8);
        assert_eq!(parse_connections(Some("many")), 8);
    }

    #[test]
    fn offsets_gaps_order_and_overlap() {
        let l = Launches::from_stamps(vec![[100, 5000], [103_100, 108_000], [106_100, 111_000]])
            .unwrap();
        assert_eq!(l.offsets_us(), vec![0.0, 103.0, 106.0]);
        assert_eq!(l.gaps_us(), vec![103.0, 3.0]);
        assert!(l.in_issue_order());
        // Kernel 1 started at 103,100, after kernel 0 ended at 5,000.
        assert_eq!(l.first_serialized(3), Some(1));
        assert_eq!(l.first_serialized(1), None);
        assert_eq!(l.serialized_count(), 1);
        let out_of_order = Launches::from_stamps(vec![[200, 900], [100, 800]]).unwrap();
        assert!(!out_of_order.in_issue_order());
        assert!(check_order(&[out_of_order]).is_err());
        assert!(Launches::from_stamps(vec![[0, 0]]).is_err());
    }
}
