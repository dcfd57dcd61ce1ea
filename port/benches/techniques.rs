//! The technique demos' synchronous/asynchronous pairs side by side, GPU time from CUDA
//! events (the demos' own code), fed to criterion through `iter_custom`:
//!
//! - `basics`: blocking copies + kernel vs one stream with async copies from pinned memory
//!   (1,048,576 floats, 1,000 iterations);
//! - `sleep_streams_small` / `sleep_streams_full`: SleepKernel K times on one stream vs once
//!   on each of K streams (K = 4, `STREAMLAB_BENCH_STREAMS` changes it), one block or a
//!   64x64 grid of 16x16, 500 µs a block;
//! - `h2d_copy`: one 64 MiB host-to-device copy from pinned vs from pageable memory.
//!
//! After the groups, each version runs once more (a criterion filter may have skipped its
//! group) and the pair's outputs are verified (bit for bit, and basics against the CPU); the
//! bench exits 1 on a mismatch or a CUDA error.
use criterion::{BenchmarkId, Criterion};
use streamlab::demos::basics::{self, Basics};
use streamlab::demos::pinned_vs_pageable::{self, Direction, HostMemory, PinnedVsPageable};
use streamlab::demos::sleep_streams::{self, Grid, SleepStreams};
use streamlab::{Gpu, Result};
use testkit::bench::{fail, gpu_timed, quick_group};
use testkit::gpu_for_bench;

const SLEEP_US: f64 = 500.0;

fn bench_basics(c: &mut Criterion, gpu: &Gpu) -> Result<()> {
    let mut b = Basics::new(gpu, basics::DEFAULT_ELEMENTS, basics::DEFAULT_ITERS, 1)?;
    let mut failure = None;
    let mut group = quick_group(c, "basics");
    gpu_timed(
        &mut group,
        BenchmarkId::new("sync_blocking_copies", "1M x 1000"),
        &mut failure,
        || b.run_blocking(gpu).map(|r| r.gpu_ms),
    );
    gpu_timed(
        &mut group,
        BenchmarkId::new("async_pinned_one_stream", "1M x 1000"),
        &mut failure,
        || b.run_async(gpu).map(|r| r.gpu_ms),
    );
    group.finish();
    failure.map_or(Ok(()), Err)?;
    // One more run of each (a filter may have skipped the group), then verify.
    b.run_blocking(gpu)?;
    b.run_async(gpu)?;
    b.check_bitwise()?;
    b.check_reference(256).map(|_| ())
}

fn bench_sleep_streams(c: &mut Criterion, gpu: &Gpu, k: usize) -> Result<()> {
    let mut s = SleepStreams::new(gpu, sleep_streams::DEFAULT_ELEMENTS, k, SLEEP_US, 1)?;
    let mut failure = None;
    for (name, grid) in [
        ("sleep_streams_small", Grid::Small),
        ("sleep_streams_full", Grid::Full),
    ] {
        let mut group = quick_group(c, name);
        gpu_timed(
            &mut group,
            BenchmarkId::new("sync_one_stream", format!("{k} launches")),
            &mut failure,
            || s.run_one_stream(gpu, grid),
        );
        gpu_timed(
            &mut group,
            BenchmarkId::new(format!("async_{k}_streams"), format!("{k} launches")),
            &mut failure,
            || s.run_multi_stream(gpu, grid),
        );
        group.finish();
    }
    failure.map_or(Ok(()), Err)?;
    // One more run of each version of each grid (a filter may have skipped a group), then
    // verify that every copy moved the data intact.
    for grid in [Grid::Small, Grid::Full] {
        s.run_one_stream(gpu, grid)?;
        s.run_multi_stream(gpu, grid)?;
        s.check_round_trip()?;
    }
    Ok(())
}

fn bench_h2d(c: &mut Criterion, gpu: &Gpu) -> Result<()> {
    let n = pinned_vs_pageable::DEFAULT_ELEMENTS;
    let mut p = PinnedVsPageable::new(gpu, n, 1)?;
    let mut failure = None;
    let mut group = quick_group(c, "h2d_copy");
    group.throughput(criterion::Throughput::Bytes(p.bytes() as u64));
    gpu_timed(
        &mut group,
        BenchmarkId::new("pageable", "64 MiB"),
        &mut failure,
        || {
            p.copy(HostMemory::Pageable, Direction::ToDevice)
                .map(|t| t.gpu_ms)
        },
    );
    gpu_timed(
        &mut group,
        BenchmarkId::new("pinned", "64 MiB"),
        &mut failure,
        || {
            p.copy(HostMemory::Pinned, Direction::ToDevice)
                .map(|t| t.gpu_ms)
        },
    );
    group.finish();
    failure.map_or(Ok(()), Err)?;
    // Copy in once more (a filter may have skipped the group), bring both back to the
    // host and verify the copies moved the data intact.
    p.copy(HostMemory::Pinned, Direction::ToDevice)?;
    p.copy(HostMemory::Pageable, Direction::ToDevice)?;
    p.copy(HostMemory::Pinned, Direction::ToHost)?;
    p.copy(HostMemory::Pageable, Direction::ToHost)?;
    p.check_round_trips().map(|_| ())
}

fn main() {
    let Some(gpu) = gpu_for_bench("techniques") else {
        return;
    };
    let k = std::env::var("STREAMLAB_BENCH_STREAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(sleep_streams::DEFAULT_STREAMS);
    let mut c = Criterion::default().configure_from_args();
    if let Err(e) = bench_basics(&mut c, &gpu) {
        fail("techniques (basics)", e);
    }
    if let Err(e) = bench_sleep_streams(&mut c, &gpu, k) {
        fail("techniques (sleep-streams)", e);
    }
    if let Err(e) = bench_h2d(&mut c, &gpu) {
        fail("techniques (h2d copy)", e);
    }
    c.final_summary();
}
