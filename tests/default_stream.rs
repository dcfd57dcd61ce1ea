//! GPU tests of the default-stream lesson. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine); the flag checks at the end
//! run everywhere.
use streamlab::lab::Lesson;
use streamlab::lessons::default_stream::{
    DefaultStream, BLOCKING, GAP_US, NON_BLOCKING, TWO_THREADS_LEGACY, TWO_THREADS_PER_THREAD,
};
use testkit::{assert_every_check_asserted, gpu, refusal, run_lesson, set_up};

#[test]
#[ignore = "needs a CUDA GPU"]
fn legacy_default_stream_serializes_blocking_but_not_non_blocking() {
    let gpu = gpu();
    let mut d: DefaultStream = set_up(&gpu, &["--sleep-us", "2000"], 0).unwrap();
    let blocking = d.version(&gpu, BLOCKING).unwrap();
    let non_blocking = d.version(&gpu, NON_BLOCKING).unwrap();
    // The second kernel started after the first ended, or before.
    assert!(blocking.value(GAP_US) >= 0.0, "{blocking:?}");
    assert!(non_blocking.value(GAP_US) < 0.0, "{non_blocking:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn default_stream_report_passes() {
    let gpu = gpu();
    let o = run_lesson::<DefaultStream>(&gpu, &["--sleep-us", "2000"], 3);
    // Every claim asserted and held: the kernels' order, from the GPU's own stamps, in every
    // repeat. What the overlap saved (blocking over non-blocking, legacy over per-thread) is
    // scripts/perf-check.sh's.
    assert_every_check_asserted(&o);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_smallest_accepted_sleep_still_shows_the_claim() {
    let gpu = gpu();
    let o = run_lesson::<DefaultStream>(&gpu, &["--sleep-us", "100"], 3);
    // Asserted, not merely passed: a "not asserted" claim would pass `o.passed()`.
    assert_every_check_asserted(&o);
}

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    for sleep in ["0.001", "-1", "1e9", "1e7", "inf", "NaN", "99"] {
        let why = refusal::<DefaultStream>(&["--sleep-us", sleep]);
        let names_the_range = why.contains("number from 100 to 5000000");
        assert!(why.contains("--sleep-us") && names_the_range, "--sleep-us {sleep}: {why}");
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

#[test]
#[ignore = "needs a CUDA GPU"]
fn two_threads_take_turns_on_the_legacy_stream_but_not_on_their_per_thread_ones() {
    let gpu = gpu();
    let mut d: DefaultStream = set_up(&gpu, &["--sleep-us", "2000"], 0).unwrap();
    for _ in 0..3 {
        let legacy = d.version(&gpu, TWO_THREADS_LEGACY).unwrap();
        let per_thread = d.version(&gpu, TWO_THREADS_PER_THREAD).unwrap();
        assert!(legacy.value(GAP_US) >= 0.0, "{legacy:?}");
        assert!(per_thread.value(GAP_US) < 0.0, "{per_thread:?}");
    }
    // The worker threads end with the lesson; a new one starts cleanly on the same context.
    drop(d);
    let o = run_lesson::<DefaultStream>(&gpu, &["--sleep-us", "1000"], 2);
    let names = [
        "2 threads on the legacy default stream took turns",
        "2 threads' per-thread default streams overlapped",
    ];
    for name in names {
        assert!(o.checks.iter().any(|c| c.name == name && c.passed()), "{name}: {:?}", o.checks);
    }
}

#[test]
fn the_longest_sleep_is_five_seconds_now_that_a_repeat_has_eight() {
    testkit::accepted::<DefaultStream>(&["--sleep-us", "5e6"]);
    let why = refusal::<DefaultStream>(&["--sleep-us", "1e7"]);
    assert!(why.contains("number from 100 to 5000000"), "{why}");
}
