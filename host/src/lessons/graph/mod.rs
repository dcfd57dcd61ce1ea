//! # CUDA graphs: capture a multi-stream DAG, replay it, update it
//!
//! Every copy and kernel enqueued on a stream costs the host a driver call: this DAG over
//! three streams costs 13 each time it runs. Record it once into a graph, let the driver
//! prepare it once (instantiate), then submit the whole DAG with one call (launch). Stream A
//! copies input a in and runs a producer (`a' = scale * sin(a) + 1`), B the same with b, and
//! C waits for both, combines them (`out = a' * b' + a'`) and copies the result back.
//!
//! The seed technique is CUDA C++'s stream capture with an event fork/join (Programming
//! Guide, "Creating a Graph Using Stream Capture", "Cross-stream Dependencies"):
//!
//! ```text
//! cudaStreamBeginCapture(c, cudaStreamCaptureModeGlobal);
//! cudaEventRecord(fork, c);  cudaStreamWaitEvent(a, fork);  cudaStreamWaitEvent(b, fork);
//! cudaMemcpyAsync(d_a, h_a, bytes, cudaMemcpyHostToDevice, a);  produce<<<g, 256, 0, a>>>(d_a, p_a, n, scale);
//! cudaMemcpyAsync(d_b, h_b, bytes, cudaMemcpyHostToDevice, b);  produce<<<g, 256, 0, b>>>(d_b, p_b, n, scale);
//! cudaEventRecord(join_a, a);  cudaStreamWaitEvent(c, join_a);   // and the same for b
//! combine<<<g, 256, 0, c>>>(p_a, p_b, d_out, n);
//! cudaMemcpyAsync(h_out, d_out, bytes, cudaMemcpyDeviceToHost, c);
//! cudaStreamEndCapture(c, &graph);  cudaGraphInstantiate(&exec, graph, 0);
//! for (...) { cudaGraphLaunch(exec, c); cudaStreamSynchronize(c); }
//! cudaGraphExecUpdate(exec, graph2, &info);  // graph2: captured with a new scale
//! ```
//!
//! In Rust: `capture(&c, CaptureMode::Global, |_| dag.enqueue(..))` records the very function
//! the stream version runs; then `graph.instantiate()`, `exec.launch(&c)`, and for the new
//! scale `exec.update_from(&graph2)`. The last two versions time 100 empty kernels launched
//! one by one against one graph of them, as `cuda-reference/launch_overhead.cu` does in C++.
//!
//! The bound: a graph removes host work, not GPU work. Per replay it saves at most the
//! stream version's issue time less one `cuGraphLaunch`, and the wall time shows that only
//! where the host, not the GPU, is the slower of the two. Where it starts to win is measured
//! on longer chains of kernels per side ([`sweep`]; `--sweep`: sizes and copies too).
pub mod crossover;
pub mod replay;
pub mod sweep;

use kernels_gpu::math::{combine_element, produce_element};
use serde::Serialize;

use crate::lab::harness::budget::MAX_ELEMENTS;
use crate::lab::harness::data::{ensure_bitwise_equal, random_inputs};
use crate::lab::harness::stats::host_ms;
use crate::lab::record::plot::Plot;
use crate::lab::{args, t, Checks, Drawing, Lesson, Measured, Plan, Report, Sample, WorkModel};
use crate::runtime::graph::Instantiate::Plain;
use crate::runtime::graph::{
    capture, CaptureMode, CaptureMode::Global, Graph, GraphExec, UpdatePath,
};
use crate::runtime::memory::copy_to_host_sync;
use crate::runtime::stream::{fork, join};
use crate::runtime::{DeviceBuffer, Error, Event, Gpu, HostBuffer, Result, Stream};
use replay::{interpret, Built, Rounds, Updated};
use sweep::{build, shapes, Copies, Shape, Sweep};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Floats per input [1..=4294967295]. Try 16777216: the GPU work then dwarfs the issue.
    #[arg(long, default_value_t = 1 << 16, value_parser = args::whole(1usize..=MAX_ELEMENTS))]
    pub elements: usize,
    /// Replays of the DAG per repeat, each version [1..=1000000]. Try 10 to see the noise.
    #[arg(long, default_value_t = 1000, value_parser = args::whole(1u32..=1_000_000))]
    pub iters: u32,
    /// Where does the graph win? Without: chains of 1 to 64 kernels per side at --elements.
    /// With: 1K to 16M elements x chains of 1 to 256 x memcpy, copy kernels or no copies.
    #[arg(long)]
    pub sweep: bool,
}

