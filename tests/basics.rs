//! GPU tests of the basics lesson. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine); the flag checks at the end
//! run everywhere.
use streamlab::lab::harness::data::ensure_close_to_reference;
use streamlab::lab::Lesson;
use streamlab::lessons::basics::{Basics, ASYNC_COPIES, BLOCKING_COPIES};
use testkit::spans::host_free_before_the_kernel_ended;
use testkit::{
    accepted, gpu, refusal, refuses, refuses_out_of_range, run_lesson, run_recorded, run_refuses,
    set_up,
};

#[test]
#[ignore = "needs a CUDA GPU"]
fn async_equals_blocking_bit_for_bit() {
    let gpu = gpu();
    for n in [1usize, 1000, 1_000_003] {
        let n_flag = n.to_string();
        let flags = ["--elements", n_flag.as_str(), "--iters", "50"];
        let mut b: Basics = set_up(&gpu, &flags, n as u64).unwrap();
        b.version(&gpu, BLOCKING_COPIES).unwrap();
        b.version(&gpu, ASYNC_COPIES).unwrap();
        let ((blocking, asynchronous), input) = (b.outputs().unwrap(), b.input().unwrap());
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&asynchronous), bits(&blocking), "n={n}");
        // Not vacuous: the kernel changed the data.
        assert_ne!(asynchronous[n - 1].to_bits(), input[n - 1].to_bits(), "n={n}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn async_matches_cpu_reference_within_tolerance() {
    let gpu = gpu();
    let (n, iters) = (50_000, 300);
    let mut b: Basics = set_up(&gpu, &["--elements", "50000", "--iters", "300"], 42).unwrap();
    b.version(&gpu, ASYNC_COPIES).unwrap();
    let ((_, out), input) = (b.outputs().unwrap(), b.input().unwrap());
    // Every element, with data.rs's tolerances: x = sin(x)cos(x) contracts, so the per-step
    // differences between libdevice's and the host's sinf/cosf do not pile up with iters.
    assert_eq!(out.len(), n);
    let reference = |i: usize| streamlab::math::compute_element(input[i], iters);
    ensure_close_to_reference("async output vs CPU", &out, n, reference).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_report_shows_the_host_free_only_when_async() {
    let gpu = gpu();
    let o = run_recorded::<Basics>(&gpu, &[], 3);
    let text = o.report.to_text();
    assert!(o.results_right(), "{text}");
    // As an order on CUPTI's clock: with async copies every driver call returned before the
    // kernel ended; the blocking copy back returned only after it. How much host time and
    // work that freed is scripts/perf-check.sh's.
    let [blocking, asynchronous] = [&o.recordings[0], &o.recordings[1]];
    assert!(host_free_before_the_kernel_ended(asynchronous), "{:?}\n{text}", asynchronous.host);
    assert!(!host_free_before_the_kernel_ended(blocking), "{:?}\n{text}", blocking.host);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_few_microseconds_of_gpu_work_make_no_host_claim() {
    let gpu = gpu();
    let o = run_lesson::<Basics>(&gpu, &["--elements", "1024", "--iters", "1"], 3);
    let text = o.report.to_text();
    assert!(o.results_right(), "{text}");
    let told = o.report.interpretation.join("\n");
    assert!(told.contains("Not a claim here"), "{text}");
}

/// (flag, value, the range the refusal must name): refused as they parse.
const OUT_OF_RANGE: [[&str; 3]; 4] = [
    ["--elements", "0", "whole number from 1 to 4294967295"],
    // 2^62: at 4 bytes an element, a 64-bit byte count wraps to 0.
    ["--elements", "4611686018427387904", "whole number from 1 to 4294967295"],
    ["--iters", "0", "whole number from 1 to 100000"],
    ["--iters", "1000000", "whole number from 1 to 100000"],
];
/// In range, but over the time budget: about half an hour of kernel on an H100.
const OVER_BUDGET: &[(&[&str], &str)] =
    &[(&["--elements", "1073741824", "--iters", "100000"], "--elements x --iters")];

/// The run plans again with the real GPU's model: what the plan refuses, it refuses too.
#[test]
#[ignore = "needs a CUDA GPU"]
fn flags_over_budget_are_refused_by_the_run_too() {
    run_refuses::<Basics, _>(&gpu(), OVER_BUDGET);
}

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    refuses_out_of_range::<Basics>(&OUT_OF_RANGE);
    refuses::<Basics, _>(OVER_BUDGET);
    assert!(refusal::<Basics>(OVER_BUDGET[0].0).contains("per repeat"));
}

#[test]
fn the_defaults_and_the_extreme_flags_pass_the_checks() {
    accepted::<Basics>(&[]);
    accepted::<Basics>(&["--elements", "1", "--iters", "1"]);
    accepted::<Basics>(&["--iters", "100000"]);
}
