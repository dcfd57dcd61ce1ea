//! # CUDA graphs: capture a multi-stream DAG, replay it, update it
//!
//! The concept: every copy and kernel enqueued on a stream costs the host a driver call, and
//! a small DAG spread over three streams costs a dozen of them (copies, launches, event
//! records and waits) every time it runs. When the same DAG runs again and again, record it
//! once into a *graph*, let the driver validate and prepare it once (*instantiate*), and
//! from then on submit the whole DAG with one call (*launch*).
//!
//! The DAG here: stream A copies input a to the GPU and runs a producer
//! (`a' = scale * sin(a) + 1`), stream B does the same with input b, and stream C waits for
//! both (events), runs the combiner (`out = a' * b' + a'`) and copies the result back.
//!
//! The seed technique is CUDA C++'s stream capture with an event fork/join, from NVIDIA's
//! Programming Guide ("Creating a Graph Using Stream Capture", "Cross-stream Dependencies"):
//!
//! ```text
//! cudaStreamBeginCapture(c, cudaStreamCaptureModeGlobal);
//! cudaEventRecord(fork, c);                                  // A and B join the capture
//! cudaStreamWaitEvent(a, fork);  cudaStreamWaitEvent(b, fork);
//! cudaMemcpyAsync(d_a, h_a, bytes, cudaMemcpyHostToDevice, a);  produce<<<g, 256, 0, a>>>(d_a, p_a, n, scale);
//! cudaMemcpyAsync(d_b, h_b, bytes, cudaMemcpyHostToDevice, b);  produce<<<g, 256, 0, b>>>(d_b, p_b, n, scale);
//! cudaEventRecord(join_a, a);  cudaStreamWaitEvent(c, join_a);   // and the same for b
//! combine<<<g, 256, 0, c>>>(p_a, p_b, d_out, n);
//! cudaMemcpyAsync(h_out, d_out, bytes, cudaMemcpyDeviceToHost, c);
//! cudaStreamEndCapture(c, &graph);
//! cudaGraphInstantiate(&exec, graph, 0);
//! for (...) { cudaGraphLaunch(exec, c); cudaStreamSynchronize(c); }
//! // new scale: capture again into graph2, then
//! cudaGraphExecUpdate(exec, graph2, &info);    // in place; re-instantiate if refused
//! ```
//!
//! In streamlab the same program is `graph::capture(&c, CaptureMode::Global, |c| ...)`,
//! `graph.instantiate()`, `exec.launch(&c)` and `exec.update_from(&graph2)` (see
//! [`crate::graph`]); the enqueued work is the very same function the stream version runs.
//!
//! A second part measures launch overhead alone: 100 empty kernels launched one by one on a
//! stream versus one graph holding those 100, exactly as `cuda-reference/launch_overhead.cu`
//! does in CUDA C++.
use std::time::Instant;

use cust::memory::{DeviceBuffer, LockedBuffer};
use kernels_gpu::math::{combine_element, produce_element};
use serde::Serialize;

use crate::data::{ensure_bitwise_equal, ensure_close_to_reference, random_inputs};
use crate::demos::{buffer_bytes, check_elements, ensure_host_memory, Options, MAX_ELEMENTS};
use crate::error::{ensure, Error, Result};
use crate::gpu::Gpu;
use crate::graph::{capture, CaptureMode, Graph, GraphExec, NodeCounts, UpdatePath};
use crate::memory::{device, pinned, pinned_from};
use crate::report::Report;
use crate::stream::{drain_on_error, Event, Stream};
use crate::timing::{interleaved, Stats};

pub const SUMMARY: &str = "a multi-stream DAG replayed with streams+events vs a captured CUDA graph; update in place; launch overhead";
pub const FLAGS: &str = "--elements (65536 per input) --iters (1000: replays of the DAG per rep, for each version, at most 1000000) --reps (10; the launch-overhead part uses at least 20); iters x reps x 2 replays must stay under about 60 s of GPU work";

pub const DEFAULT_ELEMENTS: usize = 1 << 16;
pub const DEFAULT_ITERS: u32 = 1000;
/// The producers' scale before and after the update. Both below 1, so `scale * sin(x) + 1`
/// stays in [1 - scale, 1 + scale], away from 0: no cancellation that would turn the few-ulp
/// difference between GPU and CPU `sin` into a large relative error.
pub const SCALE: f32 = 0.5;
pub const UPDATED_SCALE: f32 = 0.75;
/// Empty kernels per launch-overhead measurement (and nodes in its graph).
pub const EMPTY_KERNELS: usize = 100;
/// The least number of repeats of the launch-overhead measurement, as in the CUDA C++ twin.
pub const LAUNCH_REPS: usize = 20;
pub const MAX_ITERS: u32 = 1_000_000;
/// Device buffers the DAG needs: two inputs, two products, one output.
const DEVICE_ARRAYS: usize = 5;
/// Host arrays of `n` floats alive at once, at most: the two pinned inputs, the two pinned
/// outputs and the copy of the output taken before the update (the inputs are generated in
/// two `Vec`s first, while only the pinned inputs exist, so that peak is lower).
const HOST_ARRAYS: usize = 5;
/// The most GPU work one run may take, estimated from below, in seconds.
pub const MAX_WORK_SECONDS: f64 = 60.0;
/// The least time one replay of the DAG takes, whatever its size, in µs: its chain of
/// dependent steps measured about 22 µs of GPU time on an H200 even at 1K elements.
pub const MIN_REPLAY_US: f64 = 20.0;
/// Bytes one replay copies per element: two inputs in, one output back.
const BYTES_COPIED_PER_ELEMENT: f64 = 12.0;
/// Pinned-copy bandwidth used for the estimate, in bytes per µs (55 GB/s, about the best
/// of one copy direction on an H100/H200): a generous speed keeps the estimate a lower bound.
const COPY_BYTES_PER_US: f64 = 55e3;
/// The least GPU time of one empty kernel, in µs (about 0.5 µs inside a graph on an H200).
const EMPTY_KERNEL_FLOOR_US: f64 = 0.5;

