//! The prefetch lesson's two versions side by side, at its defaults (8 batches of 1,048,576
//! floats, 50 iterations): upload then step on one stream versus double-buffered prefetch on
//! a copy stream. GPU time is measured with events by the lesson's own code, fed to
//! criterion through `iter_custom`. Afterwards both versions run once more and the lesson's
//! checks run (prefetch against no prefetch bit for bit, the accumulator against the CPU);
//! the bench exits 1 if one fails.
use criterion::{BenchmarkId, Criterion};
use streamlab::lab::Lesson;
use streamlab::lessons::prefetch::Prefetch;
use testkit::bench::{fail, gpu_timed, quick_group, verify};
use testkit::{gpu_for_bench, set_up};

const BENCH: &str = "prefetch";

fn main() {
    let Some(gpu) = gpu_for_bench(BENCH) else {
        return;
    };
    let mut p: Prefetch = set_up(&gpu, &[], 1).unwrap_or_else(|e| fail(BENCH, e));
    let mut c = Criterion::default().configure_from_args();
    let mut group = quick_group(&mut c, "prefetch");
    let mut failure = None;
    let size = "8 x 1M x 50";
    gpu_timed(&mut group, BenchmarkId::new("sync_no_prefetch", size), &mut failure, || {
        p.without(&gpu).map(|s| s.ms)
    });
    gpu_timed(&mut group, BenchmarkId::new("async_double_buffered", size), &mut failure, || {
        p.with(&gpu).map(|s| s.ms)
    });
    group.finish();
    if let Some(e) = failure {
        fail(BENCH, e);
    }
    verify(&gpu, &mut p, 2);
    c.final_summary();
}
