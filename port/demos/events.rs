//! # Events: GPU timing and cross-stream dependencies
//!
//! The concept: an event is a marker in a stream that completes when everything queued
//! before it has finished. Two uses:
//!
//! 1. Timing. Record one event before a kernel and one after; the GPU stamps both when it
//!    reaches them, so their difference is the kernel's GPU time, free of the host's launch
//!    and synchronization overheads that a host clock around the launch would include.
//! 2. Dependencies between streams. Streams are independent queues: a kernel on stream B
//!    does not wait for a kernel on stream A unless told to. `cudaStreamWaitEvent(B, e)`
//!    makes B's later work wait until event `e` (recorded on A after the producer) completes,
//!    without blocking the host and without waiting for anything else A does later.
//!
//! The seed technique is the CUDA C++ Programming Guide's pair of event patterns: timing a
//! kernel between two `cudaEventRecord`s read with `cudaEventElapsedTime` (as in NVIDIA's
//! "How to Implement Performance Metrics in CUDA C/C++"), and the inter-stream dependency
//! `cudaEventRecord(e, a); cudaStreamWaitEvent(b, e)` of its "Explicit Synchronization"
//! section.
//!
//! Forget the wait and the consumer reads whatever the buffer held before: a race. This demo
//! makes that race certain rather than rare: the producer (`slow_scale_kernel`) spins for
//! `--sleep-us` before writing its output, so a consumer that does not wait always finishes
//! long before the producer has written anything, and reads the stale value (−1) instead.
//!
//! | CUDA C++                                    | streamlab                                 |
//! |---------------------------------------------|-------------------------------------------|
//! | `cudaEventCreate(&e)` / `cudaEventRecord(e, s)` | `Event::new()` / `e.record(&s)`       |
//! | `cudaEventSynchronize(stop)`                | `stop.synchronize()`                      |
//! | `cudaEventElapsedTime(&ms, start, stop)`    | `stop.elapsed_ms(&start)`                 |
//! | `cudaEventCreateWithFlags(&e, cudaEventDisableTiming)` | `Event::without_timing()`      |
//! | `cudaStreamWaitEvent(b, e, 0)`              | `b.wait_event(&e)`                        |
//!
//! ```text
//! slow_scale<<<g, 256, 0, a>>>(in, produced, 2.0f, cycles);   // stream A: the producer
//! cudaEventRecord(ready, a);
//! cudaStreamWaitEvent(b, ready, 0);                            // omit this: the race
//! vector_add<<<g, 256, 0, b>>>(produced, in, consumed, n);     // stream B: the consumer
//! ```
//!
//! Both streams are ordinary (blocking) streams: they synchronize only with the legacy default
//! stream, never with each other, so without the wait their kernels really run side by side.
use cust::memory::DeviceBuffer;
use kernels_gpu::math::{add_element, scale_element};
use serde::Serialize;

use crate::data::{ensure_bitwise_equal, random_inputs};
use crate::demos::estimate::{ensure_bounded, WorkModel};
use crate::demos::{
    buffer_bytes, check_elements, check_sleep_us, ensure_host_memory, Options, MAX_ELEMENTS,
};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::memory::{copy_to_device_sync, copy_to_host_sync, device};
use crate::report::Report;
use crate::stream::{Event, Stream};
use crate::timing::{host_ms, Stats};

pub const SUMMARY: &str =
    "event timing of a kernel; a cross-stream dependency with wait_event, and the race without it";
pub const FLAGS: &str =
    "--elements (262144) --iters (1000, timed kernel) --sleep-us (20000, slow producer) --reps";