/// Checks the DAG's sizes without a GPU: the element count (what a kernel can index, and
/// buffer sizes that fit in `usize`) and the host memory its arrays need.
pub fn check_sizes(n: usize) -> Result<()> {
    check_elements(n, MAX_ELEMENTS)?;
    buffer_bytes::<f32>(n, DEVICE_ARRAYS)?;
    ensure_host_memory(
        buffer_bytes::<f32>(n, HOST_ARRAYS)?,
        &format!("{HOST_ARRAYS} host arrays of {n} floats"),
    )
}

/// A lower bound of one replay's GPU time for `n` elements per input, in µs: the DAG's
/// fixed latency plus its copies at full speed.
pub fn replay_floor_us(n: usize) -> f64 {
    MIN_REPLAY_US + n as f64 * BYTES_COPIED_PER_ELEMENT / COPY_BYTES_PER_US
}

/// A lower bound of the whole run's GPU time, in seconds: `reps` repeats of `iters` replays
/// of both versions of the DAG, plus the launch-overhead part (at least [`LAUNCH_REPS`]
/// repeats of both of its versions).
pub fn work_floor_seconds(n: usize, iters: u32, reps: usize) -> f64 {
    let dag_us = f64::from(iters) * reps.max(1) as f64 * 2.0 * replay_floor_us(n);
    let launch_us =
        reps.max(LAUNCH_REPS) as f64 * 2.0 * EMPTY_KERNELS as f64 * EMPTY_KERNEL_FLOOR_US;
    (dag_us + launch_us) / 1e6
}

/// Checks the amount of work without a GPU: `iters` (replays per repeat) within
/// 1..=[`MAX_ITERS`], and the whole run at most [`MAX_WORK_SECONDS`] by
/// [`work_floor_seconds`].
pub fn check_work(n: usize, iters: u32, reps: usize) -> Result<()> {
    ensure((1..=MAX_ITERS).contains(&iters), || {
        format!("--iters (replays) must be from 1 to {MAX_ITERS}, not {iters}")
    })?;
    let seconds = work_floor_seconds(n, iters, reps);
    ensure(seconds <= MAX_WORK_SECONDS, || {
        format!(
            "--iters {iters} x --reps {reps} x 2 versions of the DAG would take at least {seconds:.0} s of GPU time ({:.1} us or more a replay at --elements {n}); lower them to stay under {MAX_WORK_SECONDS:.0} s",
            replay_floor_us(n)
        )
    })
}

/// Checks the flags this demo reads, before the GPU is touched: `--elements`, `--iters`
/// and `--reps` (the others are not used here).
pub fn check_options(opts: &Options) -> Result<()> {
    let n = opts.elements.unwrap_or(DEFAULT_ELEMENTS);
    check_sizes(n)?;
    check_work(n, opts.iters.unwrap_or(DEFAULT_ITERS), opts.reps)
}

/// Validates the DAG's sizes before anything is allocated: the same checks as
/// [`check_sizes`], plus the device memory, which needs the GPU.
pub fn validate(gpu: &Gpu, n: usize) -> Result<()> {
    check_sizes(n)?;
    gpu.ensure_device_memory(
        buffer_bytes::<f32>(n, DEVICE_ARRAYS)?,
        &format!("{DEVICE_ARRAYS} arrays of {n} floats"),
    )
}

/// The three streams, the buffers and the fork/join events of the DAG: everything one
/// iteration enqueues, except where the result goes.
struct DagParts {
    a: Stream,
    b: Stream,
    c: Stream,
    input_a: LockedBuffer<f32>,
    input_b: LockedBuffer<f32>,
    dev_a: DeviceBuffer<f32>,
    dev_b: DeviceBuffer<f32>,
    prod_a: DeviceBuffer<f32>,
    prod_b: DeviceBuffer<f32>,
    dev_out: DeviceBuffer<f32>,
    fork: Event,
    join_a: Event,
    join_b: Event,
}

/// Driver calls `enqueue_dag` makes per iteration: 1 fork record, 2 waits, 2 copies in,
/// 2 producers, 2 join records, 2 waits, the combiner, the copy out.
pub const DAG_DRIVER_CALLS: usize = 13;

