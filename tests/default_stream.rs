//! GPU tests of the default-stream lesson. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine); the flag checks at the end
//! run everywhere.
use streamlab::lab::Lesson;
use streamlab::lessons::default_stream::{DefaultStream, GAP_US};
use testkit::{gpu, refusal, run_lesson, set_up};

#[test]
#[ignore = "needs a CUDA GPU"]
fn legacy_default_stream_serializes_blocking_but_not_non_blocking() {
    let gpu = gpu();
    let mut d: DefaultStream = set_up(&gpu, &["--sleep-us", "2000"], 0).unwrap();
    let blocking = d.without(&gpu).unwrap();
    let non_blocking = d.with(&gpu).unwrap();
    // The second kernel started after the first ended, or before.
    assert!(blocking.value(GAP_US) >= 0.0, "{blocking:?}");
    assert!(non_blocking.value(GAP_US) < 0.0, "{non_blocking:?}");
    // Sum vs max of two 2 ms kernels.
    assert!(blocking.ms > 3.6, "{blocking:?}");
    assert!(non_blocking.ms < 3.0, "{non_blocking:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn default_stream_report_passes() {
    let gpu = gpu();
    let o = run_lesson::<DefaultStream>(&gpu, &["--sleep-us", "2000"], 3);
    assert!(o.passed(), "{}", o.report.to_text());
    let ratio = o.measured.speedup();
    assert!(ratio > 1.6, "blocking / non-blocking total {ratio}\n{}", o.report.to_text());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_smallest_accepted_sleep_still_shows_the_claim() {
    let gpu = gpu();
    let o = run_lesson::<DefaultStream>(&gpu, &["--sleep-us", "100"], 3);
    assert!(o.passed(), "at its minimum sleep:\n{}", o.report.to_text());
}

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    for sleep in ["0.001", "-1", "1e9", "inf", "NaN", "99"] {
        let why = refusal::<DefaultStream>(&["--sleep-us", sleep]);
        assert!(why.contains("--sleep-us"), "--sleep-us {sleep}: {why}");
    }
}

#[test]
fn the_default_and_the_shortest_sleep_pass_the_checks() {
    for flags in [&[][..], &["--sleep-us", "100"]] {
        let args = streamlab::lab::harness::args_from::<DefaultStream>(flags).unwrap();
        DefaultStream::plan(&args, &streamlab::lab::WorkModel::H100)
            .and_then(|p| p.admit(None))
            .unwrap_or_else(|e| panic!("{flags:?}: {e}"));
    }
}
