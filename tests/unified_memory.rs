//! GPU tests of the unified-memory lesson and of the runtime's managed buffers. Ignored without
//! a GPU (run them with `cargo test --release -- --include-ignored` on a GPU machine); the flag
//! refusals and the plan run anywhere.
use approx::assert_relative_eq;
use streamlab::lab::harness::data::{random_inputs, ABS_TOLERANCE, REL_TOLERANCE};
use streamlab::lab::Lesson;
use streamlab::lessons::unified_memory::{UnifiedMemory, GPU_MS, READ_MS, VERSIONS};
use streamlab::runtime::{Advice, AsContext, Location, ManagedBuffer, Stream};
use testkit::{accepted, assert_bit_for_bit_checks, gpu, refuses, run_lesson, set_up};

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_managed_version_equals_the_explicit_copies_for_awkward_sizes() {
    let gpu = gpu();
    // A chunk smaller than a page (chunks share pages across streams), odd sizes, one chunk.
    for (n, chunks, k) in [(1000, 7, 3), (1, 1, 1), (4097, 5, 8), (100_003, 3, 2)] {
        let (n, chunks, k) = (n.to_string(), chunks.to_string(), k.to_string());
        let flags = ["--elements", &n, "--chunks", &chunks, "--streams", &k];
        assert_bit_for_bit_checks::<UnifiedMemory>(&gpu, &flags, 3);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn managed_versions_match_the_cpu_for_every_element() {
    let gpu = gpu();
    let flags = ["--elements", "10000", "--chunks", "6", "--streams", "3", "--iters", "100"];
    let mut u: UnifiedMemory = set_up(&gpu, &flags, 42).unwrap();
    let input = random_inputs(60_000, 42);
    // Every version once (timing claims are not asserted at this size), then the checks.
    let mut checks = streamlab::lab::Checks::new(true);
    let measured = streamlab::lab::Measured::from_samples(
        VERSIONS.iter().map(|v| v.to_string()).collect(),
        (0..4).map(|v| vec![u.version(&gpu, v).unwrap()]).collect(),
    );
    u.verify(&gpu, &measured, &mut checks).unwrap();
    assert!(checks.passed(), "{:?}", checks.items);
    // And every element of a managed buffer against the CPU, read back by the host.
    let m = ManagedBuffer::<f32>::zeroed(&*gpu, 60_000).unwrap();
    m.write_from_host(&input).unwrap();
    let s = Stream::new(&*gpu, "t").unwrap();
    s.prefetch(&m, 0..60_000, Location::Device).unwrap();
    gpu.compute(&s, &m, 100).unwrap();
    for (x, y) in input.iter().zip(&m.to_vec().unwrap()) {
        let expected = streamlab::math::compute_element(*x, 100);
        assert_relative_eq!(*y, expected, epsilon = ABS_TOLERANCE, max_relative = REL_TOLERANCE);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_lesson_passes_its_checks_with_every_version_timed_in_parts() {
    let gpu = gpu();
    let o = run_lesson::<UnifiedMemory>(&gpu, &[], 3);
    assert!(o.results_right(), "{}", o.report.to_text());
    // Every version has its GPU part and the host's read of the results. What the faults
    // cost and what prefetching won back are timings: scripts/perf-check.sh's.
    for v in &o.measured.versions {
        assert!(v.part(GPU_MS) > 0.0 && v.part(READ_MS) > 0.0, "{}", o.report.to_text());
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_managed_buffer_is_written_computed_advised_and_read_back() {
    let gpu = gpu();
    let values: Vec<f32> = (0..5000).map(|i| i as f32).collect();
    let m = ManagedBuffer::<f32>::zeroed(&*gpu, values.len()).unwrap();
    assert_eq!(m.to_vec().unwrap(), vec![0.0; 5000]);
    m.write_from_host(&values).unwrap();
    m.advise(Advice::ReadMostly).unwrap();
    m.advise(Advice::PreferredLocation(Location::Host)).unwrap();
    m.advise(Advice::AccessedBy(Location::Device)).unwrap();
    let s = Stream::new(&*gpu, "managed").unwrap();
    gpu.scale(&s, m.slice(0..2500).unwrap(), 2.0, 1.0).unwrap();
    s.prefetch(&m, 2500..5000, Location::Device).unwrap();
    s.prefetch(&m, 0..0, Location::Host).unwrap(); // nothing to move: no call
    let mut back = vec![0.0; 5000];
    m.read_to_host(&mut back).unwrap();
    let expected: Vec<f32> =
        values.iter().enumerate().map(|(i, v)| if i < 2500 { v * 2.0 + 1.0 } else { *v }).collect();
    assert_eq!(back, expected);
    // Lengths that do not match are an error, not a short copy.
    assert!(m.write_from_host(&values[..10]).is_err());
    assert!(m.read_to_host(&mut back[..10]).is_err());
    assert!(s.prefetch(&m, 4000..5001, Location::Device).is_err());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn more_managed_memory_than_the_gpu_has_free_is_refused_in_one_line() {
    let gpu = gpu();
    let (free, _) = gpu.context().memory().unwrap();
    let Err(e) = ManagedBuffer::<f32>::zeroed(&*gpu, free / 4 + 1) else {
        panic!("a managed buffer larger than the free memory was allocated");
    };
    let e = e.to_string();
    assert!(e.contains("cuMemAllocManaged") && e.contains("is free") && !e.contains('\n'), "{e}");
}

/// The flag checks need no GPU: they run before `cuInit`.
#[test]
fn hostile_flags_are_refused_without_a_gpu() {
    refuses::<UnifiedMemory, _>([
        (&["--elements", "0"][..], "whole number from 1 to 268435456"),
        (&["--elements", "268435457"], "whole number from 1 to 268435456"),
        (&["--chunks", "0"], "whole number from 1 to 4096"),
        (&["--chunks", "4097"], "whole number from 1 to 4096"),
        (&["--streams", "65"], "whole number from 1 to 64"),
        (&["--iters", "0"], "whole number from 1 to 100000"),
        (
            &["--elements", "268435456", "--chunks", "2"],
            "--chunks 2 x --elements 268435456 is more than the 268435456 floats of managed",
        ),
        (&["--elements", "1000000", "--chunks", "256", "--iters", "100000"], "per repeat"),
    ]);
    accepted::<UnifiedMemory>(&["--elements", "1", "--chunks", "1"]);
    accepted::<UnifiedMemory>(&["--elements", "1", "--chunks", "1", "--streams", "64"]);
    accepted::<UnifiedMemory>(&["--elements", "65536", "--chunks", "4", "--iters", "10"]);
}