/// Enqueues one iteration of the DAG: the stream version runs this directly, and the graph
/// version captures exactly this. Events are made once, up front: creating them per
/// iteration would add driver calls to the stream version's cost that a careful CUDA C++
/// program does not pay.
///
/// # Safety
/// The copies read `p.input_a`/`p.input_b` and write `out` when the work runs (now, or at
/// every launch of a graph that captured them): those must stay alive, and `out` unread by
/// the host, until that work has completed.
unsafe fn enqueue_dag(gpu: &Gpu, p: &DagParts, out: &mut [f32], scale: f32) -> Result<()> {
    // Fork: A and B start after everything C has so far (in a capture, this is what makes
    // A and B join the capture begun on C).
    p.fork.record(&p.c)?;
    p.a.wait_event(&p.fork)?;
    p.b.wait_event(&p.fork)?;
    // SAFETY: this function's contract: `input_a`, `input_b` outlive the work.
    unsafe { p.a.copy_to_device(&p.input_a, &p.dev_a)? };
    // SAFETY: as above.
    unsafe { p.b.copy_to_device(&p.input_b, &p.dev_b)? };
    gpu.produce(&p.a, &p.dev_a, &p.prod_a, scale)?;
    gpu.produce(&p.b, &p.dev_b, &p.prod_b, scale)?;
    // Join: C waits for both producers (and, in a capture, A and B leave it again).
    p.join_a.record(&p.a)?;
    p.c.wait_event(&p.join_a)?;
    p.join_b.record(&p.b)?;
    p.c.wait_event(&p.join_b)?;
    gpu.combine(&p.c, &p.prod_a, &p.prod_b, &p.dev_out)?;
    // SAFETY: this function's contract: `out` outlives the copy and is not read meanwhile.
    unsafe { p.c.copy_to_host(&p.dev_out, out) }
}

/// Captures one iteration of the DAG on `parts.c` (nothing runs); its copy-out targets
/// `out`, which is `GraphDag::out_graph`.
fn capture_dag(
    gpu: &Gpu,
    parts: &DagParts,
    out: &mut [f32],
    mode: CaptureMode,
    scale: f32,
) -> Result<Graph> {
    capture(&parts.c, mode, |_| {
        // SAFETY: nothing runs during capture. The graph reads the inputs and writes
        // `out_graph` at each launch, and every launch goes through `GraphDag::run_graph`,
        // whose `&mut self` keeps them alive and unread until it has synchronized (on its
        // error path too, through `drain_on_error`).
        unsafe { enqueue_dag(gpu, parts, out, scale) }
    })
}

/// One iteration's (or one batch's) GPU time, from events on the stream, and the host time
/// spent issuing its work, in ms.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sample {
    pub gpu_ms: f64,
    pub issue_ms: f64,
}

/// The DAG with both versions' outputs, allocated once so that no allocation (which
/// synchronizes the device) happens inside a timed region.
pub struct GraphDag {
    pub n: usize,
    /// The scale the stream version uses and the graph was last captured with.
    pub scale: f32,
    /// Result of the stream version.
    pub out_streams: LockedBuffer<f32>,
    /// Result of the graph version (its captured copy-out writes here at every launch).
    pub out_graph: LockedBuffer<f32>,
    /// What the captured graph holds, once captured.
    pub nodes: NodeCounts,
    parts: DagParts,
    start: Event,
    end: Event,
    exec: Option<GraphExec>,
}

impl GraphDag {
    /// Validates `n` ([`validate`]) and allocates everything.
    pub fn new(gpu: &Gpu, n: usize, seed: u64) -> Result<GraphDag> {
        validate(gpu, n)?;
        GraphDag::allocate(n, seed)
    }

    /// Allocates everything for `n` elements, which the caller has validated.
    fn allocate(n: usize, seed: u64) -> Result<GraphDag> {
        let parts = DagParts {
            a: Stream::non_blocking("dag-a")?,
            b: Stream::non_blocking("dag-b")?,
            c: Stream::non_blocking("dag-c")?,
            input_a: pinned_from(&random_inputs(n, seed))?,
            input_b: pinned_from(&random_inputs(n, seed.wrapping_add(1)))?,
            dev_a: device(n)?,
            dev_b: device(n)?,
            prod_a: device(n)?,
            prod_b: device(n)?,
            dev_out: device(n)?,
            fork: Event::without_timing()?,
            join_a: Event::without_timing()?,
            join_b: Event::without_timing()?,
        };
        Ok(GraphDag {
            n,
            scale: SCALE,
            out_streams: pinned(n)?,
            out_graph: pinned(n)?,
            nodes: NodeCounts::default(),
            parts,
            start: Event::new()?,
            end: Event::new()?,
            exec: None,
        })
    }

    pub fn input_a(&self) -> &[f32] {
        &self.parts.input_a
    }

    pub fn input_b(&self) -> &[f32] {
        &self.parts.input_b
    }

    /// The stream C on which the DAG is captured and launched.
    pub fn stream_c(&self) -> &Stream {
        &self.parts.c
    }

    /// Version 1: one iteration with streams and events, then a synchronize on C.
    pub fn run_streams(&mut self, gpu: &Gpu) -> Result<Sample> {
        let (parts, out, scale) = (&self.parts, &mut self.out_streams, self.scale);
        let (start, end, c) = (&self.start, &self.end, &parts.c);
        drain_on_error(|| {
            start.record(c)?;
            let t = Instant::now();
            // SAFETY: the inputs and `out_streams` are owned by `self`, which this `&mut self`
            // call holds until the synchronize below has returned, or, should any call here
            // fail, until `drain_on_error` has synchronized the context: they outlive the
            // copies either way.
            unsafe { enqueue_dag(gpu, parts, out, scale)? };
            let issue_ms = t.elapsed().as_secs_f64() * 1e3;
            end.record(c)?;
            c.synchronize()?;
            Ok(Sample {
                gpu_ms: end.elapsed_ms(start)?,
                issue_ms,
            })
        })
    }

