//! The pipeline demos' synchronous and asynchronous versions side by side, at the demos'
//! default sizes:
//!
//! * `callback`: sequential (prepare, run, synchronize) vs pipelined with host functions.
//!   Timed with the host clock around the whole run: the host's preparation is one of the
//!   pipeline's two stages, so GPU events alone would leave half the pipeline out.
//! * `compute_transfer`: one stream vs a transfer stream and a compute stream.
//! * `prefetch`: upload-then-step vs double-buffered prefetch.
//!
//! The last two are GPU time from events recorded by the demos' own code, fed to criterion
//! through `iter_custom`. After each group the outputs are checked bit for bit.
use std::time::Duration;

use criterion::{BenchmarkId, Criterion};
use streamlab::demos::{callback, compute_transfer, prefetch};
use streamlab::{Gpu, Result};
use testkit::{gpu_duration, gpu_for_bench};

/// Times `iters` runs of `f` (each returning its own ms), remembering the first error.
fn timed(
    iters: u64,
    failure: &mut Option<streamlab::Error>,
    mut f: impl FnMut() -> Result<f64>,
) -> Duration {
    let mut ms = 0.0;
    for _ in 0..iters {
        match f() {
            Ok(t) => ms += t,
            Err(e) => {
                failure.get_or_insert(e);
            }
        }
    }
    gpu_duration(ms)
}

fn fail(bench: &str, e: streamlab::Error) -> ! {
    eprintln!("{bench} bench: {e}");
    std::process::exit(1);
}

fn group_settings<'a>(
    c: &'a mut Criterion,
    name: &str,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    group
}

fn bench_callback(c: &mut Criterion, gpu: &Gpu) {
    let (n, b, iters) = (
        callback::DEFAULT_ELEMENTS,
        callback::DEFAULT_BATCHES,
        callback::DEFAULT_ITERS,
    );
    let mut p = callback::CallbackPipeline::new(gpu, n, b, iters, 1)
        .unwrap_or_else(|e| fail("callback", e));
    let size = format!("{b} x 1M x {iters}");
    let mut failure = None;
    let mut group = group_settings(c, "callback");
    group.bench_function(BenchmarkId::new("sync_sequential", &size), |bch| {
        bch.iter_custom(|k| timed(k, &mut failure, || Ok(p.run_sequential(gpu)?.total_ms)))
    });
    group.bench_function(BenchmarkId::new("async_host_fn_pipeline", &size), |bch| {
        bch.iter_custom(|k| timed(k, &mut failure, || Ok(p.run_pipelined(gpu)?.0)))
    });
    group.finish();
    if let Err(e) = failure.map_or_else(|| p.check_bitwise(), Err) {
        fail("callback", e);
    }
}

fn bench_compute_transfer(c: &mut Criterion, gpu: &Gpu) {
    let (n, b, iters) = (
        compute_transfer::DEFAULT_ELEMENTS,
        compute_transfer::DEFAULT_BATCHES,
        compute_transfer::DEFAULT_ITERS,
    );
    let mut ct = compute_transfer::ComputeTransfer::new(gpu, n, b, iters, 1)
        .unwrap_or_else(|e| fail("compute_transfer", e));
    let size = format!("{b} x 512K x {iters}");
    let mut failure = None;
    let mut group = group_settings(c, "compute_transfer");
    group.bench_function(BenchmarkId::new("sync_one_stream", &size), |bch| {
        bch.iter_custom(|k| timed(k, &mut failure, || Ok(ct.run_sequential(gpu)?.total())))
    });
    group.bench_function(
        BenchmarkId::new("async_transfer_and_compute_streams", &size),
        |bch| bch.iter_custom(|k| timed(k, &mut failure, || ct.run_pipelined(gpu))),
    );
    group.finish();
    if let Err(e) = failure.map_or_else(|| ct.check_bitwise(), Err) {
        fail("compute_transfer", e);
    }
}

fn bench_prefetch(c: &mut Criterion, gpu: &Gpu) {
    let (n, b, iters) = (
        prefetch::DEFAULT_ELEMENTS,
        prefetch::DEFAULT_BATCHES,
        prefetch::DEFAULT_ITERS,
    );
    let mut p =
        prefetch::Prefetch::new(gpu, n, b, iters, 1).unwrap_or_else(|e| fail("prefetch", e));
    let size = format!("{b} x 1M x {iters}");
    let mut failure = None;
    let mut group = group_settings(c, "prefetch");
    group.bench_function(BenchmarkId::new("sync_no_prefetch", &size), |bch| {
        bch.iter_custom(|k| timed(k, &mut failure, || Ok(p.run_serial(gpu)?.total)))
    });
    group.bench_function(BenchmarkId::new("async_double_buffered", &size), |bch| {
        bch.iter_custom(|k| timed(k, &mut failure, || p.run_prefetch(gpu)))
    });
    group.finish();
    if let Err(e) = failure.map_or_else(|| p.check_bitwise(), Err) {
        fail("prefetch", e);
    }
}

fn main() {
    let Some(gpu) = gpu_for_bench("pipelines") else {
        return;
    };
    let mut c = Criterion::default().configure_from_args();
    bench_callback(&mut c, &gpu);
    bench_compute_transfer(&mut c, &gpu);
    bench_prefetch(&mut c, &gpu);
    c.final_summary();
}
