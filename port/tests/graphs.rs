//! GPU tests of CUDA graphs (streamlab::graph) and the `graph` demo. Ignored without a GPU
//! (run them with `cargo test --release -- --include-ignored` on a GPU machine).
use approx::assert_relative_eq;
use streamlab::data::{random_inputs, ABS_TOLERANCE, REL_TOLERANCE};
use streamlab::demos::graph::{
    check_options, run, GraphDag, LaunchOverhead, DEFAULT_ITERS, EMPTY_KERNELS, MAX_ITERS, SCALE,
    UPDATED_SCALE,
};
use streamlab::demos::Options;
use streamlab::graph::{capture, capture_status, CaptureMode, CaptureStatus, UpdatePath};
use streamlab::math::{combine_element, produce_element, scale_element};
use streamlab::memory::{copy_to_device_sync, device, pinned};
use streamlab::stream::{fork, join};
use streamlab::{Error, Gpu, Stream};
use testkit::gpu;

/// Runs normal work on `s` (scale a buffer in place, copy it back) and checks the result:
/// proof that the stream left capture mode and works.
fn assert_stream_works(gpu: &Gpu, s: &Stream) {
    assert_eq!(
        capture_status(s).unwrap(),
        CaptureStatus::None,
        "stream {} is still capturing",
        s.name()
    );
    let input = random_inputs(1000, 3);
    let dev = device::<f32>(input.len()).unwrap();
    copy_to_device_sync(&input, &dev).unwrap();
    gpu.scale(s, &dev, 2.0, 1.0).unwrap();
    let mut out = pinned::<f32>(input.len()).unwrap();
    // SAFETY: `out` lives to the end of this function, after the synchronize below.
    unsafe { s.copy_to_host(&dev, &mut out).unwrap() };
    s.synchronize().unwrap();
    for (i, (&x, &y)) in input.iter().zip(out.iter()).enumerate() {
        assert_eq!(
            y.to_bits(),
            scale_element(x, 2.0, 1.0).to_bits(),
            "element {i}"
        );
    }
}