    /// Captures one iteration at `scale` into a graph (nothing runs). Its copy-out targets
    /// `out_graph`.
    pub fn capture(&mut self, gpu: &Gpu, mode: CaptureMode, scale: f32) -> Result<Graph> {
        capture_dag(gpu, &self.parts, &mut self.out_graph, mode, scale)
    }

    /// Captures the DAG at the current scale, instantiates it and uploads it. Returns the
    /// host time of the capture and of the instantiation, in ms.
    pub fn build_graph(&mut self, gpu: &Gpu, mode: CaptureMode) -> Result<(f64, f64)> {
        let (graph, capture_ms) = crate::timing::host_ms(|| self.capture(gpu, mode, self.scale));
        let graph = graph?;
        self.nodes = graph.node_counts()?;
        let (exec, instantiate_ms) = crate::timing::host_ms(|| graph.instantiate());
        let exec = exec?;
        exec.upload(&self.parts.c)?;
        self.exec = Some(exec);
        Ok((capture_ms, instantiate_ms))
    }

    /// Version 2: one launch of the executable graph on C, then a synchronize on C.
    pub fn run_graph(&mut self) -> Result<Sample> {
        let exec = self.exec.as_ref().ok_or_else(|| {
            Error::Internal("GraphDag::run_graph before build_graph: no executable graph".into())
        })?;
        let (start, end, c) = (&self.start, &self.end, &self.parts.c);
        drain_on_error(|| {
            start.record(c)?;
            let t = Instant::now();
            // SAFETY: the graph's copies read the inputs and write `out_graph`, its kernels
            // use the device buffers in `parts`: all owned by `self`, which this `&mut self`
            // call holds until the synchronize below, or, should a call after the launch
            // fail, until `drain_on_error` has synchronized the context: they are alive and
            // untouched by the host while the graph runs.
            unsafe { exec.launch(c)? };
            let issue_ms = t.elapsed().as_secs_f64() * 1e3;
            end.record(c)?;
            c.synchronize()?;
            Ok(Sample {
                gpu_ms: end.elapsed_ms(start)?,
                issue_ms,
            })
        })
    }

    /// Changes the producers' scale: re-captures the DAG with it and updates the executable
    /// graph from the new capture (in place when the driver allows it). Returns the path
    /// taken and the host ms of the re-capture and of the update. The graph must be built.
    pub fn set_scale(&mut self, gpu: &Gpu, scale: f32) -> Result<(UpdatePath, f64, f64)> {
        let Some(exec) = self.exec.as_mut() else {
            return Err(Error::Internal(
                "GraphDag::set_scale before build_graph: no executable graph".into(),
            ));
        };
        let (graph, capture_ms) = crate::timing::host_ms(|| {
            capture_dag(
                gpu,
                &self.parts,
                &mut self.out_graph,
                CaptureMode::Global,
                scale,
            )
        });
        let graph = graph?;
        let (path, update_ms) = crate::timing::host_ms(|| exec.update_from(&graph));
        // On an error the executable graph still has the old scale: so does `self`.
        let path = path?;
        self.scale = scale;
        Ok((path, capture_ms, update_ms))
    }

    /// Bit-for-bit equality of the two versions' outputs.
    pub fn check_bitwise(&self) -> Result<String> {
        ensure_bitwise_equal(
            "graph vs streams+events output",
            &self.out_graph,
            &self.out_streams,
        )?;
        Ok(format!("all {} elements identical", self.n))
    }

    /// `out` (one of the two outputs) against the CPU running the same per-element math.
    pub fn check_reference(&self, what: &str, out: &[f32], samples: usize) -> Result<String> {
        let (a, b, s) = (self.input_a(), self.input_b(), self.scale);
        let checked = ensure_close_to_reference(what, out, samples, |i| {
            combine_element(produce_element(a[i], s), produce_element(b[i], s))
        })?;
        Ok(format!(
            "{checked} sampled elements within tolerance (scale {s})"
        ))
    }
}

/// Median per-iteration figures of one version, in µs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PerIteration {
    /// GPU time of one iteration, event to event on C.
    pub gpu_us: Stats,
    /// Host time spent issuing one iteration's work (the launch cost graphs remove).
    pub issue_us: Stats,
    /// Host wall time of one iteration, issue plus synchronize.
    pub wall_us: Stats,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct DagMeasured {
    pub streams: PerIteration,
    pub graph: PerIteration,
}

/// Runs `iters` iterations of one version, `reps` times, and takes the medians of the
/// per-iteration means.
fn per_iteration(
    iters: u32,
    reps: usize,
    mut one: impl FnMut() -> Result<Sample>,
) -> Result<PerIteration> {
    let (mut gpu, mut issue, mut wall) = (vec![], vec![], vec![]);
    for _ in 0..reps.max(1) {
        let (mut g, mut i) = (0.0, 0.0);
        let t = Instant::now();
        for _ in 0..iters {
            let s = one()?;
            g += s.gpu_ms;
            i += s.issue_ms;
        }
        let w = t.elapsed().as_secs_f64() * 1e3;
        let per = 1e3 / iters as f64;
        gpu.push(g * per);
        issue.push(i * per);
        wall.push(w * per);
    }
    Ok(PerIteration {
        gpu_us: Stats::of(&gpu),
        issue_us: Stats::of(&issue),
        wall_us: Stats::of(&wall),
    })
}

