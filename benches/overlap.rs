//! The overlap demo's two versions side by side: the whole array on one stream versus K
//! streams each doing its own chunk (16,777,216 floats, 100 iterations, K = 8 by default;
//! `STREAMLAB_BENCH_STREAMS` changes K). GPU time is measured with events by the demo's own
//! code, fed to criterion through `iter_custom`.
use criterion::{BenchmarkId, Criterion};
use streamlab::demos::overlap::{Overlap, DEFAULT_ELEMENTS, DEFAULT_ITERS, DEFAULT_STREAMS};
use testkit::bench::{fail, gpu_timed};
use testkit::gpu_for_bench;

fn main() {
    let Some(gpu) = gpu_for_bench("overlap") else {
        return;
    };
    let k = std::env::var("STREAMLAB_BENCH_STREAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_STREAMS);
    let mut o = Overlap::new(&gpu, DEFAULT_ELEMENTS, k, DEFAULT_ITERS, 1)
        .unwrap_or_else(|e| fail("overlap", e));
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("overlap");
    group.sample_size(30);
    let mut failure = None;
    let size = "16M x 100";
    gpu_timed(
        &mut group,
        BenchmarkId::new("sync_one_stream", size),
        &mut failure,
        || o.run_one_stream(&gpu).map(|p| p.total()),
    );
    gpu_timed(
        &mut group,
        BenchmarkId::new(format!("async_{k}_streams"), size),
        &mut failure,
        || o.run_multi_stream(&gpu),
    );
    group.finish();
    if let Some(e) = failure {
        fail("overlap", e);
    }
    // Run both once more, so the check holds even when a filter skipped the group above.
    let verified = o
        .run_one_stream(&gpu)
        .and_then(|_| o.run_multi_stream(&gpu))
        .and_then(|_| o.check_bitwise());
    if let Err(e) = verified {
        fail("overlap", e);
    }
    c.final_summary();
}
