//! Tests of the six technique demos: basics, sleep-streams, pinned-vs-pageable,
//! default-stream, priority and launch-order.
//!
//! GPU tests are ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine). The option checks at the
//! end run everywhere: `check_options` never touches the GPU.
//!
//! Of the sync/async pairs, only `basics` computes anything: it gets a bit-for-bit test
//! (async vs blocking) and an approx test against the CPU. sleep-streams and
//! pinned-vs-pageable only copy, so their CPU reference is the input itself, and the
//! strongest comparison with it is bit for bit, which their round-trip tests do.
use approx::assert_relative_eq;
use streamlab::data::{ABS_TOLERANCE, REL_TOLERANCE};
use streamlab::demos::basics::{self, Basics};
use streamlab::demos::default_stream::{self, DefaultStream, Second};
use streamlab::demos::launch_order::{self, LaunchOrder};
use streamlab::demos::pinned_vs_pageable::{self, Direction, HostMemory, PinnedVsPageable, KINDS};
use streamlab::demos::priority::{self, Priority};
use streamlab::demos::sleep_streams::{self, Grid, SleepStreams};
use streamlab::demos::Options;
use streamlab::report::Report;
use streamlab::{Error, Gpu};
use testkit::gpu;

fn quick(f: impl FnOnce(&mut Options)) -> Options {
    let mut o = Options {
        reps: 3,
        ..Options::default()
    };
    f(&mut o);
    o
}

fn figure(r: &Report, name: &str) -> f64 {
    r.value(name)
        .unwrap_or_else(|| panic!("no figure {name:?} in\n{}", r.to_text()))
}

/// Fails unless `result` is a one-line `InvalidInput` that mentions `mentions`.
fn assert_invalid_input<T>(result: streamlab::Result<T>, what: &str, mentions: &str) {
    match result {
        Err(e @ Error::InvalidInput(_)) => {
            let text = e.to_string();
            assert!(
                text.contains(mentions),
                "{what}: {text} should mention {mentions}"
            );
            assert!(!text.contains('\n'), "{what}: not one line: {text}");
            assert_eq!(e.exit_code(), 2, "{what}");
        }
        Err(e) => panic!("{what}: expected InvalidInput mentioning {mentions}, got {e}"),
        Ok(_) => panic!("{what}: expected InvalidInput mentioning {mentions}, got Ok"),
    }
}

type CheckFn = fn(&Options) -> streamlab::Result<()>;
type RunFn = fn(&Gpu, &Options) -> streamlab::Result<Report>;
type SetFn = fn(&mut Options);
/// (flags as typed, what the error must mention, how to set them)
type Case = (&'static str, &'static str, SetFn);

/// Flags a user could pass that a demo must refuse before it allocates or runs anything.
struct Hostile {
    what: String,
    check: CheckFn,
    run: RunFn,
    opts: Options,
    mentions: &'static str,
}

