//! GPU tests of the three two-GPU lessons (p2p, allreduce-overlap, pipeline-parallel).
//! Ignored without a GPU. On a machine with one GPU they assert the one-line "needs 2 GPUs"
//! refusal and print that the two-GPU part was not run; with two they run the lessons.
use streamlab::lab::report::Verdict;
use streamlab::lab::{harness, Lesson, Settings};
use streamlab::lessons::allreduce_overlap::AllreduceOverlap;
use streamlab::lessons::p2p::P2p;
use streamlab::lessons::pipeline_parallel::PipelineParallel;
use streamlab::runtime::context::device_count;
use streamlab::Error;
use testkit::{gpu, run_lesson, TestGpu};

/// The GPU when the machine has two; otherwise checks that `L` refuses in one line, exit 3,
/// and returns None.
fn two_gpus<L: Lesson>(flags: &[&str]) -> Option<TestGpu> {
    let gpu = gpu();
    let found = device_count().unwrap();
    if found >= 2 {
        return Some(gpu);
    }
    let args = harness::args_from::<L>(flags).unwrap();
    match harness::run::<L>(&gpu, &args, &Settings::default()) {
        Err(e @ Error::NotRun(_)) => {
            assert_eq!(e.to_string(), format!("needs 2 GPUs, found {found}"));
            assert_eq!(e.exit_code(), 3);
        }
        Err(e) => panic!("{}: expected 'needs 2 GPUs', got {e}", L::NAME),
        Ok(_) => panic!("{} ran on one GPU", L::NAME),
    }
    println!("{}: NOT RUN on two GPUs: this machine has {found}", L::NAME);
    None
}

fn checks_passed(o: &[streamlab::lab::report::Check], text: &str) {
    assert!(!o.is_empty());
    for c in o {
        assert_eq!(c.verdict, Verdict::Passed, "{}: {:?}\n{text}", c.name, c.detail);
    }
}

#[test]
#[ignore = "needs a CUDA GPU (two for the lesson itself)"]
fn p2p_moves_every_byte_and_the_link_beats_the_host() {
    let flags = ["--mib", "64"];
    let Some(gpu) = two_gpus::<P2p>(&flags) else { return };
    let o = run_lesson::<P2p>(&gpu, &flags, 5);
    checks_passed(&o.checks, &o.report.to_text());
    assert_eq!(o.checks.iter().filter(|c| c.name.contains("got GPU")).count(), 4);
    if o.lesson.links[0].access {
        assert!(o.measured.speedup() > 1.5, "{}", o.report.to_text());
    }
}

#[test]
#[ignore = "needs a CUDA GPU (two for the lesson itself)"]
fn allreduce_sums_are_exact_and_the_wrong_order_is_caught() {
    let flags = ["--elements", "4194304", "--buckets", "4", "--iters", "20"];
    let Some(gpu) = two_gpus::<AllreduceOverlap>(&flags) else { return };
    let o = run_lesson::<AllreduceOverlap>(&gpu, &flags, 3);
    checks_passed(&o.checks, &o.report.to_text());
    let names: Vec<&str> = o.checks.iter().map(|c| c.name.as_str()).collect();
    for expected in [
        "== sequential, bit for bit (rank 1)",
        "CPU sum of every rank's gradients (rank 0), bit for bit",
        "silently wrong sums",
    ] {
        assert!(names.iter().any(|n| n.contains(expected)), "{expected}: {names:?}");
    }
    // Overlap must not be slower than doing one thing after the other.
    assert!(o.measured.speedup() > 1.0, "{}", o.report.to_text());
}

#[test]
#[ignore = "needs a CUDA GPU (two for the lesson itself)"]
fn pipeline_output_is_the_one_gpu_output_and_the_pipe_overlaps() {
    let flags = ["--micro-batches", "8", "--elements", "1048576", "--iters", "50"];
    let Some(gpu) = two_gpus::<PipelineParallel>(&flags) else { return };
    let o = run_lesson::<PipelineParallel>(&gpu, &flags, 3);
    checks_passed(&o.checks, &o.report.to_text());
    // Two equal stages over 8 micro-batches: at best 16/9 = 1.78x; well above 1 in practice.
    assert!(o.measured.speedup() > 1.3, "{}", o.report.to_text());
    let bitwise = o.checks.iter().filter(|c| c.name.contains("bit for bit")).count();
    assert_eq!(bitwise, 2);
}
