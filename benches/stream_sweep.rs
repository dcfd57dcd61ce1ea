//! The stream-sweep lesson's versions side by side: the chunked pipeline for K = 1 (one
//! stream), 2, 4, ... up to the largest K (the lesson's defaults: 16,777,216 floats, 100
//! iterations, K up to 64; `STREAMLAB_BENCH_STREAMS` changes the largest K). GPU time is
//! measured with events by the lesson's own code, fed to criterion through `iter_custom`.
//! Afterwards every version runs once more and the lesson's checks run (every K against one
//! stream bit for bit, one stream against the CPU); the bench exits 1 if one fails.
use criterion::{BenchmarkId, Criterion};
use streamlab::lab::harness::args_from;
use streamlab::lab::Lesson;
use streamlab::lessons::stream_sweep::StreamSweep;
use testkit::bench::{fail, quick_group, verify, versions};
use testkit::{gpu_for_bench, set_up};

const BENCH: &str = "stream-sweep";

fn main() {
    let Some(gpu) = gpu_for_bench(BENCH) else {
        return;
    };
    let k = std::env::var("STREAMLAB_BENCH_STREAMS").unwrap_or_else(|_| "64".into());
    let flags = ["--streams", k.as_str()];
    let names = args_from::<StreamSweep>(&flags)
        .map(|a| StreamSweep::versions(&a))
        .unwrap_or_else(|e| fail(BENCH, e));
    let mut sweep: StreamSweep = set_up(&gpu, &flags, 1).unwrap_or_else(|e| fail(BENCH, e));
    let mut c = Criterion::default().configure_from_args();
    let ids = names.iter().map(|name| BenchmarkId::new("16M x 100", name)).enumerate();
    versions(quick_group(&mut c, "stream_sweep"), BENCH, &mut sweep, &gpu, ids);
    verify(&gpu, &mut sweep, names.len());
    c.final_summary();
}
