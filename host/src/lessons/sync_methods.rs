//! # Five ways to wait for the GPU, and what each one waits for
//!
//! The host can wait for the whole device, for one stream, for one event, or not wait and
//! poll: they differ in *what* they wait for, so in how long the host is held, and in *how*
//! the host waits (spinning or sleeping). Synchronize on the narrowest thing that covers what
//! you need: a device synchronize after stream B's work holds the host for stream A's too.
//!
//! The seed technique is "Explicit Synchronization" and "Events" in NVIDIA's CUDA C++
//! Programming Guide, with the tutorials' `SleepKernel` as the work: a long kernel of T on
//! stream A and a short one of T/10 on stream B, issued back to back, then one wait:
//!
//! ```text
//! sleep_kernel<<<1, 1, 0, a>>>(T);  sleep_kernel<<<1, 1, 0, b>>>(T / 10);
//! cudaEventRecord(e, b);
//! cudaDeviceSynchronize();                                  // everything: ~T
//! cudaStreamSynchronize(b);                                 // stream B: ~T/10
//! cudaStreamSynchronize(a);                                 // stream A: ~T
//! cudaEventSynchronize(e);           // e from cudaEventCreateWithFlags(cudaEventBlockingSync)
//! while (cudaEventQuery(e) == cudaErrorNotReady) {}        // the same point, CPU busy
//! ```
//!
//! In Rust: `gpu.synchronize()`, `b.synchronize()`, `a.synchronize()`,
//! `Event::blocking_sync(&gpu)` then `e.synchronize()`, and `while !e.is_complete()? {}`;
//! `gpu.sleep(&s, config, cycles)` is the launch. Each version is one way of waiting, timed
//! on the host from just before the first launch to the moment the wait returned.
//!
//! The bound: the device and stream A waits last at least T; stream B's and the event's at
//! least T/10 and well under T.
use serde::Serialize;

use crate::lab::harness::lesson::no_such_version;
use crate::lab::harness::stats::host_ms;
use crate::lab::kit::sleep::serial_ms;
use crate::lab::{
    args, fixed, t, Checks, Drawing, Lesson, Measured, Plan, Report, Sample, Text, WorkModel,
};
use crate::runtime::{Error, Event, Gpu, LaunchConfig, Result, Stream};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Sleep of the long kernel on stream A, µs [1000..=1000000]; B's is a tenth. Below 1 ms
    /// the short kernel drowns in launch and wake-up costs. Try 100000.
    #[arg(long, default_value_t = 10_000.0, value_parser = args::number(1000.0..=1e6))]
    pub sleep_us: f64,
}

/// The short kernel on stream B runs this fraction of the long one.
pub const SHORT_FRACTION: f64 = 0.1;
/// The polling loop's part: how many times it asked.
pub const POLLS: &str = "polls";

/// The ways of waiting, in version order: the baseline (the whole device), the narrow wait
/// that is the technique (stream B), then the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Method {
    /// Waits for the whole device, though only stream B's result is needed.
    DeviceSynchronize,
    /// Waits for stream B only.
    StreamShortSynchronize,
    /// Waits for stream A, the long kernel's.
    StreamLongSynchronize,
    /// Waits for an event recorded after B's kernel.
    EventSynchronize,
    /// Asks whether that event has completed, until it has.
    EventPolling,
}

pub const METHODS: [Method; 5] = [
    Method::DeviceSynchronize,
    Method::StreamShortSynchronize,
    Method::StreamLongSynchronize,
    Method::EventSynchronize,
    Method::EventPolling,
];

pub struct SyncMethods {
    long_us: f64,
    long_cycles: u64,
    short_cycles: u64,
    stream_long: Stream,
    stream_short: Stream,
    blocking_event: Event,
    polled_event: Event,
}

impl SyncMethods {
    /// Issues both kernels and waits with `method`: the host time until it returned. Leaves
    /// the device idle.
    fn wait(&self, gpu: &Gpu, method: Method) -> Result<Sample> {
        let one = LaunchConfig::new((1, 1, 1), (1, 1, 1));
        let (polls, ms) = host_ms(|| -> Result<u64> {
            gpu.sleep(&self.stream_long, one, self.long_cycles)?;
            gpu.sleep(&self.stream_short, one, self.short_cycles)?;
            self.blocking_event.record(&self.stream_short)?;
            self.polled_event.record(&self.stream_short)?;
            let mut polls = 0;
            match method {
                Method::DeviceSynchronize => gpu.synchronize()?,
                Method::StreamShortSynchronize => self.stream_short.synchronize()?,
                Method::StreamLongSynchronize => self.stream_long.synchronize()?,
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
        let polls = polls?;
        idle?;
        Ok(match method {
            Method::EventPolling => Sample::ms(ms).part(POLLS, polls as f64),
            _ => Sample::ms(ms),
        })
    }
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::DeviceSynchronize => "device synchronize",
            Method::StreamShortSynchronize => "stream B synchronize",
            Method::StreamLongSynchronize => "stream A synchronize",
            Method::EventSynchronize => "event synchronize (blocking-sync event after B)",
            Method::EventPolling => "event polling (is_complete loop, event after B)",
        }
    }

    pub fn waits_for(self) -> &'static str {
        match self {
            Method::DeviceSynchronize => "all work on the device: A's long kernel and B's",
            Method::StreamShortSynchronize => "stream B's short kernel only",
            Method::StreamLongSynchronize => "stream A's long kernel",
            Method::EventSynchronize => "the event after B's kernel; the host thread sleeps",
            Method::EventPolling => "the event after B's kernel; the host thread spins",
        }
    }

