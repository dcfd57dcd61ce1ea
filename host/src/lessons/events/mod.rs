//! # Events: GPU timing and cross-stream dependencies
//!
//! An event is a marker in a stream that completes when everything queued before it has
//! finished. Two events around a kernel time it on the GPU, free of the host's launch and
//! wake-up costs; and `cudaStreamWaitEvent(B, e)` makes stream B's later work wait for the
//! point of stream A where `e` was recorded, without blocking the host or waiting for A's later
//! work. Forget the wait and the consumer on B reads whatever the buffer held before: a race.
//!
//! The seed technique is the CUDA C++ Programming Guide's pair of event patterns: a kernel
//! between two `cudaEventRecord`s read with `cudaEventElapsedTime` (NVIDIA's "How to Implement
//! Performance Metrics in CUDA C/C++"), and the dependency of its "Explicit Synchronization":
//!
//! ```text
//! slow_scale<<<g, 256, 0, a>>>(in, produced, 2.0f, cycles);   // stream A: the producer
//! cudaEventRecord(ready, a);
//! cudaStreamWaitEvent(b, ready, 0);                            // omit this: the race
//! vector_add<<<g, 256, 0, b>>>(produced, in, consumed, n);     // stream B: the consumer
//! ```
//!
//! In Rust: `Event::new(&gpu)` / `e.record(&s)`, `stop.synchronize()`, `stop.elapsed_ms(&start)`,
//! `Event::without_timing(&gpu)` for `ready`, and `b.wait_event(&ready)`. The producer spins
//! `--sleep-us` before writing, so a consumer that does not wait always finishes first and
//! reads the stale value (−1): the race is certain, not rare, and shown on purpose. Both are
//! ordinary streams: they synchronize with the legacy default stream only, never each other.
//!
//! The bound: with the wait the consumer ends after the producer's spin (`--sleep-us`, once
//! per wave of blocks); without it, long before.
pub mod race;

use serde::Serialize;

use crate::lab::harness::budget::MAX_ELEMENTS;
use crate::lab::harness::data::random_inputs;
use crate::lab::harness::lesson::no_such_version;
use crate::lab::harness::stats::host_ms;
use crate::lab::{
    args, fixed, t, Checks, Drawing, Lesson, Measured, Plan, Report, Sample, Text, WorkModel,
};
use crate::runtime::{DeviceBuffer, Event, Gpu, HostBuffer, Result, Stream};
use race::{
    check_ordering, check_overtook, check_producer_timing, check_race_observed, check_right,
    check_waited, count_mismatches, Mismatches, CONSUMER_MINUS_PRODUCER, PRODUCER_DONE,
    PRODUCER_FACTOR, STALE, STALE_READ, WRONG,
};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Floats [1..=4294967295]. The default's producer grid fits on an H100 or H200 (132
    /// SMs) at once, so it spins once; more elements spin once per wave.
    #[arg(long, default_value_t = 1 << 18, value_parser = args::whole(1usize..=MAX_ELEMENTS))]
    pub elements: usize,
    /// sin·cos steps of the kernel timed with events [1..=100000]. Try 10 to see the
    /// host's launch and wake-up costs dominate the host clock.
    #[arg(long, default_value_t = 1000, value_parser = args::whole(1u32..=100_000))]
    pub iters: u32,
    /// The producer's spin before it writes, µs [100..=1000000]: the consumer's head start.
    #[arg(long, default_value_t = 20_000.0, value_parser = args::number(100.0..=1e6))]
    pub sleep_us: f64,
}

/// The producer's block size (`LaunchConfig::for_elements`).
const BLOCK: usize = 256;
/// The timed kernel's part: the host clock around its launch and synchronize.
pub const HOST_CLOCK: &str = "host clock, ms";

/// How many waves of blocks the spinning producer takes: each spins the whole `--sleep-us`.
pub fn producer_waves(n: usize, model: &WorkModel) -> usize {
    model.waves(n.div_ceil(BLOCK))
}

pub struct Events {
    sleep_us: f64,
    cycles: u64,
    iters: u32,
    waves: usize,
    pub input: Vec<f32>,
    /// Each race version's last run against the CPU: without the wait, with it.
    pub last: [Mismatches; 2],
    /// What the consumer computed, copied back: without the wait, with it.
    outputs: [HostBuffer<f32>; 2],
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

/// The versions, by their index in [`Lesson::versions`].
pub const NO_WAIT: usize = 0;
pub const WAIT_EVENT: usize = 1;
pub const TIMED_KERNEL: usize = 2;

impl Events {
    /// The consumer on B does not wait for the producer on A: the race.
    fn no_wait(&mut self, gpu: &Gpu) -> Result<Sample> {
        self.race(gpu, false)
    }

    /// `B.wait_event(ready)`: the consumer starts once the producer's event completed.
    fn wait_event(&mut self, gpu: &Gpu) -> Result<Sample> {
        self.race(gpu, true)
    }

