//! GPU tests of the compute-transfer lesson. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine); the flag checks at the end
//! run everywhere.
use streamlab::lab::harness::data::ensure_close_to_reference;
use streamlab::lab::Lesson;
use streamlab::lessons::compute_transfer::{ComputeTransfer, THREE_STREAMS, TWO_STREAMS};
use streamlab::math::compute_element;
use testkit::spans::{copy_beside_kernel, off_its_direction_stream, streams};
use testkit::{
    accepted, assert_bit_for_bit_checks, assert_nothing_to_overlap, gpu, refuses, run_lesson,
    run_recorded, run_refuses, set_up, BATCHES_REFUSED_BY_PLAN,
};

#[test]
#[ignore = "needs a CUDA GPU"]
fn compute_transfer_two_and_three_streams_equal_one_stream_bit_for_bit() {
    let gpu = gpu();
    for (n, batches) in [(1, 1), (4097, 3), (100_003, 4), (1000, 9)] {
        let (n, batches) = (n.to_string(), batches.to_string());
        let flags = ["--elements", &n, "--batches", &batches, "--iters", "40"];
        assert_bit_for_bit_checks::<ComputeTransfer>(&gpu, &flags, 2);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn compute_transfer_matches_cpu_reference_within_tolerance() {
    let gpu = gpu();
    let iters = 100;
    let flags = ["--elements", "10000", "--batches", "4", "--iters", "100"];
    let mut ct: ComputeTransfer = set_up(&gpu, &flags, 8).unwrap();
    ct.version(&gpu, TWO_STREAMS).unwrap();
    ct.version(&gpu, THREE_STREAMS).unwrap();
    let input = ct.input().unwrap();
    // Every element of every batch, not a sample.
    let reference = |i: usize| compute_element(input[i], iters);
    for (name, out) in [("two", ct.output().unwrap()), ("three", ct.output_three().unwrap())] {
        assert_eq!(out.len(), 40_000);
        let what = format!("{name}-stream output vs CPU");
        ensure_close_to_reference(&what, &out, out.len(), reference).unwrap();
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn compute_transfer_lesson_passes_and_overlaps() {
    let gpu = gpu();
    let o = run_recorded::<ComputeTransfer>(&gpu, &[], 5);
    let text = o.report.to_text();
    assert!(o.results_right(), "{text}");
    // A batch's copies on the transfer stream ran while another batch's kernel ran on the
    // compute stream (the speed-up and measured / model are scripts/perf-check.sh's).
    let [one, two, three] = [&o.recordings[0], &o.recordings[1], &o.recordings[2]];
    assert!(copy_beside_kernel(two), "{:?}\n{text}", two.spans);
    assert_eq!(streams(one).len(), 1, "{text}");
    // The third version: uploads only on "upload", downloads only on "download", kernels only
    // on "compute".
    assert_eq!(streams(three).len(), 3, "{text}");
    assert_eq!(off_its_direction_stream(three), None, "{text}");
    assert!(copy_beside_kernel(three), "{:?}\n{text}", three.spans);
}

/// With one batch there is nothing to overlap: the lesson still passes its checks, and its
/// interpretation says so instead of claiming an overlap.
#[test]
#[ignore = "needs a CUDA GPU"]
fn one_batch_is_reported_as_nothing_to_overlap() {
    let gpu = gpu();
    let flags = ["--elements", "4096", "--batches", "1", "--iters", "20"];
    assert_nothing_to_overlap(&run_lesson::<ComputeTransfer>(&gpu, &flags, 3), "nothing to");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn hostile_flags_are_refused_in_one_line_before_running() {
    run_refuses::<ComputeTransfer, _>(&gpu(), BATCHES_REFUSED_BY_PLAN);
}

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    refuses::<ComputeTransfer, _>(BATCHES_REFUSED_BY_PLAN);
    refuses::<ComputeTransfer, _>([
        (&["--batches", "0"][..], "whole number from 1 to 1024"),
        (&["--batches", "1025"], "whole number from 1 to 1024"),
        (&["--elements", "0"], "whole number from 1 to 4294967295"),
        (&["--elements", "18446744073709551615", "--batches", "18446744073709551615"], "--"),
        (&["--iters", "4294967295"], "whole number from 1 to 100000"),
    ]);
    accepted::<ComputeTransfer>(&[]);
    accepted::<ComputeTransfer>(&["--elements", "1", "--batches", "1", "--iters", "1"]);
}