    /// Whether this method waits for the long kernel (true) or only the short one.
    pub fn waits_for_long(self) -> bool {
        matches!(self, Method::DeviceSynchronize | Method::StreamLongSynchronize)
    }
}

/// Whether a method's measured wait fits what it waits for: at least 90% of the kernel it
/// waits for (the sleep kernels count clock ticks at the rated clock, so they never run
/// shorter), and, for the short ones, under half the long kernel.
pub fn check_wait(method: Method, measured_ms: f64, long_ms: f64) -> Result<Text> {
    let (floor, what) = if method.waits_for_long() {
        (0.9 * long_ms, "the long kernel")
    } else {
        (0.9 * long_ms * SHORT_FRACTION, "the short kernel")
    };
    if measured_ms < floor {
        let (method, ms, floor) =
            (method.name().to_string(), fixed(measured_ms, 3), fixed(floor, 3));
        return Err(Error::Verification(t!(
            "error.sync_methods.returned_early",
            method,
            ms,
            what,
            floor
        )));
    }
    if !method.waits_for_long() && measured_ms >= 0.5 * long_ms {
        let (method, ms, long) =
            (method.name().to_string(), fixed(measured_ms, 3), fixed(long_ms, 3));
        return Err(Error::Verification(t!("error.sync_methods.held_too_long", method, ms, long)));
    }
    Ok(t!("sync_methods.waited", ms = fixed(measured_ms, 3), what))
}

impl Lesson for SyncMethods {
    const NAME: &'static str = "sync-methods";
    const SUMMARY: &'static str =
        "device vs stream vs event synchronize vs polling: what each waits for, and for how long";
    const DRAWING: Drawing = Drawing {
        host_row: true,
        host_timed: true,
        note: "Each run's last wait, a device synchronize that leaves the GPU idle for the next run, is untimed.",
        ..Drawing::PLAIN
    };
    type Args = Args;

    fn versions(_: &Args) -> Vec<String> {
        METHODS.iter().map(|m| m.name().to_string()).collect()
    }

    fn plan(a: &Args, _: &WorkModel) -> Result<Plan> {
        // Every method waits for the long kernel at the latest (the device is idled after
        // each); in the worst case the short one runs after it.
        let sleeps = METHODS.len() as f64 * (1.0 + SHORT_FRACTION);
        Ok(Plan::new().work(serial_ms(sleeps, a.sleep_us), "--sleep-us"))
    }

    fn setup(gpu: &Gpu, a: &Args, _seed: u64) -> Result<SyncMethods> {
        Ok(SyncMethods {
            long_us: a.sleep_us,
            long_cycles: gpu.info.cycles_for_micros(a.sleep_us),
            short_cycles: gpu.info.cycles_for_micros(a.sleep_us * SHORT_FRACTION),
            stream_long: Stream::new(gpu, "A (long)")?,
            stream_short: Stream::new(gpu, "B (short)")?,
            blocking_event: Event::blocking_sync(gpu)?,
            polled_event: Event::without_timing(gpu)?,
        })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        match METHODS.get(v) {
            Some(&method) => self.wait(gpu, method),
            None => no_such_version::<Self>(v),
        }
    }

    fn streams(&self) -> Vec<&Stream> {
        vec![&self.stream_long, &self.stream_short]
    }

    fn verify(&mut self, _gpu: &Gpu, m: &Measured, checks: &mut Checks) -> Result<()> {
        for (method, v) in METHODS.iter().zip(&m.versions) {
            let name = format!("{} waited for {}", method.name(), method.waits_for());
            let outcome = check_wait(*method, v.time.median, self.long_us / 1e3);
            // Returning before the long kernel needs B's kernel to run beside A's.
            match method.waits_for_long() {
                true => checks.record(&name, outcome),
                false => checks.concurrency(&name, outcome),
            }
        }
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        interpret(self.long_us, m, r);
    }
}

