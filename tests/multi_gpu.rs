//! GPU tests of the multi-GPU lessons (p2p, allreduce-overlap, pipeline-parallel), ignored
//! without a GPU: run them with `--include-ignored`. A test named `two_gpus_*`,
//! `three_gpus_*` or `four_gpus_*` needs that many GPUs: where fewer are visible it says so
//! in a line (`skipped: ...: needs 4 GPUs, found 2`, [`testkit::gpus`]) and passes, and
//! scripts/gpu-run.sh counts it apart. The one-GPU refusal itself is tested through the
//! binary in host/tests/launch.rs.
//!
//! They assert sums, bits and the shape of the recorded spans; how much faster each
//! technique made the run is scripts/perf-check.sh's.
use streamlab::lab::record::report::Verdict;
use streamlab::lab::record::span::{Span, Work};
use streamlab::lessons::allreduce_overlap::AllreduceOverlap;
use streamlab::lessons::p2p::P2p;
use streamlab::lessons::pipeline_parallel::PipelineParallel;
use testkit::spans::{count, is_kernel, ran_at_once};
use testkit::{gpus, run_lesson, run_recorded};

fn checks_passed(o: &[streamlab::lab::record::report::Check], text: &str) {
    assert!(!o.is_empty());
    for c in o {
        assert_eq!(c.verdict, Verdict::Passed, "{}: {:?}\n{text}", c.name, c.detail);
    }
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn two_gpus_p2p_moves_every_byte_and_the_peer_copy_skips_the_host() {
    let flags = ["--mib", "64"];
    let Some(gpu) = gpus(2) else { return };
    let o = run_recorded::<P2p>(&gpu, &flags, 5);
    let text = o.report.to_text();
    checks_passed(&o.checks, &text);
    assert_eq!(o.checks.iter().filter(|c| c.name.contains("got GPU")).count(), 4);
    // The staged path: down to the host from GPU 0, up from it to GPU 1, no peer copy.
    let [staged, peer] = [&o.recordings[0], &o.recordings[1]];
    assert_eq!(count(staged, Work::CopyPeer), 0, "{:?}\n{text}", staged.spans);
    let on =
        |kind: Work, device: u32| staged.spans.iter().any(|s| s.kind == kind && s.device == device);
    assert!(on(Work::CopyToHost, 0) && on(Work::CopyToDevice, 1), "{:?}\n{text}", staged.spans);
    // With peer access the bytes went over the link alone (how much faster is
    // scripts/perf-check.sh's).
    if o.lesson.links[0].access {
        assert!(count(peer, Work::CopyPeer) > 0, "{:?}\n{text}", peer.spans);
        let through_host = count(peer, Work::CopyToHost) + count(peer, Work::CopyToDevice);
        assert_eq!(through_host, 0, "{:?}\n{text}", peer.spans);
    }
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn two_gpus_p2p_checks_hold_at_one_mib() {
    // At 1 MiB the destinations' clearing once landed under the peer copies (a copy from
    // pageable memory returns before its DMA is done): every run must pass.
    let Some(gpu) = gpus(2) else { return };
    for _ in 0..5 {
        let o = run_lesson::<P2p>(&gpu, &["--mib", "1"], 1);
        checks_passed(&o.checks, &o.report.to_text());
    }
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn two_gpus_allreduce_sums_are_exact_and_the_wrong_order_is_caught() {
    let flags = ["--elements", "4194304", "--buckets", "4", "--iters", "20"];
    let Some(gpu) = gpus(2) else { return };
    let o = run_lesson::<AllreduceOverlap>(&gpu, &flags, 3);
    checks_passed(&o.checks, &o.report.to_text());
    let names: Vec<&str> = o.checks.iter().map(|c| c.name.as_str()).collect();
    for expected in [
        "== sequential, bit for bit (rank 1)",
        "CPU sum of every rank's gradients (rank 0), bit for bit",
        "copy engines' sums == NCCL's, bit for bit (rank 0)",
        "copy engines' sums == NCCL's, bit for bit (rank 1)",
        "silently wrong sums",
    ] {
        assert!(names.iter().any(|n| n.contains(expected)), "{expected}: {names:?}");
    }
    assert!(!names.iter().any(|n| n.contains("approx:")), "two ranks are exact: {names:?}");
    // Each probed version's bound with times beside, and its gap above the free bound split
    // into sharing and scheduling, which add up to it.
    let text = o.report.to_text();
    let value = |name: &str| o.report.value(name).unwrap_or_else(|| panic!("no {name}\n{text}"));
    let free = value("bound max(C, A) + min(C, A)/B");
    for (version, which) in [(1, "NCCL, greatest priority"), (4, "copy engines")] {
        let aware = value(&format!("bound with times beside (contention-aware, {which})"));
        let sharing = value(&format!("gap: SM and memory sharing ({which})"));
        let scheduling = value(&format!("gap: scheduling ({which})"));
        let measured = o.measured.versions[version].time.median;
        assert!((sharing - (aware - free)).abs() < 1e-9, "{which}\n{text}");
        assert!((sharing + scheduling - (measured - free)).abs() < 1e-9, "{which}\n{text}");
    }
    // Whether 4 buckets of 4M elements beat one all-reduce is a timing, and at this size they
    // need not: each small all-reduce pays NCCL's fixed cost (the lesson says so). The
    // speed-up at the defaults is scripts/perf-check.sh's.
}

/// `--gpus N` in one process, on a machine with at least N GPUs: every check passes, the
/// checks are bit for bit with one or two ranks and approximate with more, and the copy
/// engines' version is there with exactly two.
/// Short of N GPUs it skips with a line ([`gpus`]).
fn allreduce_on(gpus: usize) {
    let Some(gpu) = testkit::gpus(gpus) else { return };
    let n = gpus.to_string();
    let flags = ["--gpus", &n, "--elements", "1048576", "--buckets", "4", "--iters", "20"];
    let o = run_lesson::<AllreduceOverlap>(&gpu, &flags, 2);
    let text = o.report.to_text();
    checks_passed(&o.checks, &text);
    let names: Vec<&str> = o.checks.iter().map(|c| c.name.as_str()).collect();
    let approx = names.iter().filter(|n| n.contains("approx: ")).count();
    let engines = names.iter().filter(|n| n.contains("copy engines' sums")).count();
    if gpus <= 2 {
        assert_eq!(approx, 0, "{names:?}");
    } else {
        // Three bucketed versions, one check per rank.
        assert_eq!(approx, 3 * gpus, "{names:?}");
    }
    assert_eq!(engines, if gpus == 2 { 2 } else { 0 }, "{names:?}");
    assert_eq!(o.measured.versions.len(), if gpus == 2 { 5 } else { 4 });
    assert!(
        text.contains(&format!("On {gpus} GPU(s) in this process, {gpus} rank(s) in all")),
        "{text}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU and NCCL"]
fn allreduce_runs_as_one_rank_on_one_gpu() {
    allreduce_on(1);
}

#[test]
#[ignore = "needs three CUDA GPUs"]
fn three_gpus_allreduce_checks_odd_rank_counts_approximately() {
    allreduce_on(3);
}

#[test]
#[ignore = "needs four CUDA GPUs"]
fn four_gpus_allreduce_checks_sums_approximately_and_passes() {
    allreduce_on(4);
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn two_gpus_pipeline_output_is_the_one_gpu_output_and_the_pipe_overlaps() {
    let flags = ["--micro-batches", "8", "--elements", "1048576", "--iters", "50"];
    let Some(gpu) = gpus(2) else { return };
    let o = run_recorded::<PipelineParallel>(&gpu, &flags, 3);
    let text = o.report.to_text();
    checks_passed(&o.checks, &text);
    let bitwise = o.checks.iter().filter(|c| c.name.contains("bit for bit")).count();
    assert_eq!(bitwise, 2);
    // Pipelined, stage 0 on GPU 0 ran while stage 1 ran on GPU 1: a later micro-batch beside
    // an earlier one (tests/span_shapes.rs shows the naive version never does). The
    // speed-up is scripts/perf-check.sh's.
    let on = |device: u32| move |s: &Span| is_kernel(s) && s.device == device;
    let piped = &o.recordings[1];
    assert!(ran_at_once(piped, on(0), on(1)), "{:?}\n{text}", piped.spans);
}
