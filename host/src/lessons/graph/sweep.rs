//! When does a CUDA graph win? The graph lesson's DAG (two sides that copy an input in and
//! produce from it, a combiner that copies the result out) reshaped along three axes:
//! elements per node, kernel nodes in each side's chain (a producer, then `chain - 1`
//! in-place steps), and how data gets in and out (memcpy nodes, copy kernels, or not at
//! all). Each shape is issued call by call on three streams and replayed as one graph, and
//! the ratio of their times per iteration says where the graph starts to win.
//!
//! One set of buffers, sized for the largest shape, serves every shape (each uses its first
//! `elements`); each shape has its own captured graph.
use serde::Serialize;

use super::replay::{Built, PerRound, Rounds};
use super::{Dag, BY_GRAPH, BY_STREAMS, SCALE, STEP};
use crate::lab::harness::data::{ensure_bitwise_equal, ensure_close_to_reference};
use crate::lab::harness::stats::host_ms;
use crate::lab::{t, Checks, Measured, Sample, Text, WorkModel};
use crate::math::{combine_element, produce_element, scale_element};
use crate::runtime::graph::{CaptureMode, Graph, GraphExec, Instantiate};
use crate::runtime::memory::copy_to_device_landed;
use crate::runtime::{Error, Gpu, Result, Stream};

/// GPU work each timed sample of a shape should hold, ms: short shapes replay several times.
const SAMPLE_MS: f64 = 1.0;
/// The graph wins a shape when its time per iteration is below this fraction of the
/// streams' (5% faster): between the two, they are level within the noise of a run.
pub const WIN: f64 = 0.95;

/// How the inputs reach the device and the result the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Copies {
    /// `cuMemcpyAsync` from and to pinned memory: memcpy nodes in the graph (the seed's DAG).
    Memcpy,
    /// `copy_kernel` reading and writing the pinned memory itself: kernel nodes instead.
    Kernels,
    /// No copies: the inputs stay on the device, the result too.
    None,
}

impl Copies {
    /// How the text says it: "copies by memcpy (memcpy nodes in the graph)", ...
    pub fn phrase(self) -> Text {
        match self {
            Copies::Memcpy => t!("graph.sweep_by_memcpy"),
            Copies::Kernels => t!("graph.sweep_by_kernels"),
            Copies::None => t!("graph.sweep_no_copies"),
        }
    }

    /// How a version's name says it.
    pub fn describe(self) -> &'static str {
        match self {
            Copies::Memcpy => "memcpy",
            Copies::Kernels => "copy kernels",
            Copies::None => "no copies",
        }
    }
}

/// One shape of the DAG.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Shape {
    pub elements: usize,
    /// Kernel nodes in each side's chain (the producer and its in-place steps), 1 and up.
    pub chain: usize,
    pub copies: Copies,
}

impl Shape {
    pub fn label(&self) -> String {
        let n = self.elements;
        let size = match n {
            _ if n >= 1 << 20 && n.is_multiple_of(1 << 20) => format!("{}M", n >> 20),
            _ if n >= 1 << 10 && n.is_multiple_of(1 << 10) => format!("{}K", n >> 10),
            _ => n.to_string(),
        };
        format!("{size} x {} kernels, {}", self.chain, self.copies.describe())
    }

    /// Driver calls of one replay by stream: the fork and join (1 + 2 + 2 + 2), the
    /// combiner, each side's chain, and 3 copies unless there are none.
    pub fn driver_calls(&self) -> usize {
        8 + 2 * self.chain + if self.copies == Copies::None { 0 } else { 3 }
    }

    /// Estimated GPU time of one replay, ms (copies and kernels one after another).
    pub fn estimate_ms(&self, model: &WorkModel) -> f64 {
        let n = self.elements;
        let copies = if self.copies == Copies::None { 0.0 } else { 3.0 * model.copy_ms(n) };
        copies + (2 * self.chain + 1) as f64 * model.elementwise_ms(n)
    }

