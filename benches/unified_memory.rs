//! The unified-memory lesson's four versions side by side, at its defaults (16 chunks of
//! 524,288 floats on 4 streams, 50 iterations): managed memory migrated on demand by page
//! faults, managed memory prefetched on the streams, explicit pinned copies (the bound), and
//! managed memory advised to stay on the host, mapped for the GPU. Each is timed by the
//! lesson's own code on the host's clock, from the first enqueue until the host has read every
//! result, and fed to criterion through `iter_custom`. Afterwards every version runs once more
//! and the lesson's checks run (each managed version against the explicit copies bit for bit,
//! those against the CPU); the bench exits 1 if one fails.
use criterion::{BenchmarkId, Criterion};
use streamlab::lessons::unified_memory::UnifiedMemory;
use testkit::bench::{fail, quick_group, verify, versions};
use testkit::{gpu_for_bench, set_up};

const BENCH: &str = "unified-memory";

fn main() {
    let Some(gpu) = gpu_for_bench(BENCH) else {
        return;
    };
    let mut u: UnifiedMemory = set_up(&gpu, &[], 1).unwrap_or_else(|e| fail(BENCH, e));
    let mut c = Criterion::default().configure_from_args();
    let size = "16 chunks x 512K x 50, 4 streams";
    let ids = [
        "managed_page_faults",
        "managed_prefetch",
        "explicit_pinned_copies",
        "managed_advise_host",
    ]
    .map(|id| BenchmarkId::new(id, size));
    let group = quick_group(&mut c, "unified_memory");
    versions(group, BENCH, &mut u, &gpu, ids.into_iter().enumerate());
    verify(&gpu, &mut u, 4);
    c.final_summary();
}
