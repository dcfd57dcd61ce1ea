//! GPU tests of the sleep-streams lesson. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine); the flag checks at the end
//! run everywhere.
//!
//! The lesson only copies and sleeps, so its CPU reference is the input itself, and the
//! strongest comparison with it is bit for bit, which the round-trip check makes.
use streamlab::lab::record::report::Verdict;
use streamlab::lessons::sleep_streams::{one_stream_ms, speedup, SleepStreams, FULL, SMALL};
use testkit::{
    accepted, gpu, refusal, refuses, refuses_out_of_range, run_lesson, run_refusal, run_refuses,
};

#[test]
#[ignore = "needs a CUDA GPU"]
fn copies_round_trip_bit_for_bit_in_every_version() {
    let gpu = gpu();
    for (n, k) in [(1_000_003, 4), (4097, 3), (5, 5), (1, 1), (100_000, 8)] {
        let (n_flag, k_flag) = (n.to_string(), k.to_string());
        let flags = ["--elements", &n_flag, "--streams", &k_flag, "--sleep-us", "20"];
        let o = run_lesson::<SleepStreams>(&gpu, &flags, 1);
        assert_eq!(
            o.checks.iter().find(|c| c.name == "copies round-trip bit for bit").map(|c| c.verdict),
            Some(Verdict::Passed),
            "n={n} k={k}: {:?}",
            o.checks
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_small_grid_overlaps_and_the_full_grid_barely() {
    let gpu = gpu();
    let o = run_lesson::<SleepStreams>(&gpu, &["--elements", "65536", "--sleep-us", "1000"], 3);
    let text = o.report.to_text();
    assert!(o.results_right(), "{text}");
    let (small, full) = (speedup(&o.measured, SMALL), speedup(&o.measured, FULL));
    assert_eq!(small, o.measured.speedup(), "the small grid is the headline pair");
    assert!(small > 2.5 && small < 4.5, "small grid {small}\n{text}");
    assert!(full < 1.5, "full grid {full}\n{text}");
    // One-stream small grid: about 4 sleeps of 1 ms.
    let one = one_stream_ms(&o.measured, SMALL);
    assert!((3.5..6.0).contains(&one), "{one} ms\n{text}");
}

/// One stream: nothing runs side by side, and the text must not say it did.
#[test]
#[ignore = "needs a CUDA GPU"]
fn one_stream_makes_no_claim() {
    let gpu = gpu();
    let o = run_lesson::<SleepStreams>(&gpu, &["--streams", "1"], 3);
    let text = o.report.to_text();
    assert!(o.results_right(), "{text}");
    let told = o.report.interpretation.join("\n");
    assert!(!told.contains("run side by side:"), "{text}");
}

/// Before the GPU is known the plan assumes an H100's 4 full-grid waves; the run plans again
/// with this GPU's own count, which is at least 1: a sleep over the 1-wave bound (4 streams,
/// 16 sleeps a repeat, so 3.75 s each at most) is refused on any GPU.
#[test]
#[ignore = "needs a CUDA GPU"]
fn a_sleep_over_any_gpus_bound_is_refused_by_the_run() {
    let gpu = gpu();
    let flags = ["--elements", "1024", "--streams", "4", "--sleep-us", "3750001"];
    let why = run_refusal::<SleepStreams>(&gpu, &flags);
    assert!(why.contains("--sleep-us"), "{why}");
}

/// (flag, value, the range the refusal must name): refused as they parse.
const OUT_OF_RANGE: [[&str; 3]; 6] = [
    // 2^62: at 4 bytes an element, a 64-bit byte count wraps to 0.
    ["--elements", "4611686018427387904", "whole number from 1 to 4294967295"],
    ["--elements", "0", "whole number from 1 to 4294967295"],
    ["--streams", "65", "whole number from 1 to 64"],
    ["--sleep-us", "1", "number from 10 to 10000000"],
    ["--sleep-us", "0.001", "number from 10 to 10000000"],
    ["--sleep-us", "NaN", "number from 10 to 10000000"],
];
/// In range, but refused by the plan.
const REFUSED_BY_THE_PLAN: &[(&[&str], &str)] = &[
    (&["--elements", "3", "--streams", "4"], "--streams 4 is more than --elements 3"),
    (&["--sleep-us", "1e7"], "--streams x --sleep-us"),
];

/// The run plans again with the real GPU's model: what the plan refuses, it refuses too.
#[test]
#[ignore = "needs a CUDA GPU"]
fn flags_the_plan_refuses_are_refused_by_the_run_too() {
    run_refuses::<SleepStreams, _>(&gpu(), REFUSED_BY_THE_PLAN);
}

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    refuses_out_of_range::<SleepStreams>(&OUT_OF_RANGE);
    refuses::<SleepStreams, _>(REFUSED_BY_THE_PLAN);
    // 4 streams on an H100 (4 full-grid waves): 40 sleeps a repeat, so 1.5 s each at most.
    accepted::<SleepStreams>(&["--elements", "100", "--sleep-us", "1.4e6"]);
    let why = refusal::<SleepStreams>(&["--elements", "100", "--sleep-us", "1.6e6"]);
    assert!(why.contains("--sleep-us") && why.contains("per repeat"), "{why}");
}

#[test]
fn the_default_and_the_shortest_sleep_pass_the_checks() {
    accepted::<SleepStreams>(&[]);
    accepted::<SleepStreams>(&["--sleep-us", "10"]);
}