    /// Replays per timed sample: about `SAMPLE_MS` (1 ms) of work, at most `iters`.
    pub fn replays(&self, model: &WorkModel, iters: u32) -> u32 {
        let fit = (SAMPLE_MS / self.estimate_ms(model).max(1e-6)).ceil();
        (fit.min(f64::from(iters)) as u32).max(1)
    }

    /// The CPU's value of output element `(a, b)`.
    pub fn reference(&self, a: f32, b: f32) -> f32 {
        let side = |x| {
            (1..self.chain).fold(produce_element(x, SCALE), |y, _| scale_element(y, STEP.0, STEP.1))
        };
        combine_element(side(a), side(b))
    }
}

/// The shapes of the graph lesson: [`grid_shapes`] with `--sweep` (`grid`), else
/// [`chain_shapes`] at `elements`.
pub fn shapes(grid: bool, elements: usize) -> Vec<Shape> {
    if grid {
        grid_shapes()
    } else {
        chain_shapes(elements)
    }
}

/// The default run: the seed's DAG at `elements`, its chains 1, 2, 4, ... 64 kernels long.
pub fn chain_shapes(elements: usize) -> Vec<Shape> {
    (0..=6).map(|p| Shape { elements, chain: 1 << p, copies: Copies::Memcpy }).collect()
}

/// `--sweep`: 1K to 16M elements by 4, chains of 1 to 256 by 4, each way of copying.
pub fn grid_shapes() -> Vec<Shape> {
    let mut shapes = Vec::new();
    for copies in [Copies::Memcpy, Copies::Kernels, Copies::None] {
        for chain in [1, 4, 16, 64, 256] {
            for p in 0..8 {
                shapes.push(Shape { elements: 1024 << (2 * p), chain, copies });
            }
        }
    }
    shapes
}

/// The versions of `shapes`, two per shape: by stream, then as a graph.
pub fn names(shapes: &[Shape]) -> Vec<String> {
    let each =
        |s: &Shape| [format!("streams+events: {}", s.label()), format!("graph: {}", s.label())];
    shapes.iter().flat_map(each).collect()
}

/// The elements of `shapes`' buffers (4 pinned, 5 on the device, each as large as the
/// largest shape), and their estimated work per repeat (every version once), ms.
pub fn plan(shapes: &[Shape], iters: u32, model: &WorkModel) -> (usize, f64) {
    let n = shapes.iter().map(|s| s.elements).max().unwrap_or(0);
    let ms = shapes.iter().map(|s| 2.0 * f64::from(s.replays(model, iters)) * s.estimate_ms(model));
    (n, ms.sum())
}

/// The graph `captured` returns, instantiated `how` and, with `upload`, uploaded to `on` so
/// that the first launch costs what every later one does.
pub fn build(
    on: &Stream,
    how: Instantiate,
    upload: bool,
    captured: impl FnOnce() -> Result<Graph>,
) -> Result<(GraphExec, Built)> {
    let (graph, capture_ms) = host_ms(captured);
    let graph = graph?;
    let (exec, instantiate_ms) = host_ms(|| graph.instantiate_with(how));
    let (exec, nodes) = (exec?, graph.node_counts()?);
    if upload {
        exec.upload(on)?;
    }
    Ok((exec, Built { nodes, capture_ms, instantiate_ms }))
}

/// Every shape, ready to run both ways.
pub struct Sweep {
    shapes: Vec<Shape>,
    replays: Vec<u32>,
    execs: Vec<GraphExec>,
    pub built: Vec<Built>,
    dag: Dag,
    rounds: Rounds,
}

/// One shape's medians, µs per replay: by stream, as a graph.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    pub shape: Shape,
    pub streams: PerRound,
    pub graph: PerRound,
}

impl Point {
    /// Graph time over streams time per iteration (wall clock): below 1 the graph wins.
    pub fn ratio(&self) -> f64 {
        self.graph.wall_us / self.streams.wall_us
    }
}

