//! GPU tests of the priority lesson. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine); the flag checks at the end
//! run everywhere.
use streamlab::lab::Lesson;
use streamlab::lessons::priority::{Priority, EQUAL, HIGH, LONG_DONE, SHORT_MINUS_LONG};
use testkit::{
    accepted, assert_every_check_asserted, gpu, refusal, refuses, refuses_out_of_range, run_lesson,
    run_refusal, set_up,
};

#[test]
#[ignore = "needs a CUDA GPU"]
fn high_priority_kernel_finishes_first_equal_priority_does_not() {
    let gpu = gpu();
    let mut p: Priority = set_up(&gpu, &["--waves", "4", "--sleep-us", "200"], 0).unwrap();
    p.version(&gpu, HIGH).unwrap();
    let prioritized = p.version(&gpu, HIGH).unwrap();
    let equal = p.version(&gpu, EQUAL).unwrap();
    assert!(prioritized.value(SHORT_MINUS_LONG) < 0.0, "{prioritized:?}");
    assert!(equal.value(SHORT_MINUS_LONG) >= 0.0, "{equal:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn priority_report_passes() {
    let gpu = gpu();
    let o = run_lesson::<Priority>(&gpu, &["--sleep-us", "200"], 3);
    assert!(o.results_right(), "{}", o.report.to_text());
    let (high, low) = (o.measured.with().time.median, o.measured.with().part(LONG_DONE));
    // 8 waves of 0.2 ms: the urgent kernel is done after about 2, the long one after about 9.
    assert!(high < 0.5 * low, "high {high} low {low}\n{}", o.report.to_text());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_smallest_accepted_sleep_still_shows_the_claim() {
    let gpu = gpu();
    let o = run_lesson::<Priority>(&gpu, &["--sleep-us", "100"], 3);
    // Asserted, not merely passed: a "not asserted" claim would pass `o.passed()`.
    assert_every_check_asserted(&o);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn with_one_wave_the_interpretation_says_no_claim_is_made() {
    let gpu = gpu();
    // One wave: priority cannot reorder anything, and the text must not say it did.
    let o = run_lesson::<Priority>(&gpu, &["--waves", "1", "--sleep-us", "200"], 3);
    assert!(o.results_right(), "{}", o.report.to_text());
    let told = o.report.interpretation.join("\n");
    assert!(told.contains("Not a claim here"), "{}", o.report.to_text());
    assert!(!told.contains("hands the free slots"), "{}", o.report.to_text());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_run_refuses_what_the_plan_refuses_with_this_gpus_waves() {
    let gpu = gpu();
    let why = run_refusal::<Priority>(&gpu, &["--waves", "1024", "--sleep-us", "1e7"]);
    assert!(why.contains("--sleep-us"), "{why}");
}

/// (flag, value, the range the refusal must name): refused as they parse.
const OUT_OF_RANGE: [[&str; 3]; 4] = [
    ["--sleep-us", "0.001", "number from 100 to 10000000"],
    ["--sleep-us", "NaN", "number from 100 to 10000000"],
    ["--waves", "0", "whole number from 1 to 1024"],
    ["--waves", "1025", "whole number from 1 to 1024"],
];

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    refuses_out_of_range::<Priority>(&OUT_OF_RANGE);
    // The old flag name is refused by the new one.
    refuses::<Priority, _>([(&["--batches", "1025"][..], "--waves")]);
    // 1024 waves: 2050 sleeps a repeat, so at most 29,268 µs each.
    accepted::<Priority>(&["--waves", "1024", "--sleep-us", "29268"]);
    let why = refusal::<Priority>(&["--waves", "1024", "--sleep-us", "29269"]);
    assert!(why.contains("--waves x --sleep-us"), "{why}");
    let why = refusal::<Priority>(&["--batches", "1024", "--sleep-us", "1e7"]);
    assert!(why.contains("--sleep-us") && why.contains("per repeat"), "{why}");
}

#[test]
fn the_default_the_shortest_sleep_and_the_old_flag_name_pass_the_checks() {
    accepted::<Priority>(&[]);
    accepted::<Priority>(&["--sleep-us", "100"]);
    accepted::<Priority>(&["--batches", "2"]);
}