/// The producers' scale before and after the update. Both below 1, so `scale * sin(x) + 1`
/// stays in [1 - scale, 1 + scale], away from 0: no cancellation that would turn the few-ulp
/// difference between GPU and CPU `sin` into a large relative error.
pub const SCALE: f32 = 0.5;
pub const UPDATED_SCALE: f32 = 0.75;
/// Empty kernels in each launch-overhead version (and nodes in its graph).
pub const EMPTY_KERNELS: usize = 100;
/// Driver calls one replay makes by stream: 1 fork record, 2 waits, 2 copies in,
/// 2 producers, 2 join records, 2 waits, the combiner, the copy out.
pub const DAG_DRIVER_CALLS: usize = 13;

/// Each later step of a side's chain (the sweep's longer chains): `x * STEP.0 + STEP.1`,
/// which keeps the producers' [0.5, 1.5] inside [1, 1.5], so the CPU check never meets
/// cancellation.
pub const STEP: (f32, f32) = (0.5, 0.75);

/// Where the stream version and the graph copy the result: `Dag::outs[BY_STREAMS]` and
/// `Dag::outs[BY_GRAPH]`, so that the check can hold one against the other.
pub const BY_STREAMS: usize = 0;
pub const BY_GRAPH: usize = 1;

/// The DAG's streams, buffers and events: everything one replay enqueues, sized for the
/// largest shape it runs (a shape uses the first `elements` of each buffer). Side i (A, B)
/// copies `inputs[i]` to `devs[i]` and produces `prods[i]` (then the rest of its chain);
/// C combines them into `dev_out` and copies that to `outs[BY_STREAMS]` or `outs[BY_GRAPH]`.
/// The lesson runs one shape of it ([`seed_shape`]), the sweep ([`sweep`]) many.
struct Dag {
    sides: [Stream; 2],
    c: Stream,
    inputs: [HostBuffer<f32>; 2],
    devs: [DeviceBuffer<f32>; 2],
    prods: [DeviceBuffer<f32>; 2],
    dev_out: DeviceBuffer<f32>,
    outs: [HostBuffer<f32>; 2],
    fork: Event,
    joins: [Event; 2],
}

/// The seed's DAG at `elements`: one kernel a side, memcpy in and out.
pub fn seed_shape(elements: usize) -> Shape {
    Shape { elements, chain: 1, copies: Copies::Memcpy }
}

impl Dag {
    /// Streams `{prefix}-a`, `-b`, `-c`, buffers of `n` floats, inputs from `seed`.
    fn new(gpu: &Gpu, prefix: &str, n: usize, seed: u64) -> Result<Dag> {
        let stream = |side: &str| Stream::non_blocking(gpu, format!("{prefix}-{side}"));
        let zeroed = || DeviceBuffer::zeroed(gpu, n);
        let event = || Event::without_timing(gpu);
        let input = |seed| HostBuffer::pinned_from(gpu, &random_inputs(n, seed));
        Ok(Dag {
            sides: [stream("a")?, stream("b")?],
            c: stream("c")?,
            inputs: [input(seed)?, input(seed.wrapping_add(1))?],
            devs: [zeroed()?, zeroed()?],
            prods: [zeroed()?, zeroed()?],
            dev_out: zeroed()?,
            outs: [HostBuffer::pinned(gpu, n)?, HostBuffer::pinned(gpu, n)?],
            fork: event()?,
            joins: [event()?, event()?],
        })
    }

