//! GPU tests of the sync-methods lesson. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine); the flag checks at the end
//! run everywhere.
use streamlab::lab::Lesson;
use streamlab::lessons::sync_methods::{Method, SyncMethods, METHODS, POLLS};
use testkit::spans::waited_for;
use testkit::{gpu, refusal, run_lesson, run_recorded, set_up};

#[test]
#[ignore = "needs a CUDA GPU"]
fn event_polling_asks_until_the_event_has_completed() {
    let gpu = gpu();
    let mut s: SyncMethods = set_up(&gpu, &["--sleep-us", "5000"], 0).unwrap();
    let index = METHODS.iter().position(|&m| m == Method::EventPolling).unwrap();
    let polling = s.version(&gpu, index).unwrap();
    let polls = polling.parts.iter().find(|(n, _)| *n == POLLS).unwrap().1;
    // More than one question: the first comes right after the launches, before the 0.5 ms
    // kernel on B can end. What each wait waited for is the next test's, as an order.
    assert!(polls > 1.0, "{polling:?}");
}

/// What each wait waited for, as an order on CUPTI's clock: the device synchronize returned
/// after the long kernel on stream A ended; stream B's synchronize after B's short kernel
/// ended but before A's did. How long each held the host is scripts/perf-check.sh's.
#[test]
#[ignore = "needs a CUDA GPU"]
fn each_wait_returns_once_what_it_covers_has_ended() {
    let gpu = gpu();
    let o = run_recorded::<SyncMethods>(&gpu, &["--sleep-us", "5000"], 2);
    let [device, stream_b] = [&o.recordings[0], &o.recordings[1]];
    assert!(waited_for(device, "A (long)"), "{:?}\n{:?}", device.host, device.spans);
    assert!(waited_for(stream_b, "B (short)"), "{:?}\n{:?}", stream_b.host, stream_b.spans);
    assert!(!waited_for(stream_b, "A (long)"), "{:?}\n{:?}", stream_b.host, stream_b.spans);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn sync_methods_lesson_passes() {
    let gpu = gpu();
    let o = run_lesson::<SyncMethods>(&gpu, &["--sleep-us", "4000"], 3);
    assert!(o.results_right(), "{}", o.report.to_text());
    assert_eq!(o.checks.len(), METHODS.len());
    assert_eq!(o.measured.versions.len(), METHODS.len());
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
