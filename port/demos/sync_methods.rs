//! # Five ways to wait for the GPU, and what each one waits for
//!
//! The concept: the host can wait for the whole device, for one stream (here the long one or
//! the short one), for one event, or not wait at all and ask (poll): five measurements of
//! four mechanisms. They differ in *what* they wait for, and so in how long the host is
//! held, and in *how* the host waits (spinning, yielding or sleeping).
//!
//! The seed technique is the CUDA C++ Programming Guide's "Explicit Synchronization" and
//! "Events" sections (`cudaDeviceSynchronize`, `cudaStreamSynchronize`,
//! `cudaEventSynchronize`, `cudaEventQuery`) with the tutorials' `SleepKernel` as the work.
//!
//! The setup, identical for every method: a long `sleep_kernel` of T ms on stream A and a
//! short one of T/10 on stream B, issued back to back so both run at once; then one method:
//!
//! | method                    | CUDA C++                      | streamlab                 | waits for          |
//! |---------------------------|-------------------------------|---------------------------|--------------------|
//! | device synchronize        | `cudaDeviceSynchronize()`     | `gpu.synchronize()`       | everything: ~T     |
//! | stream A synchronize      | `cudaStreamSynchronize(a)`    | `a.synchronize()`         | stream A: ~T       |
//! | stream B synchronize      | `cudaStreamSynchronize(b)`    | `b.synchronize()`         | stream B: ~T/10    |
//! | event synchronize         | `cudaEventSynchronize(e)` with `cudaEventBlockingSync` | `Event::blocking_sync()`, `e.synchronize()` | the point e was recorded (after B's kernel): ~T/10, host thread asleep |
//! | event polling             | `while (cudaEventQuery(e) == cudaErrorNotReady) {}` | `while !e.is_complete()? {}` | the same point, the CPU busy all along |
//!
//! The lesson: synchronize on the narrowest thing that covers what you need. A device
//! synchronize after stream B's work holds the host for stream A's long kernel too.
use serde::Serialize;

use crate::demos::{check_sleep_us, Options};
use crate::error::{Error, Result};
use crate::gpu::{Gpu, LaunchConfig};
use crate::report::Report;
use crate::stream::{Event, Stream};
use crate::timing::{host_ms, Stats};

pub const SUMMARY: &str =
    "device vs stream vs event synchronize vs polling: what each waits for, and for how long";
pub const FLAGS: &str = "--sleep-us (10000: the long kernel on stream A; B's is a tenth) --reps";

pub const DEFAULT_SLEEP_US: f64 = 10_000.0;
/// Below 1 ms the short kernel (a tenth) is too close to the launch and wake-up overheads
/// for the waits to tell the kernels apart; above 1 s one repeat (five waits for up to the
/// long kernel each) takes over five seconds.
pub const MIN_SLEEP_US: f64 = 1_000.0;
pub const MAX_SLEEP_US: f64 = 1e6;
/// The short kernel on stream B runs this fraction of the long one.
pub const SHORT_FRACTION: f64 = 0.1;

/// The ways of waiting this demo compares, in table order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Method {
    DeviceSynchronize,
    StreamLongSynchronize,
    StreamShortSynchronize,
    EventSynchronize,
    EventPolling,
}

pub const METHODS: [Method; 5] = [
    Method::DeviceSynchronize,
    Method::StreamLongSynchronize,
    Method::StreamShortSynchronize,
    Method::EventSynchronize,
    Method::EventPolling,
];

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::DeviceSynchronize => "device synchronize",
            Method::StreamLongSynchronize => "stream A synchronize",
            Method::StreamShortSynchronize => "stream B synchronize",
            Method::EventSynchronize => "event synchronize (blocking-sync event after B)",
            Method::EventPolling => "event polling (is_complete loop, event after B)",
        }
    }

    pub fn waits_for(self) -> &'static str {
        match self {
            Method::DeviceSynchronize => "all work on the device: A's long kernel and B's",
            Method::StreamLongSynchronize => "stream A's long kernel",
            Method::StreamShortSynchronize => "stream B's short kernel only",
            Method::EventSynchronize => "the event after B's kernel; the host thread sleeps",
            Method::EventPolling => "the event after B's kernel; the host thread spins",
        }
    }

    /// Whether this method waits for the long kernel (true) or only the short one.
    pub fn waits_for_long(self) -> bool {
        matches!(
            self,
            Method::DeviceSynchronize | Method::StreamLongSynchronize
        )
    }
}

