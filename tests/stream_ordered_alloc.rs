//! GPU tests of the stream-ordered-alloc lesson and of the runtime's stream-ordered buffers.
//! Ignored without a GPU (run them with `cargo test --release -- --include-ignored` on a GPU
//! machine); the flag refusals run anywhere.
use approx::assert_relative_eq;
use streamlab::lab::harness::data::{ABS_TOLERANCE, REL_TOLERANCE};
use streamlab::lab::Lesson;
use streamlab::lessons::stream_ordered_alloc::{StreamOrderedAlloc, KEPT_MIB, POOL, POOL_RELEASED};
use streamlab::runtime::{AsContext, DeviceBuffer, HostBuffer, Stream};
use testkit::spans::{any_span, ran_at_once};
use testkit::{assert_bit_for_bit_checks, gpu, refusal, refuses, run_recorded, set_up};

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_version_equals_the_others_bit_for_bit_for_awkward_sizes() {
    let gpu = gpu();
    for (n, k, b) in [(4097, 3, 2), (1, 1, 1), (65, 64, 1), (100_003, 5, 3)] {
        let (n, k, b) = (n.to_string(), k.to_string(), b.to_string());
        let flags = ["--elements", &n, "--streams", &k, "--rounds", &b, "--iters", "20"];
        assert_bit_for_bit_checks::<StreamOrderedAlloc>(&gpu, &flags, 3);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gpu_matches_cpu_reference_for_every_element() {
    let gpu = gpu();
    let iters = 100;
    let flags = ["--elements", "10000", "--streams", "3", "--rounds", "2", "--iters", "100"];
    let mut o: StreamOrderedAlloc = set_up(&gpu, &flags, 42).unwrap();
    o.version(&gpu, POOL).unwrap();
    let input = streamlab::lab::harness::data::random_inputs(60_000, 42);
    let out = o.outputs[1].to_vec().unwrap();
    // Every element, not a sample: the CPU runs the same compute_element.
    for (x, y) in input.iter().zip(&out) {
        let expected = streamlab::math::compute_element(*x, iters);
        assert_relative_eq!(*y, expected, epsilon = ABS_TOLERANCE, max_relative = REL_TOLERANCE);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_lesson_passes_its_checks_and_the_pool_keeps_the_overlap() {
    let gpu = gpu();
    let o = run_recorded::<StreamOrderedAlloc>(&gpu, &[], 3);
    let text = o.report.to_text();
    assert!(o.results_right(), "{text}");
    // With the pool the streams' work ran at once (cuMemFree drains every stream; the pool
    // does not). The speed-up and the pool against its bound are scripts/perf-check.sh's.
    let pool = &o.recordings[1];
    assert!(ran_at_once(pool, any_span, any_span), "{:?}\n{text}", pool.spans);
    // u64::MAX keeps at least one 2 MiB buffer after the synchronize; 0 gives memory back.
    let (kept, kept_zero) =
        (o.measured.version(POOL).part(KEPT_MIB), o.measured.version(POOL_RELEASED).part(KEPT_MIB));
    assert!(kept >= 2.0 && kept_zero < kept, "kept {kept} MiB, at threshold 0 {kept_zero} MiB");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_stream_buffer_is_a_device_buffer_freed_in_stream_order() {
    let gpu = gpu();
    let on: &streamlab::Gpu = &gpu;
    let (a, b) = (Stream::new(on, "a").unwrap(), Stream::new(on, "b").unwrap());
    let pool = gpu.context().default_mem_pool().unwrap();
    a.synchronize().unwrap();
    let before = pool.used_bytes().unwrap();
    let values: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    let (input, back) =
        (HostBuffer::pinned_from(on, &values).unwrap(), HostBuffer::pinned(on, 1000).unwrap());
    let d = DeviceBuffer::<f32>::alloc_async(&a, 1000).unwrap();
    assert!(pool.used_bytes().unwrap() >= before + 4000);
    a.copy_to_device(&input, &d).unwrap();
    gpu.scale(&a, d.slice(0..500).unwrap(), 2.0, 0.0).unwrap();
    a.copy_to_host(&d, &back).unwrap();
    // Freed on another stream: that stream waits for the allocating one first.
    d.free_async(&b).unwrap();
    b.synchronize().unwrap();
    let expected: Vec<f32> =
        values.iter().enumerate().map(|(i, v)| if i < 500 { v * 2.0 } else { *v }).collect();
    assert_eq!(back.to_vec().unwrap(), expected);
    assert_eq!(pool.used_bytes().unwrap(), before);
    // Dropped without free_async: freed on its own stream.
    drop(DeviceBuffer::<f32>::alloc_async(&a, 1 << 20).unwrap());
    a.synchronize().unwrap();
    assert_eq!(pool.used_bytes().unwrap(), before);
    // The threshold round-trips.
    let threshold = pool.release_threshold().unwrap();
    pool.set_release_threshold(u64::MAX).unwrap();
    assert_eq!(pool.release_threshold().unwrap(), u64::MAX);
    pool.set_release_threshold(threshold).unwrap();
}

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    refuses::<StreamOrderedAlloc, _>([
        (&["--elements", "0"][..], "whole number from 1 to 4294967295"),
        (&["--elements", "4294967296"], "whole number from 1 to 4294967295"),
        (&["--streams", "0"], "whole number from 1 to 64"),
        (&["--streams", "65"], "whole number from 1 to 64"),
        (&["--rounds", "0"], "whole number from 1 to 1024"),
        (&["--rounds", "1025"], "whole number from 1 to 1024"),
        (&["--rounds", "-1"], "whole number from 1 to 1024"),
        (&["--iters", "0"], "whole number from 1 to 100000"),
        (&["--elements", "100000000", "--iters", "100000"], "--rounds x --iters"),
        (&["--elements", "4294967295", "--streams", "64", "--rounds", "1024"], "per repeat"),
        (
            &["--elements", "4294967295", "--streams", "64", "--rounds", "1024", "--iters", "1"],
            "per repeat",
        ),
    ]);
    let why = refusal::<StreamOrderedAlloc>(&["--elements", "100000000", "--iters", "100000"]);
    assert!(why.contains("per repeat"), "{why}");
    testkit::accepted::<StreamOrderedAlloc>(&["--elements", "65536", "--iters", "10"]);
}