    /// One replay of `shape` at `scale`, its result to `outs[out]`: the stream version runs
    /// this, the graph version captures exactly this. The events exist once: creating them
    /// per replay would add driver calls that a careful CUDA C++ program does not pay.
    fn enqueue(&self, gpu: &Gpu, shape: &Shape, scale: f32, out: usize) -> Result<()> {
        let r = 0..shape.elements;
        let sides = self.sides.each_ref();
        // A and B start after everything on C so far: in a capture, this makes them join it.
        fork(&self.fork, &self.c, &sides)?;
        for (i, s) in sides.into_iter().enumerate() {
            let (input, dev) = (self.inputs[i].slice(r.clone())?, self.devs[i].slice(r.clone())?);
            match shape.copies {
                Copies::Memcpy => s.copy_to_device(input, dev)?,
                Copies::Kernels => gpu.copy_kernel_to_device(s, input, dev)?,
                Copies::None => {}
            }
            let prod = self.prods[i].slice(r.clone())?;
            gpu.produce(s, self.devs[i].slice(r.clone())?, prod, scale)?;
            for _ in 1..shape.chain {
                gpu.scale(s, self.prods[i].slice(r.clone())?, STEP.0, STEP.1)?;
            }
        }
        // C waits for both sides (in a capture, A and B leave it again).
        join(&self.joins, &self.c, &sides)?;
        let (a, b) = (self.prods[0].slice(r.clone())?, self.prods[1].slice(r.clone())?);
        gpu.combine(&self.c, a, b, self.dev_out.slice(r.clone())?)?;
        let (dev_out, host_out) = (self.dev_out.slice(r.clone())?, self.outs[out].slice(r)?);
        match shape.copies {
            Copies::Memcpy => self.c.copy_to_host(dev_out, host_out),
            Copies::Kernels => gpu.copy_kernel_to_host(&self.c, dev_out, host_out),
            Copies::None => Ok(()),
        }
    }

    /// One replay of `shape` at `scale`, captured on C in `mode` (nothing runs); it writes
    /// `outs[BY_GRAPH]`.
    fn capture(&self, gpu: &Gpu, mode: CaptureMode, shape: &Shape, scale: f32) -> Result<Graph> {
        capture(&self.c, mode, |_| self.enqueue(gpu, shape, scale, BY_GRAPH))
    }

    /// The result of the last replay of `shape` that wrote `outs[out]`, after it.
    fn result(&self, shape: &Shape, out: usize) -> Result<Vec<f32>> {
        let n = shape.elements;
        if shape.copies != Copies::None {
            return Ok(self.outs[out].read()?[..n].to_vec());
        }
        self.c.synchronize()?;
        let mut host = vec![0.0; n];
        copy_to_host_sync(self.dev_out.slice(0..n)?, &mut host)?;
        Ok(host)
    }
}

pub struct GraphDag {
    iters: u32,
    /// The scale the stream version uses and the graph was last captured with.
    scale: f32,
    /// The seed's DAG at `--elements` ([`seed_shape`]).
    shape: Shape,
    dag: Dag,
    exec: GraphExec,
    pub built: Built,
    pub updated: Option<Updated>,
    /// The launch-overhead versions' stream, and their graph of empty kernels.
    empty: Stream,
    empty_exec: GraphExec,
    pub empty_built: Built,
    rounds: Rounds,
    /// The DAG's other shapes: versions 4 and up.
    pub sweep: Sweep,
}

/// The DAG's versions, then the launch-overhead pair, then the sweep's (see
/// [`sweep::names`]), in [`Lesson::versions`]' order.
pub const STREAMS_EVENTS: usize = 0;
pub const GRAPH: usize = 1;
pub const EMPTY_BY_STREAM: usize = 2;
pub const EMPTY_GRAPH: usize = 3;
pub const FIRST_SWEPT: usize = 4;

impl GraphDag {
    /// `--iters` replays issued call by call on the three streams.
    fn streams_events(&self, gpu: &Gpu) -> Result<Sample> {
        let (d, scale) = (&self.dag, self.scale);
        let replay = || d.enqueue(gpu, &self.shape, scale, BY_STREAMS);
        self.rounds.run(self.iters, &d.c, replay)
    }

    /// `--iters` replays, each one `cuGraphLaunch` on C.
    fn graph(&self) -> Result<Sample> {
        let (c, exec) = (&self.dag.c, &self.exec);
        self.rounds.run(self.iters, c, || exec.launch(c))
    }

    /// [`EMPTY_KERNELS`] empty kernels launched one by one: the launch overhead.
    fn empty_by_stream(&self, gpu: &Gpu) -> Result<Sample> {
        let s = &self.empty;
        self.rounds.run(1, s, || (0..EMPTY_KERNELS).try_for_each(|_| gpu.empty(s)))
    }

    /// The same kernels as one graph: one launch.
    fn empty_graph(&self) -> Result<Sample> {
        let s = &self.empty;
        self.rounds.run(1, s, || self.empty_exec.launch(s))
    }

