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
use crate::demos::Options;
use crate::error::{ensure, Error, Result};
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
/// 256 threads; 132 SMs hold 8 each) with room left for the consumer's blocks.
pub const DEFAULT_ELEMENTS: usize = 1 << 18;
/// Iterations of the timed compute kernel (about a third of a millisecond at the default size).
pub const DEFAULT_ITERS: u32 = 1000;
/// How long the producer spins before writing: long enough that an unsynchronized consumer
/// always finishes first.
pub const DEFAULT_SLEEP_US: f64 = 20_000.0;
/// The producer computes `input * PRODUCER_FACTOR`: a power of two, so the product is exact
/// and the GPU's bits equal the CPU's whether or not the compiler fuses it into an FMA.
pub const PRODUCER_FACTOR: f32 = 2.0;
/// What the producer's output buffer holds before the producer has run.
pub const STALE: f32 = -1.0;

pub fn validate(gpu: &Gpu, n: usize, sleep_us: f64) -> Result<()> {
    ensure(n > 0, || "--elements must be at least 1".into())?;
    ensure(n <= u32::MAX as usize, || {
        format!("--elements {n} is more than the kernels' u32 index allows")
    })?;
    ensure(
        sleep_us.is_finite() && (100.0..=1e6).contains(&sleep_us),
        || format!("--sleep-us must be from 100 to 1000000 for this demo, not {sleep_us}"),
    )?;
    gpu.ensure_device_memory(4 * n * std::mem::size_of::<f32>(), "four arrays")
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

/// The producer/consumer pair on two streams.
pub struct CrossStream {
    pub n: usize,
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

impl CrossStream {
    pub fn new(gpu: &Gpu, n: usize, sleep_us: f64, seed: u64) -> Result<CrossStream> {
        validate(gpu, n, sleep_us)?;
        let input = random_inputs(n, seed);
        let dev_input = device(n)?;
        copy_to_device_sync(&input, &dev_input)?;
        Ok(CrossStream {
            n,
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
    pub fn run(&mut self, gpu: &Gpu, wait: bool) -> Result<RaceRun> {
        let result = self.run_inner(gpu, wait);
        if result.is_err() {
            let _ = gpu.synchronize();
        }
        result
    }

    fn run_inner(&mut self, gpu: &Gpu, wait: bool) -> Result<RaceRun> {
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

/// Event time and host time of one compute kernel, `reps` times after a warm-up.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct KernelTiming {
    /// Between two events around the kernel (GPU time).
    pub event_ms: Stats,
    /// Host clock around launch + synchronize (GPU time plus launch and wake-up overheads).
    pub host_ms: Stats,
}

pub fn time_kernel(
    gpu: &Gpu,
    n: usize,
    iters: u32,
    reps: usize,
    seed: u64,
) -> Result<KernelTiming> {
    ensure(n > 0 && n <= u32::MAX as usize, || {
        format!("--elements must be from 1 to {}", u32::MAX)
    })?;
    let data = device(n)?;
    copy_to_device_sync(&random_inputs(n, seed), &data)?;
    let s = Stream::new("timed")?;
    let (start, stop) = (Event::new()?, Event::new()?);
    let (mut ev, mut host) = (vec![], vec![]);
    for rep in 0..=reps.max(1) {
        let (r, h) = host_ms(|| -> Result<f64> {
            start.record(&s)?;
            gpu.compute(&s, &data, iters)?;
            stop.record(&s)?;
            stop.synchronize()?;
            stop.elapsed_ms(&start)
        });
        if rep > 0 {
            ev.push(r?);
            host.push(h);
        } else {
            r?; // the warm-up
        }
    }
    Ok(KernelTiming {
        event_ms: Stats::of(&ev),
        host_ms: Stats::of(&host),
    })
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

/// Checks the flags this demo reads, before the GPU is touched.
pub fn check_options(opts: &Options) -> Result<()> {
    super::check_common(opts)
}

pub fn run(gpu: &Gpu, opts: &Options) -> Result<Report> {
    let n = opts.elements.unwrap_or(DEFAULT_ELEMENTS);
    let iters = opts.iters.unwrap_or(DEFAULT_ITERS);
    let sleep_us = opts.sleep_us.unwrap_or(DEFAULT_SLEEP_US);
    let mut c = CrossStream::new(gpu, n, sleep_us, opts.seed)?;
    let timing = time_kernel(gpu, n, iters, opts.reps, opts.seed)?;
    let results = race(gpu, &mut c, opts.reps)?;

    let median = |runs: &[(RaceRun, Mismatches)], f: fn(&RaceRun) -> f64| {
        Stats::of(&runs.iter().map(|(r, _)| f(r)).collect::<Vec<_>>()).median
    };
    let producer_ms = median(&results.with_wait, |r| r.producer_finished_ms);
    let right_consumer_ms = median(&results.with_wait, |r| r.consumer_finished_ms);
    let wrong_consumer_ms = median(&results.without_wait, |r| r.consumer_finished_ms);
    let wrong = results
        .without_wait
        .last()
        .map(|(_, m)| m.clone())
        .ok_or_else(|| Error::InvalidInput("--reps must be at least 1".into()))?;

    let mut r = Report::new(
        "events",
        "events: kernel timing and cross-stream dependencies",
        &gpu.info.name,
    );
    r.param("elements", n)
        .param("iters", iters)
        .param("sleep_us", sleep_us)
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
        results
            .with_wait
            .last()
            .map_or(0.0, |(_, m)| m.wrong as f64),
        "elements",
    );
    r.detail("kernel_timing", timing)
        .detail(
            "with_wait",
            results
                .with_wait
                .iter()
                .map(|(r, _)| *r)
                .collect::<Vec<_>>(),
        )
        .detail(
            "without_wait",
            results.without_wait.iter().collect::<Vec<_>>(),
        );
    r.check(
        "event time <= host time around the same kernel",
        if timing.event_ms.median <= timing.host_ms.median {
            Ok(format!(
                "{:.3} ms <= {:.3} ms",
                timing.event_ms.median, timing.host_ms.median
            ))
        } else {
            Err(Error::Verification(format!(
                "event time {:.3} ms exceeds the host's {:.3} ms",
                timing.event_ms.median, timing.host_ms.median
            )))
        },
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
        check_race_observed(&results.without_wait),
    );
    let finish_times =
        |runs: &[(RaceRun, Mismatches)]| runs.iter().map(|(r, _)| *r).collect::<Vec<_>>();
    r.check(
        "consumer waited for the producer only with wait_event",
        check_ordering(
            &finish_times(&results.with_wait),
            &finish_times(&results.without_wait),
        ),
    );
    r.explain(format!(
        "Events time the kernel on the GPU itself: {:.3} ms, against {:.3} ms on the host clock, which also counts the launch and the wake-up from synchronize.",
        timing.event_ms.median, timing.host_ms.median
    ));
    let example = wrong.example.map_or(String::new(), |(i, got, want)| {
        format!(" e.g. element {i} is {got} instead of {want}")
    });
    r.explain(format!(
        "Without wait_event the consumer on stream B ran at once ({wrong_consumer_ms:.3} ms) while the producer on A was still spinning, and read the stale buffer: {} of {n} elements wrong ({} of them exactly the stale value){example}. This is the bug the event prevents, shown on purpose.",
        wrong.wrong, wrong.stale
    ));
    r.explain(format!(
        "With B.wait_event(ready) the consumer starts only when the producer's event completes ({producer_ms:.3} ms) and matches the CPU bit for bit; the host never blocked, and B waits for that one point of A, not for all of A's later work."
    ));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
