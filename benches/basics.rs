//! The basics lesson's two versions side by side (its defaults: 1,048,576 floats, 1,000
//! iterations): blocking copies and kernel on the legacy default stream versus one stream
//! with async copies from pinned memory. GPU time is measured with events by the lesson's
//! own code, fed to criterion through `iter_custom`. Afterwards both versions run once more
//! and the lesson's checks run (bit for bit, against the CPU, the host was free); the bench
//! exits 1 if one fails.
use criterion::{BenchmarkId, Criterion};
use streamlab::lessons::basics::Basics;
use testkit::bench::{fail, quick_group, verify, versions};
use testkit::{gpu_for_bench, set_up};

const BENCH: &str = "basics";

fn main() {
    let Some(gpu) = gpu_for_bench(BENCH) else {
        return;
    };
    let mut b: Basics = set_up(&gpu, &[], 1).unwrap_or_else(|e| fail(BENCH, e));
    let mut c = Criterion::default().configure_from_args();
    let size = "1M x 1000";
    let ids = [
        (0, BenchmarkId::new("sync_blocking_copies", size)),
        (1, BenchmarkId::new("async_pinned_one_stream", size)),
    ];
    versions(quick_group(&mut c, "basics"), BENCH, &mut b, &gpu, ids);
    verify(&gpu, &mut b, 2);
    c.final_summary();
}