/// The figures and what they mean, for a long kernel of `long_us`.
pub fn interpret(long_us: f64, m: &Measured, r: &mut Report) {
    let (long_ms, short_ms) = (long_us / 1e3, long_us * SHORT_FRACTION / 1e3);
    let at = |method: Method| METHODS.iter().position(|&x| x == method).map(|i| m.version(i));
    let median = |method: Method| at(method).map_or(f64::NAN, |v| v.time.median);
    let fits = |method: Method| check_wait(method, median(method), long_ms).is_ok();
    let polls = at(Method::EventPolling).map_or(f64::NAN, |v| v.part(POLLS));
    r.param("short_kernel_us", long_us * SHORT_FRACTION);
    r.figure("long kernel on stream A (nominal)", long_ms, "ms")
        .figure("short kernel on stream B (nominal)", short_ms, "ms")
        .figure("event polling: polls until complete", polls, "polls");
    let (device, stream_b) =
        (median(Method::DeviceSynchronize), median(Method::StreamShortSynchronize));
    let (event, polling) = (median(Method::EventSynchronize), median(Method::EventPolling));
    let [device, stream_b, long_ms, short_ms, event, polling] =
        [device, stream_b, long_ms, short_ms, event, polling].map(|v| fixed(v, 3));
    let polls = fixed(polls, 0);
    r.explain(if fits(Method::DeviceSynchronize) && fits(Method::StreamShortSynchronize) {
        t!("sync_methods.device", device, stream_b)
    } else {
        t!("sync_methods.device_mismatch", device, stream_b, long_ms, short_ms)
    });
    r.explain(if fits(Method::EventSynchronize) {
        t!("sync_methods.event", event)
    } else {
        t!("sync_methods.event_mismatch", event, short_ms)
    });
    r.explain(if fits(Method::EventPolling) {
        t!("sync_methods.polling", polling, polls)
    } else {
        t!("sync_methods.polling_mismatch", polling, polls)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

    #[test]
    fn waits_are_judged_against_the_kernel_each_method_covers() {
        // Device sync: must have waited for the long kernel.
        assert!(check_wait(Method::DeviceSynchronize, 10.2, 10.0).is_ok());
        assert!(check_wait(Method::DeviceSynchronize, 1.1, 10.0).is_err());
        // Stream B: at least the short kernel, well under the long one.
        assert!(check_wait(Method::StreamShortSynchronize, 1.1, 10.0).is_ok());
        assert!(check_wait(Method::StreamShortSynchronize, 0.2, 10.0).is_err());
        assert!(check_wait(Method::EventPolling, 9.9, 10.0).is_err());
    }

    #[test]
    fn long_waits_must_cover_the_long_kernel_and_short_ones_must_not() {
        assert!(check_wait(Method::StreamLongSynchronize, 10.0, 10.0).is_ok());
        assert!(check_wait(Method::StreamLongSynchronize, 1.0, 10.0).is_err());
        assert!(check_wait(Method::EventSynchronize, 1.0, 10.0).is_ok());
        assert!(check_wait(Method::EventSynchronize, 6.0, 10.0).is_err());
    }

    #[test]
    fn every_method_is_a_version_with_a_distinct_name() {
        let names = SyncMethods::versions(&args_from::<SyncMethods>(&[]).unwrap());
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), METHODS.len());
        // The baseline first, the technique second.
        assert_eq!(names[0], "device synchronize");
        assert_eq!(names[1], "stream B synchronize");
        assert_eq!(METHODS.iter().filter(|m| m.waits_for_long()).count(), 2);
    }

    // What the flag checks refuse is tested in tests/sync_methods.rs.

    /// Medians in version order: device, stream B, stream A, event, polling.
    fn measured(ms: [f64; 5], polls: f64) -> Measured {
        let runs = ms
            .iter()
            .zip(METHODS)
            .map(|(&t, m)| match m {
                Method::EventPolling => vec![Sample::ms(t).part(POLLS, polls)],
                _ => vec![Sample::ms(t)],
            })
            .collect();
        Measured::from_samples(SyncMethods::versions(&args_from::<SyncMethods>(&[]).unwrap()), runs)
    }

    fn told(m: &Measured) -> String {
        let mut r = Report::new("sync-methods", "", "");
        interpret(10_000.0, m, &mut r);
        r.interpretation.join("\n")
    }

    #[test]
    fn interpretation_follows_the_data() {
        let good = told(&measured([10.1, 1.05, 10.1, 1.1, 1.02], 5000.0));
        assert!(
            good.contains("held the host until every stream was idle")
                && good.contains("sleeps in the driver")
                && good.contains("5000 polls"),
            "{good}"
        );
        // Every wait as long as the long kernel: the narrow waits did not return early.
        let serial = told(&measured([10.1, 10.1, 10.1, 10.1, 10.1], 9000.0));
        assert!(
            serial.contains("did not match")
                && serial.contains("not the short kernel's")
                && serial.contains("not at the point"),
            "{serial}"
        );
        assert!(!serial.contains("sleeps in the driver"), "{serial}");
        assert!((measured([10.0, 1.0, 10.0, 1.0, 1.0], 1.0).speedup() - 10.0).abs() < 1e-12);
    }
}