/// Small enough that the whole producer grid is resident at once on an H100 (1024 blocks of
/// 256 threads; its 132 SMs of 2048 threads hold 1056 such blocks), so it spins once.
pub const DEFAULT_ELEMENTS: usize = 1 << 18;
/// Iterations of the timed compute kernel (about a third of a millisecond at the default size).
pub const DEFAULT_ITERS: u32 = 1000;
/// How long the producer spins before writing: long enough that an unsynchronized consumer
/// always finishes first.
pub const DEFAULT_SLEEP_US: f64 = 20_000.0;
/// Below this the producer's spin is too short to be sure an unsynchronized consumer
/// finishes first; above the maximum one run takes over a second per wave.
pub const MIN_SLEEP_US: f64 = 100.0;
pub const MAX_SLEEP_US: f64 = 1e6;
/// The producer computes `input * PRODUCER_FACTOR`: a power of two, so the product is exact
/// and the GPU's bits equal the CPU's whether or not the compiler fuses it into an FMA.
pub const PRODUCER_FACTOR: f32 = 2.0;
/// What the producer's output buffer holds before the producer has run.
pub const STALE: f32 = -1.0;
/// The producer's block size (`LaunchConfig::for_elements`).
const BLOCK: usize = 256;

/// How many waves of blocks the spinning producer takes on `model`'s GPU: each wave spins
/// for the whole `--sleep-us`.
pub fn producer_waves(n: usize, model: &WorkModel) -> usize {
    model.waves(n.div_ceil(BLOCK))
}

/// Checks the flags without a GPU: the element count, the producer's spin, host memory (the
/// input, the consumer's output and the CPU's expected values) and the work of one repeat
/// under `model`: two producer runs (each `producer_waves` x `--sleep-us`) and one timed
/// compute kernel.
pub fn check_sizes(n: usize, iters: u32, sleep_us: f64, model: &WorkModel) -> Result<()> {
    check_elements(n, MAX_ELEMENTS)?;
    check_sleep_us(
        sleep_us,
        MIN_SLEEP_US,
        MAX_SLEEP_US,
        "the producer must spin long enough for an unsynchronized consumer to finish first, and a run must stay short",
    )?;
    let waves = producer_waves(n, model);
    let producer_ms = waves as f64 * sleep_us / 1e3;
    ensure_bounded(
        "events",
        2.0 * producer_ms + model.compute_ms(n, iters) + 6.0 * model.elementwise_ms(n),
        &format!(
            "--elements {n} (a producer of {waves} waves, each spinning --sleep-us {sleep_us}) with --iters {iters}"
        ),
    )?;
    ensure_host_memory(
        buffer_bytes::<f32>(n, 4)?,
        &format!("the events demo's {n} floats"),
    )
}

/// Checks the flags this demo reads, before the GPU is touched.
pub fn check_options(opts: &Options) -> Result<()> {
    check_sizes(
        opts.elements.unwrap_or(DEFAULT_ELEMENTS),
        opts.iters.unwrap_or(DEFAULT_ITERS),
        opts.sleep_us.unwrap_or(DEFAULT_SLEEP_US),
        &WorkModel::H100,
    )
}

/// The same checks for the GPU present, plus its free device memory (three arrays).
pub fn validate(gpu: &Gpu, n: usize, iters: u32, sleep_us: f64) -> Result<()> {
    check_sizes(n, iters, sleep_us, &WorkModel::for_gpu(gpu))?;
    gpu.ensure_device_memory(buffer_bytes::<f32>(n, 3)?, "three arrays")
}

/// What the consumer must compute for input `x`: the producer's `x * 2` plus `x`.
pub fn expected_element(x: f32) -> f32 {
    add_element(scale_element(x, PRODUCER_FACTOR, 0.0), x)
}

/// What a consumer that read the producer's buffer before the producer wrote it computes.
pub fn stale_element(x: f32) -> f32 {
    add_element(STALE, x)
}

/// How a consumer's output compares with the right answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mismatches {
    /// Elements whose bits differ from the right answer.
    pub wrong: usize,
    /// Of those, how many hold exactly what the stale buffer gives.
    pub stale: usize,
    pub total: usize,
    /// The first wrong element: (index, got, expected).
    pub example: Option<(usize, f32, f32)>,
}

