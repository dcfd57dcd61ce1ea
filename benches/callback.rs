//! The callback lesson's two versions side by side at its defaults (8 batches of 1,048,576
//! floats, 500 iterations): prepare, run, synchronize batch after batch, versus the pipeline
//! woken by host functions. Timed with the host clock around the whole run, not with events:
//! the host's preparation is one of the pipeline's two stages, so GPU events alone would
//! leave half the pipeline out. Both versions' outputs are checked afterwards (a criterion
//! filter may have skipped the group); a mismatch or a CUDA error exits 1.
use criterion::{BenchmarkId, Criterion};
use streamlab::lab::Lesson;
use streamlab::lessons::callback::Callback;
use testkit::bench::{fail, gpu_timed, quick_group, verify};
use testkit::{gpu_for_bench, set_up};

fn main() {
    let Some(gpu) = gpu_for_bench("callback") else {
        return;
    };
    let mut p: Callback = set_up(&gpu, &[], 1).unwrap_or_else(|e| fail("callback", e));
    let mut c = Criterion::default().configure_from_args();
    let mut group = quick_group(&mut c, "callback");
    let mut failure = None;
    let size = "8 x 1M x 500";
    // Both return the host ms of one whole run, which `gpu_timed` hands to criterion.
    gpu_timed(&mut group, BenchmarkId::new("sync_sequential", size), &mut failure, || {
        p.without(&gpu).map(|s| s.ms)
    });
    gpu_timed(&mut group, BenchmarkId::new("async_host_fn_pipeline", size), &mut failure, || {
        p.with(&gpu).map(|s| s.ms)
    });
    group.finish();
    if let Some(e) = failure {
        fail("callback", e);
    }
    verify(&gpu, &mut p, 2);
    c.final_summary();
}