fn capture_parts(e: Error) -> (String, String, String) {
    match e {
        Error::Capture { op, status, cause } => (op, status, cause),
        other => panic!("expected Error::Capture, got {other:?} ({other})"),
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn graph_replay_equals_stream_version_bit_for_bit_in_every_capture_mode() {
    let gpu = gpu();
    for (n, mode) in [
        (65_536, CaptureMode::Global),
        (1, CaptureMode::ThreadLocal),
        (1_000_003, CaptureMode::Relaxed),
        (4097, CaptureMode::Global),
    ] {
        let mut dag = GraphDag::new(&gpu, n, n as u64).unwrap();
        dag.build_graph(&gpu, mode).unwrap();
        // The DAG: 2 copies in, 2 producers, 1 combiner, 1 copy out; the fork/join events
        // become edges, not nodes.
        assert_eq!(dag.nodes.kernels, 3, "{mode:?}: {}", dag.nodes);
        assert_eq!(dag.nodes.memcpys, 3, "{mode:?}: {}", dag.nodes);
        for _ in 0..3 {
            dag.run_streams(&gpu).unwrap();
            dag.run_graph().unwrap();
        }
        dag.check_bitwise()
            .unwrap_or_else(|e| panic!("n={n} {mode:?}: {e}"));
        // Not trivially equal: the output was really written.
        assert!(dag.out_graph.iter().all(|&x| x > 0.0), "n={n}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn graph_output_matches_cpu_reference_within_tolerance() {
    let gpu = gpu();
    let n = 50_000;
    let mut dag = GraphDag::new(&gpu, n, 42).unwrap();
    dag.build_graph(&gpu, CaptureMode::Global).unwrap();
    dag.run_graph().unwrap();
    // Every element. produce_element is scale * sin(x) + 1 with GPU and CPU sin a few ulps
    // apart, and scale < 1 keeps it in [0.5, 1.5]: no cancellation, so data.rs's tolerances
    // (relative 1e-4, absolute 1e-6) hold with a wide margin.
    let (a, b) = (dag.input_a().to_vec(), dag.input_b().to_vec());
    for i in 0..n {
        let expected = combine_element(produce_element(a[i], SCALE), produce_element(b[i], SCALE));
        assert_relative_eq!(
            dag.out_graph[i],
            expected,
            epsilon = ABS_TOLERANCE,
            max_relative = REL_TOLERANCE
        );
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn updating_the_scale_updates_in_place_and_changes_the_result() {
    let gpu = gpu();
    let n = 10_000;
    let mut dag = GraphDag::new(&gpu, n, 7).unwrap();
    dag.build_graph(&gpu, CaptureMode::Global).unwrap();
    dag.run_graph().unwrap();
    let before = dag.out_graph.to_vec();
    let (path, _, _) = dag.set_scale(&gpu, UPDATED_SCALE).unwrap();
    // Only kernel arguments changed: the driver must accept the update in place.
    assert_eq!(path, UpdatePath::InPlace, "{path}");
    dag.run_graph().unwrap();
    dag.run_streams(&gpu).unwrap();
    dag.check_bitwise().unwrap();
    let (a, b) = (dag.input_a().to_vec(), dag.input_b().to_vec());
    let mut changed = 0;
    for i in 0..n {
        let expected = combine_element(
            produce_element(a[i], UPDATED_SCALE),
            produce_element(b[i], UPDATED_SCALE),
        );
        assert_relative_eq!(
            dag.out_graph[i],
            expected,
            epsilon = ABS_TOLERANCE,
            max_relative = REL_TOLERANCE
        );
        changed += usize::from(dag.out_graph[i].to_bits() != before[i].to_bits());
    }
    // sin(x) = 0 only at x = 0 exactly; practically every element changes.
    assert!(changed > n * 99 / 100, "only {changed} of {n} changed");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_changed_topology_falls_back_to_reinstantiation() {
    let gpu = gpu();
    let s = Stream::non_blocking("topology").unwrap();
    let input = random_inputs(4096, 5);
    let data = device::<f32>(input.len()).unwrap();
    let once = capture(&s, CaptureMode::Global, |s| gpu.scale(s, &data, 2.0, 0.0)).unwrap();
    let twice = capture(&s, CaptureMode::Global, |s| {
        gpu.scale(s, &data, 2.0, 0.0)?;
        gpu.scale(s, &data, 3.0, 1.0)
    })
    .unwrap();
    let mut exec = once.instantiate().unwrap();
    let path = exec.update_from(&twice).unwrap();
    match &path {
        // A node was added. The documented reason is CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        // driver 580 (CUDA 13) answers CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED through the
        // cuGraphExecUpdate entry point. Either is a refusal; anything else is not.
        UpdatePath::Reinstantiated { reason } => assert!(
            reason.contains(streamlab::graph::update_refusal_reason(2))
                || reason.contains(streamlab::graph::update_refusal_reason(6)),
            "{reason}"
        ),
        UpdatePath::InPlace => panic!("adding a node cannot be an in-place update"),
    }
    copy_to_device_sync(&input, &data).unwrap();
    // SAFETY: the graph touches only `data`, alive until the end of this test.
    unsafe { exec.launch(&s).unwrap() };
    let mut out = pinned::<f32>(input.len()).unwrap();
    // SAFETY: `out` outlives the synchronize below.
    unsafe { s.copy_to_host(&data, &mut out).unwrap() };
    s.synchronize().unwrap();
    for (i, &x) in input.iter().enumerate() {
        let expected = scale_element(scale_element(x, 2.0, 0.0), 3.0, 1.0);
        assert_eq!(out[i].to_bits(), expected.to_bits(), "element {i}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn synchronizing_inside_a_capture_is_a_clear_error_and_the_stream_recovers() {
    let gpu = gpu();
    let s = Stream::non_blocking("capture-sync").unwrap();
    let err = capture(&s, CaptureMode::Global, |s| {
        gpu.empty(s)?;
        s.synchronize()
    })
    .err()
    .expect("a synchronize inside a capture must fail");
    let (op, status, cause) = capture_parts(err);
    assert!(op.starts_with("cuStreamSynchronize"), "{op}");
    assert!(op.contains("capture-sync"), "{op}");
    assert_eq!(status, "invalidated");
    assert!(
        cause.starts_with("cuStreamSynchronize is not allowed while the stream is being captured"),
        "{cause}"
    );
    assert_stream_works(&gpu, &s);
    // The capture mode does not matter: waiting for captured work is never possible.
    let err = capture(&s, CaptureMode::Relaxed, |s| {
        gpu.empty(s)?;
        s.synchronize()
    })
    .err()
    .expect("a synchronize inside a relaxed capture must fail too");
    let (op, _, cause) = capture_parts(err);
    assert!(op.starts_with("cuStreamSynchronize"), "{op}");
    assert!(cause.contains("not allowed"), "{cause}");
    assert_stream_works(&gpu, &s);
    // A device-wide synchronize (cust, which reports capture codes as 999) is also reported
    // as a capture error, because it invalidates the capture.
    let err = capture(&s, CaptureMode::Global, |s| {
        gpu.empty(s)?;
        gpu.synchronize()
    })
    .err()
    .expect("a device synchronize inside a capture must fail");
    let (op, status, _) = capture_parts(err);
    assert!(op.starts_with("cuCtxSynchronize"), "{op}");
    assert_eq!(status, "invalidated");
    assert_stream_works(&gpu, &s);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_legacy_default_stream_during_a_global_capture_is_a_clear_error() {
    let gpu = gpu();
    // A blocking stream: the legacy default stream implicitly synchronizes with it.
    let s = Stream::new("capture-blocking").unwrap();
    let legacy = Stream::legacy_default();
    let err = capture(&s, CaptureMode::Global, |s| {
        gpu.empty(s)?;
        gpu.empty(&legacy)
    })
    .err()
    .expect("using the legacy stream while a blocking stream is captured must fail");
    let (op, _, cause) = capture_parts(err);
    assert!(op.contains("legacy default stream"), "{op}");
    assert!(cause.contains("legacy default stream"), "{cause}");
    assert_stream_works(&gpu, &s);
    // And the legacy stream itself works again.
    gpu.empty(&legacy).unwrap();
    legacy.synchronize().unwrap();
    // Capturing the legacy stream itself is refused before the driver is asked.
    let (op, status, cause) = capture_parts(
        capture(&legacy, CaptureMode::Global, |_| Ok(()))
            .err()
            .expect("the legacy stream cannot be captured"),
    );
    assert!(op.starts_with("cuStreamBeginCapture"), "{op}");
    assert_eq!(status, "not capturing");
    assert!(cause.contains("cannot be captured"), "{cause}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn waiting_on_an_event_from_outside_the_capture_is_a_clear_error() {
    let gpu = gpu();
    let outside = Stream::non_blocking("outside").unwrap();
    let s = Stream::non_blocking("capture-event").unwrap();
    let e = streamlab::Event::without_timing().unwrap();
    gpu.empty(&outside).unwrap();
    e.record(&outside).unwrap();
    let err = capture(&s, CaptureMode::Global, |s| {
        gpu.empty(s)?;
        s.wait_event(&e)?;
        gpu.empty(s)
    })
    .err()
    .expect("waiting on a non-captured event inside a capture must fail");
    let (op, _, cause) = capture_parts(err);
    assert!(op.starts_with("cuStreamWaitEvent"), "{op}");
    assert!(op.contains("capture-event"), "{op}");
    // The driver's code for a dependency that crosses the capture boundary, and its cause.
    assert!(
        cause.ends_with("[CUDA_ERROR_STREAM_CAPTURE_ISOLATION (905)]"),
        "{cause}"
    );
    assert!(
        cause.contains("waited on an event recorded outside the capture"),
        "{cause}"
    );
    assert_stream_works(&gpu, &s);
    assert_stream_works(&gpu, &outside);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_fork_that_is_not_joined_is_a_clear_error_and_both_streams_recover() {
    let gpu = gpu();
    let origin = Stream::non_blocking("origin").unwrap();
    let side = Stream::non_blocking("side").unwrap();
    let err = capture(&origin, CaptureMode::Global, |o| {
        let _fork = fork(o, &[&side])?;
        gpu.empty(&side)?;
        gpu.empty(o)
        // no join
    })
    .err()
    .expect("an unjoined fork must fail at the end of the capture");
    let (op, _, cause) = capture_parts(err);
    assert!(op.starts_with("cuStreamEndCapture"), "{op}");
    assert!(cause.contains("not joined back"), "{cause}");
    assert_stream_works(&gpu, &origin);
    assert_stream_works(&gpu, &side);
    // The same capture with the join is fine, and holds both kernels.
    let graph = capture(&origin, CaptureMode::Global, |o| {
        let _fork = fork(o, &[&side])?;
        gpu.empty(&side)?;
        gpu.empty(o)?;
        join(o, &[&side]).map(|_| ())
    })
    .unwrap();
    assert_eq!(graph.node_counts().unwrap().kernels, 2);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn launch_overhead_graph_holds_every_kernel_and_is_cheaper_to_issue() {
    let gpu = gpu();
    let lo = LaunchOverhead::new(&gpu, EMPTY_KERNELS).unwrap();
    assert_eq!(lo.nodes.kernels, EMPTY_KERNELS);
    assert_eq!(lo.nodes.total(), EMPTY_KERNELS);
    let m = streamlab::demos::graph::measure_launch_overhead(&gpu, &lo, 10).unwrap();
    // One cuGraphLaunch costs the host less than 100 cuLaunchKernel calls on any GPU.
    assert!(
        m.graph_issue_per_kernel_us < m.stream_issue_per_kernel_us,
        "{m:?}"
    );
    assert!(m.stream_gpu_per_kernel_us > 0.0 && m.graph_gpu_per_kernel_us > 0.0);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn demo_report_passes_its_checks_and_the_graph_issues_faster() {
    let gpu = gpu();
    let opts = Options {
        elements: Some(1 << 14),
        iters: Some(200),
        reps: 3,
        ..Options::default()
    };
    let r = run(&gpu, &opts).unwrap();
    assert!(r.passed(), "{}", r.to_text());
    let streams = r.value("streams+events: host issue / iteration").unwrap();
    let graph = r
        .value("graph: host issue (cuGraphLaunch) / iteration")
        .unwrap();
    assert!(
        graph < streams,
        "graph {graph} us vs streams {streams} us\n{}",
        r.to_text()
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn invalid_sizes_are_refused_before_allocation() {
    let gpu = gpu();
    let zero = GraphDag::new(&gpu, 0, 0)
        .err()
        .expect("0 elements must be refused");
    assert!(
        matches!(zero, Error::InvalidInput(_)) && zero.to_string().contains("--elements"),
        "{zero}"
    );
    let opts = Options {
        iters: Some(0),
        ..Options::default()
    };
    let no_iters = run(&gpu, &opts).expect_err("0 replays must be refused");
    assert!(no_iters.to_string().contains("--iters"), "{no_iters}");
    let huge = Options {
        elements: Some(u32::MAX as usize + 1),
        ..Options::default()
    };
    let huge = run(&gpu, &huge).expect_err("more elements than a u32 index must be refused");
    assert!(
        matches!(huge, Error::InvalidInput(_)) && huge.to_string().contains("--elements"),
        "{huge}"
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn using_the_graph_before_building_it_is_an_internal_error() {
    let gpu = gpu();
    let mut dag = GraphDag::new(&gpu, 1000, 1).unwrap();
    let launch = dag.run_graph().expect_err("no graph to launch yet");
    assert!(matches!(launch, Error::Internal(_)), "{launch}");
    let update = dag
        .set_scale(&gpu, UPDATED_SCALE)
        .expect_err("no graph to update yet");
    assert!(matches!(update, Error::Internal(_)), "{update}");
    // Neither left anything behind: the stream version still runs and is right.
    dag.run_streams(&gpu).unwrap();
    dag.check_reference("streams output", &dag.out_streams, 1000)
        .unwrap();
}

/// `check_options` with the given flags; the error text when it refuses them.
fn refused(opts: Options) -> Option<String> {
    match check_options(&opts) {
        Ok(()) => None,
        Err(e) => {
            assert!(matches!(e, Error::InvalidInput(_)), "{e:?}");
            let text = e.to_string();
            assert!(!text.contains('\n'), "not one line: {text}");
            Some(text)
        }
    }
}

#[test]
fn default_and_small_flags_pass_the_checks_without_a_gpu() {
    assert_eq!(refused(Options::default()), None);
    let small = Options {
        elements: Some(1),
        iters: Some(1),
        reps: 1,
        ..Options::default()
    };
    assert_eq!(refused(small), None);
    // Flags this demo does not read are not its business.
    let unread = Options {
        streams: Some(64),
        batches: Some(1024),
        sleep_us: Some(0.001),
        ..Options::default()
    };
    assert_eq!(refused(unread), None);
}

#[test]
fn hostile_flags_are_refused_without_a_gpu_in_one_line() {
    let elements = |n| Options {
        elements: Some(n),
        ..Options::default()
    };
    for n in [0, u32::MAX as usize + 1, usize::MAX, usize::MAX / 4] {
        let why = refused(elements(n)).unwrap_or_else(|| panic!("--elements {n} passed"));
        assert!(why.contains("--elements"), "{why}");
    }
    let iters = |i| Options {
        iters: Some(i),
        ..Options::default()
    };
    for i in [0, MAX_ITERS + 1, u32::MAX] {
        let why = refused(iters(i)).unwrap_or_else(|| panic!("--iters {i} passed"));
        assert!(why.contains("--iters"), "{why}");
    }
    // Allowed one by one, too much together: at least 20 us a replay, 2 versions.
    let too_long = Options {
        iters: Some(MAX_ITERS),
        reps: 10_000,
        ..Options::default()
    };
    let why = refused(too_long).expect("10^10 replays must be refused");
    assert!(why.contains("--iters") && why.contains("60 s"), "{why}");
    let too_long = Options {
        iters: Some(DEFAULT_ITERS),
        reps: 5_000,
        ..Options::default()
    };
    assert!(refused(too_long).is_some());
    // The largest array a kernel takes, replayed by default: its copies alone take longer.
    let why = refused(elements(u32::MAX as usize)).expect("4G elements x 1000 replays");
    assert!(why.contains("60 s") || why.contains("host memory"), "{why}");
}