/// Compares `got` with [`expected_element`] of `input`, bit for bit.
pub fn count_mismatches(input: &[f32], got: &[f32]) -> Mismatches {
    let mut m = Mismatches {
        wrong: 0,
        stale: 0,
        total: got.len(),
        example: None,
    };
    for (i, (&x, &g)) in input.iter().zip(got).enumerate() {
        let want = expected_element(x);
        if g.to_bits() != want.to_bits() {
            m.wrong += 1;
            if g.to_bits() == stale_element(x).to_bits() {
                m.stale += 1;
            }
            m.example.get_or_insert((i, g, want));
        }
    }
    m
}

/// The producer/consumer pair on two streams, and the kernel timed with events.
pub struct CrossStream {
    pub n: usize,
    pub iters: u32,
    pub cycles: u64,
    pub input: Vec<f32>,
    /// The consumer's output after the last run.
    pub output: Vec<f32>,
    dev_input: DeviceBuffer<f32>,
    produced: DeviceBuffer<f32>,
    consumed: DeviceBuffer<f32>,
    producer: Stream,
    consumer: Stream,
    ready: Event,
    start: Event,
    producer_done: Event,
    consumer_done: Event,
}

/// When each side finished, in GPU ms after the producer started.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RaceRun {
    pub producer_finished_ms: f64,
    pub consumer_finished_ms: f64,
}

/// Event time and host time of one compute kernel, `reps` times after a warm-up.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct KernelTiming {
    /// Between two events around the kernel (GPU time).
    pub event_ms: Stats,
    /// Host clock around launch + synchronize (GPU time plus launch and wake-up overheads).
    pub host_ms: Stats,
}

impl CrossStream {
    pub fn new(gpu: &Gpu, n: usize, iters: u32, sleep_us: f64, seed: u64) -> Result<CrossStream> {
        validate(gpu, n, iters, sleep_us)?;
        let input = random_inputs(n, seed);
        let dev_input = device(n)?;
        copy_to_device_sync(&input, &dev_input)?;
        Ok(CrossStream {
            n,
            iters,
            cycles: gpu.cycles_for_micros(sleep_us),
            input,
            output: vec![0.0; n],
            dev_input,
            produced: device(n)?,
            consumed: device(n)?,
            producer: Stream::new("producer (A)")?,
            consumer: Stream::new("consumer (B)")?,
            ready: Event::without_timing()?,
            start: Event::new()?,
            producer_done: Event::new()?,
            consumer_done: Event::new()?,
        })
    }

    /// One run: the producer on stream A, the consumer on stream B, with or without
    /// `B.wait_event(ready)`. Afterwards `self.output` holds what the consumer computed.
    /// Only device memory is copied asynchronously (the copy back is synchronous), so an
    /// error leaves no copy into host memory in flight.
    pub fn run(&mut self, gpu: &Gpu, wait: bool) -> Result<RaceRun> {
        let (a, b) = (&self.producer, &self.consumer);
        // Reset: the producer's buffer to the stale value, the consumer's to zero; then both
        // streams are idle and start from the same state.
        gpu.scale(a, &self.produced, 0.0, STALE)?;
        gpu.scale(a, &self.consumed, 0.0, 0.0)?;
        a.synchronize()?;

        self.start.record(a)?;
        gpu.slow_scale(
            a,
            &self.dev_input,
            &self.produced,
            PRODUCER_FACTOR,
            self.cycles,
        )?;
        self.ready.record(a)?;
        self.producer_done.record(a)?;
        if wait {
            b.wait_event(&self.ready)?;
        }
        gpu.vector_add(b, &self.produced, &self.dev_input, &self.consumed)?;
        self.consumer_done.record(b)?;
        b.synchronize()?;
        a.synchronize()?;
        copy_to_host_sync(&self.consumed, &mut self.output)?;
        Ok(RaceRun {
            producer_finished_ms: self.producer_done.elapsed_ms(&self.start)?,
            consumer_finished_ms: self.consumer_done.elapsed_ms(&self.start)?,
        })
    }

