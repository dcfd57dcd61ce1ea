//! # The legacy default stream
//!
//! The concept: work issued without a stream goes to the *legacy default stream* (stream
//! `0`, the NULL stream), which is special: an operation on it waits for all earlier work on
//! every *blocking* stream, and work issued to a blocking stream afterwards waits for it. So
//! one forgotten `<<<g, b>>>` without a stream argument can serialize a whole multi-stream
//! program. A stream created with `cudaStreamNonBlocking` is exempt: it never synchronizes
//! with the legacy default stream.
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
//! In streamlab: `Stream::legacy_default()` is stream `0`, `Stream::new` is
//! `cudaStreamCreate` (blocking), `Stream::non_blocking` is
//! `cudaStreamCreateWithFlags(cudaStreamNonBlocking)`, and `gpu.sleep_stamped` is a one-thread
//! sleep kernel that writes its own start and end time (`%globaltimer`, ns), so the GPU
//! itself says whether the second kernel started before the first ended.
//!
//! The other way out is the *per-thread default stream*: compiled with
//! `nvcc --default-stream per-thread` (or using `cudaStreamPerThread`, the driver's
//! `CU_STREAM_PER_THREAD`), stream `0` means a per-host-thread stream that behaves like an
//! ordinary stream: it does not synchronize with other streams (it still does with the
//! legacy default stream if a program uses both).
use cust::memory::DeviceBuffer;
use serde::Serialize;

use crate::demos::{check_common, check_sleep_us, Options};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::memory::{copy_to_device_sync, copy_to_host_sync, device};
use crate::report::Report;
use crate::stream::Stream;
use crate::timing::Stats;

pub const SUMMARY: &str =
    "the legacy default stream serializes blocking streams; a non-blocking stream overlaps it";
pub const FLAGS: &str = "--sleep-us (5000, 100 or more) --reps";

/// Each kernel sleeps 5 ms: far longer than a launch, so overlap or its absence is obvious.
pub const DEFAULT_SLEEP_US: f64 = 5000.0;
/// The second kernel is issued a few microseconds after the first: a kernel must last far
/// longer than that for "the second started before the first ended" to mean anything.
pub const MIN_SLEEP_US: f64 = 100.0;
/// One repeat (both cases) may take at most this long, so a run stays bounded.
pub const MAX_REPEAT_SECONDS: f64 = 60.0;
/// Sleeps in one repeat in the worst case: both pairs serialized.
pub const SLEEPS_PER_REPEAT: f64 = 4.0;

/// The stream the second kernel goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Second {
    Blocking,
    NonBlocking,
}

/// GPU start and end stamps (ns) of the kernel on the legacy default stream and of the one
/// on the other stream, issued right after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Pair {
    pub first: [u64; 2],
    pub second: [u64; 2],
}

impl Pair {
    /// Fails unless both kernels wrote sane stamps (zeroed before each run).
    pub fn from_stamps(first: [u64; 2], second: [u64; 2]) -> Result<Pair> {
        for (what, s) in [("first", first), ("second", second)] {
            if s[0] == 0 || s[1] < s[0] {
                return Err(Error::Verification(format!(
                    "the {what} kernel's stamps {s:?} are not a start and an end: did it run?"
                )));
            }
        }
        Ok(Pair { first, second })
    }

    /// The second kernel started before the first one ended.
    pub fn overlapped(&self) -> bool {
        self.second[0] < self.first[1]
    }

    /// From the first start to the last end, in ms.
    pub fn total_ms(&self) -> f64 {
        let start = self.first[0].min(self.second[0]);
        let end = self.first[1].max(self.second[1]);
        (end - start) as f64 / 1e6
    }

    /// Second start minus first end, in µs: positive if the second waited, negative if it
    /// overlapped the first.
    pub fn gap_us(&self) -> f64 {
        (self.second[0] as f64 - self.first[1] as f64) / 1e3
    }

    /// The first kernel's own duration, in ms.
    pub fn kernel_ms(&self) -> f64 {
        (self.first[1] - self.first[0]) as f64 / 1e6
    }
}

/// Checks the sleep: long enough to outlast a launch, short enough to bound a repeat.
pub fn check_sleep(sleep_us: f64) -> Result<()> {
    check_sleep_us(
        sleep_us,
        MIN_SLEEP_US,
        (MAX_REPEAT_SECONDS * 1e6 / SLEEPS_PER_REPEAT).floor(),
        &format!("a kernel must outlast a launch, and the {SLEEPS_PER_REPEAT} sleeps of a repeat must stay under {MAX_REPEAT_SECONDS} s"),
    )
}

/// Checks the flags this demo reads, before the GPU is touched.
pub fn check_options(opts: &Options) -> Result<()> {
    check_common(opts)?;
    check_sleep(opts.sleep_us.unwrap_or(DEFAULT_SLEEP_US))
}