/// Whether a method's measured wait fits what it waits for: at least 90% of the kernel it
/// waits for (the sleep kernels count clock ticks at the rated clock, so they never run
/// shorter), and, for the short ones, under half the long kernel.
pub fn check_wait(method: Method, measured_ms: f64, long_ms: f64, short_ms: f64) -> Result<String> {
    let (floor, what) = if method.waits_for_long() {
        (0.9 * long_ms, "the long kernel")
    } else {
        (0.9 * short_ms, "the short kernel")
    };
    if measured_ms < floor {
        return Err(Error::Verification(format!(
            "{}: returned after {measured_ms:.3} ms, before {what} ({floor:.3} ms) could have finished",
            method.name()
        )));
    }
    if !method.waits_for_long() && measured_ms >= 0.5 * long_ms {
        return Err(Error::Verification(format!(
            "{}: held the host {measured_ms:.3} ms, as if it waited for the long kernel ({long_ms:.3} ms)",
            method.name()
        )));
    }
    Ok(format!("{measured_ms:.3} ms: waited for {what}"))
}

/// The long kernel's length, `--sleep-us`, within this demo's range.
pub fn validate(sleep_us: f64) -> Result<()> {
    check_sleep_us(
        sleep_us,
        MIN_SLEEP_US,
        MAX_SLEEP_US,
        "the short kernel (a tenth) must stand out from launch overheads, and a repeat must stay short",
    )
}

/// Checks the flags this demo reads, before the GPU is touched: only `--sleep-us` (and
/// `--reps`); no allocation depends on a flag. The shared checks of every demo still apply.
pub fn check_options(opts: &Options) -> Result<()> {
    super::check_common(opts)?;
    validate(opts.sleep_us.unwrap_or(DEFAULT_SLEEP_US))
}

/// The two streams and two events every measurement uses.
pub struct SyncSetup {
    pub long_us: f64,
    pub short_us: f64,
    long_cycles: u64,
    short_cycles: u64,
    stream_long: Stream,
    stream_short: Stream,
    blocking_event: Event,
    polled_event: Event,
}

/// One measurement: how long the host was held, and how many times it polled.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Wait {
    pub host_ms: f64,
    pub polls: u64,
}

impl SyncSetup {
    pub fn new(gpu: &Gpu, long_us: f64) -> Result<SyncSetup> {
        validate(long_us)?;
        let short_us = long_us * SHORT_FRACTION;
        Ok(SyncSetup {
            long_us,
            short_us,
            long_cycles: gpu.cycles_for_micros(long_us),
            short_cycles: gpu.cycles_for_micros(short_us),
            stream_long: Stream::new("A (long)")?,
            stream_short: Stream::new("B (short)")?,
            blocking_event: Event::blocking_sync()?,
            polled_event: Event::without_timing()?,
        })
    }

