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
use crate::lab::harness::data::{ensure_bitwise_equal, ensure_close_to_reference, random_inputs};
use crate::lab::harness::stats::host_ms;
use crate::lab::record::plot::{Plot, Series};
use crate::lab::{fixed, t, Checks, Measured, Report, Sample, Text, WorkModel};
use crate::math::{combine_element, produce_element, scale_element};
use crate::runtime::graph::{capture, CaptureMode, Graph, GraphExec, Instantiate};
use crate::runtime::memory::{copy_to_device_sync, copy_to_host_sync};
use crate::runtime::stream::{fork, join};
use crate::runtime::{DeviceBuffer, Error, Event, Gpu, HostBuffer, Result, Stream};

/// The producers' scale, and each later step of a chain: `x * STEP.0 + STEP.1`, which keeps
/// the producers' [0.5, 1.5] inside [1, 1.5], so the CPU check never meets cancellation.
const SCALE: f32 = 0.5;
const STEP: (f32, f32) = (0.5, 0.75);
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
            Copies::Memcpy => t!("graph_sweep.by_memcpy"),
            Copies::Kernels => t!("graph_sweep.by_kernels"),
            Copies::None => t!("graph_sweep.no_copies"),
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

    /// Replays per timed sample: about [`SAMPLE_MS`] of work, at most `iters`.
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

/// Buffers and streams shared by every shape.
struct Dag {
    sides: [Stream; 2],
    c: Stream,
    inputs: [HostBuffer<f32>; 2],
    devs: [DeviceBuffer<f32>; 2],
    prods: [DeviceBuffer<f32>; 2],
    dev_out: DeviceBuffer<f32>,
    /// Where the stream version and the graph copy the result ([`Copies::None`]: unused).
    outs: [HostBuffer<f32>; 2],
    fork: Event,
    joins: [Event; 2],
}

