//! GPU tests of the events lesson. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine); the flag checks at the end
//! run everywhere.
use approx::assert_relative_eq;
use streamlab::lab::harness::data::ABS_TOLERANCE;
use streamlab::lab::Lesson;
use streamlab::lessons::events::race::{CONSUMER_MINUS_PRODUCER, PRODUCER_DONE, STALE_READ, WRONG};
use streamlab::lessons::events::{Events, HOST_CLOCK, NO_WAIT, TIMED_KERNEL, WAIT_EVENT};
use testkit::{accepted, gpu, refuses, run_lesson, run_refuses, set_up};

#[test]
#[ignore = "needs a CUDA GPU"]
fn events_missing_wait_reads_stale_data_and_the_wait_fixes_it() {
    let gpu = gpu();
    let flags = ["--elements", "65536", "--iters", "100", "--sleep-us", "20000"];
    let mut e: Events = set_up(&gpu, &flags, 11).unwrap();
    for _ in 0..3 {
        let wrong_run = e.version(&gpu, NO_WAIT).unwrap();
        assert!(
            wrong_run.value(WRONG) > 0.0,
            "the unsynchronized consumer read correct data: {wrong_run:?}"
        );
        // What it read was the buffer before the producer wrote it.
        assert!(wrong_run.value(STALE_READ) > 0.0, "{wrong_run:?}");
        assert!(e.last[0].stale > 0, "{:?}", e.last[0]);
        assert!(wrong_run.value(CONSUMER_MINUS_PRODUCER) < 0.0, "{wrong_run:?}");

        let right_run = e.version(&gpu, WAIT_EVENT).unwrap();
        assert_eq!(right_run.value(WRONG), 0.0, "{right_run:?}");
        assert_eq!(e.last[1].wrong, 0, "{:?}", e.last[1]);
        assert!(right_run.value(CONSUMER_MINUS_PRODUCER) >= 0.0, "{right_run:?}");
        // The producer really spun for its 20 ms (sleep counts ticks at the rated clock).
        assert!(right_run.value(PRODUCER_DONE) >= 18.0, "{right_run:?}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn events_consumer_matches_cpu_within_tolerance() {
    let gpu = gpu();
    let flags = ["--elements", "10000", "--iters", "100", "--sleep-us", "1000"];
    let mut e: Events = set_up(&gpu, &flags, 5).unwrap();
    let run = e.version(&gpu, WAIT_EVENT).unwrap();
    // The lesson counts bit-for-bit differences from the CPU's 2x + x: none.
    assert_eq!(run.value(WRONG), 0.0, "{run:?}");
    assert_eq!((e.last[1].wrong, e.last[1].total), (0, 10_000));
    // And the inputs give 3x within rounding: the comparison itself is not vacuous.
    for x in &e.input {
        let expected = streamlab::lessons::events::race::expected_element(*x);
        assert_relative_eq!(expected, 3.0 * x, epsilon = ABS_TOLERANCE, max_relative = 1e-6);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn events_lesson_passes_and_times_the_kernel() {
    let gpu = gpu();
    let o = run_lesson::<Events>(
        &gpu,
        &["--elements", "65536", "--iters", "500", "--sleep-us", "10000"],
        3,
    );
    assert!(o.results_right(), "{}", o.report.to_text());
    // The racing version is no baseline: the report prints no speed-up over it.
    assert!(o.report.value("speed-up (first / second)").is_none(), "{}", o.report.to_text());
    let kernel = o.measured.version(TIMED_KERNEL);
    assert!(kernel.time.median > 0.0, "{}", o.report.to_text());
    assert!(kernel.part(HOST_CLOCK) > 0.0, "{}", o.report.to_text());
    // The events around the 10 ms producer measured its spin (never shorter at the rated
    // clock), and the consumer that waited finished after it.
    let producer = o.measured.with().part(PRODUCER_DONE);
    assert!(producer >= 9.5, "producer {producer} ms\n{}", o.report.to_text());
    assert!(o.measured.with().time.median >= producer, "{}", o.report.to_text());
    assert!(o.lesson.last[0].wrong > 0, "{}", o.report.to_text());
    assert_eq!(o.lesson.last[1].wrong, 0, "{}", o.report.to_text());
}

/// Flags that parse but that the plan refuses: the same on a GPU, with its work model.
const REFUSED_BY_PLAN: [(&[&str], &str); 3] = [
    // 4e9 elements: thousands of producer waves.
    (&["--elements", "4000000000"], "waves"),
    // 100 waves of a one-second spin on an H100 (more on a GPU with fewer SMs).
    (&["--elements", "27033600", "--sleep-us", "1e6"], "estimated"),
    // The timed kernel: 2^32 - 1 elements x 100,000 iterations, over ten minutes.
    (
        &["--elements", "4294967295", "--sleep-us", "100", "--iters", "100000"],
        "--iters 100000 is estimated",
    ),
];

/// Flags refused while parsing, before any GPU is touched.
const REFUSED_BY_PARSER: [(&[&str], &str); 9] = [
    (&["--elements", "0"], "--elements"),
    (&["--elements", "4294967296"], "--elements"),
    (&["--sleep-us", "50"], "number from 100 to 1000000"),
    (&["--sleep-us", "NaN"], "--sleep-us"),
    (&["--sleep-us", "inf"], "--sleep-us"),
    (&["--sleep-us", "-1"], "--sleep-us"),
    (&["--sleep-us", "2e6"], "--sleep-us"),
    // One thread's 4e9 dependent steps would run for minutes whatever the estimate says.
    (&["--iters", "4294967295"], "whole number from 1 to 100000"),
    (&["--iters", "0"], "whole number from 1 to 100000"),
];

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_run_refuses_hostile_flags_in_one_line_before_running() {
    run_refuses::<Events, _>(&gpu(), REFUSED_BY_PLAN);
}

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    refuses::<Events, _>(REFUSED_BY_PLAN.iter().chain(&REFUSED_BY_PARSER));
    accepted::<Events>(&[]);
    accepted::<Events>(&["--elements", "1", "--iters", "1", "--sleep-us", "100"]);
}
