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

use crate::demos::{check_common, check_sleep_us, Options, MAX_STREAMS};
use crate::error::{ensure, Error, Result};
use crate::gpu::Gpu;
use crate::memory::{copy_to_device_sync, copy_to_host_sync, device};
use crate::report::Report;
use crate::stream::Stream;
use crate::timing::Stats;

pub const SUMMARY: &str =
    "kernels issued to several streams start in issue order, a launch gap apart, and overlap";
pub const FLAGS: &str = "--streams (8) --sleep-us (1000, 100 or more) --reps";

pub const DEFAULT_STREAMS: usize = 8;
/// 1 ms per kernel: far longer than 64 launch gaps, so all kernels can overlap.
pub const DEFAULT_SLEEP_US: f64 = 1000.0;
/// A kernel must last far longer than the few microseconds between two launches, or the
/// next kernel cannot start before it ends and "overlap" means nothing.
pub const MIN_SLEEP_US: f64 = 100.0;
/// One repeat may take at most this long (estimated from the sleeps), so a run stays bounded.
pub const MAX_REPEAT_SECONDS: f64 = 60.0;
/// The hardware work queues a context gets when `CUDA_DEVICE_MAX_CONNECTIONS` is not set.
pub const DEFAULT_CONNECTIONS: usize = 8;

/// The hardware queues this process gets: `CUDA_DEVICE_MAX_CONNECTIONS` if set, else 8.
/// Every demo that reasons about queues (this one, sleep-streams) reads it here.
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

/// The longest sleep that keeps one repeat under [`MAX_REPEAT_SECONDS`]: with `k` streams on
/// `connections` queues, up to `ceil(k / connections)` kernels run one after another.
pub fn max_sleep_us(k: usize, connections: usize) -> f64 {
    let serial = k.div_ceil(connections.max(1)).max(1) as f64;
    (MAX_REPEAT_SECONDS * 1e6 / serial).floor()
}

/// Checks the stream count and the sleep, without a GPU.
pub fn check_sizes(k: usize, sleep_us: f64, connections: usize) -> Result<()> {
    ensure((1..=MAX_STREAMS).contains(&k), || {
        format!("--streams must be from 1 to {MAX_STREAMS}, not {k}")
    })?;
    check_sleep_us(
        sleep_us,
        MIN_SLEEP_US,
        max_sleep_us(k, connections),
        &format!(
            "a kernel must outlast the launch gaps, and {k} streams on {connections} hardware queues must stay under {MAX_REPEAT_SECONDS} s a repeat"
        ),
    )
}

