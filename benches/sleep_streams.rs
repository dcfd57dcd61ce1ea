//! The sleep-streams lesson's versions side by side: SleepKernel K times on one stream versus
//! once on each of K streams (K = 4, `STREAMLAB_BENCH_STREAMS` changes it), with one block
//! (`sleep_streams_small`) and with a 64x64 grid of 16x16 (`sleep_streams_full`), 500 µs a
//! block. GPU time is measured with events by the lesson's own code, fed to criterion
//! through `iter_custom`. Afterwards every version runs once more and the lesson's checks
//! run (every copy round-tripped bit for bit, the small grid overlapped); the bench exits 1
//! if one fails.
use criterion::{BenchmarkId, Criterion};
use streamlab::lessons::sleep_streams::{SleepStreams, FULL, SMALL};
use testkit::bench::{fail, quick_group, verify, versions};
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
    let launches = format!("{k} launches");
    for (name, grid) in [("sleep_streams_small", SMALL), ("sleep_streams_full", FULL)] {
        let ids = [
            (2 * grid, BenchmarkId::new("sync_one_stream", &launches)),
            (2 * grid + 1, BenchmarkId::new(format!("async_{k}_streams"), &launches)),
        ];
        versions(quick_group(&mut c, name), BENCH, &mut s, &gpu, ids);
    }
    verify(&gpu, &mut s, 4);
    c.final_summary();
}