impl Sweep {
    /// Buffers for the largest shape, inputs from `seed`, and one graph per shape.
    pub fn new(gpu: &Gpu, shapes: Vec<Shape>, iters: u32, seed: u64) -> Result<Sweep> {
        let n = shapes.iter().map(|s| s.elements).max().unwrap_or(1);
        let dag = Dag::new(gpu, "sweep", n, seed)?;
        // Without copies, the inputs are on the device from the start.
        for (input, dev) in dag.inputs.iter().zip(&dag.devs) {
            copy_to_device_landed(&input.to_vec()?, dev)?;
        }
        let model = WorkModel::for_device(&gpu.info);
        let replays = shapes.iter().map(|s| s.replays(&model, iters)).collect();
        let (mut execs, mut built) = (Vec::new(), Vec::new());
        for shape in &shapes {
            let graph = || dag.capture(gpu, CaptureMode::Global, shape, SCALE);
            let (exec, b) = build(&dag.c, Instantiate::Plain, true, graph)?;
            execs.push(exec);
            built.push(b);
        }
        Ok(Sweep { shapes, replays, execs, built, dag, rounds: Rounds::new(gpu)? })
    }

    pub fn shapes(&self) -> &[Shape] {
        &self.shapes
    }

    /// Shape `k` captured again, for an experiment (other instantiation flags, no upload).
    pub fn capture(&self, gpu: &Gpu, k: usize) -> Result<Graph> {
        let shape = self.shapes.get(k).ok_or_else(|| Error::Internal(format!("no shape {k}")))?;
        self.dag.capture(gpu, CaptureMode::Global, shape, SCALE)
    }

    /// `n` replays of `exec` (a graph of one of the shapes), timed as the versions are.
    pub fn time(&self, exec: &GraphExec, n: u32) -> Result<Sample> {
        let c = &self.dag.c;
        self.rounds.run(n, c, || exec.launch(c))
    }

    /// The stream the graphs are launched on, which the stream version ends on.
    pub fn launch_stream(&self) -> &Stream {
        &self.dag.c
    }

    pub fn streams(&self) -> Vec<&Stream> {
        let d = &self.dag;
        vec![&d.sides[0], &d.sides[1], &d.c]
    }

    /// Version `v` of [`names`]: shape `v / 2`, by stream (even) or as a graph (odd).
    pub fn run(&self, gpu: &Gpu, v: usize) -> Result<Sample> {
        let k = v / 2;
        let (Some(shape), Some(exec)) = (self.shapes.get(k), self.execs.get(k)) else {
            return Err(Error::Internal(format!("the graph sweep has no version {v}")));
        };
        let (c, n) = (&self.dag.c, self.replays[k]);
        if v.is_multiple_of(2) {
            self.rounds.run(n, c, || self.dag.enqueue(gpu, shape, SCALE, BY_STREAMS))
        } else {
            self.rounds.run(n, c, || exec.launch(c))
        }
    }

    /// Each shape once more both ways: the graph's result equals the streams' bit for bit,
    /// and the CPU's within tolerance.
    pub fn verify(&self, gpu: &Gpu, checks: &mut Checks) -> Result<()> {
        let (a, b) = (self.dag.inputs[0].to_vec()?, self.dag.inputs[1].to_vec()?);
        let (mut same, mut close) = (Ok(()), Ok(()));
        for (k, shape) in self.shapes.iter().enumerate() {
            self.run(gpu, 2 * k)?;
            let streams = self.dag.result(shape, BY_STREAMS)?;
            self.run(gpu, 2 * k + 1)?;
            let graph = self.dag.result(shape, BY_GRAPH)?;
            let what = format!("graph vs streams+events, {}", shape.label());
            same = same.and_then(|()| ensure_bitwise_equal(&what, &graph, &streams));
            let what = format!("graph vs CPU, {}", shape.label());
            let reference = |i: usize| shape.reference(a[i], b[i]);
            close = close
                .and_then(|()| ensure_close_to_reference(&what, &graph, 1024, reference).map(drop));
        }
        let count = self.shapes.len();
        let detail = t!("graph.sweep_same", count);
        checks.record("every shape: graph == streams+events, bit for bit", same.map(|()| detail));
        let detail = t!("graph.sweep_close", count);
        checks.record("every shape: GPU vs CPU reference (approx)", close.map(|()| detail));
        Ok(())
    }