pub struct DefaultStream {
    pub cycles: u64,
    legacy: Stream,
    blocking: Stream,
    non_blocking: Stream,
    stamps: [DeviceBuffer<u64>; 2],
}

impl DefaultStream {
    pub fn new(gpu: &Gpu, sleep_us: f64) -> Result<DefaultStream> {
        check_sleep(sleep_us)?;
        Ok(DefaultStream {
            cycles: gpu.cycles_for_micros(sleep_us),
            legacy: Stream::legacy_default(),
            blocking: Stream::new("blocking")?,
            non_blocking: Stream::non_blocking("non-blocking")?,
            stamps: [device::<u64>(2)?, device::<u64>(2)?],
        })
    }

    /// A stamped sleep on the legacy default stream, then one on the `second` stream.
    pub fn run_pair(&mut self, gpu: &Gpu, second: Second) -> Result<Pair> {
        for s in &self.stamps {
            copy_to_device_sync(&[0u64, 0], s)?;
        }
        // A copy from pageable memory may return before its DMA lands, and the non-blocking
        // stream would not wait for it: let the zeros land before any kernel stamps.
        gpu.synchronize()?;
        let other = match second {
            Second::Blocking => &self.blocking,
            Second::NonBlocking => &self.non_blocking,
        };
        gpu.sleep_stamped(&self.legacy, self.cycles, &self.stamps[0])?;
        gpu.sleep_stamped(other, self.cycles, &self.stamps[1])?;
        gpu.synchronize()?;
        let (mut first, mut second) = ([0u64; 2], [0u64; 2]);
        copy_to_host_sync(&self.stamps[0], &mut first)?;
        copy_to_host_sync(&self.stamps[1], &mut second)?;
        Pair::from_stamps(first, second)
    }
}

/// Every repeat of both cases.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub blocking: Vec<Pair>,
    pub non_blocking: Vec<Pair>,
}

impl Measured {
    fn stats(pairs: &[Pair], f: fn(&Pair) -> f64) -> Stats {
        Stats::of(&pairs.iter().map(f).collect::<Vec<_>>())
    }
    pub fn blocking_total(&self) -> Stats {
        Self::stats(&self.blocking, Pair::total_ms)
    }
    pub fn non_blocking_total(&self) -> Stats {
        Self::stats(&self.non_blocking, Pair::total_ms)
    }
}

pub fn measure(gpu: &Gpu, d: &mut DefaultStream, reps: usize) -> Result<Measured> {
    d.run_pair(gpu, Second::Blocking)?;
    d.run_pair(gpu, Second::NonBlocking)?;
    let mut m = Measured {
        blocking: Vec::new(),
        non_blocking: Vec::new(),
    };
    for _ in 0..reps.max(1) {
        m.blocking.push(d.run_pair(gpu, Second::Blocking)?);
        m.non_blocking.push(d.run_pair(gpu, Second::NonBlocking)?);
    }
    Ok(m)
}

/// Every blocking pair serialized, or the first that did not.
pub fn check_blocking_waited(pairs: &[Pair]) -> Result<String> {
    match pairs.iter().position(Pair::overlapped) {
        None => Ok(format!(
            "in all {} repeats the blocking stream's kernel started after the legacy one ended",
            pairs.len()
        )),
        Some(i) => Err(Error::Verification(format!(
            "repeat {i}: the blocking stream's kernel started {:.1} µs before the legacy one ended",
            -pairs[i].gap_us()
        ))),
    }
}

/// Every non-blocking pair overlapped, or the first that did not.
pub fn check_non_blocking_overlapped(pairs: &[Pair]) -> Result<String> {
    match pairs.iter().position(|p| !p.overlapped()) {
        None => Ok(format!(
            "in all {} repeats the non-blocking stream's kernel started before the legacy one ended",
            pairs.len()
        )),
        Some(i) => Err(Error::Verification(format!(
            "repeat {i}: the non-blocking stream's kernel waited {:.1} µs after the legacy one ended",
            pairs[i].gap_us()
        ))),
    }
}