/// Both versions, `reps` repeats of `iters` iterations each after one warm-up iteration,
/// alternating so that clock or thermal drift affects both alike. The graph must be built.
pub fn measure_dag(gpu: &Gpu, dag: &mut GraphDag, iters: u32, reps: usize) -> Result<DagMeasured> {
    let (streams, graph) = interleaved(
        dag,
        reps,
        |dag| per_iteration(iters, 1, || dag.run_streams(gpu)),
        |dag| per_iteration(iters, 1, || dag.run_graph()),
    )?;
    let merge = |v: &[PerIteration]| PerIteration {
        gpu_us: Stats::of_each(v, |p| p.gpu_us.median),
        issue_us: Stats::of_each(v, |p| p.issue_us.median),
        wall_us: Stats::of_each(v, |p| p.wall_us.median),
    };
    Ok(DagMeasured {
        streams: merge(&streams),
        graph: merge(&graph),
    })
}

/// `kernels` empty kernels on one stream, launched one by one or as one captured graph.
pub struct LaunchOverhead {
    pub kernels: usize,
    pub nodes: NodeCounts,
    stream: Stream,
    start: Event,
    end: Event,
    exec: GraphExec,
}

impl LaunchOverhead {
    /// Captures `kernels` empty launches on a non-blocking stream (global mode), instantiates
    /// the graph and uploads it.
    pub fn new(gpu: &Gpu, kernels: usize) -> Result<LaunchOverhead> {
        ensure((1..=100_000).contains(&kernels), || {
            format!("the launch-overhead graph takes 1 to 100000 kernels, not {kernels}")
        })?;
        let stream = Stream::non_blocking("launch-overhead")?;
        let graph = capture(&stream, CaptureMode::Global, |s| {
            (0..kernels).try_for_each(|_| gpu.empty(s))
        })?;
        let nodes = graph.node_counts()?;
        let exec = graph.instantiate()?;
        exec.upload(&stream)?;
        Ok(LaunchOverhead {
            kernels,
            nodes,
            stream,
            start: Event::new()?,
            end: Event::new()?,
            exec,
        })
    }

    /// `kernels` launches one by one: GPU time between events around all of them, and host
    /// time of the launch calls alone.
    pub fn run_stream(&self, gpu: &Gpu) -> Result<Sample> {
        self.start.record(&self.stream)?;
        let t = Instant::now();
        for _ in 0..self.kernels {
            gpu.empty(&self.stream)?;
        }
        let issue_ms = t.elapsed().as_secs_f64() * 1e3;
        self.end.record(&self.stream)?;
        self.end.synchronize()?;
        Ok(Sample {
            gpu_ms: self.end.elapsed_ms(&self.start)?,
            issue_ms,
        })
    }

    /// One launch of the graph of `kernels` empty kernels, measured the same way.
    pub fn run_graph(&self) -> Result<Sample> {
        self.start.record(&self.stream)?;
        let t = Instant::now();
        // SAFETY: the graph holds only empty kernels: it touches no memory.
        unsafe { self.exec.launch(&self.stream)? };
        let issue_ms = t.elapsed().as_secs_f64() * 1e3;
        self.end.record(&self.stream)?;
        self.end.synchronize()?;
        Ok(Sample {
            gpu_ms: self.end.elapsed_ms(&self.start)?,
            issue_ms,
        })
    }
}

/// Per-kernel medians in µs, named like the lines `cuda-reference/launch_overhead.cu` prints.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LaunchMeasured {
    pub stream_gpu_per_kernel_us: f64,
    pub stream_issue_per_kernel_us: f64,
    pub graph_gpu_per_kernel_us: f64,
    pub graph_issue_per_kernel_us: f64,
    pub graph_launch_issue_us: f64,
}

/// One warm-up of each, then `reps` alternating repeats; medians divided by the kernel count.
/// The same procedure, step for step, as `cuda-reference/launch_overhead.cu`.
pub fn measure_launch_overhead(
    gpu: &Gpu,
    lo: &LaunchOverhead,
    reps: usize,
) -> Result<LaunchMeasured> {
    let (by_stream, by_graph) =
        interleaved(&mut (), reps, |_| lo.run_stream(gpu), |_| lo.run_graph())?;
    let per_kernel =
        |v: &[Sample], f: fn(&Sample) -> f64| Stats::of_each(v, f).median * 1e3 / lo.kernels as f64;
    Ok(LaunchMeasured {
        stream_gpu_per_kernel_us: per_kernel(&by_stream, |s| s.gpu_ms),
        stream_issue_per_kernel_us: per_kernel(&by_stream, |s| s.issue_ms),
        graph_gpu_per_kernel_us: per_kernel(&by_graph, |s| s.gpu_ms),
        graph_issue_per_kernel_us: per_kernel(&by_graph, |s| s.issue_ms),
        graph_launch_issue_us: Stats::of_each(&by_graph, |s| s.issue_ms).median * 1e3,
    })
}