/// Checks the flags this demo reads, before the GPU is touched.
pub fn check_options(opts: &Options) -> Result<()> {
    check_common(opts)?;
    check_sizes(
        opts.streams.unwrap_or(DEFAULT_STREAMS),
        opts.sleep_us.unwrap_or(DEFAULT_SLEEP_US),
        connections(),
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
        if stamps.is_empty() {
            return Err(Error::Internal("launch-order ran no kernels".into()));
        }
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

    /// The most kernels that were running at the same instant (a kernel runs from its
    /// start stamp up to, not including, its end stamp).
    pub fn max_concurrent(&self) -> usize {
        // Ends sort before starts at the same time: a kernel that starts exactly when
        // another ends did not run beside it.
        let mut edges: Vec<(u64, i64)> = self
            .stamps
            .iter()
            .flat_map(|s| [(s[0], 1), (s[1], -1)])
            .collect();
        edges.sort_unstable();
        let (mut running, mut most) = (0i64, 0i64);
        for (_, delta) in edges {
            running += delta;
            most = most.max(running);
        }
        most as usize
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
        check_sizes(k, sleep_us, connections())?;
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

/// The median over repeats of the most kernels running at once.
pub fn median_concurrency(runs: &[Launches]) -> f64 {
    Stats::of(
        &runs
            .iter()
            .map(|l| l.max_concurrent() as f64)
            .collect::<Vec<_>>(),
    )
    .median
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
        detail.push_str(&format!(
            "; with {k} streams on {connections} hardware queues at most {:.0} kernels ran at once (median)",
            median_concurrency(runs)
        ));
    }
    Ok(detail)
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
    let concurrent = median_concurrency(&runs);
    // The kernels that each have a hardware queue of their own, and how far their starts spread.
    let upto = k.min(connections);
    let spread_us = offsets[upto - 1];

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
    r.figure("one kernel's duration", duration, "ms")
        .figure("median gap between consecutive starts", median_gap, "µs")
        .figure(
            "most kernels running at once, median",
            concurrent,
            "kernels",
        );
    for (i, offset) in offsets.iter().enumerate() {
        r.figure(
            &format!("kernel {i} (stream {i}): start after kernel 0"),
            *offset,
            "µs",
        );
    }
    r.detail("stamps_ns", &runs);
    let order = check_order(&runs);
    let in_order = order.is_ok();
    let overlap = check_overlap(&runs, connections);
    let overlapped = overlap.is_ok();
    r.check("starts in issue order", order);
    r.check("kernels overlapped", overlap);

    if k == 1 {
        r.explain(format!(
            "One stream, one kernel ({duration:.3} ms): there is no order and no overlap to see; try --streams 8."
        ));
    } else if in_order {
        r.explain(format!(
            "Each kernel starts about {median_gap:.1} µs after the one issued before it: that is the host's launch cost, paid one launch at a time, so the GPU sees the work in issue order."
        ));
    } else {
        r.explain("In some repeat a kernel started before one issued earlier (see the check): here the start order did not follow the issue order.");
    }
    if k > 1 && overlapped {
        let compared = if duration * 1e3 > spread_us {
            format!("each lasts {duration:.3} ms, longer than the {spread_us:.1} µs over which they started")
        } else {
            format!("their starts spread over {spread_us:.1} µs, but each started before the previous {duration:.3} ms kernel ended")
        };
        r.explain(format!(
            "The first {upto} kernels, one per hardware queue, ran side by side: {compared}. Streams give concurrency; the host's issue order gives the start order."
        ));
    } else if k > 1 {
        r.explain(format!(
            "Not every kernel started before the one issued before it ended (see the check): at most {concurrent:.0} of {k} ran at once, so here the streams did not all run side by side."
        ));
    }
    if k > connections {
        let why = if concurrent <= connections as f64 {
            "no more than the queues: a kernel waits for the one ahead of it in its queue, even though their streams are independent"
        } else {
            "more than the queue count: this driver did not map the streams onto that many queues"
        };
        r.explain(format!(
            "With {k} streams on {connections} hardware queues (CUDA_DEVICE_MAX_CONNECTIONS) streams share queues; at most {concurrent:.0} kernels ran at once, {why}."
        ));
    } else {
        r.explain(format!(
            "Up to {connections} streams (CUDA_DEVICE_MAX_CONNECTIONS) each get a hardware queue of their own; beyond that, streams share queues and a kernel waits for the one ahead of it in its queue: try --streams {}.",
            (connections + 8).min(MAX_STREAMS)
        ));
    }
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
        // Kernels 1 and 2 overlap; kernel 0 ran alone.
        assert_eq!(l.max_concurrent(), 2);
        let out_of_order = Launches::from_stamps(vec![[200, 900], [100, 800]]).unwrap();
        assert!(!out_of_order.in_issue_order());
        assert!(check_order(&[out_of_order]).is_err());
        assert!(Launches::from_stamps(vec![[0, 0]]).is_err());
        assert!(matches!(
            Launches::from_stamps(vec![]),
            Err(Error::Internal(_))
        ));
    }

    #[test]
    fn concurrency_counts_only_true_overlaps() {
        // Back to back (one ends exactly when the next starts): never two at once.
        let serial = Launches::from_stamps(vec![[10, 20], [20, 30], [30, 40]]).unwrap();
        assert_eq!(serial.max_concurrent(), 1);
        let all = Launches::from_stamps(vec![[10, 100], [11, 100], [12, 100]]).unwrap();
        assert_eq!(all.max_concurrent(), 3);
    }

    #[test]
    fn sleeps_are_bounded_by_the_launch_gap_and_the_run_time() {
        // 8 streams on 8 queues run at once: one sleep a repeat.
        assert_eq!(max_sleep_us(8, 8), 60e6);
        // 64 streams on 8 queues: 8 kernels in a row.
        assert_eq!(max_sleep_us(64, 8), 7.5e6);
        assert!(check_sizes(8, DEFAULT_SLEEP_US, 8).is_ok());
        assert!(check_sizes(8, 0.001, 8).is_err());
        assert!(check_sizes(8, MIN_SLEEP_US, 8).is_ok());
        assert!(check_sizes(64, 8e6, 8).is_err());
        assert!(check_sizes(64, f64::NAN, 8).is_err());
        assert!(check_sizes(65, DEFAULT_SLEEP_US, 8).is_err());
    }
}