    /// Each shape's medians from `m`, whose versions from `first` on are this sweep's.
    pub fn points(&self, m: &Measured, first: usize) -> Vec<Point> {
        let v = |i: usize| m.versions.get(first + i).map(|v| PerRound::of(v, 1));
        let each = |(k, shape): (usize, &Shape)| {
            Some(Point { shape: *shape, streams: v(2 * k)?, graph: v(2 * k + 1)? })
        };
        self.shapes.iter().enumerate().filter_map(each).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_named_and_counted() {
        let s = Shape { elements: 65536, chain: 16, copies: Copies::Memcpy };
        assert_eq!(s.label(), "64K x 16 kernels, memcpy");
        assert_eq!(Shape { elements: 16 << 20, ..s }.label(), "16M x 16 kernels, memcpy");
        assert_eq!(
            Shape { elements: 1000, copies: Copies::None, ..s }.label(),
            "1000 x 16 kernels, no copies"
        );
        // The seed's DAG: 13 driver calls, 3 of them copies.
        assert_eq!(Shape { chain: 1, ..s }.driver_calls(), 13);
        assert_eq!(Shape { chain: 1, copies: Copies::None, ..s }.driver_calls(), 10);
        assert_eq!(
            chain_shapes(4096).iter().map(|s| s.chain).collect::<Vec<_>>(),
            [1, 2, 4, 8, 16, 32, 64]
        );
        let grid = grid_shapes();
        assert_eq!(grid.len(), 3 * 5 * 8);
        assert_eq!(grid.iter().map(|s| s.elements).max(), Some(16 << 20));
        assert_eq!(grid.iter().map(|s| s.elements).min(), Some(1024));
        assert_eq!(
            names(&grid[..1]),
            ["streams+events: 1K x 1 kernels, memcpy", "graph: 1K x 1 kernels, memcpy"]
        );
        assert_eq!(shapes(false, 10).len(), 7);
    }

    #[test]
    fn short_shapes_replay_more_but_never_more_than_iters() {
        let m = WorkModel::H100;
        let small = Shape { elements: 1024, chain: 1, copies: Copies::Memcpy };
        let big = Shape { elements: 16 << 20, chain: 256, copies: Copies::Memcpy };
        assert!(small.replays(&m, 1000) > 10, "{}", small.replays(&m, 1000));
        assert_eq!(small.replays(&m, 3), 3);
        assert_eq!(big.replays(&m, 1000), 1);
        assert!(big.estimate_ms(&m) > small.estimate_ms(&m) * 100.0);
        let (most, ms) = plan(&grid_shapes(), 1000, &m);
        assert_eq!(most, 16 << 20);
        assert!(ms > 100.0 && ms < 60_000.0, "{ms}");
    }

    #[test]
    fn the_reference_follows_the_chain() {
        let s = Shape { elements: 1, chain: 1, copies: Copies::None };
        let (a, b) = (0.3f32, -1.2f32);
        let (pa, pb) = (produce_element(a, SCALE), produce_element(b, SCALE));
        assert_eq!(s.reference(a, b), combine_element(pa, pb));
        let two = Shape { chain: 3, ..s };
        let step = |x| scale_element(scale_element(x, STEP.0, STEP.1), STEP.0, STEP.1);
        assert_eq!(two.reference(a, b), combine_element(step(pa), step(pb)));
        // Long chains settle near the step's fixed point 1.5: a' * b' + a' near 3.75.
        let long = Shape { chain: 256, ..s }.reference(a, b);
        assert!((long - 3.75).abs() < 1e-3, "{long}");
    }
}
