//! GPU tests of the overlap lesson. Ignored without a GPU (run them with
//! `cargo test --release -- --include-ignored` on a GPU machine).
use streamlab::lab::harness::data::ensure_close_to_reference;
use streamlab::lab::record::span::Work;
use streamlab::lab::Lesson;
use streamlab::lessons::overlap::{Overlap, CHUNKED};
use testkit::spans::{copy_beside_kernel, NS};
use testkit::{accepted, assert_bit_for_bit, gpu, refuses, run_recorded, set_up};

#[test]
#[ignore = "needs a CUDA GPU"]
fn multi_stream_equals_one_stream_bit_for_bit_for_awkward_sizes() {
    let gpu = gpu();
    // Sizes K does not divide, K = 1, K = n, and the 64-stream maximum.
    for (n, k) in [(1_000_003, 8), (4097, 3), (65, 64), (5, 5), (1, 1), (100_000, 1)] {
        let (n, k) = (n.to_string(), k.to_string());
        assert_bit_for_bit::<Overlap>(&gpu, &["--elements", &n, "--streams", &k, "--iters", "20"]);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn breadth_first_issue_gives_the_same_bits_as_one_stream() {
    let gpu = gpu();
    for (n, k) in [(1_000_003, 8), (65, 64), (4097, 1)] {
        let (n, k) = (n.to_string(), k.to_string());
        let flags =
            ["--elements", &n, "--streams", &k, "--iters", "20", "--issue-order", "breadth"];
        assert_bit_for_bit::<Overlap>(&gpu, &flags);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_matches_cpu_reference_for_every_element() {
    let gpu = gpu();
    let (n, iters) = (50_000, 100);
    let mut o: Overlap =
        set_up(&gpu, &["--elements", "50000", "--streams", "4", "--iters", "100"], 42).unwrap();
    o.version(&gpu, CHUNKED).unwrap();
    let (input, out) = (o.host[0].to_vec().unwrap(), o.host[2].to_vec().unwrap());
    // Every element, not a sample: the CPU runs the same compute_element.
    assert_eq!(out.len(), n);
    let reference = |i: usize| streamlab::math::compute_element(input[i], iters);
    ensure_close_to_reference("K-stream output vs CPU", &out, n, reference).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_lesson_passes_its_checks_and_copies_run_beside_kernels() {
    let gpu = gpu();
    let o = run_recorded::<Overlap>(
        &gpu,
        &["--elements", "4194304", "--streams", "4", "--iters", "50"],
        3,
    );
    let text = o.report.to_text();
    assert!(o.results_right(), "{text}");
    // On one stream each phase waits for the one before: copy in, kernel, copy out.
    let mut one = o.recordings[0].spans.clone();
    one.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
    let kinds: Vec<Work> = one.iter().map(|s| s.kind).collect();
    assert_eq!(kinds, [Work::CopyToDevice, Work::Kernel, Work::CopyToHost], "{text}");
    assert!(one.windows(2).all(|w| w[0].end_ms <= w[1].start_ms + NS), "{one:?}");
    // On four, the copy engine and the SMs worked at once (how much faster that made it is
    // scripts/perf-check.sh's to say).
    assert!(copy_beside_kernel(&o.recordings[1]), "{:?}\n{text}", o.recordings[1].spans);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn more_device_memory_than_the_gpu_has_is_refused() {
    let gpu = gpu();
    let huge = gpu.ensure_device_memory(1 << 50, "a petabyte").unwrap_err();
    assert!(
        matches!(huge, streamlab::Error::InvalidInput(_)) && huge.to_string().contains("MiB"),
        "{huge}"
    );
}

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    refuses::<Overlap, _>([
        (&["--elements", "0"][..], "whole number from 1 to 4294967295"),
        (&["--elements", "18446744073709551615"], "whole number from 1 to 4294967295"),
        (&["--elements", "3", "--streams", "4"], "--streams 4 is more than --elements 3"),
        (&["--streams", "65"], "whole number from 1 to 64"),
        (&["--streams", "0"], "whole number from 1 to 64"),
        (&["--streams", "-3"], "whole number from 1 to 64"),
        (&["--iters", "0"], "whole number from 1 to 100000"),
        (&["--streams", "9", "--elements", "8"], "--streams 9 is more than --elements 8"),
        (&["--elements", "4294967295", "--iters", "100000"], "per repeat"),
    ]);
    accepted::<Overlap>(&[]);
    // Host memory: four buffers of 2^30 floats (16 GiB) are refused exactly where
    // /proc/meminfo says they do not fit.
    let args = streamlab::lab::harness::args_from::<Overlap>(&[
        "--elements",
        "1073741824",
        "--iters",
        "1",
    ])
    .unwrap();
    let big = Overlap::plan(&args, &streamlab::lab::WorkModel::H100).and_then(|p| p.admit(None));
    let available_kib: Option<u64> = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        t.lines().find(|l| l.starts_with("MemAvailable:"))?.split_whitespace().nth(1)?.parse().ok()
    });
    if let Some(kib) = available_kib {
        let fits = (16u64 << 30) <= kib * 1024;
        assert_eq!(big.is_ok(), fits, "{big:?} with {kib} KiB available");
    }
}
