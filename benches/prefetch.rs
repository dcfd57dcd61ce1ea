//! The prefetch lesson's two versions side by side, at its defaults (8 batches of 1,048,576
//! floats, 50 iterations): upload then step on one stream versus double-buffered prefetch on
//! a copy stream. GPU time is measured with events by the lesson's own code, fed to
//! criterion through `iter_custom`. Afterwards both versions run once more and the lesson's
//! checks run (prefetch against no prefetch bit for bit, the accumulator against the CPU);
//! the bench exits 1 if one fails.
use criterion::{BenchmarkId, Criterion};
use streamlab::lessons::prefetch::Prefetch;
use testkit::bench::{fail, quick_group, verify, versions};
use testkit::{gpu_for_bench, set_up};

const BENCH: &str = "prefetch";

fn main() {
    let Some(gpu) = gpu_for_bench(BENCH) else {
        return;
    };
    let mut p: Prefetch = set_up(&gpu, &[], 1).unwrap_or_else(|e| fail(BENCH, e));
    let mut c = Criterion::default().configure_from_args();
    let size = "8 x 1M x 50";
    let ids = [
        (0, BenchmarkId::new("sync_no_prefetch", size)),
        (1, BenchmarkId::new("async_double_buffered", size)),
    ];
    versions(quick_group(&mut c, "prefetch"), BENCH, &mut p, &gpu, ids);
    verify(&gpu, &mut p, 2);
    c.final_summary();
}