    /// Changes the producers' scale: re-captures the DAG with it and updates the executable
    /// graph from the re-capture (in place when the driver accepts it). On an error the
    /// executable graph keeps the old scale, and so does the stream version.
    pub fn update(&mut self, gpu: &Gpu, scale: f32) -> Result<Updated> {
        let d = &self.dag;
        let (graph, recapture_ms) = host_ms(|| d.capture(gpu, Global, &self.shape, scale));
        let (path, update_ms) = host_ms(|| self.exec.update_from(&graph?));
        let updated = Updated { path: path?, recapture_ms, update_ms };
        self.scale = scale;
        Ok(updated)
    }

    /// Captures the DAG again in `mode` at the current scale, in place of its graph.
    pub fn rebuild(&mut self, gpu: &Gpu, mode: CaptureMode) -> Result<()> {
        let (d, scale) = (&self.dag, self.scale);
        (self.exec, self.built) =
            build(&d.c, Plain, true, || d.capture(gpu, mode, &self.shape, scale))?;
        Ok(())
    }

    /// Inputs a and b, then the outputs of the graph and of the stream version.
    pub fn buffers(&self) -> Result<Vec<Vec<f32>>> {
        let d = &self.dag;
        let all = [&d.inputs[0], &d.inputs[1], &d.outs[BY_GRAPH], &d.outs[BY_STREAMS]];
        all.into_iter().map(HostBuffer::to_vec).collect()
    }

    /// The graph's output against the stream version's, and against the CPU.
    fn check_outputs(&self, checks: &mut Checks, prefix: &str) -> Result<()> {
        let d = &self.dag;
        let (a, b) = (d.inputs[0].read()?, d.inputs[1].read()?);
        let graph = d.outs[BY_GRAPH].read()?;
        let bitwise = format!("{prefix}graph == streams+events, bit for bit");
        checks.bitwise(&bitwise, &graph, &d.outs[BY_STREAMS].read()?);
        let (approx, s) = (format!("{prefix}GPU vs CPU reference (approx)"), self.scale);
        checks.approx(&approx, &graph, 4096, |i| {
            combine_element(produce_element(a[i], s), produce_element(b[i], s))
        });
        Ok(())
    }
}

impl Lesson for GraphDag {
    const NAME: &'static str = "graph";
    const SUMMARY: &'static str = "a multi-stream DAG replayed with streams+events vs a captured CUDA graph; update in place; launch overhead";
    const DRAWING: Drawing = Drawing { repeats: Some(("iters", "replay")), ..Drawing::PLAIN };
    type Args = Args;

