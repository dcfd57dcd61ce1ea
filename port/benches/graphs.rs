//! CUDA graphs against the streams they replace: the `graph` demo's 3-stream DAG (65,536
//! floats per input) issued with streams and events versus replayed as one executable graph,
//! and 100 empty kernels launched one by one versus one graph holding them. GPU time is
//! measured with events by the demo's own code, fed to criterion through `iter_custom`.
//!
//! After the DAG group, both versions run once more (a criterion filter may have skipped the
//! group) and their outputs are verified bit for bit and against the CPU; the bench exits 1
//! on a mismatch or a CUDA error.
use criterion::{BenchmarkId, Criterion};
use streamlab::demos::graph::{GraphDag, LaunchOverhead, DEFAULT_ELEMENTS, EMPTY_KERNELS};
use streamlab::graph::CaptureMode;
use streamlab::{Gpu, Result};
use testkit::bench::{fail, gpu_timed, quick_group};
use testkit::gpu_for_bench;

const BENCH: &str = "graphs";

fn dag_group(c: &mut Criterion, gpu: &Gpu) -> Result<()> {
    let mut dag = GraphDag::new(gpu, DEFAULT_ELEMENTS, 1)?;
    dag.build_graph(gpu, CaptureMode::Global)?;
    let mut failure = None;
    let mut group = quick_group(c, "graph_dag");
    gpu_timed(
        &mut group,
        BenchmarkId::new("streams_events", "64K x 3 streams"),
        &mut failure,
        || dag.run_streams(gpu).map(|s| s.gpu_ms),
    );
    gpu_timed(
        &mut group,
        BenchmarkId::new("graph", "64K x 3 streams"),
        &mut failure,
        || dag.run_graph().map(|s| s.gpu_ms),
    );
    group.finish();
    failure.map_or(Ok(()), Err)?;
    // One more run of each, so the check below never compares two untouched buffers.
    dag.run_streams(gpu)?;
    dag.run_graph()?;
    dag.check_bitwise()?;
    dag.check_reference("graph output vs CPU", &dag.out_graph, 4096)
        .map(|_| ())
}

fn launch_group(c: &mut Criterion, gpu: &Gpu) -> Result<()> {
    let lo = LaunchOverhead::new(gpu, EMPTY_KERNELS)?;
    let mut failure = None;
    let mut group = quick_group(c, "launch_overhead");
    let label = format!("{EMPTY_KERNELS} empty kernels");
    gpu_timed(
        &mut group,
        BenchmarkId::new("stream_launches", &label),
        &mut failure,
        || lo.run_stream(gpu).map(|s| s.gpu_ms),
    );
    gpu_timed(
        &mut group,
        BenchmarkId::new("one_graph", &label),
        &mut failure,
        || lo.run_graph().map(|s| s.gpu_ms),
    );
    group.finish();
    // Empty kernels have no output to verify; their graph's node count is the check.
    failure.map_or(Ok(()), Err)?;
    if lo.nodes.kernels != EMPTY_KERNELS {
        return Err(streamlab::Error::Verification(format!(
            "the launch-overhead graph holds {} kernels, not {EMPTY_KERNELS}",
            lo.nodes.kernels
        )));
    }
    Ok(())
}

fn main() {
    let Some(gpu) = gpu_for_bench(BENCH) else {
        return;
    };
    let mut c = Criterion::default().configure_from_args();
    dag_group(&mut c, &gpu).unwrap_or_else(|e| fail(BENCH, e));
    launch_group(&mut c, &gpu).unwrap_or_else(|e| fail(BENCH, e));
    c.final_summary();
}
