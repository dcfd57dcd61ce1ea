//! GPU tests of the multi-GPU lessons (p2p, allreduce-overlap, pipeline-parallel), ignored
//! without a GPU: run them with `--include-ignored`. A test named `two_gpus_*`,
//! `three_gpus_*` or `four_gpus_*` needs that many GPUs; gpu-run.sh and `scripts/test.sh
//! --gpu` skip it, and say so, where there are fewer.
use streamlab::lab::record::report::Verdict;
use streamlab::lessons::allreduce_overlap::AllreduceOverlap;
use streamlab::lessons::p2p::P2p;
use streamlab::lessons::pipeline_parallel::PipelineParallel;
use streamlab::runtime::context::device_count;
use testkit::{gpu, run_lesson, TestGpu};

/// The GPU, on a machine with two; a panic naming what is missing otherwise. These tests
/// are named `two_gpus_*`: gpu-run.sh, `scripts/test.sh --gpu` and the GPU workflow skip
/// them by that name, and say so, where there is one GPU (the one-GPU refusal itself is
/// tested through the binary in host/tests/launch.rs).
fn two_gpus() -> TestGpu {
    let gpu = gpu();
    let found = device_count().unwrap();
    assert!(found >= 2, "this test needs two CUDA GPUs and found {found}");
    gpu
}

fn checks_passed(o: &[streamlab::lab::record::report::Check], text: &str) {
    assert!(!o.is_empty());
    for c in o {
        assert_eq!(c.verdict, Verdict::Passed, "{}: {:?}\n{text}", c.name, c.detail);
    }
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn two_gpus_p2p_moves_every_byte_and_the_link_beats_the_host() {
    let flags = ["--mib", "64"];
    let gpu = two_gpus();
    let o = run_lesson::<P2p>(&gpu, &flags, 5);
    checks_passed(&o.checks, &o.report.to_text());
    assert_eq!(o.checks.iter().filter(|c| c.name.contains("got GPU")).count(), 4);
    if o.lesson.links[0].access {
        assert!(o.measured.speedup() > 1.5, "{}", o.report.to_text());
    }
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn two_gpus_p2p_checks_hold_at_one_mib() {
    // At 1 MiB the destinations' clearing once landed under the peer copies (a copy from
    // pageable memory returns before its DMA is done): every run must pass.
    let gpu = two_gpus();
    for _ in 0..5 {
        let o = run_lesson::<P2p>(&gpu, &["--mib", "1"], 1);
        checks_passed(&o.checks, &o.report.to_text());
    }
}

#[test]
#[ignore = "needs two CUDA GPUs"]
fn two_gpus_allreduce_sums_are_exact_and_the_wrong_order_is_caught() {
    let flags = ["--elements", "4194304", "--buckets", "4", "--iters", "20"];
    let gpu = two_gpus();
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
    // Overlap must not be slower than doing one thing after the other.
    assert!(o.measured.speedup() > 1.0, "{}", o.report.to_text());
}

/// `--gpus N` in one process, on a machine with at least N GPUs: every check passes, the
/// checks are bit for bit with one or two ranks and approximate with more, and the copy
/// engines' version is there with exactly two.
fn allreduce_on(gpus: usize) {
    let found = device_count().unwrap() as usize;
    assert!(found >= gpus, "this test needs {gpus} CUDA GPUs and found {found}");
    let n = gpus.to_string();
    let flags = ["--gpus", &n, "--elements", "1048576", "--buckets", "4", "--iters", "20"];
    let o = run_lesson::<AllreduceOverlap>(&gpu(), &flags, 2);
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
    let gpu = two_gpus();
    let o = run_lesson::<PipelineParallel>(&gpu, &flags, 3);
    checks_passed(&o.checks, &o.report.to_text());
    // Two equal stages over 8 micro-batches: at best 16/9 = 1.78x; well above 1 in practice.
    assert!(o.measured.speedup() > 1.3, "{}", o.report.to_text());
    let bitwise = o.checks.iter().filter(|c| c.name.contains("bit for bit")).count();
    assert_eq!(bitwise, 2);
}