pub fn run(gpu: &Gpu, opts: &Options) -> Result<Report> {
    let n = opts.elements.unwrap_or(DEFAULT_ELEMENTS);
    let iters = opts.iters.unwrap_or(DEFAULT_ITERS);
    // Every check once, before anything runs: the DAG is allocated (unchecked) further down.
    validate(gpu, n)?;
    check_work(n, iters, opts.reps)?;
    // Launch overhead first, in a process state like its C++ twin's: before the DAG's
    // streams and graphs exist.
    let lo = LaunchOverhead::new(gpu, EMPTY_KERNELS)?;
    let lm = measure_launch_overhead(gpu, &lo, opts.reps.max(LAUNCH_REPS))?;
    let lo_nodes = lo.nodes;
    drop(lo);
    let mut dag = GraphDag::allocate(n, opts.seed)?;
    let (capture_ms, instantiate_ms) = dag.build_graph(gpu, CaptureMode::Global)?;
    let m = measure_dag(gpu, &mut dag, iters, opts.reps)?;
    let bitwise = dag.check_bitwise();
    let reference = dag.check_reference("graph output vs CPU", &dag.out_graph, 4096);

    // Change a kernel parameter: re-capture with the new scale, update the executable graph
    // (in place when the driver accepts it).
    let before: Vec<f32> = dag.out_graph.to_vec();
    let (path, recapture_ms, update_ms) = dag.set_scale(gpu, UPDATED_SCALE)?;
    dag.run_graph()?;
    dag.run_streams(gpu)?;
    let changed = ensure_bitwise_equal("", &before, &dag.out_graph)
        .is_err()
        .then(|| format!("the output changed with the scale ({SCALE} -> {UPDATED_SCALE})"))
        .ok_or_else(|| {
            Error::Verification(format!(
                "the output did not change after the update ({path})"
            ))
        });
    let updated_bitwise = dag.check_bitwise();
    let updated_reference =
        dag.check_reference("updated graph output vs CPU", &dag.out_graph, 4096);

    let mut r = Report::new(
        "graph",
        "CUDA graphs: a captured 3-stream DAG vs streams+events",
        &gpu.info.name,
    );
    r.param("elements", n)
        .param("iters (replays per rep)", iters)
        .param("reps", opts.reps)
        .param("graph", dag.nodes.to_string())
        .param("update", path.to_string());
    let (s, g) = (&m.streams, &m.graph);
    r.figure(
        "streams+events: GPU time / iteration",
        s.gpu_us.median,
        "us",
    )
    .figure(
        "streams+events: host issue / iteration",
        s.issue_us.median,
        "us",
    )
    .figure("streams+events: wall / iteration", s.wall_us.median, "us")
    .figure("graph: GPU time / iteration", g.gpu_us.median, "us")
    .figure(
        "graph: host issue (cuGraphLaunch) / iteration",
        g.issue_us.median,
        "us",
    )
    .figure("graph: wall / iteration", g.wall_us.median, "us")
    .figure("speed-up, wall", s.wall_us.median / g.wall_us.median, "x")
    .figure(
        "host issue saved / iteration",
        s.issue_us.median - g.issue_us.median,
        "us",
    )
    .figure("capture (once)", capture_ms * 1e3, "us")
    .figure("instantiate (once)", instantiate_ms * 1e3, "us")
    .figure("re-capture with new scale", recapture_ms * 1e3, "us")
    .figure("update of the executable graph", update_ms * 1e3, "us")
    .figure(
        "100 empty kernels by stream: GPU / kernel",
        lm.stream_gpu_per_kernel_us,
        "us",
    )
    .figure(
        "100 empty kernels by stream: issue / kernel",
        lm.stream_issue_per_kernel_us,
        "us",
    )
    .figure(
        "graph of 100 empty kernels: GPU / kernel",
        lm.graph_gpu_per_kernel_us,
        "us",
    )
    .figure(
        "graph of 100 empty kernels: issue / kernel",
        lm.graph_issue_per_kernel_us,
        "us",
    );
    r.detail("streams_per_iteration_us", m.streams)
        .detail("graph_per_iteration_us", m.graph)
        .detail("graph_nodes", dag.nodes)
        .detail("launch_overhead_us", lm)
        .detail("launch_overhead_graph_nodes", lo_nodes);
    r.check("graph == streams+events, bit for bit", bitwise);
    r.check("GPU vs CPU reference (approx)", reference);
    r.check("update changed the output", changed);
    r.check(
        "after update: graph == streams+events, bit for bit",
        updated_bitwise,
    );
    r.check(
        "after update: GPU vs CPU reference (approx)",
        updated_reference,
    );
    r.explain(format!(
        "Each streams+events iteration makes {DAG_DRIVER_CALLS} driver calls on 3 streams ({:.1} us of host time); the graph replays the same {} with one cuGraphLaunch ({:.1} us).",
        s.issue_us.median, dag.nodes, g.issue_us.median
    ));
    r.explain(explain_wall(&m, (capture_ms + instantiate_ms) * 1e3, &lm));
    r.explain(format!(
        "Launch overhead: an empty kernel costs {:.2} us of GPU time launched by stream and {:.2} us inside a graph (cuda-reference/launch_overhead.cu measures CUDA C++ the same way, for a same-GPU comparison).",
        lm.stream_gpu_per_kernel_us, lm.graph_gpu_per_kernel_us
    ));
    r.explain(explain_update(&path, update_ms * 1e3, instantiate_ms * 1e3));
    Ok(r)
}