    /// Issues both kernels, waits with `method`, and returns the host time from just before
    /// the first launch to the moment the method returned. Leaves the device idle.
    pub fn measure(&self, gpu: &Gpu, method: Method) -> Result<Wait> {
        let one = LaunchConfig::new((1, 1, 1), (1, 1, 1));
        let (result, ms) = host_ms(|| -> Result<u64> {
            gpu.sleep(&self.stream_long, one, self.long_cycles)?;
            gpu.sleep(&self.stream_short, one, self.short_cycles)?;
            self.blocking_event.record(&self.stream_short)?;
            self.polled_event.record(&self.stream_short)?;
            let mut polls = 0;
            match method {
                Method::DeviceSynchronize => gpu.synchronize()?,
                Method::StreamLongSynchronize => self.stream_long.synchronize()?,
                Method::StreamShortSynchronize => self.stream_short.synchronize()?,
                Method::EventSynchronize => self.blocking_event.synchronize()?,
                Method::EventPolling => loop {
                    polls += 1;
                    if self.polled_event.is_complete()? {
                        break;
                    }
                },
            }
            Ok(polls)
        });
        // Whatever the method left running finishes before the next measurement.
        let idle = gpu.synchronize();
        let polls = result?;
        idle?;
        Ok(Wait { host_ms: ms, polls })
    }
}

/// One row of the table.
#[derive(Debug, Clone, Serialize)]
pub struct MethodRow {
    pub method: Method,
    pub name: &'static str,
    pub waits_for: &'static str,
    pub host_ms: Stats,
    /// Polls of the polling loop (zero for the other methods).
    pub polls: Stats,
}

/// Every method `reps` times after a warm-up, interleaved.
pub fn measure_all(gpu: &Gpu, setup: &SyncSetup, reps: usize) -> Result<Vec<MethodRow>> {
    for m in METHODS {
        setup.measure(gpu, m)?;
    }
    let mut samples: Vec<(Vec<f64>, Vec<f64>)> = vec![(vec![], vec![]); METHODS.len()];
    for _ in 0..reps.max(1) {
        for (k, m) in METHODS.into_iter().enumerate() {
            let w = setup.measure(gpu, m)?;
            samples[k].0.push(w.host_ms);
            samples[k].1.push(w.polls as f64);
        }
    }
    Ok(METHODS
        .into_iter()
        .zip(samples)
        .map(|(m, (ms, polls))| MethodRow {
            method: m,
            name: m.name(),
            waits_for: m.waits_for(),
            host_ms: Stats::of(&ms),
            polls: Stats::of(&polls),
        })
        .collect())
}