fn hostile_flags() -> Vec<Hostile> {
    // 2^62: at 4 bytes an element, a 64-bit byte count wraps to 0.
    const WRAPS: usize = 4_611_686_018_427_387_904;
    // (demo, its checks, its run, its cases)
    let demos: Vec<(&str, CheckFn, RunFn, Vec<Case>)> = vec![
        (
            "basics",
            basics::check_options,
            basics::run,
            vec![
                ("--elements 0", "--elements", |o| o.elements = Some(0)),
                ("--elements 2^62", "--elements", |o| {
                    o.elements = Some(WRAPS)
                }),
                ("--iters 0", "--iters", |o| o.iters = Some(0)),
                ("--iters 1000000", "--iters", |o| o.iters = Some(1_000_000)),
                ("--elements 2^30 --iters 100000", "--iters", |o| {
                    o.elements = Some(1 << 30);
                    o.iters = Some(100_000);
                }),
            ],
        ),
        (
            "sleep-streams",
            sleep_streams::check_options,
            sleep_streams::run,
            vec![
                ("--elements 2^62", "--elements", |o| {
                    o.elements = Some(WRAPS)
                }),
                ("--elements 3 --streams 4", "--streams", |o| {
                    o.elements = Some(3);
                    o.streams = Some(4);
                }),
                ("--streams 65", "--streams", |o| o.streams = Some(65)),
                ("--sleep-us 0.001", "--sleep-us", |o| {
                    o.sleep_us = Some(0.001)
                }),
                ("--sleep-us 1e7", "--sleep-us", |o| o.sleep_us = Some(1e7)),
                ("--sleep-us NaN", "--sleep-us", |o| {
                    o.sleep_us = Some(f64::NAN)
                }),
            ],
        ),
        (
            "pinned-vs-pageable",
            pinned_vs_pageable::check_options,
            pinned_vs_pageable::run,
            vec![
                ("--elements 0", "--elements", |o| o.elements = Some(0)),
                ("--elements 2^62", "--elements", |o| {
                    o.elements = Some(WRAPS)
                }),
            ],
        ),
        (
            "default-stream",
            default_stream::check_options,
            default_stream::run,
            vec![
                ("--sleep-us 0.001", "--sleep-us", |o| {
                    o.sleep_us = Some(0.001)
                }),
                ("--sleep-us -1", "--sleep-us", |o| o.sleep_us = Some(-1.0)),
                ("--sleep-us 1e9", "--sleep-us", |o| o.sleep_us = Some(1e9)),
                ("--sleep-us inf", "--sleep-us", |o| {
                    o.sleep_us = Some(f64::INFINITY)
                }),
            ],
        ),
        (
            "priority",
            priority::check_options,
            priority::run,
            vec![
                ("--sleep-us 0.001", "--sleep-us", |o| {
                    o.sleep_us = Some(0.001)
                }),
                ("--batches 0", "--batches", |o| o.batches = Some(0)),
                ("--batches 1025", "--batches", |o| o.batches = Some(1025)),
                ("--batches 1024 --sleep-us 1e7", "--sleep-us", |o| {
                    o.batches = Some(1024);
                    o.sleep_us = Some(1e7);
                }),
            ],
        ),
        (
            "launch-order",
            launch_order::check_options,
            launch_order::run,
            vec![
                ("--sleep-us 0.001", "--sleep-us", |o| {
                    o.sleep_us = Some(0.001)
                }),
                ("--sleep-us 1e9", "--sleep-us", |o| o.sleep_us = Some(1e9)),
                ("--streams 0", "--streams", |o| o.streams = Some(0)),
                ("--streams 65", "--streams", |o| o.streams = Some(65)),
            ],
        ),
    ];
    demos
        .into_iter()
        .flat_map(|(demo, check, run, cases)| {
            cases
                .into_iter()
                .map(move |(flags, mentions, set)| Hostile {
                    what: format!("{demo} {flags}"),
                    check,
                    run,
                    opts: quick(set),
                    mentions,
                })
        })
        .collect()
}

// ---------------------------------------------------------------- basics