/// The interpretation of the DAG's wall times: every claim in it is the outcome of a
/// comparison of the numbers it states. `setup_us`: capture plus instantiation.
pub fn explain_wall(m: &DagMeasured, setup_us: f64, lm: &LaunchMeasured) -> String {
    let (s, g) = (&m.streams, &m.graph);
    let (s_wall, g_wall) = (s.wall_us.median, g.wall_us.median);
    let (s_gpu, g_gpu) = (s.gpu_us.median, g.gpu_us.median);
    let (s_issue, g_issue) = (s.issue_us.median, g.issue_us.median);
    let saved_us = s_wall - g_wall;
    if saved_us > 0.0 {
        let why = if s_issue > s_gpu {
            format!("issuing the DAG by stream takes the host {s_issue:.1} us, more than its {s_gpu:.1} us of GPU time, so the GPU waits for the host call by call; the graph is submitted with one call ({g_issue:.1} us)")
        } else if g_gpu < s_gpu {
            format!("the graph's GPU time is shorter ({g_gpu:.1} against {s_gpu:.1} us): the driver prepared the whole DAG's work at instantiation")
        } else {
            format!("per iteration the host issues for {s_issue:.1} us with streams and {g_issue:.1} us with the graph, and the GPU works {s_gpu:.1} and {g_gpu:.1} us")
        };
        format!(
            "Wall time per iteration falls from {s_wall:.1} to {g_wall:.1} us: {why}. Capture and instantiation ({setup_us:.0} us) pay for themselves after {:.0} replays.",
            (setup_us / saved_us).ceil()
        )
    } else {
        let why = if s_gpu > s_issue {
            format!("the DAG's chain of dependent steps (copy in, produce, combine, copy out, with the cross-stream waits) keeps the GPU busy {s_gpu:.1} us, longer than the {s_issue:.1} us the host needs to issue it, so a shorter issue does not shorten the iteration")
        } else {
            format!("although issuing the DAG by stream takes the host {s_issue:.1} us, no less than its {s_gpu:.1} us of GPU time, the shorter issue did not show in the wall time of this run")
        };
        let host = if s_issue > g_issue {
            format!(
                "What the graph saved is host time: {:.1} us of CPU per iteration, free for other work.",
                s_issue - g_issue
            )
        } else {
            format!(
                "Nor did it save host time here ({g_issue:.1} us to launch against {s_issue:.1})."
            )
        };
        let (lo_stream, lo_graph) = (lm.stream_gpu_per_kernel_us, lm.graph_gpu_per_kernel_us);
        let tiny = if lo_graph < lo_stream {
            format!(" Where the host is the bottleneck, as with the {EMPTY_KERNELS} empty kernels below ({lo_stream:.2} against {lo_graph:.2} us of GPU time per kernel), the graph shortens the GPU's time too.")
        } else {
            String::new()
        };
        format!(
            "Here the graph does not shorten the iteration ({g_wall:.1} us against {s_wall:.1} with streams): {why}. {host}{tiny}"
        )
    }
}

