//! GPU tests of the launch-order lesson. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine); the flag checks at the end
//! run everywhere.
use streamlab::lab::Lesson;
use streamlab::lessons::launch_order::{
    LaunchOrder, AT_ONCE, GAP_US, K_STREAMS, LAST_START_US, ONE_STREAM, OUT_OF_ORDER, WAITED,
};
use testkit::{
    accepted, assert_every_check_asserted, gpu, refusal, refuses_out_of_range, run_lesson,
    run_refusal, set_up,
};

#[test]
#[ignore = "needs a CUDA GPU"]
fn kernels_start_in_issue_order_and_overlap() {
    let gpu = gpu();
    let mut o: LaunchOrder = set_up(&gpu, &["--streams", "8", "--sleep-us", "1000"], 0).unwrap();
    o.version(&gpu, K_STREAMS).unwrap();
    let s = o.version(&gpu, K_STREAMS).unwrap();
    assert_eq!(s.value(OUT_OF_ORDER), 0.0, "{s:?}");
    assert_eq!(s.value(WAITED), 0.0, "{s:?}");
    // The last kernel started after kernel 0, and some kernels ran at once (from the GPU's
    // own stamps); how far apart the starts lay is scripts/perf-check.sh's.
    assert!(s.value(LAST_START_US) > 0.0, "{s:?}");
    assert!(s.value(AT_ONCE) >= 2.0, "{s:?}");
    // On one stream the same 8 kernels of 1 ms run one at a time.
    let one = o.version(&gpu, ONE_STREAM).unwrap();
    assert_eq!(one.value(AT_ONCE), 1.0, "{one:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn launch_order_report_passes() {
    let gpu = gpu();
    let o = run_lesson::<LaunchOrder>(&gpu, &["--streams", "6"], 3);
    assert!(o.results_right(), "{}", o.report.to_text());
    let gap = o.measured.with().part(GAP_US);
    assert!(gap >= 0.0, "gap {gap} µs\n{}", o.report.to_text());
    let offset5 = o.measured.with().part(LAST_START_US);
    assert!(offset5 > 0.0, "{}", o.report.to_text());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_smallest_accepted_sleep_still_shows_the_claim() {
    let gpu = gpu();
    let o = run_lesson::<LaunchOrder>(&gpu, &["--sleep-us", "100"], 3);
    // Asserted, not merely passed: a "not asserted" claim would pass `o.passed()`.
    assert_every_check_asserted(&o);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn one_stream_is_reported_as_nothing_to_order_or_overlap() {
    let gpu = gpu();
    let o = run_lesson::<LaunchOrder>(&gpu, &["--streams", "1"], 3);
    assert!(o.results_right(), "{}", o.report.to_text());
    let told = o.report.interpretation.join("\n");
    assert!(told.contains("One stream, one kernel"), "{}", o.report.to_text());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_run_refuses_what_the_plan_refuses() {
    let gpu = gpu();
    let why = run_refusal::<LaunchOrder>(&gpu, &["--streams", "64", "--sleep-us", "1e7"]);
    assert!(why.contains("--sleep-us"), "{why}");
}

/// (flag, value, the range the refusal must name): refused as they parse.
const OUT_OF_RANGE: [[&str; 3]; 5] = [
    ["--sleep-us", "0.001", "number from 100 to 10000000"],
    ["--sleep-us", "1e9", "number from 100 to 10000000"],
    ["--sleep-us", "NaN", "number from 100 to 10000000"],
    ["--streams", "0", "whole number from 1 to 64"],
    ["--streams", "65", "whole number from 1 to 64"],
];

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    refuses_out_of_range::<LaunchOrder>(&OUT_OF_RANGE);
    // Each in range, too much together: 64 streams of 10 s sleeps.
    let why = refusal::<LaunchOrder>(&["--streams", "64", "--sleep-us", "1e7"]);
    assert!(why.contains("--streams x --sleep-us") && why.contains("per repeat"), "{why}");
}

#[test]
fn the_default_and_the_shortest_sleep_pass_the_checks() {
    accepted::<LaunchOrder>(&[]);
    accepted::<LaunchOrder>(&["--sleep-us", "100"]);
}