    /// The compute kernel on a fresh copy of the input, between two events, and the host
    /// clock around its launch and synchronize.
    fn timed_kernel(&mut self, gpu: &Gpu) -> Result<Sample> {
        let (s, start, stop) = (&self.producer, &self.start, &self.producer_done);
        s.copy_on_device(&self.dev_input, &self.consumed)?;
        s.synchronize()?;
        let (event_ms, host) = host_ms(|| -> Result<f64> {
            start.record(s)?;
            gpu.compute(s, &self.consumed, self.iters)?;
            stop.record(s)?;
            stop.synchronize()?;
            stop.elapsed_ms(start)
        });
        Ok(Sample::ms(event_ms?).part(HOST_CLOCK, host))
    }
}

impl Lesson for Events {
    const NAME: &'static str = "events";
    const SUMMARY: &'static str =
        "event timing of a kernel; a cross-stream dependency with wait_event, and the race without it";
    // Without the wait the consumer races the producer: its time is no baseline.
    const SPEEDUP: bool = false;
    const DRAWING: Drawing = Drawing {
        measure: Some((
            "consumer (stream B) finished at",
            &[
                ("consumer finished at, without wait_event", "without wait_event"),
                ("consumer (stream B) finished at, with wait_event", "with wait_event"),
            ],
        )),
        measure_in_headings: true,
        ..Drawing::PLAIN
    };
    type Args = Args;

