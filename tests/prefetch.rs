//! GPU tests of the prefetch lesson. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine); the flag checks at the end
//! run everywhere.
use approx::assert_relative_eq;
use streamlab::lab::harness::data::{ABS_TOLERANCE, REL_TOLERANCE};
use streamlab::lab::record::span::{Span, Work};
use streamlab::lab::Lesson;
use streamlab::lessons::prefetch::{check_accumulator, reference_element, Prefetch, PREFETCH};
use testkit::spans::{is_kernel, ran_at_once};
use testkit::{
    accepted, assert_bit_for_bit, assert_nothing_to_overlap, gpu, refuses, run_lesson,
    run_recorded, run_refuses, set_up, BATCHES_REFUSED_BY_PLAN,
};

#[test]
#[ignore = "needs a CUDA GPU"]
fn prefetch_equals_no_prefetch_bit_for_bit() {
    let gpu = gpu();
    // 1 and 2 batches never reuse a buffer; 3 and 9 do (the consumed-event path).
    for (n, batches) in [(1, 1), (4097, 2), (100_003, 3), (5000, 9)] {
        let (n, batches) = (n.to_string(), batches.to_string());
        let flags = ["--elements", &n, "--batches", &batches, "--iters", "20"];
        assert_bit_for_bit::<Prefetch>(&gpu, &flags);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn prefetch_matches_cpu_reference_within_tolerance() {
    let gpu = gpu();
    let (n, iters) = (10_000, 50);
    let flags = ["--elements", "10000", "--batches", "5", "--iters", "50"];
    let mut p: Prefetch = set_up(&gpu, &flags, 2).unwrap();
    p.version(&gpu, PREFETCH).unwrap();
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
    let o = run_recorded::<Prefetch>(&gpu, &[], 5);
    let text = o.report.to_text();
    assert!(o.results_right(), "{text}");
    // The next batch's upload on the copy stream ran while a step ran on the compute stream
    // (the speed-up is scripts/perf-check.sh's).
    let prefetched = &o.recordings[1];
    let upload = |s: &Span| s.kind == Work::CopyToDevice;
    assert!(ran_at_once(prefetched, upload, is_kernel), "{:?}\n{text}", prefetched.spans);
}

/// With one batch there is no next batch to prefetch: the lesson still passes its checks,
/// and its interpretation says so instead of claiming an overlap.
#[test]
#[ignore = "needs a CUDA GPU"]
fn one_batch_is_reported_as_nothing_to_prefetch() {
    let gpu = gpu();
    let flags = ["--elements", "4096", "--batches", "1", "--iters", "20"];
    assert_nothing_to_overlap(&run_lesson::<Prefetch>(&gpu, &flags, 3), "no next batch");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn hostile_flags_are_refused_in_one_line_before_running() {
    run_refuses::<Prefetch, _>(&gpu(), BATCHES_REFUSED_BY_PLAN);
}

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    refuses::<Prefetch, _>(BATCHES_REFUSED_BY_PLAN);
    refuses::<Prefetch, _>([
        (&["--batches", "0"][..], "whole number from 1 to 4096"),
        (&["--batches", "4097"], "whole number from 1 to 4096"),
        (&["--elements", "0"], "whole number from 1 to 4294967295"),
        (&["--elements", "18446744073709551615", "--batches", "18446744073709551615"], "--"),
        (&["--iters", "4294967295"], "whole number from 1 to 100000"),
    ]);
    accepted::<Prefetch>(&[]);
    accepted::<Prefetch>(&["--elements", "1", "--batches", "1", "--iters", "1"]);
}
