//! The sleep-streams lesson's versions side by side: SleepKernel K times on one stream versus
//! once on each of K streams (K = 4, `STREAMLAB_BENCH_STREAMS` changes it), with one block
//! (`sleep_streams_small`) and with a 64x64 grid of 16x16 (`sleep_streams_full`), 500 µs a
//! block. GPU time is measured with events by the lesson's own code, fed to criterion
//! through `iter_custom`. Afterwards every version runs once more and the lesson's checks
//! run (every copy round-tripped bit for bit, the small grid overlapped); the bench exits 1
//! if one fails.
use criterion::{BenchmarkId, Criterion};
use streamlab::lab::Lesson;
use streamlab::lessons::sleep_streams::{SleepStreams, FULL, SMALL};
use testkit::bench::{fail, gpu_timed, quick_group, verify};
use testkit::{gpu_for_bench, set_up};

const BENCH: &str = "sleep-streams";

fn main() {
    let Some(gpu) = gpu_for_bench(BENCH) else {
        return;
    };
    let k = std::env::var("STREAMLAB_BENCH_STREAMS").unwrap_or_else(|_| "4".into());
    let flags = ["--streams", k.as_str(), "--sleep-us", "500"];
    let mut s: SleepStreams = set_up(&gpu, &flags, 1).unwrap_or_else(|e| fail(BENCH, e));
    let mut c = Criterion::default().configure_from_args();
    let mut failure = None;
    let launches = format!("{k} launches");
    for (name, grid) in [("sleep_streams_small", SMALL), ("sleep_streams_full", FULL)] {
        let mut group = quick_group(&mut c, name);
        for (v, id) in [
            (2 * grid, "sync_one_stream".to_string()),
            (2 * grid + 1, format!("async_{k}_streams")),
        ] {
            gpu_timed(&mut group, BenchmarkId::new(id, &launches), &mut failure, || {
                match v {
                    0 => s.without(&gpu),
                    1 => s.with(&gpu),
                    _ => s.other(&gpu, v),
                }
                .map(|sample| sample.ms)
            });
        }
        group.finish();
    }
    if let Some(e) = failure {
        fail(BENCH, e);
    }
    verify(&gpu, &mut s, 4);
    c.final_summary();
}
