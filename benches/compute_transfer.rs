//! The compute-transfer lesson's two versions side by side, at its defaults (4 batches of
//! 524,288 floats, 100 iterations): every batch on one stream versus a transfer stream and a
//! compute stream linked by events. GPU time is measured with events by the lesson's own
//! code, fed to criterion through `iter_custom`. Afterwards both versions run once more and
//! the lesson's checks run (two streams against one bit for bit, against the CPU); the bench
//! exits 1 if one fails.
use criterion::{BenchmarkId, Criterion};
use streamlab::lessons::compute_transfer::ComputeTransfer;
use testkit::bench::{fail, quick_group, verify, versions};
use testkit::{gpu_for_bench, set_up};

const BENCH: &str = "compute-transfer";

fn main() {
    let Some(gpu) = gpu_for_bench(BENCH) else {
        return;
    };
    let mut ct: ComputeTransfer = set_up(&gpu, &[], 1).unwrap_or_else(|e| fail(BENCH, e));
    let mut c = Criterion::default().configure_from_args();
    let size = "4 x 512K x 100";
    let ids = [
        (0, BenchmarkId::new("sync_one_stream", size)),
        (1, BenchmarkId::new("async_transfer_and_compute_streams", size)),
    ];
    versions(quick_group(&mut c, "compute_transfer"), BENCH, &mut ct, &gpu, ids);
    verify(&gpu, &mut ct, 2);
    c.final_summary();
}