    /// The compute kernel on a copy of the input, timed with two events around it and with
    /// the host clock around its launch and synchronize, `reps` times after a warm-up.
    pub fn time_kernel(&mut self, gpu: &Gpu, reps: usize) -> Result<KernelTiming> {
        let s = &self.producer;
        let (start, stop) = (&self.start, &self.producer_done);
        let (mut ev, mut host) = (vec![], vec![]);
        for rep in 0..=reps.max(1) {
            // Fresh input each time, outside the timed region.
            s.copy_on_device(&self.dev_input, &self.consumed)?;
            s.synchronize()?;
            let (r, h) = host_ms(|| -> Result<f64> {
                start.record(s)?;
                gpu.compute(s, &self.consumed, self.iters)?;
                stop.record(s)?;
                stop.synchronize()?;
                stop.elapsed_ms(start)
            });
            let r = r?;
            if rep > 0 {
                ev.push(r);
                host.push(h);
            }
        }
        Ok(KernelTiming {
            event_ms: Stats::of(&ev),
            host_ms: Stats::of(&host),
        })
    }

    pub fn mismatches(&self) -> Mismatches {
        count_mismatches(&self.input, &self.output)
    }

    /// The consumer's output against the CPU, bit for bit (exact float operations).
    pub fn check_against_cpu(&self) -> Result<String> {
        let expected: Vec<f32> = self.input.iter().map(|&x| expected_element(x)).collect();
        ensure_bitwise_equal("consumer output vs CPU", &self.output, &expected)?;
        Ok(format!("all {} elements identical to the CPU's", self.n))
    }
}

/// Everything the race part measures over `reps` runs of each version.
pub struct RaceResults {
    pub with_wait: Vec<(RaceRun, Mismatches)>,
    pub without_wait: Vec<(RaceRun, Mismatches)>,
    /// The right version's CPU check of every run, first failure if any.
    pub right_vs_cpu: Result<String>,
}

pub fn race(gpu: &Gpu, c: &mut CrossStream, reps: usize) -> Result<RaceResults> {
    let (mut with_wait, mut without_wait) = (vec![], vec![]);
    let mut right_vs_cpu = Ok(String::new());
    for _ in 0..reps.max(1) {
        let r = c.run(gpu, true)?;
        if right_vs_cpu.is_ok() {
            right_vs_cpu = c.check_against_cpu();
        }
        with_wait.push((r, c.mismatches()));
        let r = c.run(gpu, false)?;
        without_wait.push((r, c.mismatches()));
    }
    Ok(RaceResults {
        with_wait,
        without_wait,
        right_vs_cpu,
    })
}

/// Passes when every run without the wait read stale data (the race this demo sets up).
pub fn check_race_observed(runs: &[(RaceRun, Mismatches)]) -> Result<String> {
    let missed = runs.iter().filter(|(_, m)| m.wrong == 0).count();
    if missed > 0 || runs.is_empty() {
        return Err(Error::Verification(format!(
            "the unsynchronized consumer read correct data in {missed} of {} runs: the race was not reproduced (raise --sleep-us)",
            runs.len()
        )));
    }
    let worst = runs.iter().map(|(_, m)| m.wrong).min().unwrap_or(0);
    Ok(format!(
        "in all {} runs (at least {worst} of {} elements wrong each time)",
        runs.len(),
        runs[0].1.total
    ))
}

/// Passes when the consumer finished after the producer with the wait, and before it without.
pub fn check_ordering(with_wait: &[RaceRun], without_wait: &[RaceRun]) -> Result<String> {
    if let Some(r) = with_wait
        .iter()
        .find(|r| r.consumer_finished_ms < r.producer_finished_ms)
    {
        return Err(Error::Verification(format!(
            "with the wait, the consumer finished at {:.3} ms, before the producer ({:.3} ms)",
            r.consumer_finished_ms, r.producer_finished_ms
        )));
    }
    if let Some(r) = without_wait
        .iter()
        .find(|r| r.consumer_finished_ms >= r.producer_finished_ms)
    {
        return Err(Error::Verification(format!(
            "without the wait, the consumer finished at {:.3} ms, not before the producer ({:.3} ms): the streams did not run concurrently",
            r.consumer_finished_ms, r.producer_finished_ms
        )));
    }
    Ok("with the wait the consumer ends after the producer; without it, before".into())
}

