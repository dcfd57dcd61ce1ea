//! Tests of the six technique demos: basics, sleep-streams, pinned-vs-pageable,
//! default-stream, priority and launch-order.
//!
//! GPU tests are ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine). The input-validation tests
//! at the end run everywhere: they never reach the GPU.
//!
//! Of the sync/async pairs, only `basics` computes anything: it gets a bit-for-bit test
//! (async vs blocking) and an approx test against the CPU. sleep-streams and
//! pinned-vs-pageable only copy, so their CPU reference is the input itself, and the
//! strongest comparison with it is bit for bit, which their round-trip tests do.
use approx::assert_relative_eq;
use streamlab::data::ABS_TOLERANCE;
use streamlab::demos::basics::{self, relative_tolerance, Basics};
use streamlab::demos::default_stream::{self, DefaultStream, Second};
use streamlab::demos::launch_order::{self, LaunchOrder};
use streamlab::demos::pinned_vs_pageable::{self, Direction, HostMemory, PinnedVsPageable, KINDS};
use streamlab::demos::priority::{self, Priority};
use streamlab::demos::sleep_streams::{self, Grid, SleepStreams};
use streamlab::demos::Options;
use streamlab::report::Report;
use streamlab::Error;
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

fn assert_invalid_input(result: streamlab::Result<Report>, mentions: &str) {
    match result {
        Err(e @ Error::InvalidInput(_)) => {
            assert!(
                e.to_string().contains(mentions),
                "{e} should mention {mentions}"
            )
        }
        Err(e) => panic!("expected InvalidInput mentioning {mentions}, got {e}"),
        Ok(r) => panic!(
            "expected InvalidInput mentioning {mentions}, got\n{}",
            r.to_text()
        ),
    }
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
    // Every element, with the demo's tolerance: data.rs's 100-step bound scaled by
    // iters / 100, because per-step differences between libdevice and the host's sinf/cosf
    // add up at most linearly.
    let rel = relative_tolerance(iters);
    for i in 0..n {
        let expected = streamlab::math::compute_element(b.input[i], iters);
        assert_relative_eq!(
            b.out_async[i],
            expected,
            epsilon = ABS_TOLERANCE,
            max_relative = rel
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
fn demos_refuse_invalid_input_with_invalid_input_errors() {
    let gpu = gpu();
    assert_invalid_input(
        basics::run(&gpu, &quick(|o| o.elements = Some(0))),
        "--elements",
    );
    assert_invalid_input(
        sleep_streams::run(
            &gpu,
            &quick(|o| {
                o.elements = Some(3);
                o.streams = Some(4)
            }),
        ),
        "--streams",
    );
    assert_invalid_input(
        pinned_vs_pageable::run(&gpu, &quick(|o| o.elements = Some(0))),
        "--elements",
    );
    assert_invalid_input(
        default_stream::run(&gpu, &quick(|o| o.sleep_us = Some(-1.0))),
        "--sleep-us",
    );
    assert_invalid_input(
        priority::run(&gpu, &quick(|o| o.batches = Some(0))),
        "--batches",
    );
    assert_invalid_input(
        launch_order::run(&gpu, &quick(|o| o.streams = Some(65))),
        "--streams",
    );
    // A request larger than the device is refused before allocating.
    assert_invalid_input(
        pinned_vs_pageable::run(&gpu, &quick(|o| o.elements = Some(1 << 38))),
        "MiB",
    );
}

// ---------------------------------------------------------------- pure logic, no GPU

#[test]
fn size_checks_accept_sane_values_and_refuse_the_rest() {
    assert!(basics::check_sizes(1, 1).is_ok());
    assert!(basics::check_sizes(0, 1).is_err());
    assert!(basics::check_sizes(1, 0).is_err());
    assert!(basics::check_sizes(u32::MAX as usize + 1, 1).is_err());

    assert!(sleep_streams::check_sizes(4, 4, 1.0).is_ok());
    assert!(sleep_streams::check_sizes(3, 4, 1.0).is_err());
    assert!(sleep_streams::check_sizes(100, 0, 1.0).is_err());
    assert!(sleep_streams::check_sizes(100, 65, 1.0).is_err());
    assert!(sleep_streams::check_sizes(100, 4, 0.0).is_err());
    assert!(sleep_streams::check_sizes(100, 4, f64::NAN).is_err());

    assert!(pinned_vs_pageable::check_sizes(1).is_ok());
    assert!(pinned_vs_pageable::check_sizes(0).is_err());

    assert!(default_stream::check_sleep(5000.0).is_ok());
    assert!(default_stream::check_sleep(0.0).is_err());
    assert!(default_stream::check_sleep(f64::INFINITY).is_err());

    assert!(priority::check_sizes(8, 500.0).is_ok());
    assert!(priority::check_sizes(0, 500.0).is_err());
    assert!(priority::check_sizes(priority::MAX_WAVES + 1, 500.0).is_err());

    assert!(launch_order::check_sizes(8, 1000.0).is_ok());
    assert!(launch_order::check_sizes(0, 1000.0).is_err());
    assert!(launch_order::check_sizes(8, -1.0).is_err());
}

#[test]
fn every_error_from_a_size_check_is_invalid_input() {
    let errors = [
        basics::check_sizes(0, 1).unwrap_err(),
        sleep_streams::check_sizes(1, 2, 1.0).unwrap_err(),
        pinned_vs_pageable::check_sizes(0).unwrap_err(),
        default_stream::check_sleep(-3.0).unwrap_err(),
        priority::check_sizes(0, 1.0).unwrap_err(),
        launch_order::check_sizes(99, 1.0).unwrap_err(),
    ];
    for e in errors {
        assert!(matches!(e, Error::InvalidInput(_)), "{e}");
        assert_eq!(e.exit_code(), 2);
        assert!(!e.to_string().contains('\n'), "one line: {e}");
    }
}

#[test]
fn small_grid_claim_is_half_the_ideal_within_the_hardware_queues() {
    assert_eq!(sleep_streams::small_grid_claim(1), None);
    assert_eq!(sleep_streams::small_grid_claim(4), Some(2.0));
    assert_eq!(sleep_streams::small_grid_claim(16), Some(4.0));
}

#[test]
fn sleep_streams_claim_is_not_asserted_when_copies_dominate() {
    use streamlab::demos::sleep_streams::{check_claim, Measured, Regime};
    use streamlab::timing::Stats;
    let regime = |one: f64, multi: f64| Regime {
        one: Stats::of(&[one]),
        multi: Stats::of(&[multi]),
    };
    let good = Measured {
        full: regime(32.0, 31.0),
        small: regime(8.1, 2.1),
    };
    assert!(check_claim(&good, 4, 2.0).is_ok());
    let no_overlap = Measured {
        full: regime(32.0, 31.0),
        small: regime(8.1, 7.9),
    };
    assert!(check_claim(&no_overlap, 4, 2.0).is_err());
    // 4 sleeps of 0.01 ms in 8 ms: the copies dominate, nothing is claimed.
    let note = check_claim(&no_overlap, 4, 0.01).unwrap();
    assert!(note.starts_with("not asserted"), "{note}");
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

#[test]
fn flags_name_what_each_demo_reads() {
    assert!(basics::FLAGS.contains("--elements") && basics::FLAGS.contains("--iters"));
    assert!(
        sleep_streams::FLAGS.contains("--streams") && sleep_streams::FLAGS.contains("--sleep-us")
    );
    assert!(pinned_vs_pageable::FLAGS.contains("--elements"));
    assert!(default_stream::FLAGS.contains("--sleep-us"));
    assert!(priority::FLAGS.contains("--batches") && priority::FLAGS.contains("--sleep-us"));
    assert!(launch_order::FLAGS.contains("--streams"));
}
