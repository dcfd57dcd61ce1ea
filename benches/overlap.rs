//! The overlap lesson's two versions side by side: the whole array on one stream versus K
//! streams each doing its own chunk (the lesson's defaults: 16,777,216 floats, 100
//! iterations, K = 8; `STREAMLAB_BENCH_STREAMS` changes K). GPU time is measured with events
//! by the lesson's own code, fed to criterion through `iter_custom`.
use criterion::{BenchmarkId, Criterion};
use streamlab::lessons::overlap::Overlap;
use testkit::bench::{fail, verify, versions};
use testkit::{gpu_for_bench, set_up};

fn main() {
    let Some(gpu) = gpu_for_bench("overlap") else {
        return;
    };
    let k = std::env::var("STREAMLAB_BENCH_STREAMS").unwrap_or_else(|_| "8".into());
    let mut o: Overlap = set_up(&gpu, &["--streams", &k], 1).unwrap_or_else(|e| fail("overlap", e));
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("overlap");
    group.sample_size(30);
    let size = "16M x 100";
    let ids = [
        (0, BenchmarkId::new("sync_one_stream", size)),
        (1, BenchmarkId::new(format!("async_{k}_streams"), size)),
    ];
    versions(group, "overlap", &mut o, &gpu, ids);
    verify(&gpu, &mut o, 2);
    c.final_summary();
}
