//! GPU tests of the sync-methods lesson. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine); the flag checks at the end
//! run everywhere.
use streamlab::lab::Lesson;
use streamlab::lessons::sync_methods::{Method, SyncMethods, METHODS, POLLS};
use testkit::{gpu, refusal, run_lesson, set_up};

#[test]
#[ignore = "needs a CUDA GPU"]
fn sync_methods_wait_for_what_they_cover() {
    let gpu = gpu();
    let mut s: SyncMethods = set_up(&gpu, &["--sleep-us", "5000"], 0).unwrap();
    let index = |method| METHODS.iter().position(|&m| m == method).unwrap();
    let device = s.version(&gpu, index(Method::DeviceSynchronize)).unwrap();
    let stream_b = s.version(&gpu, index(Method::StreamShortSynchronize)).unwrap();
    let polling = s.version(&gpu, index(Method::EventPolling)).unwrap();
    let polls = polling.parts.iter().find(|(n, _)| *n == POLLS).unwrap().1;
    assert!(device.ms >= 4.5, "{device:?}");
    assert!(stream_b.ms < 2.5 && stream_b.ms >= 0.45, "{stream_b:?}");
    assert!(polling.ms < 2.5 && polls > 1.0, "{polling:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn sync_methods_lesson_passes() {
    let gpu = gpu();
    let o = run_lesson::<SyncMethods>(&gpu, &["--sleep-us", "4000"], 3);
    assert!(o.passed(), "{}", o.report.to_text());
    assert_eq!(o.checks.len(), METHODS.len());
    assert_eq!(o.measured.versions.len(), METHODS.len());
    // The device synchronize waited for the long kernel, stream B's for the short one.
    assert!(o.measured.speedup() > 2.0, "{}", o.report.to_text());
}

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn a_sleep_outside_the_range_is_refused_in_one_line() {
    for sleep in ["10", "5e6", "NaN", "0", "999", "1000001", "inf", "-5"] {
        let why = refusal::<SyncMethods>(&["--sleep-us", sleep]);
        let names_the_range = why.contains("number from 1000 to 1000000");
        assert!(why.contains("--sleep-us") && names_the_range, "--sleep-us {sleep}: {why}");
    }
    for flags in [&[][..], &["--sleep-us", "1000"], &["--sleep-us", "1e6"]] {
        let args = streamlab::lab::harness::args_from::<SyncMethods>(flags).unwrap();
        SyncMethods::plan(&args, &streamlab::lab::WorkModel::H100)
            .and_then(|p| p.admit(None))
            .unwrap_or_else(|e| panic!("{flags:?}: {e}"));
    }
}
