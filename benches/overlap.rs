//! The overlap demo's two versions side by side: the whole array on one stream versus K
//! streams each doing its own chunk (16,777,216 floats, 100 iterations, K = 8 by default;
//! `STREAMLAB_BENCH_STREAMS` changes K). GPU time is measured with events by the demo's own
//! code, fed to criterion through `iter_custom`.
use criterion::{BenchmarkId, Criterion};
use streamlab::demos::overlap::{Overlap, DEFAULT_ELEMENTS, DEFAULT_ITERS, DEFAULT_STREAMS};
use testkit::{gpu_duration, gpu_for_bench};

fn main() {
    let Some(gpu) = gpu_for_bench("overlap") else {
        return;
    };
    let k = std::env::var("STREAMLAB_BENCH_STREAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_STREAMS);
    let mut o = match Overlap::new(&gpu, DEFAULT_ELEMENTS, k, DEFAULT_ITERS, 1) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("overlap bench: {e}");
            std::process::exit(1);
        }
    };
    let mut c = Criterion::default().configure_from_args();
    let mut group = c.benchmark_group("overlap");
    group.sample_size(30);
    let mut failure = None;
    group.bench_function(BenchmarkId::new("sync_one_stream", "16M x 100"), |b| {
        b.iter_custom(|iters| {
            let mut ms = 0.0;
            for _ in 0..iters {
                match o.run_one_stream(&gpu) {
                    Ok(p) => ms += p.total(),
                    Err(e) => failure = Some(e),
                }
            }
            gpu_duration(ms)
        })
    });
    group.bench_function(
        BenchmarkId::new(format!("async_{k}_streams"), "16M x 100"),
        |b| {
            b.iter_custom(|iters| {
                let mut ms = 0.0;
                for _ in 0..iters {
                    match o.run_multi_stream(&gpu) {
                        Ok(t) => ms += t,
                        Err(e) => failure = Some(e),
                    }
                }
                gpu_duration(ms)
            })
        },
    );
    group.finish();
    let verified = failure.map_or_else(|| o.check_bitwise(), Err);
    if let Err(e) = verified {
        eprintln!("overlap bench: {e}");
        std::process::exit(1);
    }
    c.final_summary();
}