    fn versions(_: &Args) -> Vec<String> {
        vec![
            "consumer finished at, without wait_event".into(),
            "consumer (stream B) finished at, with wait_event".into(),
            "compute kernel, event time".into(),
        ]
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        let waves = producer_waves(a.elements, model);
        let (n, iters, us) = (a.elements, a.iters, a.sleep_us);
        // Two producer runs, the timed kernel, and the resets and consumers around them.
        let ms = 2.0 * waves as f64 * us / 1e3
            + model.compute_ms(n, iters)
            + 6.0 * model.elementwise_ms(n);
        Ok(Plan::new()
            .host::<f32>(n, 4)?
            .device::<f32>(n, 3)?
            .work(ms, t!("error.events.work_flags", n, waves, us = us.to_string(), iters)))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<Events> {
        let input = random_inputs(a.elements, seed);
        Ok(Events {
            sleep_us: a.sleep_us,
            cycles: gpu.info.cycles_for_micros(a.sleep_us),
            iters: a.iters,
            waves: producer_waves(a.elements, &WorkModel::for_device(&gpu.info)),
            dev_input: DeviceBuffer::from_slice(gpu, &input)?,
            input,
            last: Default::default(),
            outputs: [HostBuffer::pinned(gpu, a.elements)?, HostBuffer::pinned(gpu, a.elements)?],
            produced: DeviceBuffer::zeroed(gpu, a.elements)?,
            consumed: DeviceBuffer::zeroed(gpu, a.elements)?,
            producer: Stream::new(gpu, "producer (A)")?,
            consumer: Stream::new(gpu, "consumer (B)")?,
            ready: Event::without_timing(gpu)?,
            start: Event::new(gpu)?,
            producer_done: Event::new(gpu)?,
            consumer_done: Event::new(gpu)?,
        })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        match v {
            NO_WAIT => self.no_wait(gpu),
            WAIT_EVENT => self.wait_event(gpu),
            TIMED_KERNEL => self.timed_kernel(gpu),
            _ => no_such_version::<Self>(v),
        }
    }

    fn streams(&self) -> Vec<&Stream> {
        vec![&self.producer, &self.consumer]
    }

    fn verify(&mut self, _gpu: &Gpu, m: &Measured, checks: &mut Checks) -> Result<()> {
        checks.record(
            "events around the producer measure at least its spin",
            check_producer_timing(m.with(), self.sleep_us),
        );
        checks.record(
            "with wait_event: consumer == CPU reference, bit for bit, every run",
            check_right(m.with(), self.input.len()),
        );
        checks.record(
            "with wait_event: consumer finished after the producer, every run",
            check_waited(m.with()),
        );
        // These need the two streams to run at once (compute-sanitizer serializes them).
        checks.concurrency(
            "without wait_event: race observed (expected: this is the bug)",
            check_race_observed(m.without(), self.input.len()),
        );
        checks.concurrency(
            "without wait_event: consumer finished before the producer, every run",
            check_overtook(m.without()),
        );
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        r.param("producer_waves", self.waves);
        interpret(m, &self.last, r);
    }
}

impl Events {
    /// One run: reset both buffers, the producer on A, then the consumer on B (waiting for
    /// `ready` or not), its output copied back and compared with the CPU.
    fn race(&mut self, gpu: &Gpu, wait: bool) -> Result<Sample> {
        let (a, b, out) = (&self.producer, &self.consumer, usize::from(wait));
        gpu.scale(a, &self.produced, 0.0, STALE)?;
        gpu.scale(a, &self.consumed, 0.0, 0.0)?;
        a.synchronize()?;
        self.start.record(a)?;
        gpu.slow_scale(a, &self.dev_input, &self.produced, PRODUCER_FACTOR, self.cycles)?;
        self.ready.record(a)?;
        self.producer_done.record(a)?;
        if wait {
            b.wait_event(&self.ready)?;
        }
        gpu.vector_add(b, &self.produced, &self.dev_input, &self.consumed)?;
        self.consumer_done.record(b)?;
        b.copy_to_host(&self.consumed, &self.outputs[out])?;
        a.synchronize()?;
        // Waits for B's copy: the host compares what the consumer computed, stale or not.
        let m = count_mismatches(&self.input, &self.outputs[out].read()?);
        let producer = self.producer_done.elapsed_ms(&self.start)?;
        let consumer = self.consumer_done.elapsed_ms(&self.start)?;
        let sample = Sample::ms(consumer)
            .part(PRODUCER_DONE, producer)
            .part(CONSUMER_MINUS_PRODUCER, consumer - producer)
            .part(WRONG, m.wrong as f64)
            .part(STALE_READ, m.stale as f64);
        self.last[out] = m;
        Ok(sample)
    }
}

/// The figures and what they mean; `last` is each race version's last run.
pub fn interpret(m: &Measured, last: &[Mismatches; 2], r: &mut Report) {
    let (wrong, right) = (&last[0], &last[1]);
    let kernel = m.version(TIMED_KERNEL);
    let (event, host) = (kernel.time.median, kernel.part(HOST_CLOCK));
    let overhead = host - event;
    let (producer, right_consumer) = (m.with().part(PRODUCER_DONE), m.with().time.median);
    let (unwaited_producer, wrong_consumer) =
        (m.without().part(PRODUCER_DONE), m.without().time.median);
    let n = wrong.total;
    r.figure("same kernel, host clock around launch + synchronize", host, "ms")
        .figure("host clock minus event time", overhead, "ms")
        .figure("producer (stream A) finished at", producer, "ms")
        .figure("wrong elements without wait_event (last run)", wrong.wrong as f64, "elements")
        .figure("wrong elements with wait_event (last run)", right.wrong as f64, "elements");
    let times =
        [event, host, overhead, producer, right_consumer, wrong_consumer, unwaited_producer];
    let [event, host, overhead, producer, right_consumer, wrong_consumer, unwaited_producer] =
        times.map(|v| fixed(v, 3));
    r.explain(if times[2] > 0.0 {
        t!("events.timing_overhead", event, host, overhead)
    } else {
        t!("events.timing_same", event, host)
    });
    let example = wrong.example.map_or(Text::Plain(String::new()), |(i, got, want)| {
        t!("events.example", i, got = got.to_string(), want = want.to_string())
    });
    let (wrong_n, stale) = (wrong.wrong, wrong.stale);
    r.explain(if check_race_observed(m.without(), n).is_ok() {
        t!("events.race", wrong_consumer, unwaited_producer, wrong = wrong_n, n, stale, example)
    } else {
        t!("events.no_race", wrong = wrong_n, n)
    });
    r.explain(match (check_right(m.with(), n).is_ok(), check_ordering(m).is_ok()) {
        (true, true) => t!("events.waited", producer, right_consumer),
        (true, false) => t!("events.misordered", producer, right_consumer, wrong_consumer),
        (false, _) => t!("events.still_wrong", wrong = right.wrong),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;
    use race::fixtures::{self, Run, RACED, WAITED};

    fn measured(without: &[Run], with: &[Run]) -> Measured {
        let names = Events::versions(&args_from::<Events>(&[]).unwrap());
        let kernel = Sample::ms(0.3).part(HOST_CLOCK, 0.35);
        fixtures::measured(names, without, with, kernel)
    }

    /// What the flag checks refuse is tested in tests/events.rs, with a GPU and without.
    #[test]
    fn the_default_producer_is_one_wave_and_one_block_more_is_two() {
        let wave = WorkModel::H100.blocks_per_wave * BLOCK;
        assert_eq!(producer_waves(1 << 18, &WorkModel::H100), 1);
        assert_eq!(producer_waves(wave, &WorkModel::H100), 1);
        assert_eq!(producer_waves(wave + 1, &WorkModel::H100), 2);
    }

    fn told(m: &Measured, last: &[Mismatches; 2]) -> String {
        let mut r = Report::new("events", "", "");
        interpret(m, last, &mut r);
        r.interpretation.join("\n")
    }

    #[test]
    fn interpretation_follows_the_data() {
        let stale = Mismatches { wrong: 10, stale: 10, total: 10, example: Some((0, 0.5, 4.5)) };
        let right = Mismatches { total: 10, ..Mismatches::default() };
        let last = [stale.clone(), right.clone()];
        let good = told(&measured(&[RACED], &[WAITED]), &last);
        assert!(good.contains("0.050 ms more"), "{good}");
        assert!(good.contains("shown on purpose") && good.contains("element 0 is 0.5"), "{good}");
        assert!(good.contains("matched the CPU bit for bit; the host never blocked"), "{good}");
        let missed = told(&measured(&[WAITED], &[WAITED]), &[right.clone(), right.clone()]);
        assert!(missed.contains("did not show") && missed.contains("did not order"), "{missed}");
        let broken = told(&measured(&[RACED], &[RACED]), &[stale.clone(), stale]);
        assert!(broken.contains("the dependency did not hold"), "{broken}");
    }
}
