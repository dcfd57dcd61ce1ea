//! The basics lesson's two versions side by side (its defaults: 1,048,576 floats, 1,000
//! iterations): blocking copies and kernel on the legacy default stream versus one stream
//! with async copies from pinned memory. GPU time is measured with events by the lesson's
//! own code, fed to criterion through `iter_custom`. Afterwards both versions run once more
//! and the lesson's checks run (bit for bit, against the CPU, the host was free); the bench
//! exits 1 if one fails.
use criterion::{BenchmarkId, Criterion};
use streamlab::lab::Lesson;
use streamlab::lessons::basics::Basics;
use testkit::bench::{fail, gpu_timed, quick_group, verify};
use testkit::{gpu_for_bench, set_up};

const BENCH: &str = "basics";

fn main() {
    let Some(gpu) = gpu_for_bench(BENCH) else {
        return;
    };
    let mut b: Basics = set_up(&gpu, &[], 1).unwrap_or_else(|e| fail(BENCH, e));
    let mut c = Criterion::default().configure_from_args();
    let mut group = quick_group(&mut c, "basics");
    let mut failure = None;
    gpu_timed(
        &mut group,
        BenchmarkId::new("sync_blocking_copies", "1M x 1000"),
        &mut failure,
        || b.without(&gpu).map(|s| s.ms),
    );
    gpu_timed(
        &mut group,
        BenchmarkId::new("async_pinned_one_stream", "1M x 1000"),
        &mut failure,
        || b.with(&gpu).map(|s| s.ms),
    );
    group.finish();
    if let Some(e) = failure {
        fail(BENCH, e);
    }
    verify(&gpu, &mut b, 2);
    c.final_summary();
}
