//! GPU tests of the callback lesson. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine: release matters, the host's
//! preparation is part of what is timed); the flag checks at the end run everywhere.
use streamlab::lab::harness::data::ensure_close_to_reference;
use streamlab::lab::kit::host_batch_log::{batch_value, check_event_order};
use streamlab::lab::Lesson;
use streamlab::lessons::callback::{
    Callback, AHEAD, GPU_WORK, ONE_STREAM, PIPELINED, PREPARE, READ_WAIT, SEQUENTIAL,
};
use streamlab::math::compute_element;
use testkit::{
    accepted, assert_nothing_to_overlap, gpu, refuses, run_lesson, run_refuses, set_up,
    BATCHES_REFUSED_BY_PLAN,
};

fn flags(n: usize, batches: usize, iters: u32) -> Vec<String> {
    vec![
        "--elements".into(),
        n.to_string(),
        "--batches".into(),
        batches.to_string(),
        "--iters".into(),
        iters.to_string(),
    ]
}

fn set_up_callback(
    n: usize,
    batches: usize,
    iters: u32,
    seed: u64,
) -> (testkit::TestGpu, Callback) {
    let gpu = gpu();
    let f = flags(n, batches, iters);
    let f: Vec<&str> = f.iter().map(String::as_str).collect();
    let p = set_up::<Callback>(&gpu, &f, seed).unwrap();
    (gpu, p)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn callback_pipelined_equals_sequential_bit_for_bit() {
    // One batch, an odd count (the rotation wraps unevenly), sizes no block size divides.
    for (n, batches) in [(1, 1), (4097, 5), (100_003, 2), (65_536, 8)] {
        let (gpu, mut p) = set_up_callback(n, batches, 30, 9);
        p.version(&gpu, SEQUENTIAL).unwrap();
        p.version(&gpu, PIPELINED).unwrap();
        p.version(&gpu, ONE_STREAM).unwrap();
        let same_bits = |out: &[f32]| {
            out.len() == n * batches
                && out.iter().zip(&p.out_sequential).all(|(a, b)| a.to_bits() == b.to_bits())
        };
        assert!(same_bits(&p.out_pipelined), "n={n} batches={batches}: pipelined differs");
        assert!(same_bits(&p.out_one_stream), "n={n} batches={batches}: one stream differs");
        for events in [&p.events, &p.events_one_stream] {
            check_event_order(events, batches).unwrap();
            assert_eq!(events.len(), 4 * batches, "{events:?}");
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn callback_matches_cpu_reference_within_tolerance() {
    let (n, batches, iters, seed) = (20_000, 3, 100, 4);
    let (gpu, mut p) = set_up_callback(n, batches, iters, seed);
    p.version(&gpu, PIPELINED).unwrap();
    p.version(&gpu, ONE_STREAM).unwrap();
    // Every element: data.rs's tolerances bound libdevice-vs-std drift over 100 iterations.
    let reference = |k: usize| compute_element(batch_value(seed, k / n, k % n), iters);
    ensure_close_to_reference("pipelined output vs CPU", &p.out_pipelined, n * batches, reference)
        .unwrap();
    let one = &p.out_one_stream;
    ensure_close_to_reference("one-stream output vs CPU", one, n * batches, reference).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn callback_lesson_passes_and_overlaps_host_and_gpu() {
    let gpu = gpu();
    let o = run_lesson::<Callback>(
        &gpu,
        &["--elements", "1048576", "--batches", "4", "--iters", "500"],
        3,
    );
    assert!(o.results_right(), "{}", o.report.to_text());
    let (prep, g) = (o.measured.without().part(PREPARE), o.measured.without().part(GPU_WORK));
    assert!(prep > 0.0 && g > 0.0, "{}", o.report.to_text());
    assert_eq!(o.lesson.events.len(), 16, "{:?}", o.lesson.events);
    // The pipeline, as an order of the host's events: the next batch was prepared and
    // queued before this batch's results were consumed, so the GPU had it while the host
    // waited (how much time that saved is scripts/perf-check.sh's).
    let at = |what: &str, i: usize| {
        let name = format!("{what} {i}");
        let e = o.lesson.events.iter().find(|e| e.what == name);
        e.unwrap_or_else(|| panic!("no event {name:?}: {:?}", o.lesson.events)).ms
    };
    for i in 0..3 {
        assert!(at("enqueued", i + 1) <= at("consumed", i), "{:?}", o.lesson.events);
    }
    // A count of batches 1..4 prepared before the previous callback: 0 to 3, never NaN (a
    // missing part) or more than there are. Which count depends on the host's speed.
    let ahead = o.measured.with().part(AHEAD);
    assert!((0.0..=3.0).contains(&ahead), "{ahead} batches ahead\n{}", o.report.to_text());
    // The one-stream version ran the same pipeline, and timed its reads (a part, never NaN).
    let one = o.measured.version(ONE_STREAM);
    assert!((0.0..=3.0).contains(&one.part(AHEAD)), "{}", o.report.to_text());
    assert!(one.part(READ_WAIT) >= 0.0, "{}", o.report.to_text());
    assert_eq!(o.lesson.events_one_stream.len(), 16, "{:?}", o.lesson.events_one_stream);
    assert!(o
        .report
        .details
        .get("events")
        .is_some_and(|e| e.as_array().is_some_and(|a| a.len() == 16)));
}

/// With one batch there is nothing to overlap: the lesson still passes its checks, and its
/// interpretation says so instead of claiming an overlap.
#[test]
#[ignore = "needs a CUDA GPU"]
fn one_batch_is_reported_as_nothing_to_pipeline() {
    let gpu = gpu();
    let flags = ["--elements", "4096", "--batches", "1", "--iters", "20"];
    assert_nothing_to_overlap(&run_lesson::<Callback>(&gpu, &flags, 2), "nothing to");
}

/// Flags refused while parsing, before any GPU is touched.
const REFUSED_BY_PARSER: [(&[&str], &str); 7] = [
    // One thread's 4e9 dependent steps would run for minutes whatever the estimate says.
    (&["--iters", "4294967295"], "whole number from 1 to 100000"),
    // Past 100,000 steps the CPU reference alone would take minutes.
    (&["--iters", "100001"], "whole number from 1 to 100000"),
    (&["--iters", "0"], "whole number from 1 to 100000"),
    (&["--batches", "0"], "whole number from 1 to 4096"),
    (&["--batches", "4097"], "whole number from 1 to 4096"),
    (&["--elements", "0"], "--elements"),
    (&["--elements", "4294967296"], "--elements"),
];

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_run_refuses_hostile_flags_in_one_line_before_running() {
    run_refuses::<Callback, _>(&gpu(), BATCHES_REFUSED_BY_PLAN);
}

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    refuses::<Callback, _>(BATCHES_REFUSED_BY_PLAN.iter().chain(&REFUSED_BY_PARSER));
    accepted::<Callback>(&[]);
    accepted::<Callback>(&["--elements", "1", "--batches", "1", "--iters", "1"]);
}
