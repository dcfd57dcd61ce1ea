//! GPU tests of the stream-sweep lesson. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine).
use streamlab::lab::record::report::Verdict;
use streamlab::lessons::stream_sweep::{best, rows, version_streams, StreamSweep};
use testkit::spans::{copy_beside_kernel, streams};
use testkit::{
    accepted, assert_nothing_to_overlap, gpu, refuses, refuses_out_of_range, run_lesson,
    run_recorded,
};

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_sweep_passes_with_sane_rows() {
    let gpu = gpu();
    let o = run_recorded::<StreamSweep>(
        &gpu,
        &["--elements", "4194304", "--iters", "50", "--streams", "8"],
        2,
    );
    let text = o.report.to_text();
    assert!(o.results_right(), "{text}");
    assert_eq!(
        o.checks.iter().find(|c| c.name == "every K == one stream, bit for bit").map(|c| c.verdict),
        Some(Verdict::Passed),
        "{text}"
    );
    // K = 1 (one stream), 8, then 2 and 4.
    assert_eq!(o.measured.versions.len(), 4, "{text}");
    let rows = rows(&version_streams(8), &o.measured);
    let ks: Vec<usize> = rows.iter().map(|r| r.streams).collect();
    assert_eq!(ks, [1, 2, 4, 8]);
    // A row per K, each with its bound; the best K is one of them. Which K is best, how
    // close each comes to its bound and how much the best beats one stream are timings:
    // scripts/perf-check.sh's.
    assert!(rows.iter().all(|r| r.measured_over_bound > 0.0), "{text}");
    let top = best(&rows).unwrap();
    assert!(ks.contains(&top.streams), "best K {}\n{text}", top.streams);
    // Recorded: with 8 streams a chunk's copy ran beside another chunk's kernel.
    let eight = &o.recordings[1];
    assert_eq!(streams(eight).len(), 8, "{text}");
    assert!(copy_beside_kernel(eight), "{:?}\n{text}", eight.spans);
}

/// With one stream there is nothing to sweep: the lesson still passes its checks, and its
/// interpretation says so instead of claiming an overlap.
#[test]
#[ignore = "needs a CUDA GPU"]
fn one_stream_is_reported_as_no_sweep() {
    let gpu = gpu();
    let flags = ["--elements", "4096", "--streams", "1", "--iters", "20"];
    assert_nothing_to_overlap(&run_lesson::<StreamSweep>(&gpu, &flags, 2), "no sweep");
}

/// (flag, value, the range the refusal must name): refused as they parse.
const OUT_OF_RANGE: [[&str; 3]; 6] = [
    ["--streams", "0", "whole number from 1 to 64"],
    ["--streams", "65", "whole number from 1 to 64"],
    ["--elements", "0", "whole number from 1 to 4294967295"],
    ["--elements", "18446744073709551615", "whole number from 1 to 4294967295"],
    ["--iters", "0", "whole number from 1 to 100000"],
    ["--iters", "4294967295", "whole number from 1 to 100000"],
];

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn hostile_flags_are_refused_in_one_line_without_a_gpu() {
    refuses_out_of_range::<StreamSweep>(&OUT_OF_RANGE);
    refuses::<StreamSweep, _>([
        (&["--elements", "4", "--streams", "8"][..], "--streams 8 is more than --elements 4"),
        // 4G elements x 100000 iterations, seven times over.
        (&["--elements", "4294967295", "--iters", "100000"], "per repeat"),
    ]);
}

#[test]
fn the_default_and_one_stream_pass_the_checks() {
    accepted::<StreamSweep>(&[]);
    // One stream is allowed: the report says there is no sweep.
    accepted::<StreamSweep>(&["--elements", "1", "--streams", "1", "--iters", "1"]);
}
