//! `streamlab launch`: one process per GPU. The flag checks run everywhere; the runs need a
//! GPU and NCCL (ignored otherwise). One GPU is enough for a one-rank launch; the two-rank
//! comparison with the one-process run needs two and says so when there is one.
use std::process::Output;

mod common;
use common::{streamlab, text};

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

#[test]
#[ignore = "needs a CUDA GPU and NCCL"]
fn one_rank_per_process_gives_the_bits_of_one_process() {
    let run = |pre: &[&str]| {
        let args: Vec<&str> =
            pre.iter().chain(["--json"].iter()).chain(FLAGS.iter()).copied().collect();
        let o = streamlab(&args);
        (o.status.code(), o)
    };
    // One rank alone: NCCL with a one-rank communicator works on any GPU.
    let (code, one) = run(&["launch", "--gpus", "1", "run", "allreduce-overlap"]);
    assert_eq!(code, Some(0), "{}", text(&one.stderr));
    assert!(digest(&one).starts_with("fnv1a64:"));
    let (code, two) = run(&["launch", "--gpus", "2", "run", "allreduce-overlap"]);
    if code == Some(3) {
        assert!(text(&two.stderr).contains("needs 2 GPUs, found 1"), "{}", text(&two.stderr));
        println!("NOT RUN on two GPUs: this machine has one");
        return;
    }
    assert_eq!(code, Some(0), "{}", text(&two.stderr));
    let (code, alone) = run(&["run", "allreduce-overlap"]);
    assert_eq!(code, Some(0), "{}", text(&alone.stderr));
    assert_eq!(digest(&two), digest(&alone), "two processes and one process summed differently");
}
