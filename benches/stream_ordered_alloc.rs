//! The stream-ordered-alloc lesson's four versions side by side, at its defaults (4 streams,
//! 8 rounds, 524,288 floats per temporary buffer, 100 iterations): cuMemAlloc/cuMemFree in
//! the loop, cuMemAllocAsync/cuMemFreeAsync from the pool with the release threshold at
//! u64::MAX and at 0, and buffers allocated once (the bound). GPU time is measured with events
//! by the lesson's own code, fed to criterion through `iter_custom`. Afterwards every version
//! runs once more and the lesson's checks run; the bench exits 1 if one fails.
use criterion::{BenchmarkId, Criterion};
use streamlab::lessons::stream_ordered_alloc::StreamOrderedAlloc;
use testkit::bench::{fail, quick_group, verify, versions};
use testkit::{gpu_for_bench, set_up};

const BENCH: &str = "stream-ordered-alloc";

fn main() {
    let Some(gpu) = gpu_for_bench(BENCH) else {
        return;
    };
    let mut s: StreamOrderedAlloc = set_up(&gpu, &[], 1).unwrap_or_else(|e| fail(BENCH, e));
    let mut c = Criterion::default().configure_from_args();
    let size = "4 streams x 8 rounds x 512K";
    let ids = ["sync_cuMemAlloc", "async_pool_keep", "async_pool_release", "bound_setup"]
        .map(|id| BenchmarkId::new(id, size));
    let group = quick_group(&mut c, "stream_ordered_alloc");
    versions(group, BENCH, &mut s, &gpu, ids.into_iter().enumerate());
    verify(&gpu, &mut s, 4);
    c.final_summary();
}
