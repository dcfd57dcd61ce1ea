//! The callback lesson's three versions side by side at its defaults (8 batches of 1,048,576
//! floats, 500 iterations): prepare, run, synchronize batch after batch, versus the pipeline
//! woken by host functions, on a stream per slot and on one stream. Timed with the host clock
//! around the whole run, not with events: the host's preparation is one of the pipeline's two
//! stages, so GPU events alone would leave half the pipeline out. Every version's output is
//! checked afterwards (a criterion filter may have skipped the group); a mismatch or a CUDA
//! error exits 1.
use criterion::{BenchmarkId, Criterion};
use streamlab::lessons::callback::{Callback, ONE_STREAM, PIPELINED, SEQUENTIAL};
use testkit::bench::{fail, quick_group, verify, versions};
use testkit::{gpu_for_bench, set_up};

fn main() {
    let Some(gpu) = gpu_for_bench("callback") else {
        return;
    };
    let mut p: Callback = set_up(&gpu, &[], 1).unwrap_or_else(|e| fail("callback", e));
    let mut c = Criterion::default().configure_from_args();
    let size = "8 x 1M x 500";
    // Each sample holds the host ms of one whole run, which criterion is handed.
    let ids = [
        (SEQUENTIAL, BenchmarkId::new("sync_sequential", size)),
        (PIPELINED, BenchmarkId::new("async_host_fn_pipeline", size)),
        (ONE_STREAM, BenchmarkId::new("async_host_fn_one_stream", size)),
    ];
    versions(quick_group(&mut c, "callback"), "callback", &mut p, &gpu, ids);
    verify(&gpu, &mut p, 3);
    c.final_summary();
}