/// The interpretation of the update, following the path the driver took.
pub fn explain_update(path: &UpdatePath, update_us: f64, instantiate_us: f64) -> String {
    match path {
        UpdatePath::InPlace => format!(
            "A new kernel parameter needed no new instantiation: the re-captured graph has the same shape, so cuGraphExecUpdate patched the executable graph in place in {update_us:.0} us (the first instantiation took {instantiate_us:.0} us)."
        ),
        UpdatePath::Reinstantiated { reason } => format!(
            "The driver refused to update the executable graph in place ({reason}), so it was instantiated again from the re-capture: {update_us:.0} us, against {instantiate_us:.0} us for the first instantiation."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_keep_producers_away_from_zero() {
        // a' = scale * sin(x) + 1 >= 1 - scale: no cancellation for the CPU check to trip on.
        for s in [SCALE, UPDATED_SCALE] {
            assert!(s > 0.0 && s < 1.0);
            for x in [-std::f32::consts::FRAC_PI_2, 0.0, 1.0, 3.0] {
                assert!(produce_element(x, s) >= 1.0 - s - 1e-6);
            }
        }
        assert_ne!(SCALE, UPDATED_SCALE);
    }

    /// Per-iteration medians (gpu, issue, wall), in µs.
    fn per(gpu: f64, issue: f64, wall: f64) -> PerIteration {
        PerIteration {
            gpu_us: Stats::of(&[gpu]),
            issue_us: Stats::of(&[issue]),
            wall_us: Stats::of(&[wall]),
        }
    }

    fn launch(stream_gpu: f64, graph_gpu: f64) -> LaunchMeasured {
        LaunchMeasured {
            stream_gpu_per_kernel_us: stream_gpu,
            stream_issue_per_kernel_us: 2.0,
            graph_gpu_per_kernel_us: graph_gpu,
            graph_issue_per_kernel_us: 0.05,
            graph_launch_issue_us: 5.0,
        }
    }

    #[test]
    fn a_gpu_bound_dag_is_explained_by_the_numbers_it_states() {
        // As measured on an H200: ~30 us of GPU time against ~12 us of host issue.
        let m = DagMeasured {
            streams: per(30.0, 12.0, 45.0),
            graph: per(30.0, 3.5, 46.0),
        };
        let text = explain_wall(&m, 100.0, &launch(2.8, 0.52));
        assert!(
            text.starts_with("Here the graph does not shorten the iteration (46.0 us against 45.0"),
            "{text}"
        );
        assert!(
            text.contains("keeps the GPU busy 30.0 us, longer than the 12.0 us"),
            "{text}"
        );
        assert!(text.contains("host time: 8.5 us"), "{text}");
        assert!(text.contains("(2.80 against 0.52 us"), "{text}");
        // Without a launch-overhead gain, no claim about it.
        let text = explain_wall(&m, 100.0, &launch(0.5, 0.6));
        assert!(!text.contains("empty kernels"), "{text}");
    }

    #[test]
    fn no_gpu_bound_claim_when_the_issue_takes_longer() {
        let m = DagMeasured {
            streams: per(10.0, 12.0, 30.0),
            graph: per(10.0, 13.0, 31.0),
        };
        let text = explain_wall(&m, 100.0, &launch(2.8, 0.52));
        assert!(text.contains("does not shorten"), "{text}");
        assert!(!text.contains("keeps the GPU busy"), "{text}");
        assert!(text.contains("12.0 us, no less than its 10.0 us"), "{text}");
        // The graph issued slower here: no host time saved, and the text says so.
        assert!(text.contains("Nor did it save host time"), "{text}");
        assert!(!text.contains("What the graph saved"), "{text}");
    }

    #[test]
    fn a_wall_time_gain_is_explained_by_what_was_measured() {
        let host_bound = DagMeasured {
            streams: per(10.0, 40.0, 50.0),
            graph: per(10.0, 4.0, 20.0),
        };
        let text = explain_wall(&host_bound, 300.0, &launch(2.8, 0.52));
        assert!(
            text.starts_with("Wall time per iteration falls from 50.0 to 20.0 us"),
            "{text}"
        );
        assert!(text.contains("GPU waits for the host"), "{text}");
        assert!(text.contains("after 10 replays"), "{text}");
        let gpu_faster = DagMeasured {
            streams: per(40.0, 10.0, 50.0),
            graph: per(30.0, 4.0, 45.0),
        };
        let text = explain_wall(&gpu_faster, 300.0, &launch(2.8, 0.52));
        assert!(
            text.contains("GPU time is shorter (30.0 against 40.0"),
            "{text}"
        );
        assert!(!text.contains("GPU waits"), "{text}");
        let neither = DagMeasured {
            streams: per(40.0, 10.0, 50.0),
            graph: per(41.0, 4.0, 45.0),
        };
        let text = explain_wall(&neither, 300.0, &launch(2.8, 0.52));
        assert!(
            !text.contains("GPU waits") && !text.contains("shorter"),
            "{text}"
        );
        assert!(text.contains("the GPU works 40.0 and 41.0 us"), "{text}");
    }

    #[test]
    fn the_update_text_follows_the_path_taken() {
        let in_place = explain_update(&UpdatePath::InPlace, 12.0, 80.0);
        assert!(
            in_place.contains("patched the executable graph in place in 12 us"),
            "{in_place}"
        );
        assert!(!in_place.contains("refused"), "{in_place}");
        let again = explain_update(
            &UpdatePath::Reinstantiated {
                reason: "the topology changed".into(),
            },
            70.0,
            80.0,
        );
        assert!(
            again.contains("refused") && again.contains("the topology changed"),
            "{again}"
        );
        assert!(!again.contains("no new instantiation"), "{again}");
    }

    #[test]
    fn the_default_work_is_far_below_the_bound_and_hostile_work_is_refused() {
        let defaults = work_floor_seconds(DEFAULT_ELEMENTS, DEFAULT_ITERS, 10);
        assert!(defaults > 0.1 && defaults < 3.0, "{defaults}");
        assert!(check_work(DEFAULT_ELEMENTS, DEFAULT_ITERS, 10).is_ok());
        // The floor grows with the copies: 64M elements copy 768 MB a replay.
        assert!(replay_floor_us(1 << 26) > 10_000.0);
        assert!(check_work(1 << 26, DEFAULT_ITERS, 10).is_err());
        for iters in [0, MAX_ITERS + 1, u32::MAX] {
            let e = check_work(DEFAULT_ELEMENTS, iters, 1).unwrap_err();
            assert!(e.to_string().contains("--iters"), "{e}");
        }
        let e = check_work(DEFAULT_ELEMENTS, MAX_ITERS, 10_000).unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{e}");
        assert!(
            e.to_string().contains("60 s") && !e.to_string().contains('\n'),
            "{e}"
        );
        // reps 0 runs once, like the measurement loops.
        assert_eq!(
            work_floor_seconds(DEFAULT_ELEMENTS, 10, 0),
            work_floor_seconds(DEFAULT_ELEMENTS, 10, 1)
        );
    }

    #[test]
    fn per_iteration_divides_by_the_iteration_count() {
        let mut calls = 0;
        let p = per_iteration(4, 3, || {
            calls += 1;
            Ok(Sample {
                gpu_ms: 0.002,
                issue_ms: 0.001,
            })
        })
        .unwrap();
        assert_eq!(calls, 12);
        assert!((p.gpu_us.median - 2.0).abs() < 1e-9, "{:?}", p.gpu_us);
        assert!((p.issue_us.median - 1.0).abs() < 1e-9, "{:?}", p.issue_us);
        assert_eq!(p.gpu_us.count, 3);
    }

    #[test]
    fn per_iteration_stops_at_the_first_error() {
        let mut calls = 0;
        let r = per_iteration(5, 2, || {
            calls += 1;
            if calls == 3 {
                Err(Error::Verification("boom".into()))
            } else {
                Ok(Sample {
                    gpu_ms: 1.0,
                    issue_ms: 1.0,
                })
            }
        });
        assert!(matches!(r, Err(Error::Verification(_))));
        assert_eq!(calls, 3);
    }
}
