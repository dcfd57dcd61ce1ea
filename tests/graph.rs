//! GPU tests of CUDA graphs (`streamlab::runtime::graph`) and of the graph lesson. Ignored
//! without a GPU (run them with `cargo test --release -- --include-ignored` on a GPU machine).
use approx::assert_relative_eq;
use streamlab::lab::harness::data::ensure_close_to_reference;
use streamlab::lab::harness::data::{random_inputs, ABS_TOLERANCE, REL_TOLERANCE};
use streamlab::lab::{Lesson, Measured, Sample};
use streamlab::lessons::graph::sweep::{build, Copies, Shape, Sweep};
use streamlab::lessons::graph::{
    GraphDag, EMPTY_BY_STREAM, EMPTY_KERNELS, FIRST_SWEPT, GRAPH, SCALE, STREAMS_EVENTS,
    UPDATED_SCALE,
};
use streamlab::math::{combine_element, produce_element, scale_element};
use streamlab::runtime::graph::{
    capture, capture_status, update_refusal_reason, CaptureMode, CaptureStatus, Instantiate,
    UpdatePath,
};
use streamlab::runtime::memory::copy_to_device_sync;
use streamlab::runtime::stream::{fork, join};
use streamlab::runtime::{DeviceBuffer, Event, HostBuffer, Stream};
use streamlab::{Error, Gpu};
use testkit::spans::issued;
use testkit::{accepted, gpu, refusal, refuses_out_of_range, run_recorded, set_up};

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
    let dev = DeviceBuffer::<f32>::zeroed(gpu, input.len()).unwrap();
    copy_to_device_sync(&input, &dev).unwrap();
    gpu.scale(s, &dev, 2.0, 1.0).unwrap();
    let out = HostBuffer::<f32>::pinned(gpu, input.len()).unwrap();
    s.copy_to_host(&dev, &out).unwrap();
    s.synchronize().unwrap();
    let out = out.read().unwrap();
    for (i, (&x, &y)) in input.iter().zip(out.iter()).enumerate() {
        assert_eq!(y.to_bits(), scale_element(x, 2.0, 1.0).to_bits(), "element {i}");
    }
}

fn capture_parts(e: Error) -> (String, String, String) {
    match e {
        Error::Capture { op, stream, status, cause } => {
            // The call as the error line names it: with its stream, where it has one.
            let call = match stream {
                Some(s) => format!("{op} on stream \"{s}\""),
                None => op,
            };
            (call, status, cause.en())
        }
        other => panic!("expected Error::Capture, got {other:?} ({other})"),
    }
}