#[test]
#[ignore = "needs a CUDA GPU"]
fn basics_async_equals_blocking_bit_for_bit() {
    let gpu = gpu();
    for n in [1, 1000, 1_000_003] {
        let mut b = Basics::new(&gpu, n, 50, n as u64).unwrap();
        b.run_blocking(&gpu).unwrap();
        b.run_async(&gpu).unwrap();
        b.check_bitwise().unwrap_or_else(|e| panic!("n={n}: {e}"));
        // Not vacuous: the kernel changed the data.
        assert_ne!(b.out_async[n - 1].to_bits(), b.input[n - 1].to_bits());
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn basics_async_matches_cpu_reference_within_tolerance() {
    let gpu = gpu();
    let (n, iters) = (50_000, 300);
    let mut b = Basics::new(&gpu, n, iters, 42).unwrap();
    b.run_async(&gpu).unwrap();
    // Every element, with data.rs's tolerances: x = sin(x)cos(x) contracts, so the per-step
    // differences between libdevice's and the host's sinf/cosf do not pile up with iters.
    for i in 0..n {
        let expected = streamlab::math::compute_element(b.input[i], iters);
        assert_relative_eq!(
            b.out_async[i],
            expected,
            epsilon = ABS_TOLERANCE,
            max_relative = REL_TOLERANCE
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn basics_report_shows_the_host_free_only_when_async() {
    let gpu = gpu();
    let r = basics::run(&gpu, &quick(|_| {})).unwrap();
    assert!(r.passed(), "{}", r.to_text());
    let ratio = figure(&r, "async / blocking GPU time");
    assert!(
        (0.7..1.3).contains(&ratio),
        "GPU times differ: {ratio}\n{}",
        r.to_text()
    );
    let gpu_ms = figure(&r, "async: GPU time, median");
    assert!(gpu_ms > 0.5, "the default kernel should take ms: {gpu_ms}");
    assert!(
        figure(&r, "async: host time inside the calls") < 0.5 * gpu_ms,
        "{}",
        r.to_text()
    );
    assert!(
        figure(&r, "blocking: host time inside the calls") > 0.8 * gpu_ms,
        "{}",
        r.to_text()
    );
    assert!(
        figure(&r, "async: host work units done while the GPU ran")
            > 10.0 * figure(&r, "blocking: host work units done while the GPU ran").max(1.0),
        "{}",
        r.to_text()
    );
}

// ---------------------------------------------------------------- sleep-streams

#[test]
#[ignore = "needs a CUDA GPU"]
fn sleep_streams_copies_round_trip_bit_for_bit() {
    let gpu = gpu();
    for (n, k) in [(1_000_003, 4), (4097, 3), (5, 5), (1, 1), (100_000, 8)] {
        let mut s = SleepStreams::new(&gpu, n, k, 20.0, n as u64).unwrap();
        for grid in [Grid::Small, Grid::Full] {
            s.run_one_stream(&gpu, grid).unwrap();
            s.run_multi_stream(&gpu, grid).unwrap();
        }
        s.check_round_trip()
            .unwrap_or_else(|e| panic!("n={n} k={k}: {e}"));
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn sleep_streams_small_grid_overlaps_and_full_grid_barely() {
    let gpu = gpu();
    let opts = quick(|o| {
        o.elements = Some(1 << 16);
        o.sleep_us = Some(1000.0);
    });
    let r = sleep_streams::run(&gpu, &opts).unwrap();
    assert!(r.passed(), "{}", r.to_text());
    let small = figure(&r, "small grid (1 block): speed-up");
    let full = figure(&r, "full grid (64x64 blocks of 16x16): speed-up");
    assert!(
        small > 2.5 && small < 4.5,
        "small grid {small}\n{}",
        r.to_text()
    );
    assert!(full < 1.5, "full grid {full}\n{}", r.to_text());
    // One-stream small grid: about 4 sleeps of 1 ms.
    let one = figure(&r, "small grid (1 block): 4x on one stream");
    assert!((3.5..6.0).contains(&one), "{one} ms\n{}", r.to_text());
}

// ---------------------------------------------------------------- pinned-vs-pageable

#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_and_pageable_copies_round_trip_bit_for_bit() {
    let gpu = gpu();
    for n in [1, 4097, 3_000_001] {
        let mut p = PinnedVsPageable::new(&gpu, n, n as u64).unwrap();
        for (memory, direction) in KINDS {
            p.copy(memory, direction).unwrap();
        }
        p.check_round_trips()
            .unwrap_or_else(|e| panic!("n={n}: {e}"));
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pageable_copy_holds_the_host_pinned_does_not() {
    let gpu = gpu();
    let mut p = PinnedVsPageable::new(&gpu, 8 << 20, 1).unwrap();
    let stats = pinned_vs_pageable::measure(&mut p, 3).unwrap();
    let get = |m, d| {
        stats
            .iter()
            .find(|k| k.memory == m && k.direction == d)
            .copied()
            .unwrap()
    };
    let pinned = get(HostMemory::Pinned, Direction::ToDevice);
    let pageable = get(HostMemory::Pageable, Direction::ToDevice);
    assert!(pinned.held_fraction() < 0.5, "{pinned:?}");
    assert!(pageable.held_fraction() > 0.5, "{pageable:?}");
    assert!(
        pinned.gb_per_s > pageable.gb_per_s,
        "{pinned:?} vs {pageable:?}"
    );
    for k in &stats {
        assert!((0.5..2000.0).contains(&k.gb_per_s), "{k:?}");
    }
    pinned_vs_pageable::check_claim(&stats, p.bytes()).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_vs_pageable_report_passes() {
    let gpu = gpu();
    let r = pinned_vs_pageable::run(&gpu, &quick(|o| o.elements = Some(4 << 20))).unwrap();
    assert!(r.passed(), "{}", r.to_text());
    assert!(
        figure(&r, "H2D pinned / pageable bandwidth") > 1.0,
        "{}",
        r.to_text()
    );
}

// ---------------------------------------------------------------- default-stream

#[test]
#[ignore = "needs a CUDA GPU"]
fn legacy_default_stream_serializes_blocking_but_not_non_blocking() {
    let gpu = gpu();
    let mut d = DefaultStream::new(&gpu, 2000.0).unwrap();
    let blocking = d.run_pair(&gpu, Second::Blocking).unwrap();
    let non_blocking = d.run_pair(&gpu, Second::NonBlocking).unwrap();
    assert!(!blocking.overlapped(), "{blocking:?}");
    assert!(non_blocking.overlapped(), "{non_blocking:?}");
    // Sum vs max of two 2 ms kernels.
    assert!(blocking.total_ms() > 3.6, "{blocking:?}");
    assert!(non_blocking.total_ms() < 3.0, "{non_blocking:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn default_stream_report_passes() {
    let gpu = gpu();
    let r = default_stream::run(&gpu, &quick(|o| o.sleep_us = Some(2000.0))).unwrap();
    assert!(r.passed(), "{}", r.to_text());
    assert!(
        figure(&r, "blocking / non-blocking total") > 1.6,
        "{}",
        r.to_text()
    );
}

// ---------------------------------------------------------------- priority

#[test]
#[ignore = "needs a CUDA GPU"]
fn high_priority_kernel_finishes_first_equal_priority_does_not() {
    let gpu = gpu();
    let mut p = Priority::new(&gpu, 4, 200.0).unwrap();
    p.run_case(&gpu, true).unwrap();
    let prioritized = p.run_case(&gpu, true).unwrap();
    let equal = p.run_case(&gpu, false).unwrap();
    assert!(prioritized.second_finished_first(), "{prioritized:?}");
    assert!(!equal.second_finished_first(), "{equal:?}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn priority_report_passes() {
    let gpu = gpu();
    let r = priority::run(&gpu, &quick(|o| o.sleep_us = Some(200.0))).unwrap();
    assert!(r.passed(), "{}", r.to_text());
    let high = figure(&r, "prioritized: short high-priority kernel done at");
    let low = figure(&r, "prioritized: long low-priority kernel done at");
    // 8 waves of 0.2 ms: the urgent kernel is done after about 2, the long one after about 9.
    assert!(high < 0.5 * low, "high {high} low {low}\n{}", r.to_text());
}

// ---------------------------------------------------------------- launch-order

#[test]
#[ignore = "needs a CUDA GPU"]
fn kernels_start_in_issue_order_and_overlap() {
    let gpu = gpu();
    let mut o = LaunchOrder::new(&gpu, 8, 1000.0).unwrap();
    o.run_once(&gpu).unwrap();
    let l = o.run_once(&gpu).unwrap();
    assert!(l.in_issue_order(), "{:?}", l.offsets_us());
    assert_eq!(l.first_serialized(8), None, "{:?}", l.stamps);
    let last = *l.offsets_us().last().unwrap();
    assert!(
        last > 0.0 && last < 500.0,
        "8 launches spread over {last} µs"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn launch_order_report_passes() {
    let gpu = gpu();
    let r = launch_order::run(&gpu, &quick(|o| o.streams = Some(6))).unwrap();
    assert!(r.passed(), "{}", r.to_text());
    let gap = figure(&r, "median gap between consecutive starts");
    assert!((0.0..200.0).contains(&gap), "gap {gap} µs\n{}", r.to_text());
    let offset5 = figure(&r, "kernel 5 (stream 5): start after kernel 0");
    assert!(offset5 > 0.0, "{}", r.to_text());
}

// ---------------------------------------------------------------- invalid input, on a GPU

#[test]
#[ignore = "needs a CUDA GPU"]
fn hostile_flags_are_refused_by_check_options_and_by_run() {
    let gpu = gpu();
    for h in hostile_flags() {
        assert_invalid_input((h.check)(&h.opts), &h.what, h.mentions);
        // `run` must refuse them too (before allocating): the CLI is not its only caller.
        assert_invalid_input((h.run)(&gpu, &h.opts), &h.what, h.mentions);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn sleep_streams_new_refuses_a_sleep_over_any_gpus_bound() {
    let gpu = gpu();
    // check_options assumes 4 full-grid waves; SleepStreams::new checks again with this GPU's
    // own count, which is at least 1: a sleep over the 1-wave bound is refused on any GPU.
    let sleep = sleep_streams::max_sleep_us(4, 1) + 1.0;
    assert_invalid_input(
        SleepStreams::new(&gpu, 1024, 4, sleep, 0),
        "sleep-streams over the 1-wave bound",
        "--sleep-us",
    );
}

// ---------------------------------------------------------------- edge regimes, on a GPU

/// The report's interpretation as one string, for tests that check what it claims.
fn told(r: &Report) -> String {
    r.interpretation.join("\n")
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_smallest_accepted_sleeps_still_show_each_claim() {
    let gpu = gpu();
    let at = |us| quick(|o| o.sleep_us = Some(us));
    for (name, r) in [
        (
            "default-stream",
            default_stream::run(&gpu, &at(default_stream::MIN_SLEEP_US)),
        ),
        ("priority", priority::run(&gpu, &at(priority::MIN_SLEEP_US))),
        (
            "launch-order",
            launch_order::run(&gpu, &at(launch_order::MIN_SLEEP_US)),
        ),
    ] {
        let r = r.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(r.passed(), "{name} at its minimum sleep:\n{}", r.to_text());
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn interpretations_say_when_a_claim_is_not_made() {
    let gpu = gpu();
    // One wave: priority cannot reorder anything, and the text must not say it did.
    let r = priority::run(
        &gpu,
        &quick(|o| {
            o.batches = Some(1);
            o.sleep_us = Some(200.0)
        }),
    )
    .unwrap();
    assert!(r.passed(), "{}", r.to_text());
    assert!(told(&r).contains("Not a claim here"), "{}", r.to_text());
    assert!(
        !told(&r).contains("hands the free slots"),
        "{}",
        r.to_text()
    );

    // One stream: nothing runs side by side.
    let r = sleep_streams::run(&gpu, &quick(|o| o.streams = Some(1))).unwrap();
    assert!(r.passed(), "{}", r.to_text());
    assert!(!told(&r).contains("run side by side:"), "{}", r.to_text());
    let r = launch_order::run(&gpu, &quick(|o| o.streams = Some(1))).unwrap();
    assert!(r.passed(), "{}", r.to_text());
    assert!(
        told(&r).contains("One stream, one kernel"),
        "{}",
        r.to_text()
    );

    // Four bytes: neither bandwidth nor asynchrony is claimed.
    let r = pinned_vs_pageable::run(&gpu, &quick(|o| o.elements = Some(1))).unwrap();
    assert!(r.passed(), "{}", r.to_text());
    assert!(!told(&r).contains("faster"), "{}", r.to_text());
    assert!(!told(&r).contains("not asynchronous"), "{}", r.to_text());

    // A few microseconds of GPU work: the host claim is not made.
    let r = basics::run(
        &gpu,
        &quick(|o| {
            o.elements = Some(1024);
            o.iters = Some(1)
        }),
    )
    .unwrap();
    assert!(r.passed(), "{}", r.to_text());
    assert!(told(&r).contains("Not a claim here"), "{}", r.to_text());
}

// ---------------------------------------------------------------- option checks, no GPU

#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    for h in hostile_flags() {
        assert_invalid_input((h.check)(&h.opts), &h.what, h.mentions);
    }
}

#[test]
fn default_flags_pass_every_check() {
    let defaults = Options::default();
    basics::check_options(&defaults).unwrap();
    sleep_streams::check_options(&defaults).unwrap();
    pinned_vs_pageable::check_options(&defaults).unwrap();
    default_stream::check_options(&defaults).unwrap();
    priority::check_options(&defaults).unwrap();
    launch_order::check_options(&defaults).unwrap();
    // The smallest sleeps each demo takes are accepted, not just the defaults.
    let at = |us| quick(|o| o.sleep_us = Some(us));
    default_stream::check_options(&at(default_stream::MIN_SLEEP_US)).unwrap();
    priority::check_options(&at(priority::MIN_SLEEP_US)).unwrap();
    launch_order::check_options(&at(launch_order::MIN_SLEEP_US)).unwrap();
    sleep_streams::check_options(&at(sleep_streams::MIN_SLEEP_US)).unwrap();
}

#[test]
fn basics_claim_needs_a_free_host() {
    use streamlab::demos::basics::{check_host_was_free, Measured};
    use streamlab::timing::Stats;
    let m = |async_in_calls_ms: f64, async_units: f64| Measured {
        blocking_gpu: Stats::of(&[2.0]),
        async_gpu: Stats::of(&[2.0]),
        blocking_in_calls_ms: 2.0,
        async_in_calls_ms,
        blocking_units: 0.0,
        async_units,
    };
    assert!(check_host_was_free(&m(0.03, 1500.0)).is_ok());
    assert!(check_host_was_free(&m(1.9, 1500.0)).is_err());
    assert!(check_host_was_free(&m(0.03, 0.0)).is_err());
}