/// Passes when the events around the producer measured at least its spin in every run: the
/// spin counts clock ticks at the rated (peak) clock, so it never takes less than
/// `--sleep-us`; 5% is left for the events' resolution. Events recorded in the wrong place,
/// or timing the host instead of the GPU, would measure less.
pub fn check_producer_timing(runs: &[RaceRun], sleep_us: f64) -> Result<String> {
    let floor = 0.95 * sleep_us / 1e3;
    if runs.is_empty() {
        return Err(Error::Internal("no producer run was timed".into()));
    }
    if let Some(r) = runs.iter().find(|r| r.producer_finished_ms < floor) {
        return Err(Error::Verification(format!(
            "the events put the producer's end at {:.3} ms, before its {:.3} ms spin could have finished",
            r.producer_finished_ms,
            sleep_us / 1e3
        )));
    }
    let shortest = runs
        .iter()
        .map(|r| r.producer_finished_ms)
        .fold(f64::INFINITY, f64::min);
    Ok(format!(
        "{} runs, shortest {shortest:.3} ms >= the {:.3} ms spin",
        runs.len(),
        sleep_us / 1e3
    ))
}

pub fn run(gpu: &Gpu, opts: &Options) -> Result<Report> {
    let n = opts.elements.unwrap_or(DEFAULT_ELEMENTS);
    let iters = opts.iters.unwrap_or(DEFAULT_ITERS);
    let sleep_us = opts.sleep_us.unwrap_or(DEFAULT_SLEEP_US);
    let mut c = CrossStream::new(gpu, n, iters, sleep_us, opts.seed)?;
    let timing = c.time_kernel(gpu, opts.reps)?;
    let results = race(gpu, &mut c, opts.reps)?;

    let finish_times =
        |runs: &[(RaceRun, Mismatches)]| runs.iter().map(|(r, _)| *r).collect::<Vec<_>>();
    let (with_wait, without_wait) = (
        finish_times(&results.with_wait),
        finish_times(&results.without_wait),
    );
    let median = |runs: &[RaceRun], f: fn(&RaceRun) -> f64| {
        Stats::of(&runs.iter().map(f).collect::<Vec<_>>()).median
    };
    let producer_ms = median(&with_wait, |r| r.producer_finished_ms);
    let right_consumer_ms = median(&with_wait, |r| r.consumer_finished_ms);
    let wrong_consumer_ms = median(&without_wait, |r| r.consumer_finished_ms);
    let unwaited_producer_ms = median(&without_wait, |r| r.producer_finished_ms);
    let (wrong, right) = match (results.without_wait.last(), results.with_wait.last()) {
        (Some((_, w)), Some((_, r))) => (w.clone(), r.clone()),
        // `race` runs each version at least once.
        _ => return Err(Error::Internal("the race measured no run".into())),
    };
    let overhead_ms = timing.host_ms.median - timing.event_ms.median;

    let mut r = Report::new(
        "events",
        "events: kernel timing and cross-stream dependencies",
        &gpu.info.name,
    );
    r.param("elements", n)
        .param("iters", iters)
        .param("sleep_us", sleep_us)
        .param(
            "producer_waves",
            producer_waves(n, &WorkModel::for_gpu(gpu)),
        )
        .param("reps", opts.reps);
    r.figure(
        "compute kernel, event time, median",
        timing.event_ms.median,
        "ms",
    )
    .figure(
        "same kernel, host clock around launch + synchronize",
        timing.host_ms.median,
        "ms",
    )
    .figure("host clock minus event time", overhead_ms, "ms")
    .figure("producer (stream A) finished at", producer_ms, "ms")
    .figure(
        "consumer (stream B) finished at, with wait_event",
        right_consumer_ms,
        "ms",
    )
    .figure(
        "consumer finished at, without wait_event",
        wrong_consumer_ms,
        "ms",
    )
    .figure(
        "wrong elements without wait_event (last run)",
        wrong.wrong as f64,
        "elements",
    )
    .figure(
        "wrong elements with wait_event (last run)",
        right.wrong as f64,
        "elements",
    );
    r.detail("kernel_timing", timing)
        .detail("with_wait", &with_wait)
        .detail(
            "without_wait",
            results.without_wait.iter().collect::<Vec<_>>(),
        );

    let producer_timed = check_producer_timing(&with_wait, sleep_us);
    let right_matches = results.right_vs_cpu.is_ok();
    let race_seen = check_race_observed(&results.without_wait);
    let ordering = check_ordering(&with_wait, &without_wait);
    let (race_ok, ordering_ok) = (race_seen.is_ok(), ordering.is_ok());
    r.check(
        "events around the producer measure at least its spin",
        producer_timed,
    );
    r.check(
        "with wait_event: consumer == CPU reference, bit for bit, every run",
        results.right_vs_cpu.map(|_| {
            format!(
                "all {n} elements identical to the CPU's in {} runs",
                results.with_wait.len()
            )
        }),
    );
    r.check(
        "without wait_event: race observed (expected: this is the bug)",
        race_seen,
    );
    r.check(
        "consumer waited for the producer only with wait_event",
        ordering,
    );

    r.explain(if overhead_ms > 0.0 {
        format!(
            "Events time the kernel on the GPU itself: {:.3} ms; the host clock around the launch and the synchronize reads {:.3} ms, {overhead_ms:.3} ms more: the launch and the wake-up from synchronize.",
            timing.event_ms.median, timing.host_ms.median
        )
    } else {
        format!(
            "Events time the kernel on the GPU itself: {:.3} ms; the host clock around launch and synchronize reads {:.3} ms, no more than the events within this run's noise.",
            timing.event_ms.median, timing.host_ms.median
        )
    });
    let example = wrong.example.map_or(String::new(), |(i, got, want)| {
        format!("; e.g. element {i} is {got} instead of {want}")
    });
    r.explain(if race_ok {
        format!(
            "Without wait_event the consumer on stream B did not wait for the producer on A (consumer done at {wrong_consumer_ms:.3} ms, producer at {unwaited_producer_ms:.3} ms) and read the stale buffer: {} of {n} elements wrong ({} of them exactly the stale value){example}. This is the bug the event prevents, shown on purpose.",
            wrong.wrong, wrong.stale
        )
    } else {
        format!(
            "Without wait_event the consumer read correct data in at least one run (last run: {} of {n} elements wrong): the race this demo sets up did not show; a longer --sleep-us gives the producer more of a head start to lose.",
            wrong.wrong
        )
    });
    r.explain(match (right_matches, ordering_ok) {
        (true, true) => format!(
            "With B.wait_event(ready) the consumer ran only after the producer's event completed ({producer_ms:.3} ms; consumer done at {right_consumer_ms:.3} ms) and matched the CPU bit for bit; the host never blocked, and B waits for that one point of A, not for all of A's later work."
        ),
        (true, false) => format!(
            "With B.wait_event(ready) the consumer matched the CPU bit for bit, but the finish times did not order as expected (producer {producer_ms:.3} ms, consumer {right_consumer_ms:.3} ms with the wait, {wrong_consumer_ms:.3} ms without): see the checks."
        ),
        (false, _) => format!(
            "With B.wait_event(ready) the consumer still differed from the CPU in at least one run ({} elements wrong in the last): the dependency did not hold; see the checks.",
            right.wrong
        ),
    });
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demos::testing::refusal;

    #[test]
    fn stale_and_right_answers_differ() {
        for x in [-3.0f32, -0.25, 0.0, 0.7, 3.1] {
            assert_ne!(expected_element(x), stale_element(x), "x = {x}");
        }
        assert_eq!(expected_element(1.5), 4.5);
        assert_eq!(stale_element(1.5), 0.5);
    }

    #[test]
    fn mismatches_count_wrong_and_stale_elements() {
        let input = [1.0f32, 2.0, 3.0, 4.0];
        let right: Vec<f32> = input.iter().map(|&x| expected_element(x)).collect();
        let m = count_mismatches(&input, &right);
        assert_eq!((m.wrong, m.stale, m.example), (0, 0, None));
        let mut got = right.clone();
        got[1] = stale_element(2.0);
        got[3] = 99.0;
        let m = count_mismatches(&input, &got);
        assert_eq!((m.wrong, m.stale, m.total), (2, 1, 4));
        assert_eq!(m.example, Some((1, 1.0, 6.0)));
    }

    #[test]
    fn race_check_needs_every_run_wrong() {
        let run = RaceRun {
            producer_finished_ms: 20.0,
            consumer_finished_ms: 0.1,
        };
        let m = |wrong| Mismatches {
            wrong,
            stale: wrong,
            total: 10,
            example: None,
        };
        assert!(check_race_observed(&[(run, m(10)), (run, m(3))]).is_ok());
        assert!(check_race_observed(&[(run, m(10)), (run, m(0))]).is_err());
        assert!(check_race_observed(&[]).is_err());
    }

    #[test]
    fn ordering_check() {
        let r = |p, c| RaceRun {
            producer_finished_ms: p,
            consumer_finished_ms: c,
        };
        assert!(check_ordering(&[r(20.0, 20.1)], &[r(20.0, 0.1)]).is_ok());
        assert!(check_ordering(&[r(20.0, 0.1)], &[r(20.0, 0.1)]).is_err());
        assert!(check_ordering(&[r(20.0, 20.1)], &[r(20.0, 20.1)]).is_err());
    }

    #[test]
    fn producer_timing_must_cover_the_spin() {
        let r = |p| RaceRun {
            producer_finished_ms: p,
            consumer_finished_ms: 0.1,
        };
        assert!(check_producer_timing(&[r(20.1), r(20.0)], 20_000.0).is_ok());
        assert!(check_producer_timing(&[r(20.1), r(5.0)], 20_000.0).is_err());
        assert!(matches!(
            check_producer_timing(&[], 20_000.0),
            Err(Error::Internal(_))
        ));
    }

    fn opts(elements: usize, iters: u32, sleep_us: f64) -> Options {
        Options {
            elements: Some(elements),
            iters: Some(iters),
            sleep_us: Some(sleep_us),
            ..Options::default()
        }
    }

    #[test]
    fn options_accept_the_defaults_and_refuse_hostile_flags() {
        check_options(&Options::default()).unwrap();
        check_options(&opts(1, 0, MIN_SLEEP_US)).unwrap();
        assert_eq!(producer_waves(DEFAULT_ELEMENTS, &WorkModel::H100), 1);
        assert!(refusal(check_options, &opts(0, 1000, 20_000.0)).contains("--elements"));
        assert!(
            refusal(check_options, &opts(MAX_ELEMENTS + 1, 1000, 20_000.0)).contains("--elements")
        );
        for us in [50.0, 2e6, f64::NAN, f64::INFINITY, -1.0] {
            assert!(refusal(check_options, &opts(1 << 18, 1000, us)).contains("--sleep-us"));
        }
        // The review's case: 4e9 elements are ~15,000 waves of a 20 ms spin, twice a repeat.
        assert!(refusal(check_options, &opts(4_000_000_000, 1000, 20_000.0)).contains("waves"));
        // 100 waves of a one-second spin.
        assert!(refusal(check_options, &opts(100 * 1056 * 256, 1, 1e6)).contains("estimated"));
        // The timed kernel alone: 2^18 elements x 2^32 iterations.
        assert!(refusal(check_options, &opts(1 << 18, u32::MAX, 20_000.0)).contains("estimated"));
    }
}
