//! GPU tests of the prefetch lesson. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine); the flag checks at the end
//! run everywhere.
use approx::assert_relative_eq;
use streamlab::lab::data::{ABS_TOLERANCE, REL_TOLERANCE};
use streamlab::lab::report::Verdict;
use streamlab::lab::Lesson;
use streamlab::lessons::prefetch::{check_accumulator, reference_element, Prefetch};
use testkit::{accepted, gpu, refuses, run_lesson, run_refusal, set_up};

#[test]
#[ignore = "needs a CUDA GPU"]
fn prefetch_equals_no_prefetch_bit_for_bit() {
    let gpu = gpu();
    // 1 and 2 batches never reuse a buffer; 3 and 9 do (the consumed-event path).
    for (n, batches) in [(1, 1), (4097, 2), (100_003, 3), (5000, 9)] {
        let (n_flag, b_flag) = (n.to_string(), batches.to_string());
        let flags = ["--elements", &n_flag, "--batches", &b_flag, "--iters", "20"];
        let o = run_lesson::<Prefetch>(&gpu, &flags, 1);
        assert_eq!(
            o.checks.iter().find(|c| c.name.contains("bit for bit")).map(|c| c.verdict),
            Some(Verdict::Passed),
            "n={n} batches={batches}: {:?}",
            o.checks
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn prefetch_matches_cpu_reference_within_tolerance() {
    let gpu = gpu();
    let (n, iters) = (10_000, 50);
    let flags = ["--elements", "10000", "--batches", "5", "--iters", "50"];
    let mut p: Prefetch = set_up(&gpu, &flags, 2).unwrap();
    p.with(&gpu).unwrap();
    let (input, acc) = (p.input().unwrap(), p.output().unwrap());
    // Every element, with the tolerance prefetch.rs explains (relative to the sum of the
    // terms' magnitudes, since a sum of mixed signs can cancel to near zero).
    check_accumulator(&acc, &input, iters, n).unwrap();
    // And plain approx on the elements whose sum does not cancel.
    for (j, &got) in acc.iter().enumerate() {
        let (expected, magnitude) = reference_element(&input, n, iters, j);
        if expected.abs() > 0.5 * magnitude {
            assert_relative_eq!(
                got,
                expected,
                epsilon = ABS_TOLERANCE,
                max_relative = 2.0 * REL_TOLERANCE
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn prefetch_lesson_passes_and_overlaps() {
    let gpu = gpu();
    let o = run_lesson::<Prefetch>(&gpu, &[], 5);
    assert!(o.passed(), "{}", o.report.to_text());
    let speedup = o.measured.speedup();
    assert!(speedup > 1.05, "speed-up {speedup}\n{}", o.report.to_text());
}

/// With one batch there is no next batch to prefetch: the lesson still passes its checks,
/// and its interpretation says so instead of claiming an overlap.
#[test]
#[ignore = "needs a CUDA GPU"]
fn one_batch_is_reported_as_nothing_to_prefetch() {
    let gpu = gpu();
    let flags = ["--elements", "4096", "--batches", "1", "--iters", "20"];
    let o = run_lesson::<Prefetch>(&gpu, &flags, 3);
    let r = &o.report;
    assert!(o.passed(), "{}", r.to_text());
    assert!(r.interpretation[0].contains("no next batch"), "{}", r.to_text());
    assert!(!r.interpretation.iter().any(|l| l.contains("x faster")), "{}", r.to_text());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn hostile_flags_are_refused_in_one_line_before_running() {
    let gpu = gpu();
    let why = run_refusal::<Prefetch>(&gpu, &["--batches", "1024", "--elements", "100000000"]);
    assert!(why.contains("--batches 1024"), "{why}");
    let why = run_refusal::<Prefetch>(
        &gpu,
        &["--batches", "1", "--elements", "268435456", "--iters", "100000"],
    );
    assert!(why.contains("per repeat"), "{why}");
}

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    refuses::<Prefetch, _>([
        (&["--batches", "0"][..], "whole number from 1 to 4096"),
        (&["--batches", "4097"], "whole number from 1 to 4096"),
        (&["--elements", "0"], "whole number from 1 to 4294967295"),
        (&["--elements", "18446744073709551615", "--batches", "18446744073709551615"], "--"),
        (&["--iters", "4294967295"], "whole number from 1 to 100000"),
        (
            &["--batches", "1024", "--elements", "100000000"],
            "--batches 1024 x --elements 100000000",
        ),
        (&["--batches", "1", "--elements", "268435456", "--iters", "100000"], "per repeat"),
    ]);
    accepted::<Prefetch>(&[]);
    accepted::<Prefetch>(&["--elements", "1", "--batches", "1", "--iters", "1"]);
}
