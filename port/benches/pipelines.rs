//! The pipeline demos' synchronous and asynchronous versions side by side, at the demos'
//! default sizes:
//!
//! * `callback`: sequential (prepare, run, synchronize) vs pipelined with host functions.
//!   Timed with the host clock around the whole run, not with events: the host's
//!   preparation is one of the pipeline's two stages, so GPU events alone would leave half
//!   the pipeline out.
//! * `compute_transfer`: one stream vs a transfer stream and a compute stream.
//! * `prefetch`: upload-then-step vs double-buffered prefetch.
//!
//! The last two are GPU time from events recorded by the demos' own code, fed to criterion
//! through `iter_custom`. After each group both versions run once more (a criterion filter
//! may have skipped the group, leaving the outputs unwritten) and their outputs are checked
//! bit for bit; a mismatch or a CUDA error exits 1.
use criterion::{BenchmarkId, Criterion};
use streamlab::demos::{callback, compute_transfer, prefetch};
use streamlab::{Gpu, Result};
use testkit::bench::{fail, gpu_timed, quick_group};
use testkit::gpu_for_bench;

fn bench_callback(c: &mut Criterion, gpu: &Gpu) -> Result<()> {
    let (n, b, iters) = (
        callback::DEFAULT_ELEMENTS,
        callback::DEFAULT_BATCHES,
        callback::DEFAULT_ITERS,
    );
    let mut p = callback::CallbackPipeline::new(gpu, n, b, iters, 1)?;
    let size = format!("{b} x 1M x {iters}");
    let mut failure = None;
    let mut group = quick_group(c, "callback");
    // Host wall time (see the module documentation): both closures return the host ms of
    // one whole run, which `gpu_timed` hands to criterion like any other time.
    gpu_timed(
        &mut group,
        BenchmarkId::new("sync_sequential", &size),
        &mut failure,
        || Ok(p.run_sequential(gpu)?.total_ms),
    );
    gpu_timed(
        &mut group,
        BenchmarkId::new("async_host_fn_pipeline", &size),
        &mut failure,
        || Ok(p.run_pipelined(gpu)?.0),
    );
    group.finish();
    failure.map_or(Ok(()), Err)?;
    p.run_sequential(gpu)?;
    p.run_pipelined(gpu)?;
    p.check_bitwise()?;
    p.check_reference(256).map(|_| ())
}

fn bench_compute_transfer(c: &mut Criterion, gpu: &Gpu) -> Result<()> {
    let (n, b, iters) = (
        compute_transfer::DEFAULT_ELEMENTS,
        compute_transfer::DEFAULT_BATCHES,
        compute_transfer::DEFAULT_ITERS,
    );
    let mut ct = compute_transfer::ComputeTransfer::new(gpu, n, b, iters, 1)?;
    let size = format!("{b} x 512K x {iters}");
    let mut failure = None;
    let mut group = quick_group(c, "compute_transfer");
    gpu_timed(
        &mut group,
        BenchmarkId::new("sync_one_stream", &size),
        &mut failure,
        || Ok(ct.run_sequential(gpu)?.total()),
    );
    gpu_timed(
        &mut group,
        BenchmarkId::new("async_transfer_and_compute_streams", &size),
        &mut failure,
        || ct.run_pipelined(gpu),
    );
    group.finish();
    failure.map_or(Ok(()), Err)?;
    ct.run_sequential(gpu)?;
    ct.run_pipelined(gpu)?;
    ct.check_bitwise()?;
    ct.check_reference(256).map(|_| ())
}

fn bench_prefetch(c: &mut Criterion, gpu: &Gpu) -> Result<()> {
    let (n, b, iters) = (
        prefetch::DEFAULT_ELEMENTS,
        prefetch::DEFAULT_BATCHES,
        prefetch::DEFAULT_ITERS,
    );
    let mut p = prefetch::Prefetch::new(gpu, n, b, iters, 1)?;
    let size = format!("{b} x 1M x {iters}");
    let mut failure = None;
    let mut group = quick_group(c, "prefetch");
    gpu_timed(
        &mut group,
        BenchmarkId::new("sync_no_prefetch", &size),
        &mut failure,
        || Ok(p.run_serial(gpu)?.total),
    );
    gpu_timed(
        &mut group,
        BenchmarkId::new("async_double_buffered", &size),
        &mut failure,
        || p.run_prefetch(gpu),
    );
    group.finish();
    failure.map_or(Ok(()), Err)?;
    p.run_serial(gpu)?;
    p.run_prefetch(gpu)?;
    p.check_bitwise()?;
    p.check_reference(256).map(|_| ())
}

fn main() {
    let Some(gpu) = gpu_for_bench("pipelines") else {
        return;
    };
    let mut c = Criterion::default().configure_from_args();
    bench_callback(&mut c, &gpu).unwrap_or_else(|e| fail("callback", e));
    bench_compute_transfer(&mut c, &gpu).unwrap_or_else(|e| fail("compute_transfer", e));
    bench_prefetch(&mut c, &gpu).unwrap_or_else(|e| fail("prefetch", e));
    c.final_summary();
}