/// The lesson set up on `gpu` with `--elements n` and one replay per version.
fn dag(gpu: &Gpu, n: usize, seed: u64) -> GraphDag {
    set_up(gpu, &["--elements", &n.to_string(), "--iters", "1"], seed).unwrap()
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
        let mut dag = dag(&gpu, n, n as u64);
        dag.rebuild(&gpu, mode).unwrap();
        // The DAG: 2 copies in, 2 producers, 1 combiner, 1 copy out; the fork/join events
        // become edges, not nodes.
        let nodes = dag.built.nodes;
        assert_eq!(nodes.kernels, 3, "{mode:?}: {nodes}");
        assert_eq!(nodes.memcpys, 3, "{mode:?}: {nodes}");
        for _ in 0..3 {
            dag.version(&gpu, STREAMS_EVENTS).unwrap();
            dag.version(&gpu, GRAPH).unwrap();
        }
        let buffers = dag.buffers().unwrap();
        let (graph, streams) = (&buffers[2], &buffers[3]);
        let differ = graph.iter().zip(streams).filter(|(g, s)| g.to_bits() != s.to_bits()).count();
        assert_eq!(differ, 0, "n={n} {mode:?}: {differ} elements differ");
        // Not trivially equal: the output was really written.
        assert!(graph.iter().all(|&x| x > 0.0), "n={n}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn graph_output_matches_cpu_reference_within_tolerance() {
    let gpu = gpu();
    let n = 50_000;
    let mut dag = dag(&gpu, n, 42);
    dag.version(&gpu, GRAPH).unwrap();
    // Every element. produce_element is scale * sin(x) + 1 with GPU and CPU sin a few ulps
    // apart, and scale < 1 keeps it in [0.5, 1.5]: no cancellation, so data.rs's tolerances
    // (relative 1e-4, absolute 1e-6) hold with a wide margin.
    let buffers = dag.buffers().unwrap();
    let (a, b, out) = (&buffers[0], &buffers[1], &buffers[2]);
    assert_eq!(out.len(), n);
    let reference =
        |i: usize| combine_element(produce_element(a[i], SCALE), produce_element(b[i], SCALE));
    ensure_close_to_reference("graph output vs CPU", out, n, reference).unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn updating_the_scale_updates_in_place_and_changes_the_result() {
    let gpu = gpu();
    let n = 10_000;
    let mut dag = dag(&gpu, n, 7);
    dag.version(&gpu, GRAPH).unwrap();
    let before = dag.buffers().unwrap().swap_remove(2);
    let updated = dag.update(&gpu, UPDATED_SCALE).unwrap();
    // Only kernel arguments changed: the driver must accept the update in place.
    assert_eq!(updated.path, UpdatePath::InPlace, "{}", updated.path);
    dag.version(&gpu, GRAPH).unwrap();
    dag.version(&gpu, STREAMS_EVENTS).unwrap();
    let buffers = dag.buffers().unwrap();
    let (a, b, graph, streams) = (&buffers[0], &buffers[1], &buffers[2], &buffers[3]);
    let mut changed = 0;
    for i in 0..n {
        assert_eq!(graph[i].to_bits(), streams[i].to_bits(), "element {i}");
        let expected = combine_element(
            produce_element(a[i], UPDATED_SCALE),
            produce_element(b[i], UPDATED_SCALE),
        );
        assert_relative_eq!(
            graph[i],
            expected,
            epsilon = ABS_TOLERANCE,
            max_relative = REL_TOLERANCE
        );
        changed += usize::from(graph[i].to_bits() != before[i].to_bits());
    }
    // sin(x) = 0 only at x = 0 exactly; practically every element changes.
    assert!(changed > n * 99 / 100, "only {changed} of {n} changed");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_changed_topology_falls_back_to_reinstantiation() {
    let gpu = gpu();
    let g: &Gpu = &gpu;
    let s = Stream::non_blocking(g, "topology").unwrap();
    let input = random_inputs(4096, 5);
    let data = DeviceBuffer::<f32>::zeroed(g, input.len()).unwrap();
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
            reason.contains(update_refusal_reason(2)) || reason.contains(update_refusal_reason(6)),
            "{reason}"
        ),
        UpdatePath::InPlace => panic!("adding a node cannot be an in-place update"),
    }
    copy_to_device_sync(&input, &data).unwrap();
    exec.launch(&s).unwrap();
    let out = HostBuffer::<f32>::pinned(g, input.len()).unwrap();
    s.copy_to_host(&data, &out).unwrap();
    s.synchronize().unwrap();
    let out = out.read().unwrap();
    for (i, &x) in input.iter().enumerate() {
        let expected = scale_element(scale_element(x, 2.0, 0.0), 3.0, 1.0);
        assert_eq!(out[i].to_bits(), expected.to_bits(), "element {i}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn synchronizing_inside_a_capture_is_a_clear_error_and_the_stream_recovers() {
    let gpu = gpu();
    let s = Stream::non_blocking(&*gpu, "capture-sync").unwrap();
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
    // A device-wide synchronize invalidates the capture too, and is reported as a capture
    // error whatever code the driver gives it.
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
    let s = Stream::new(&*gpu, "capture-blocking").unwrap();
    let legacy = Stream::legacy_default(&*gpu);
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
    let outside = Stream::non_blocking(&*gpu, "outside").unwrap();
    let s = Stream::non_blocking(&*gpu, "capture-event").unwrap();
    let e = Event::without_timing(&*gpu).unwrap();
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
    assert!(cause.ends_with("[CUDA_ERROR_STREAM_CAPTURE_ISOLATION (905)]"), "{cause}");
    assert!(cause.contains("waited on an event recorded outside the capture"), "{cause}");
    assert_stream_works(&gpu, &s);
    assert_stream_works(&gpu, &outside);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_fork_that_is_not_joined_is_a_clear_error_and_both_streams_recover() {
    let gpu = gpu();
    let origin = Stream::non_blocking(&*gpu, "origin").unwrap();
    let side = Stream::non_blocking(&*gpu, "side").unwrap();
    let (forked, joined) =
        (Event::without_timing(&*gpu).unwrap(), [Event::without_timing(&*gpu).unwrap()]);
    let err = capture(&origin, CaptureMode::Global, |o| {
        fork(&forked, o, &[&side])?;
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
        fork(&forked, o, &[&side])?;
        gpu.empty(&side)?;
        gpu.empty(o)?;
        join(&joined, o, &[&side])
    })
    .unwrap();
    assert_eq!(graph.node_counts().unwrap().kernels, 2);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn launch_overhead_graph_holds_every_kernel_and_is_cheaper_to_issue() {
    let gpu = gpu();
    let mut dag = dag(&gpu, 1024, 1);
    let nodes = dag.empty_built.nodes;
    assert_eq!(nodes.kernels, EMPTY_KERNELS, "{nodes}");
    assert_eq!(nodes.total(), EMPTY_KERNELS, "{nodes}");
    // One warm-up of each, then 10 alternating repeats, as the lesson's harness does.
    let mut runs: [Vec<Sample>; 2] = Default::default();
    for rep in 0..11 {
        for (v, samples) in runs.iter_mut().enumerate() {
            let sample = dag.version(&gpu, EMPTY_BY_STREAM + v).unwrap();
            if rep > 0 {
                samples.push(sample);
            }
        }
    }
    let names = vec!["by stream".to_string(), "graph".to_string()];
    let m = Measured::from_samples(names, runs.into());
    let (by_stream, graph) = (&m.versions[0], &m.versions[1]);
    // One cuGraphLaunch costs the host less than 100 cuLaunchKernel calls on any GPU.
    assert!(graph.part("issue") < by_stream.part("issue"), "{:?}", m.versions);
    assert!(by_stream.part("gpu") > 0.0 && graph.part("gpu") > 0.0);
    // Four versions of its own, then the 7 chain lengths of the sweep, two versions each.
    assert!(dag.version(&gpu, FIRST_SWEPT + 2 * 7).is_err(), "graph has only 18 versions");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_lesson_passes_its_checks_and_the_graph_issues_one_call_an_iteration() {
    let gpu = gpu();
    let o = run_recorded::<GraphDag>(&gpu, &["--elements", "16384", "--iters", "200"], 3);
    let text = o.report.to_text();
    assert!(o.results_right(), "{text}");
    // Both outputs, before and after the update, were checked.
    for name in [
        "graph == streams+events, bit for bit",
        "update changed the output",
        "after update: GPU vs CPU reference (approx)",
    ] {
        assert!(o.checks.iter().any(|c| c.name == name), "no check {name:?}\n{text}");
    }
    // What the host issued, call by call: each replay is one cuGraphLaunch, where streams
    // and events launch every kernel and copy themselves. How much host time that saved is
    // scripts/perf-check.sh's.
    let [streams, graph] = [&o.recordings[0], &o.recordings[1]];
    assert_eq!(issued(graph, "cuGraphLaunch"), 200, "{:?}", graph.host);
    let by_hand = ["cuLaunchKernel", "cuMemcpy", "cuStreamWaitEvent"];
    assert!(by_hand.iter().all(|call| issued(graph, call) == 0), "{:?}", graph.host);
    assert!(by_hand.iter().all(|call| issued(streams, call) >= 200), "{:?}", streams.host);
    let figure = |name: &str| o.report.value(name).unwrap_or_else(|| panic!("no {name:?}\n{text}"));
    assert!(figure("update of the executable graph") > 0.0, "{text}");
    assert!(o.lesson.updated.is_some());
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn copy_kernels_move_pinned_memory_both_ways_and_refuse_pageable() {
    let test_gpu = gpu();
    let gpu: &Gpu = &test_gpu;
    let s = Stream::non_blocking(gpu, "copy kernels").unwrap();
    let input = random_inputs(100_003, 5);
    let host = HostBuffer::pinned_from(gpu, &input).unwrap();
    let dev = DeviceBuffer::<f32>::zeroed(gpu, input.len()).unwrap();
    let back = HostBuffer::<f32>::pinned(gpu, input.len()).unwrap();
    gpu.copy_kernel_to_device(&s, &host, &dev).unwrap();
    gpu.copy_kernel_to_host(&s, &dev, &back).unwrap();
    // `read` waits for the stream the copy kernel was launched on.
    let back = back.to_vec().unwrap();
    let differ = input.iter().zip(&back).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
    assert_eq!(differ, 0, "{differ} elements differ after the round trip");
    let pageable = HostBuffer::pageable_from_vec(gpu, input.clone()).unwrap();
    let e = gpu.copy_kernel_to_device(&s, &pageable, &dev).unwrap_err();
    assert!(matches!(e, Error::InvalidInput(_)) && e.to_string().contains("pageable"), "{e}");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_sweep_shape_replays_as_by_stream_and_node_priority_instantiates() {
    let gpu = gpu();
    let mut shapes = Vec::new();
    for copies in [Copies::Memcpy, Copies::Kernels, Copies::None] {
        for (elements, chain) in [(1, 1), (4097, 3), (100_000, 2)] {
            shapes.push(Shape { elements, chain, copies });
        }
    }
    let sweep = Sweep::new(&gpu, shapes.clone(), 3, 11).unwrap();
    for (shape, built) in shapes.iter().zip(&sweep.built) {
        let copies = if shape.copies == Copies::None { 0 } else { 3 };
        let (memcpys, kernels) = match shape.copies {
            Copies::Memcpy => (copies, 2 * shape.chain + 1),
            _ => (0, 2 * shape.chain + 1 + copies),
        };
        assert_eq!((built.nodes.memcpys, built.nodes.kernels), (memcpys, kernels), "{shape:?}");
    }
    let mut checks = streamlab::lab::Checks::default();
    sweep.verify(&gpu, &mut checks).unwrap();
    assert!(checks.passed(), "{:?}", checks.items);
    assert_eq!(checks.items.len(), 2);
    // The flag changes how nodes take priorities, not what they compute.
    let c = sweep.launch_stream();
    let (exec, _) =
        build(c, Instantiate::UseNodePriority, false, || sweep.capture(&gpu, 4)).unwrap();
    let sample = sweep.time(&exec, 2).unwrap();
    assert!(sample.ms > 0.0 && sample.value("gpu") > 0.0, "{sample:?}");
}

/// (flag, value, the range the refusal must name): refused as they parse.
const OUT_OF_RANGE: [[&str; 3]; 7] = [
    ["--elements", "0", "whole number from 1 to 4294967295"],
    ["--elements", "4294967296", "whole number from 1 to 4294967295"],
    ["--elements", "18446744073709551615", "whole number from 1 to 4294967295"],
    ["--elements", "4611686018427387903", "whole number from 1 to 4294967295"],
    ["--iters", "0", "whole number from 1 to 1000000"],
    ["--iters", "1000001", "whole number from 1 to 1000000"],
    ["--iters", "4294967295", "whole number from 1 to 1000000"],
];

/// The flag checks need no GPU: they run before `cuInit`, so nothing is allocated.
#[test]
fn default_and_small_flags_pass_and_hostile_flags_are_refused_without_a_gpu() {
    accepted::<GraphDag>(&[]);
    accepted::<GraphDag>(&["--elements", "1", "--iters", "1"]);
    refuses_out_of_range::<GraphDag>(&OUT_OF_RANGE);
    // Allowed one by one, too much together: at least tens of us a replay, 2 versions.
    let why = refusal::<GraphDag>(&["--iters", "1000000"]);
    assert!(why.contains("--iters") && why.contains("60 s"), "{why}");
    // The copies grow with the elements: 128M floats a replay, 1000 replays, twice.
    let why = refusal::<GraphDag>(&["--elements", "134217728"]);
    assert!(why.contains("--elements") && why.contains("per repeat"), "{why}");
    // The largest array a kernel takes, replayed by default: its copies alone take longer.
    let why = refusal::<GraphDag>(&["--elements", "4294967295"]);
    assert!(why.contains("60 s") || why.contains("host memory"), "{why}");
}
