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
use crate::demos::Options;
use crate::error::{ensure, Error, Result};
use crate::gpu::Gpu;
use crate::graph::{capture, CaptureMode, Graph, GraphExec, NodeCounts, UpdatePath};
use crate::memory::{device, pinned, pinned_from};
use crate::report::Report;
use crate::stream::{Event, Stream};
use crate::timing::Stats;

pub const SUMMARY: &str = "a multi-stream DAG replayed with streams+events vs a captured CUDA graph; update in place; launch overhead";
pub const FLAGS: &str = "--elements (65536 per input) --iters (1000 replays of the DAG per rep) --reps (10; the launch-overhead part uses at least 20)";

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

/// Validates sizes before anything is allocated.
pub fn validate(gpu: &Gpu, n: usize, iters: u32) -> Result<()> {
    ensure(n > 0, || "--elements must be at least 1".into())?;
    ensure(n <= u32::MAX as usize, || {
        format!(
            "--elements {n} is more than the kernels' u32 index allows ({})",
            u32::MAX
        )
    })?;
    ensure((1..=MAX_ITERS).contains(&iters), || {
        format!("--iters (replays) must be from 1 to {MAX_ITERS}, not {iters}")
    })?;
    let bytes = n
        .checked_mul(DEVICE_ARRAYS * std::mem::size_of::<f32>())
        .ok_or_else(|| Error::InvalidInput(format!("--elements {n} is too large")))?;
    gpu.ensure_device_memory(bytes, &format!("{DEVICE_ARRAYS} arrays of {n} floats"))
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

/// Driver calls [`enqueue_dag`] makes per iteration: 1 fork record, 2 waits, 2 copies in,
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
    pub fn new(gpu: &Gpu, n: usize, seed: u64) -> Result<GraphDag> {
        validate(gpu, n, 1)?;
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
        let c = &self.parts.c;
        self.start.record(c)?;
        let t = Instant::now();
        // SAFETY: the inputs and `out_streams` are owned by `self`, which this `&mut self`
        // call holds until the synchronize below has returned, so they outlive the copies.
        unsafe { enqueue_dag(gpu, &self.parts, &mut self.out_streams, self.scale)? };
        let issue_ms = t.elapsed().as_secs_f64() * 1e3;
        self.end.record(c)?;
        c.synchronize()?;
        Ok(Sample {
            gpu_ms: self.end.elapsed_ms(&self.start)?,
            issue_ms,
        })
    }

    /// Captures one iteration at `scale` into a graph (nothing runs). Its copy-out targets
    /// `out_graph`.
    pub fn capture(&mut self, gpu: &Gpu, mode: CaptureMode, scale: f32) -> Result<Graph> {
        let (parts, out) = (&self.parts, &mut self.out_graph);
        capture(&parts.c, mode, |_| {
            // SAFETY: nothing runs during capture; the graph reads the inputs and writes
            // `out_graph` at each launch, and every launch goes through `run_graph`, whose
            // `&mut self` keeps them alive and unread until it has synchronized.
            unsafe { enqueue_dag(gpu, parts, out, scale) }
        })
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
            Error::InvalidInput("the DAG has no graph yet: call build_graph first".into())
        })?;
        let c = &self.parts.c;
        self.start.record(c)?;
        let t = Instant::now();
        // SAFETY: the graph's copies read the inputs and write `out_graph`, its kernels use
        // the device buffers in `parts`: all owned by `self`, which this `&mut self` call
        // holds until the synchronize below, so they are alive and untouched meanwhile.
        unsafe { exec.launch(c)? };
        let issue_ms = t.elapsed().as_secs_f64() * 1e3;
        self.end.record(c)?;
        c.synchronize()?;
        Ok(Sample {
            gpu_ms: self.end.elapsed_ms(&self.start)?,
            issue_ms,
        })
    }

    /// Changes the producers' scale: re-captures the DAG with it and updates the executable
    /// graph from the new capture (in place when the driver allows it). Returns the path
    /// taken and the host ms of the re-capture and of the update.
    pub fn set_scale(&mut self, gpu: &Gpu, scale: f32) -> Result<(UpdatePath, f64, f64)> {
        if self.exec.is_none() {
            self.scale = scale;
            self.build_graph(gpu, CaptureMode::Global)?;
            return Ok((
                UpdatePath::Reinstantiated {
                    reason: "there was no executable graph yet".into(),
                },
                0.0,
                0.0,
            ));
        }
        let (graph, capture_ms) =
            crate::timing::host_ms(|| self.capture(gpu, CaptureMode::Global, scale));
        let graph = graph?;
        let exec = self
            .exec
            .as_mut()
            .ok_or_else(|| Error::InvalidInput("no executable graph".into()))?;
        let (path, update_ms) = crate::timing::host_ms(|| exec.update_from(&graph));
        self.scale = scale;
        Ok((path?, capture_ms, update_ms))
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
    dag.run_streams(gpu)?;
    dag.run_graph()?;
    let (mut streams, mut graph) = (vec![], vec![]);
    for _ in 0..reps.max(1) {
        streams.push(per_iteration(iters, 1, || dag.run_streams(gpu))?);
        graph.push(per_iteration(iters, 1, || dag.run_graph())?);
    }
    let merge = |v: &[PerIteration]| PerIteration {
        gpu_us: Stats::of(&v.iter().map(|p| p.gpu_us.median).collect::<Vec<_>>()),
        issue_us: Stats::of(&v.iter().map(|p| p.issue_us.median).collect::<Vec<_>>()),
        wall_us: Stats::of(&v.iter().map(|p| p.wall_us.median).collect::<Vec<_>>()),
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
    lo.run_stream(gpu)?;
    lo.run_graph()?;
    let (mut sg, mut si, mut gg, mut gi) = (vec![], vec![], vec![], vec![]);
    for _ in 0..reps.max(1) {
        let s = lo.run_stream(gpu)?;
        sg.push(s.gpu_ms);
        si.push(s.issue_ms);
        let g = lo.run_graph()?;
        gg.push(g.gpu_ms);
        gi.push(g.issue_ms);
    }
    let per_kernel = |v: &[f64]| Stats::of(v).median * 1e3 / lo.kernels as f64;
    Ok(LaunchMeasured {
        stream_gpu_per_kernel_us: per_kernel(&sg),
        stream_issue_per_kernel_us: per_kernel(&si),
        graph_gpu_per_kernel_us: per_kernel(&gg),
        graph_issue_per_kernel_us: per_kernel(&gi),
        graph_launch_issue_us: Stats::of(&gi).median * 1e3,
    })
}

/// Checks the flags this demo reads, before the GPU is touched.
pub fn check_options(opts: &Options) -> Result<()> {
    super::check_common(opts)
}

pub fn run(gpu: &Gpu, opts: &Options) -> Result<Report> {
    let n = opts.elements.unwrap_or(DEFAULT_ELEMENTS);
    let iters = opts.iters.unwrap_or(DEFAULT_ITERS);
    validate(gpu, n, iters)?;
    // Launch overhead first, in a process state like its C++ twin's: before the DAG's
    // streams and graphs exist.
    let lo = LaunchOverhead::new(gpu, EMPTY_KERNELS)?;
    let lm = measure_launch_overhead(gpu, &lo, opts.reps.max(LAUNCH_REPS))?;
    let lo_nodes = lo.nodes;
    drop(lo);
    let mut dag = GraphDag::new(gpu, n, opts.seed)?;
    let (capture_ms, instantiate_ms) = dag.build_graph(gpu, CaptureMode::Global)?;
    let m = measure_dag(gpu, &mut dag, iters, opts.reps)?;
    let bitwise = dag.check_bitwise();
    let reference = dag.check_reference("graph output vs CPU", &dag.out_graph, 4096);

    // Change a kernel parameter: re-capture with the new scale, update the graph in place.
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
    let setup_us = (capture_ms + instantiate_ms) * 1e3;
    let saved_us = s.wall_us.median - g.wall_us.median;
    r.explain(if saved_us > 0.0 {
        format!(
            "Wall time per iteration falls from {:.1} to {:.1} us: with streams the GPU waits while the host feeds it call by call, the graph's work is submitted at once. Capture and instantiation ({setup_us:.0} us) pay for themselves after {:.0} replays.",
            s.wall_us.median,
            g.wall_us.median,
            (setup_us / saved_us).ceil()
        )
    } else {
        format!(
            "Here the graph does not shorten the iteration ({:.1} us against {:.1} with streams): the DAG's chain of dependent steps (copy in, produce, combine, copy out, with the cross-stream waits) keeps the GPU busy {:.1} us, longer than the {:.1} us the host needs to issue it, so the GPU never waited for the host. What the graph saved is host time: {:.1} us of CPU per iteration, free for other work. Where the host is the bottleneck, as with the 100 tiny kernels below, the graph cuts the wall time too.",
            g.wall_us.median,
            s.wall_us.median,
            s.gpu_us.median,
            s.issue_us.median,
            s.issue_us.median - g.issue_us.median
        )
    });
    r.explain(format!(
        "Launch overhead: an empty kernel costs {:.2} us of GPU time launched by stream and {:.2} us inside a graph (CUDA C++ on an H200: about 3.1 and 0.69 us; cuda-reference/launch_overhead.cu measures it the same way).",
        lm.stream_gpu_per_kernel_us, lm.graph_gpu_per_kernel_us
    ));
    r.explain(format!(
        "A new kernel parameter needs no new instantiation: the re-captured graph has the same shape, so the executable graph was {path} in {:.0} us.",
        update_ms * 1e3
    ));
    Ok(r)
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