pub fn run(gpu: &Gpu, opts: &Options) -> Result<Report> {
    let sleep_us = opts.sleep_us.unwrap_or(DEFAULT_SLEEP_US);
    let mut d = DefaultStream::new(gpu, sleep_us)?;
    let m = measure(gpu, &mut d, opts.reps)?;
    let (blocking, non_blocking) = (m.blocking_total(), m.non_blocking_total());
    let all: Vec<Pair> = m.blocking.iter().chain(&m.non_blocking).copied().collect();
    let kernel = Measured::stats(&all, Pair::kernel_ms);
    let wait = Measured::stats(&m.blocking, Pair::gap_us);
    let overlap = Measured::stats(&m.non_blocking, |p| -p.gap_us());

    let mut r = Report::new(
        "default-stream",
        "the legacy default stream vs blocking and non-blocking streams",
        &gpu.info.name,
    );
    r.param("sleep_us", sleep_us)
        .param("cycles", d.cycles)
        .param("reps", opts.reps);
    r.figure("one kernel alone (GPU stamps)", kernel.median, "ms")
        .figure("legacy + blocking stream: total", blocking.median, "ms")
        .figure(
            "legacy + non-blocking stream: total",
            non_blocking.median,
            "ms",
        )
        .figure(
            "blocking / non-blocking total",
            blocking.median / non_blocking.median,
            "x",
        )
        .figure(
            "blocking: 2nd started after the 1st ended by",
            wait.median,
            "µs",
        )
        .figure(
            "non-blocking: 2nd started before the 1st ended by",
            overlap.median,
            "µs",
        );
    r.detail("pairs_ns", &m);
    let waited = check_blocking_waited(&m.blocking);
    let blocking_waited = waited.is_ok();
    let overlapped = check_non_blocking_overlapped(&m.non_blocking);
    let non_blocking_overlapped = overlapped.is_ok();
    r.check(
        "blocking stream waited for the legacy default stream",
        waited,
    );
    r.check("non-blocking stream overlapped it", overlapped);
    let count = |pairs: &[Pair]| pairs.iter().filter(|p| p.overlapped()).count();
    let reps = m.blocking.len();
    r.explain(if blocking_waited {
        format!(
            "A kernel on the legacy default stream, then one on a blocking stream: the second waited for the first in every repeat ({:.3} ms for two {:.3} ms kernels).",
            blocking.median, kernel.median
        )
    } else {
        format!(
            "A kernel on the legacy default stream, then one on a blocking stream: the second started before the first ended in {} of {reps} repeats ({:.3} ms for two {:.3} ms kernels), which the legacy default stream should not allow: see the failed check.",
            count(&m.blocking), blocking.median, kernel.median
        )
    });
    r.explain(if non_blocking_overlapped {
        format!(
            "With a non-blocking stream the second kernel started before the first ended in every repeat: they ran side by side ({:.3} ms in all, vs {:.3} ms with the blocking stream).",
            non_blocking.median, blocking.median
        )
    } else {
        format!(
            "With a non-blocking stream the second kernel should start before the first ends, but it waited in {} of {reps} repeats ({:.3} ms in all): see the failed check.",
            reps - count(&m.non_blocking),
            non_blocking.median
        )
    });
    r.explain("The legacy default stream (stream 0, what a launch without a stream uses) synchronizes with every blocking stream (cudaStreamCreate's default); cudaStreamNonBlocking opts a stream out.");
    r.explain("Compiling with nvcc --default-stream per-thread (cudaStreamPerThread, CU_STREAM_PER_THREAD) makes stream 0 an ordinary per-thread stream instead, which removes this implicit serialization for code that never names a stream.");
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialized_and_overlapped_pairs() {
        let serial = Pair::from_stamps([1_000, 6_000_000], [6_002_000, 11_000_000]).unwrap();
        assert!(!serial.overlapped());
        assert!((serial.gap_us() - 2.0).abs() < 1e-9);
        assert!((serial.total_ms() - 10.999).abs() < 1e-9);
        let side_by_side = Pair::from_stamps([1_000, 5_001_000], [4_000, 5_004_000]).unwrap();
        assert!(side_by_side.overlapped());
        assert!((side_by_side.gap_us() + 4997.0).abs() < 1e-9);
        assert!((side_by_side.total_ms() - 5.003).abs() < 1e-9);
        assert!(check_blocking_waited(&[serial]).is_ok());
        assert!(check_blocking_waited(&[serial, side_by_side]).is_err());
        assert!(check_non_blocking_overlapped(&[side_by_side]).is_ok());
        assert!(check_non_blocking_overlapped(&[side_by_side, serial]).is_err());
    }

    #[test]
    fn sleeps_outlast_a_launch_and_bound_a_repeat() {
        assert!(check_sleep(DEFAULT_SLEEP_US).is_ok());
        assert!(check_sleep(MIN_SLEEP_US).is_ok());
        assert!(check_sleep(0.001).is_err());
        assert!(check_sleep(15e6).is_ok());
        assert!(check_sleep(15e6 + 1.0).is_err());
        assert!(check_sleep(f64::INFINITY).is_err());
        assert!(check_sleep(f64::NAN).is_err());
    }

    #[test]
    fn stamps_of_a_kernel_that_did_not_run_are_refused() {
        assert!(Pair::from_stamps([0, 0], [1, 2]).is_err());
        assert!(Pair::from_stamps([5, 4], [1, 2]).is_err());
    }
}