    fn versions(a: &Args) -> Vec<String> {
        let k = EMPTY_KERNELS;
        let by_stream = format!("{k} empty kernels by stream");
        let graph = format!("graph of {k} empty kernels");
        let mine = ["streams+events".into(), "graph".into(), by_stream, graph];
        mine.into_iter().chain(sweep::names(&shapes(a.sweep, a.elements))).collect()
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        let n = a.elements;
        // A replay with nothing overlapping: three copies and three light kernels.
        let replay = 3.0 * (model.copy_ms(n) + model.elementwise_ms(n));
        let empty = 2.0 * EMPTY_KERNELS as f64 * model.op_us * 1e-3;
        let (most, sweep_ms) = sweep::plan(&shapes(a.sweep, a.elements), a.iters, model);
        let ms = 2.0 * f64::from(a.iters) * replay + empty + sweep_ms;
        Ok(Plan::new()
            // Pinned: inputs, outputs, the output kept across the update; then the sweep's.
            .host::<f32>(n, 5)?
            .host::<f32>(most, 4)?
            .device::<f32>(n, 5)?
            .device::<f32>(most, 5)?
            .work(ms, "--elements x --iters"))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<GraphDag> {
        let n = a.elements;
        let stream = |name: &str| Stream::non_blocking(gpu, name);
        // The launch-overhead graph first, as its C++ twin builds it before anything else.
        let empty = stream("launch-overhead")?;
        let kernels = |s: &Stream| (0..EMPTY_KERNELS).try_for_each(|_| gpu.empty(s));
        let (empty_exec, empty_built) =
            build(&empty, Plain, true, || capture(&empty, Global, kernels))?;
        let dag = Dag::new(gpu, "dag", n, seed)?;
        let shape = seed_shape(n);
        let (exec, built) = build(&dag.c, Plain, true, || dag.capture(gpu, Global, &shape, SCALE))?;
        Ok(GraphDag {
            iters: a.iters,
            scale: SCALE,
            shape,
            dag,
            exec,
            built,
            updated: None,
            empty,
            empty_exec,
            empty_built,
            rounds: Rounds::new(gpu)?,
            sweep: Sweep::new(gpu, shapes(a.sweep, a.elements), a.iters, seed)?,
        })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        match v {
            STREAMS_EVENTS => self.streams_events(gpu),
            GRAPH => self.graph(),
            EMPTY_BY_STREAM => self.empty_by_stream(gpu),
            EMPTY_GRAPH => self.empty_graph(),
            _ => self.sweep.run(gpu, v - FIRST_SWEPT),
        }
    }

    fn streams(&self) -> Vec<&Stream> {
        let d = &self.dag;
        vec![&d.sides[0], &d.sides[1], &d.c, &self.empty]
    }

    fn verify(&mut self, gpu: &Gpu, _m: &Measured, checks: &mut Checks) -> Result<()> {
        self.check_outputs(checks, "")?;
        // A new kernel parameter (back again on a second call), then one run of each version.
        let (before, old) = (self.dag.outs[BY_GRAPH].to_vec()?, self.scale);
        let updated = self.update(gpu, if old == SCALE { UPDATED_SCALE } else { SCALE })?;
        let (d, new) = (&self.dag, self.scale);
        self.exec.launch(&d.c)?;
        d.enqueue(gpu, &self.shape, new, BY_STREAMS)?;
        let changed = ensure_bitwise_equal("", &before, &d.outs[BY_GRAPH].read()?).is_err();
        let how = match &updated.path {
            UpdatePath::InPlace => t!("error.graph.updated_in_place"),
            UpdatePath::Reinstantiated { reason } => {
                t!("error.graph.reinstantiated", reason = reason.clone())
            }
        };
        let same = t!("error.graph.unchanged", how);
        let moved = t!("graph.moved", old = old.to_string(), new = new.to_string());
        let outcome = changed.then_some(moved).ok_or(Error::Verification(same));
        checks.record("update changed the output", outcome);
        self.updated = Some(updated);
        self.check_outputs(checks, "after update: ")?;
        self.sweep.verify(gpu, checks)
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        r.detail("launch_overhead_graph_nodes", self.empty_built.nodes);
        let (calls, kernels) = (DAG_DRIVER_CALLS, EMPTY_KERNELS);
        interpret(m, (calls, kernels), &self.built, self.updated.as_ref(), r);
        crossover::interpret(&self.sweep.points(m, FIRST_SWEPT), r);
    }

    fn plot(&self, m: &Measured) -> Option<Plot> {
        crossover::plot(&self.sweep.points(m, FIRST_SWEPT))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

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
    fn versions_name_the_dag_then_the_empty_kernels() {
        let names = GraphDag::versions(&args_from::<GraphDag>(&[]).unwrap());
        assert_eq!(
            names[..4],
            [
                "streams+events",
                "graph",
                "100 empty kernels by stream",
                "graph of 100 empty kernels"
            ]
        );
        // Then the chains of 1 to 64 kernels per side, each by stream and as a graph.
        assert_eq!(names.len(), 4 + 2 * 7);
        assert_eq!(names[4], "streams+events: 64K x 1 kernels, memcpy");
        assert_eq!(names[17], "graph: 64K x 64 kernels, memcpy");
        let sweep = GraphDag::versions(&args_from::<GraphDag>(&["--sweep"]).unwrap());
        assert_eq!(sweep.len(), 4 + 2 * 120);
        // Every one, the summary and the update check's detail have their Chinese (`--lang zh`).
        let all = sweep.iter().chain(&names).map(String::as_str).chain([GraphDag::SUMMARY]);
        let moved = t!("graph.moved", old = SCALE.to_string(), new = UPDATED_SCALE.to_string());
        Report::new(GraphDag::NAME, "", "").assert_chinese(&[moved], all);
    }

    /// What the flag checks refuse is tested in tests/graph.rs.
    #[test]
    fn the_default_work_is_far_below_the_cap() {
        // About 1000 x 2 replays of ~50 us: a tenth of a second a repeat.
        let a = args_from::<GraphDag>(&[]).unwrap();
        let ms = GraphDag::plan(&a, &WorkModel::H100).unwrap().ms_per_repeat;
        assert!(ms > 10.0 && ms < 1000.0, "{ms}");
    }
}