pub fn run(gpu: &Gpu, opts: &Options) -> Result<Report> {
    let long_us = opts.sleep_us.unwrap_or(DEFAULT_SLEEP_US);
    let setup = SyncSetup::new(gpu, long_us)?;
    let rows = measure_all(gpu, &setup, opts.reps)?;
    let (long_ms, short_ms) = (setup.long_us / 1e3, setup.short_us / 1e3);

    let mut r = Report::new(
        "sync-methods",
        "device, stream and event synchronization, and polling",
        &gpu.info.name,
    );
    r.param("long_kernel_us", setup.long_us)
        .param("short_kernel_us", setup.short_us)
        .param("reps", opts.reps);
    r.figure("long kernel on stream A (nominal)", long_ms, "ms")
        .figure("short kernel on stream B (nominal)", short_ms, "ms");
    for row in &rows {
        r.figure(
            &format!("{}: host waited", row.name),
            row.host_ms.median,
            "ms",
        );
    }
    if let Some(p) = rows.iter().find(|r| r.method == Method::EventPolling) {
        r.figure(
            "event polling: polls until complete",
            p.polls.median,
            "polls",
        );
    }
    r.detail("methods", &rows);
    let mut fits = Vec::with_capacity(rows.len());
    for row in &rows {
        let outcome = check_wait(row.method, row.host_ms.median, long_ms, short_ms);
        fits.push((row.method, outcome.is_ok()));
        r.check(
            &format!("{} waited for {}", row.name, row.waits_for),
            outcome,
        );
    }
    let fit = |m: Method| fits.iter().any(|&(f, ok)| f == m && ok);
    let get = |m: Method| {
        rows.iter()
            .find(|r| r.method == m)
            .map_or(0.0, |r| r.host_ms.median)
    };
    let (device, stream_b) = (
        get(Method::DeviceSynchronize),
        get(Method::StreamShortSynchronize),
    );
    r.explain(
        if fit(Method::DeviceSynchronize) && fit(Method::StreamShortSynchronize) {
            format!(
                "A device synchronize held the host until every stream was idle ({device:.3} ms, the long kernel), though only stream B's result was needed; stream B's synchronize returned after B's short kernel ({stream_b:.3} ms)."
            )
        } else {
            format!(
                "The device and stream-B waits did not match what they cover ({device:.3} ms and {stream_b:.3} ms against a {long_ms:.3} ms kernel on A and a {short_ms:.3} ms one on B): see the checks."
            )
        },
    );
    let event = get(Method::EventSynchronize);
    r.explain(if fit(Method::EventSynchronize) {
        format!(
            "An event marks one point in a stream: synchronizing on the event recorded after B's kernel returned at that point ({event:.3} ms), not at the end of A's. Created with BLOCKING_SYNC, the host thread sleeps in the driver instead of spinning."
        )
    } else {
        format!(
            "The event synchronize held the host {event:.3} ms, not the short kernel's {short_ms:.3} ms that its event follows: see the checks."
        )
    });
    let (polling, polls) = (
        get(Method::EventPolling),
        rows.iter()
            .find(|r| r.method == Method::EventPolling)
            .map_or(0.0, |r| r.polls.median),
    );
    r.explain(if fit(Method::EventPolling) {
        format!(
            "Polling is_complete() also returned after B's kernel ({polling:.3} ms) but kept a CPU core busy the whole time ({polls:.0} polls); it pays off only when the host has other work to do between polls."
        )
    } else {
        format!(
            "Polling is_complete() returned after {polling:.3} ms ({polls:.0} polls), not at the point after B's kernel: see the checks."
        )
    });
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_are_judged_against_the_kernel_each_method_covers() {
        // Device sync: must have waited for the long kernel.
        assert!(check_wait(Method::DeviceSynchronize, 10.2, 10.0, 1.0).is_ok());
        assert!(check_wait(Method::DeviceSynchronize, 1.1, 10.0, 1.0).is_err());
        // Stream B: at least the short kernel, well under the long one.
        assert!(check_wait(Method::StreamShortSynchronize, 1.1, 10.0, 1.0).is_ok());
        assert!(check_wait(Method::StreamShortSynchronize, 0.2, 10.0, 1.0).is_err());
        assert!(check_wait(Method::EventPolling, 9.9, 10.0, 1.0).is_err());
    }

    #[test]
    fn every_method_has_a_distinct_name() {
        let mut names: Vec<&str> = METHODS.iter().map(|m| m.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), METHODS.len());
        assert_eq!(METHODS.iter().filter(|m| m.waits_for_long()).count(), 2);
    }

    #[test]
    fn long_waits_must_cover_the_long_kernel_and_short_ones_must_not() {
        assert!(check_wait(Method::StreamLongSynchronize, 10.0, 10.0, 1.0).is_ok());
        assert!(check_wait(Method::StreamLongSynchronize, 1.0, 10.0, 1.0).is_err());
        assert!(check_wait(Method::EventSynchronize, 1.0, 10.0, 1.0).is_ok());
        assert!(check_wait(Method::EventSynchronize, 6.0, 10.0, 1.0).is_err());
    }

    #[test]
    fn options_refuse_a_sleep_outside_the_range_in_one_line() {
        let with = |us: f64| Options {
            sleep_us: Some(us),
            ..Options::default()
        };
        check_options(&Options::default()).unwrap();
        check_options(&with(MIN_SLEEP_US)).unwrap();
        check_options(&with(MAX_SLEEP_US)).unwrap();
        for us in [0.0, 999.0, 1e6 + 1.0, f64::NAN, f64::INFINITY, -5.0] {
            match check_options(&with(us)) {
                Err(Error::InvalidInput(why)) => {
                    assert!(why.contains("--sleep-us") && !why.contains('\n'), "{why}")
                }
                other => panic!("--sleep-us {us}: {other:?}"),
            }
        }
    }
}
