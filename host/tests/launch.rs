//! `streamlab launch`: one process per GPU. The flag checks run everywhere; the runs need a
//! GPU and NCCL (ignored otherwise). One GPU is enough for a one-rank launch and for the
//! one-GPU refusals; the two-rank comparison with the one-process run needs two GPUs (its
//! name starts with `two_gpus`, the name the GPU scripts skip on a one-GPU machine).
use std::process::Output;

mod common;
use common::{streamlab, streamlab_in, text};

#[test]
fn launch_refuses_what_it_cannot_run_in_one_line() {
    for (args, expected) in [
        (&["launch", "--gpus", "2", "run", "overlap"][..], "`overlap` is not one of them"),
        (&["launch", "--gpus", "0", "run", "allreduce-overlap"], "whole number from 1 to 64"),
        (
            &["launch", "--gpus", "2", "run", "allreduce-overlap", "--device", "1"],
            "launch sets --device",
        ),
        (&["launch", "--gpus", "2", "allreduce-overlap"], "launch takes `run LESSON [flags]`"),
    ] {
        let o = streamlab(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}

/// The result digest a run printed in its JSON checks.
fn digest(o: &Output) -> String {
    let out = text(&o.stdout);
    let report: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let checks = report["checks"].as_array().expect("checks");
    let c = checks
        .iter()
        .find(|c| c["name"].as_str().unwrap_or("").starts_with("result digest"))
        .expect("digest check");
    assert_eq!(c["verdict"], "passed", "{c}");
    c["detail"].as_str().expect("detail").to_string()
}

const FLAGS: [&str; 8] =
    ["--elements", "1048576", "--buckets", "4", "--iters", "20", "--reps", "1"];

/// `streamlab <pre> --json <FLAGS>`: its exit code and output.
fn run_json(pre: &[&str]) -> (Option<i32>, Output) {
    let args: Vec<&str> =
        pre.iter().chain(["--json"].iter()).chain(FLAGS.iter()).copied().collect();
    let o = streamlab(&args);
    (o.status.code(), o)
}

#[test]
#[ignore = "needs a CUDA GPU and NCCL"]
fn one_rank_alone_runs_on_any_gpu() {
    // NCCL with a one-rank communicator: the rank code path, the rendezvous and the launcher.
    let (code, one) = run_json(&["launch", "--gpus", "1", "run", "allreduce-overlap"]);
    assert_eq!(code, Some(0), "{}", text(&one.stderr));
    assert!(digest(&one).starts_with("fnv1a64:"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn two_gpu_lessons_say_so_in_one_line_on_one_gpu() {
    // One GPU visible to the process, whatever the machine has.
    for args in [
        &["run", "p2p"][..],
        &["run", "pipeline-parallel"],
        &["launch", "--gpus", "2", "run", "allreduce-overlap"],
    ] {
        let o = streamlab_in(&[("CUDA_VISIBLE_DEVICES", "0")], args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("needs 2 GPUs, found 1"), "{args:?}: {err}");
    }
    // `run all` lists them as not run and still exits 0 (at the smallest repeat count).
    let o = streamlab_in(&[("CUDA_VISIBLE_DEVICES", "0")], &["run", "all", "--reps", "1"]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    for lesson in ["p2p", "allreduce-overlap", "pipeline-parallel"] {
        assert!(out.contains(&format!("== {lesson}: not run: needs 2 GPUs, found 1")), "{lesson}");
    }
}

#[test]
#[ignore = "needs two CUDA GPUs and NCCL"]
fn two_gpus_two_ranks_give_the_bits_of_one_process() {
    let (code, two) = run_json(&["launch", "--gpus", "2", "run", "allreduce-overlap"]);
    assert_eq!(code, Some(0), "{}", text(&two.stderr));
    let (code, alone) = run_json(&["run", "allreduce-overlap"]);
    assert_eq!(code, Some(0), "{}", text(&alone.stderr));
    assert_eq!(digest(&two), digest(&alone), "two processes and one process summed differently");
}
