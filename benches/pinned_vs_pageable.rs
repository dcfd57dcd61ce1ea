//! The pinned-vs-pageable lesson's host-to-device pair side by side (`h2d_copy`): one 64 MiB
//! copy from pageable versus from pinned memory (the lesson's default size). GPU time is
//! measured with events by the lesson's own code, fed to criterion through `iter_custom`,
//! with the bytes as throughput. Afterwards all four copies (both directions) run once more
//! and the lesson's checks run (the data intact through every copy, pinned calls returned at
//! once and pageable ones held the host); the bench exits 1 if one fails.
use criterion::{BenchmarkId, Criterion, Throughput};
use streamlab::lessons::pinned_vs_pageable::{PinnedVsPageable, KINDS};
use testkit::bench::{fail, quick_group, verify, versions};
use testkit::{gpu_for_bench, set_up};

const BENCH: &str = "pinned-vs-pageable";

fn main() {
    let Some(gpu) = gpu_for_bench(BENCH) else {
        return;
    };
    let mut p: PinnedVsPageable = set_up(&gpu, &[], 1).unwrap_or_else(|e| fail(BENCH, e));
    let mut c = Criterion::default().configure_from_args();
    let mut group = quick_group(&mut c, "h2d_copy");
    group.throughput(Throughput::Bytes(64 << 20));
    let ids =
        [(0, BenchmarkId::new("pageable", "64 MiB")), (1, BenchmarkId::new("pinned", "64 MiB"))];
    versions(group, BENCH, &mut p, &gpu, ids);
    verify(&gpu, &mut p, KINDS.len());
    c.final_summary();
}
