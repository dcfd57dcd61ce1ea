//! CUDA graphs against the streams they replace, with the graph lesson's own versions: its
//! 3-stream DAG (65,536 floats per input) issued with streams and events versus replayed as
//! one executable graph, one replay per iteration, and 100 empty kernels launched one by one
//! versus one graph holding them. Group `graph_crossover` lengthens each side of the DAG to
//! chains of 1, 4, 16 and 64 kernels (same size, memcpy nodes): where the graph starts to
//! win. GPU time is measured with events by the lesson's code, fed to criterion through
//! `iter_custom`.
//!
//! Afterwards every version runs once more (a criterion filter may have skipped a group) and
//! the lesson's checks run, the update of the graph included; the bench exits 1 on a failed
//! check, a CUDA error, or a launch-overhead graph without its 100 kernels.
use criterion::{BenchmarkId, Criterion};
use streamlab::lab::{Checks, Lesson, Sample};
use streamlab::lessons::graph::sweep::{Copies, Shape, Sweep};
use streamlab::lessons::graph::{
    GraphDag, EMPTY_BY_STREAM, EMPTY_GRAPH, EMPTY_KERNELS, GRAPH, STREAMS_EVENTS,
};
use testkit::bench::{fail, gpu_timed, quick_group, verify};
use testkit::{gpu_for_bench, set_up};

const BENCH: &str = "graph";

/// A sample's GPU time (its "gpu" part), ms.
fn gpu_ms(s: Sample) -> f64 {
    s.parts.iter().find(|(name, _)| *name == "gpu").map_or(f64::NAN, |(_, ms)| *ms)
}

fn main() {
    let Some(gpu) = gpu_for_bench(BENCH) else {
        return;
    };
    let mut dag: GraphDag = set_up(&gpu, &["--iters", "1"], 1).unwrap_or_else(|e| fail(BENCH, e));
    let mut c = Criterion::default().configure_from_args();
    let mut failure = None;

    let mut group = quick_group(&mut c, "graph_dag");
    let size = "64K x 3 streams";
    gpu_timed(&mut group, BenchmarkId::new("streams_events", size), &mut failure, || {
        dag.version(&gpu, STREAMS_EVENTS).map(gpu_ms)
    });
    gpu_timed(&mut group, BenchmarkId::new("graph", size), &mut failure, || {
        dag.version(&gpu, GRAPH).map(gpu_ms)
    });
    group.finish();

    let mut group = quick_group(&mut c, "launch_overhead");
    let label = format!("{EMPTY_KERNELS} empty kernels");
    for (name, v) in [("stream_launches", EMPTY_BY_STREAM), ("one_graph", EMPTY_GRAPH)] {
        gpu_timed(&mut group, BenchmarkId::new(name, &label), &mut failure, || {
            dag.version(&gpu, v).map(gpu_ms)
        });
    }
    group.finish();

    let shapes =
        [1, 4, 16, 64].map(|chain| Shape { elements: 65536, chain, copies: Copies::Memcpy });
    let sweep = Sweep::new(&gpu, shapes.to_vec(), 1, 1).unwrap_or_else(|e| fail(BENCH, e));
    let mut group = quick_group(&mut c, "graph_crossover");
    for (k, shape) in shapes.iter().enumerate() {
        let size = format!("64K x {} kernels per side", shape.chain);
        for (name, v) in [("streams_events", 2 * k), ("graph", 2 * k + 1)] {
            gpu_timed(&mut group, BenchmarkId::new(name, &size), &mut failure, || {
                sweep.run(&gpu, v).map(gpu_ms)
            });
        }
    }
    group.finish();
    if let Some(e) = failure {
        fail(BENCH, e);
    }
    let mut checks = Checks::default();
    sweep.verify(&gpu, &mut checks).unwrap_or_else(|e| fail(BENCH, e));
    if let Some(c) = checks.items.iter().find(|c| !c.passed()) {
        fail(BENCH, streamlab::Error::Verification(format!("{}: {}", c.name, c.detail).into()));
    }
    // Empty kernels have no output to verify; their graph's node count is the check.
    if dag.empty_built.nodes.kernels != EMPTY_KERNELS {
        fail(
            BENCH,
            streamlab::Error::Verification(
                format!(
                    "the launch-overhead graph holds {} kernels, not {EMPTY_KERNELS}",
                    dag.empty_built.nodes.kernels
                )
                .into(),
            ),
        );
    }
    verify(&gpu, &mut dag, 4);
    c.final_summary();
}