impl Dag {
    /// One replay of `shape`, its result to `outs[out]`.
    fn enqueue(&self, gpu: &Gpu, shape: &Shape, out: usize) -> Result<()> {
        let r = 0..shape.elements;
        let sides = self.sides.each_ref();
        fork(&self.fork, &self.c, &sides)?;
        for (i, s) in sides.into_iter().enumerate() {
            let (input, dev) = (self.inputs[i].slice(r.clone())?, self.devs[i].slice(r.clone())?);
            match shape.copies {
                Copies::Memcpy => s.copy_to_device(input, dev)?,
                Copies::Kernels => gpu.copy_kernel_to_device(s, input, dev)?,
                Copies::None => {}
            }
            let prod = self.prods[i].slice(r.clone())?;
            gpu.produce(s, self.devs[i].slice(r.clone())?, prod, SCALE)?;
            for _ in 1..shape.chain {
                gpu.scale(s, self.prods[i].slice(r.clone())?, STEP.0, STEP.1)?;
            }
        }
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
        let stream = |name: &str| Stream::non_blocking(gpu, name);
        let (zeroed, event) = (|| DeviceBuffer::zeroed(gpu, n), || Event::without_timing(gpu));
        let values = [random_inputs(n, seed), random_inputs(n, seed.wrapping_add(1))];
        let dag = Dag {
            sides: [stream("sweep-a")?, stream("sweep-b")?],
            c: stream("sweep-c")?,
            inputs: [
                HostBuffer::pinned_from(gpu, &values[0])?,
                HostBuffer::pinned_from(gpu, &values[1])?,
            ],
            devs: [zeroed()?, zeroed()?],
            prods: [zeroed()?, zeroed()?],
            dev_out: zeroed()?,
            outs: [HostBuffer::pinned(gpu, n)?, HostBuffer::pinned(gpu, n)?],
            fork: event()?,
            joins: [event()?, event()?],
        };
        // Without copies, the inputs are on the device from the start.
        for (values, dev) in values.iter().zip(&dag.devs) {
            copy_to_device_sync(values, dev)?;
        }
        let model = WorkModel::for_device(&gpu.info);
        let replays = shapes.iter().map(|s| s.replays(&model, iters)).collect();
        let (mut execs, mut built) = (Vec::new(), Vec::new());
        for shape in &shapes {
            let graph = || capture(&dag.c, CaptureMode::Global, |_| dag.enqueue(gpu, shape, 1));
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
        capture(&self.dag.c, CaptureMode::Global, |_| self.dag.enqueue(gpu, shape, 1))
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
            self.rounds.run(n, c, || self.dag.enqueue(gpu, shape, 0))
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
            let streams = self.dag.result(shape, 0)?;
            self.run(gpu, 2 * k + 1)?;
            let graph = self.dag.result(shape, 1)?;
            let what = format!("graph vs streams+events, {}", shape.label());
            same = same.and_then(|()| ensure_bitwise_equal(&what, &graph, &streams));
            let what = format!("graph vs CPU, {}", shape.label());
            let reference = |i: usize| shape.reference(a[i], b[i]);
            close = close
                .and_then(|()| ensure_close_to_reference(&what, &graph, 1024, reference).map(drop));
        }
        let count = self.shapes.len();
        let detail = t!("graph_sweep.same", count);
        checks.record("every shape: graph == streams+events, bit for bit", same.map(|()| detail));
        let detail = t!("graph_sweep.close", count);
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

/// Along one line of points that differ in one axis (`x` of a point), ascending: the first
/// value from which the graph wins ([`WIN`]) at every larger one (`rising`), or up to which
/// it wins at every smaller one (not `rising`). `None`: it never does.
pub fn crossover(line: &[Point], x: fn(&Shape) -> usize, rising: bool) -> Option<usize> {
    let mut sorted: Vec<&Point> = line.iter().collect();
    sorted.sort_by_key(|p| x(&p.shape));
    if !rising {
        sorted.reverse();
    }
    let losing = sorted.iter().rposition(|p| p.ratio() >= WIN);
    let from = losing.map_or(0, |i| i + 1);
    sorted.get(from).map(|p| x(&p.shape))
}

/// The sweep's figures, and what they say about where the graph wins.
pub fn interpret(points: &[Point], r: &mut Report) {
    for p in points {
        let label = p.shape.label();
        r.figure(&format!("graph / streams, {label}"), p.ratio(), "x");
    }
    let elements: std::collections::BTreeSet<usize> =
        points.iter().map(|p| p.shape.elements).collect();
    if let (1, Some(line)) = (elements.len(), chain_text(points)) {
        r.explain(line);
    } else {
        for copies in [Copies::Memcpy, Copies::Kernels, Copies::None] {
            let mine: Vec<Point> =
                points.iter().filter(|p| p.shape.copies == copies).copied().collect();
            if !mine.is_empty() {
                r.explain(grid_text(copies, &mine));
            }
        }
    }
}

/// Where the graph starts to win along the chain, for points at one size (None: no points).
pub fn chain_text(points: &[Point]) -> Option<Text> {
    let (first, last) = (points.first()?, points.last()?);
    let (n, shortest, longest) = (first.shape.elements, first.shape.chain, last.shape.chain);
    let (first, last) = (fixed(first.ratio(), 2), fixed(last.ratio(), 2));
    Some(match crossover(points, |s| s.chain, true) {
        Some(c) if c == shortest => {
            t!("graph_sweep.chain_always", n, shortest, longest, first, last)
        }
        Some(c) => t!("graph_sweep.chain_from", n, c, shortest, longest, first, last),
        None => t!("graph_sweep.chain_never", n, shortest, longest, first, last),
    })
}

/// "1 kernel", "4 kernels".
fn kernels(c: usize) -> Text {
    if c == 1 {
        t!("graph_sweep.one_kernel")
    } else {
        t!("graph_sweep.kernels", c)
    }
}

/// For each chain length, the largest size at which the graph still wins, with `copies`.
pub fn grid_text(copies: Copies, points: &[Point]) -> Text {
    let chains: std::collections::BTreeSet<usize> = points.iter().map(|p| p.shape.chain).collect();
    let wins = chains
        .iter()
        .map(|&c| {
            let line: Vec<Point> = points.iter().filter(|p| p.shape.chain == c).copied().collect();
            let kernels = kernels(c);
            match crossover(&line, |s| s.elements, false) {
                Some(n) => t!("graph_sweep.up_to", n, kernels),
                None => t!("graph_sweep.no_size", kernels),
            }
        })
        .collect();
    let wins = Text::List(wins);
    let worst =
        points.iter().filter(|p| p.ratio() >= WIN).max_by(|a, b| a.ratio().total_cmp(&b.ratio()));
    let rest = match worst {
        Some(p) if p.ratio() > 1.0 / WIN => {
            let (n, c, loss) =
                (p.shape.elements, p.shape.chain, fixed((p.ratio() - 1.0) * 100.0, 0));
            t!("graph_sweep.loses", loss, n, c)
        }
        Some(_) => t!("graph_sweep.level"),
        None => t!("graph_sweep.wins_everywhere"),
    };
    t!("graph_sweep.grid", copies = copies.phrase(), wins, rest)
}

/// Graph time over streams time against the shape, with the break-even line and a mark
/// where each line starts to win. None with fewer than two points.
pub fn plot(points: &[Point]) -> Option<Plot> {
    let elements: std::collections::BTreeSet<usize> =
        points.iter().map(|p| p.shape.elements).collect();
    let by_chain = elements.len() == 1;
    let mut series = Vec::new();
    let mut marks = Vec::new();
    if by_chain {
        let line: Vec<(f64, f64)> =
            points.iter().map(|p| (p.shape.chain as f64, p.ratio())).collect();
        let n = points.first().map_or(0, |p| p.shape.elements);
        series.push(Series::measured(&format!("{n} elements per node, memcpy"), line));
        if let Some(c) = crossover(points, |s| s.chain, true) {
            marks.extend(
                points.iter().filter(|p| p.shape.chain == c).map(|p| (c as f64, p.ratio())),
            );
        }
    } else {
        let chains: std::collections::BTreeSet<usize> =
            points.iter().map(|p| p.shape.chain).collect();
        for c in chains {
            let line: Vec<Point> = points
                .iter()
                .filter(|p| p.shape.chain == c && p.shape.copies == Copies::Memcpy)
                .copied()
                .collect();
            let xy = line.iter().map(|p| (p.shape.elements as f64, p.ratio())).collect();
            series.push(Series::measured(&format!("{} per side", kernels(c).en()), xy));
            if let Some(n) = crossover(&line, |s| s.elements, false) {
                marks.extend(
                    line.iter().filter(|p| p.shape.elements == n).map(|p| (n as f64, p.ratio())),
                );
            }
        }
    }
    let xs: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
    let (lo, hi) = xs.iter().fold((f64::INFINITY, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
    if xs.len() < 2 {
        return None;
    }
    series.push(Series::model("break-even: graph = streams", vec![(lo, 1.0), (hi, 1.0)]));
    let mark = if by_chain {
        "shortest chain from which the graph wins (5%+)"
    } else {
        "largest size up to which the graph wins (5%+)"
    };
    series.push(Series::marks(mark, marks));
    let (title, x_label) = if by_chain {
        ("graph: time per iteration, graph / streams, against the chain", "kernel nodes per side")
    } else {
        (
            "graph: time per iteration, graph / streams (memcpy nodes), against DAG size",
            "elements per node",
        )
    };
    Some(Plot::lines(title, x_label, "graph time / streams time", true, series))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn per(wall_us: f64) -> PerRound {
        PerRound { wall_us, gpu_us: wall_us * 0.9, issue_us: 10.0 }
    }

    /// A point of `shape` whose graph takes `ratio` times the streams' 100 µs.
    fn point(elements: usize, chain: usize, copies: Copies, ratio: f64) -> Point {
        Point {
            shape: Shape { elements, chain, copies },
            streams: per(100.0),
            graph: per(100.0 * ratio),
        }
    }

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

    #[test]
    fn the_crossover_is_where_the_graph_wins_from_then_on() {
        let line = |ratios: &[f64]| -> Vec<Point> {
            ratios
                .iter()
                .enumerate()
                .map(|(i, &r)| point(65536, 1 << i, Copies::Memcpy, r))
                .collect()
        };
        let chain = |s: &Shape| s.chain;
        assert_eq!(crossover(&line(&[1.2, 1.05, 0.9, 0.7]), chain, true), Some(4));
        // Within 5% is level, not a win.
        assert_eq!(crossover(&line(&[1.2, 0.97, 0.9]), chain, true), Some(4));
        // A win that does not last is no crossover: the last loss decides.
        assert_eq!(crossover(&line(&[0.9, 1.1, 0.93, 0.8]), chain, true), Some(4));
        assert_eq!(crossover(&line(&[0.9, 0.8]), chain, true), Some(1));
        assert_eq!(crossover(&line(&[1.2, 1.0]), chain, true), None);
        // Along the size the graph wins below a size: the largest size up to which it wins.
        let sizes: Vec<Point> = [0.5, 0.8, 0.94, 0.99, 1.2]
            .iter()
            .enumerate()
            .map(|(i, &r)| point(1024 << (2 * i), 4, Copies::Memcpy, r))
            .collect();
        assert_eq!(crossover(&sizes, |s| s.elements, false), Some(16384));
        assert_eq!(crossover(&sizes[3..], |s| s.elements, false), None);
        assert_eq!(crossover(&sizes[..2], |s| s.elements, false), Some(4096));
    }

    #[test]
    fn the_texts_state_what_the_points_show() {
        let chain: Vec<Point> = [1.2, 1.05, 0.9, 0.7]
            .iter()
            .enumerate()
            .map(|(i, &r)| point(65536, 1 << i, Copies::Memcpy, r))
            .collect();
        let text = chain_text(&chain).unwrap().en();
        assert!(
            text.contains(
                "65536 elements per node: the graph starts to win (5% or more faster) at 4 kernel nodes per side"
            ),
            "{text}"
        );
        assert!(text.contains("from 1.20 to 0.70"), "{text}");
        let never = chain_text(&chain[..2]).unwrap().en();
        assert!(never.contains("not reached") && !never.contains("starts to win"), "{never}");
        let always = chain_text(&chain[2..]).unwrap().en();
        assert!(always.contains("wins at every length"), "{always}");
        let grid = vec![
            point(1024, 1, Copies::None, 0.9),
            point(4096, 1, Copies::None, 1.1),
            point(1024, 4, Copies::None, 1.3),
        ];
        let text = grid_text(Copies::None, &grid).en();
        assert!(text.starts_with("Crossover on this GPU with no copies"), "{text}");
        let wins = "faster) up to 1024 elements per node with 1 kernel per side, at no size with 4";
        assert!(text.contains(wins), "{text}");
        assert!(text.ends_with("loses by up to 30% (1024 elements per node, 4 per side) or the two are level within 5%."), "{text}");
        let level = grid_text(Copies::None, &grid[..1]).en();
        assert!(level.ends_with("and it wins at every shape measured."), "{level}");
        let level = grid_text(Copies::None, &[grid[0], point(4096, 1, Copies::None, 1.02)]).en();
        assert!(
            level.ends_with("elsewhere the two are level within 5%: the GPU's work sets the pace."),
            "{level}"
        );
        let mut r = Report::new("graph", "", "");
        interpret(&chain, &mut r);
        assert_eq!(r.value("graph / streams, 64K x 4 kernels, memcpy"), Some(0.9));
        assert_eq!(r.interpretation, [chain_text(&chain).unwrap().en()]);
        assert!(chain_text(&[]).is_none());
    }

    /// Under `--lang zh` the sweep's lines, check details, figure and version names read
    /// in Chinese, with no English sentence left, for the chain and for the grid.
    #[test]
    fn the_texts_and_names_read_in_chinese() {
        use crate::lab::text::{has_chinese, Lang};
        let chain: Vec<Point> = [1.2, 1.05, 0.9, 0.7]
            .iter()
            .enumerate()
            .map(|(i, &r)| point(65536, 1 << i, Copies::Memcpy, r))
            .collect();
        let mut grid = Vec::new();
        for (k, copies) in [Copies::Memcpy, Copies::Kernels, Copies::None].into_iter().enumerate() {
            for (i, chain) in [1, 4].into_iter().enumerate() {
                grid.push(point(1024 << (2 * i), chain, copies, [0.8, 1.02, 1.3][k]));
            }
        }
        let mut lines = vec![
            t!("graph_sweep.same", count = 120usize),
            t!("graph_sweep.close", count = 120usize),
        ];
        let mut figures = Vec::new();
        for points in [&chain, &chain[..2], &chain[2..], &grid] {
            let mut r = Report::new("graph", "", "");
            interpret(points, &mut r);
            lines.extend(r.messages);
            figures.extend(r.figures.into_iter().map(|f| f.name));
        }
        assert_eq!(lines.len(), 2 + 3 + 3, "{lines:?}");
        let versions = names(&grid_shapes());
        let all = versions.iter().chain(&figures);
        Report::new("graph", "", "").assert_chinese(&lines, all.clone().map(String::as_str));
        // The holes are filled in Chinese too: no English word of a shape is left.
        for name in all {
            let zh = Text::label(name.clone()).render(Lang::Zh);
            assert!(has_chinese(&zh), "{name}: {zh}");
            assert!(!zh.contains("kernels") && !zh.contains("copies"), "{name}: {zh}");
        }
        let median = Text::label(format!("{}, median", versions[1])).render(Lang::Zh);
        assert_eq!(median, "CUDA 图：1K 个元素 x 每侧 1 个核函数，memcpy 拷贝，中位数");
    }

    #[test]
    fn the_plot_marks_where_the_graph_starts_to_win() {
        let chain: Vec<Point> = [1.2, 0.9, 0.7]
            .iter()
            .enumerate()
            .map(|(i, &r)| point(65536, 1 << i, Copies::Memcpy, r))
            .collect();
        let Some(Plot::Lines { series, log_x, .. }) = plot(&chain) else { panic!("no plot") };
        assert!(log_x);
        assert_eq!(series.len(), 3);
        assert_eq!(series[0].points, [(1.0, 1.2), (2.0, 0.9), (4.0, 0.7)]);
        assert!(series[1].model && series[1].points == [(1.0, 1.0), (4.0, 1.0)]);
        assert!(series[2].marks && series[2].points == [(2.0, 0.9)]);
        let mut grid = Vec::new();
        for (chain, ratios) in [(1, [0.8, 1.1]), (4, [0.5, 0.9])] {
            for (i, r) in ratios.into_iter().enumerate() {
                grid.push(point(1024 << (2 * i), chain, Copies::Memcpy, r));
                grid.push(point(1024 << (2 * i), chain, Copies::None, r / 2.0));
            }
        }
        let Some(Plot::Lines { series, .. }) = plot(&grid) else { panic!("no plot") };
        let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "1 kernel per side",
                "4 kernels per side",
                "break-even: graph = streams",
                "largest size up to which the graph wins (5%+)"
            ]
        );
        // Memcpy points only; one mark per line that wins somewhere.
        assert_eq!(series[0].points, [(1024.0, 0.8), (4096.0, 1.1)]);
        assert_eq!(series[3].points, [(1024.0, 0.8), (4096.0, 0.9)]);
        let svg = crate::lab::record::plot::svg(&plot(&grid).unwrap(), "test").unwrap();
        assert!(svg.contains("largest size up to which the graph wins (5%+)"));
        assert!(plot(&chain[..1]).is_none());
    }
}
