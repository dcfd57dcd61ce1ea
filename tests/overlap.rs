//! GPU tests of the chunked-overlap demo. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine).
use approx::assert_relative_eq;
use streamlab::data::{ABS_TOLERANCE, REL_TOLERANCE};
use streamlab::demos::overlap::{run, Overlap};
use streamlab::demos::Options;
use streamlab::Error;
use testkit::gpu;

#[test]
#[ignore = "needs a CUDA GPU"]
fn multi_stream_equals_one_stream_bit_for_bit_for_awkward_sizes() {
    let gpu = gpu();
    // Sizes K does not divide, K = 1, K = n, and the 64-stream maximum.
    for (n, k) in [
        (1_000_003, 8),
        (4097, 3),
        (65, 64),
        (5, 5),
        (1, 1),
        (100_000, 1),
    ] {
        let mut o = Overlap::new(&gpu, n, k, 20, n as u64).unwrap();
        o.run_one_stream(&gpu).unwrap();
        o.run_multi_stream(&gpu).unwrap();
        o.check_bitwise()
            .unwrap_or_else(|e| panic!("n={n} k={k}: {e}"));
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_matches_cpu_reference_within_tolerance() {
    let gpu = gpu();
    let (n, iters) = (50_000, 100);
    let mut o = Overlap::new(&gpu, n, 4, iters, 42).unwrap();
    o.run_multi_stream(&gpu).unwrap();
    // Every element, not a sample: the CPU runs the same compute_element.
    for i in 0..n {
        let expected = streamlab::math::compute_element(o.input[i], iters);
        assert_relative_eq!(
            o.out_multi[i],
            expected,
            epsilon = ABS_TOLERANCE,
            max_relative = REL_TOLERANCE
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn demo_report_passes_its_checks_and_reports_a_speedup() {
    let gpu = gpu();
    let opts = Options {
        elements: Some(4 << 20),
        streams: Some(4),
        iters: Some(50),
        reps: 3,
        ..Options::default()
    };
    let r = run(&gpu, &opts).unwrap();
    assert!(r.passed(), "{}", r.to_text());
    let speedup = r.value("speed-up").unwrap();
    // Copies and compute really overlap on any GPU with a copy engine.
    assert!(speedup > 1.1, "speed-up {speedup}\n{}", r.to_text());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn invalid_sizes_are_refused_before_allocation() {
    let gpu = gpu();
    let too_many = Overlap::new(&gpu, 3, 4, 1, 0)
        .err()
        .expect("4 streams for 3 elements must be refused");
    assert!(matches!(too_many, Error::InvalidInput(_)), "{too_many}");
    let huge = gpu.ensure_device_memory(1 << 50, "a petabyte").unwrap_err();
    assert!(
        matches!(huge, Error::InvalidInput(_)) && huge.to_string().contains("MiB"),
        "{huge}"
    );
    let zero = Overlap::new(&gpu, 0, 1, 1, 0)
        .err()
        .expect("0 elements must be refused");
    assert!(zero.to_string().contains("--elements"), "{zero}");
}

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    use streamlab::demos::overlap::check_options;
    let opts = |elements: usize, streams: usize| Options {
        elements: Some(elements),
        streams: Some(streams),
        ..Options::default()
    };
    for (o, expected) in [
        (opts(0, 1), "--elements must be at least 1"),
        (opts(1 << 62, 8), "more than this demo takes"),
        (opts(3, 4), "--streams 4 is more than --elements 3"),
        (opts(100, 65), "--streams must be from 1 to 64"),
        (opts(100, 0), "--streams must be from 1 to 64"),
    ] {
        let err = check_options(&o).expect_err(expected);
        assert!(matches!(err, Error::InvalidInput(_)), "{err}");
        assert!(
            err.to_string().contains(expected),
            "{err} (expected {expected})"
        );
        assert_eq!(err.to_string().lines().count(), 1, "{err}");
    }
    assert!(check_options(&Options::default()).is_ok());
    // Host memory: four buffers of 2^30 floats (16 GiB) are refused exactly where
    // /proc/meminfo says they do not fit.
    let big = check_options(&opts(1 << 30, 8));
    let available_kib: Option<u64> = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        t.lines()
            .find(|l| l.starts_with("MemAvailable:"))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    });
    if let Some(kib) = available_kib {
        let fits = (16u64 << 30) <= kib * 1024;
        assert_eq!(big.is_ok(), fits, "{big:?} with {kib} KiB available");
    }
}
