//! CUDA graphs against the streams they replace: the `graph` demo's 3-stream DAG (65,536
//! floats per input) issued with streams and events versus replayed as one executable graph,
//! and 100 empty kernels launched one by one versus one graph holding them. GPU time is
//! measured with events by the demo's own code, fed to criterion through `iter_custom`.
use criterion::{BenchmarkId, Criterion};
use streamlab::demos::graph::{GraphDag, LaunchOverhead, DEFAULT_ELEMENTS, EMPTY_KERNELS};
use streamlab::graph::CaptureMode;
use streamlab::{Error, Gpu};
use testkit::{gpu_duration, gpu_for_bench};

fn fail(e: Error) -> ! {
    eprintln!("graphs bench: {e}");
    std::process::exit(1);
}

/// Sums the GPU ms of `iters` runs of `one`, remembering the first error.
fn gpu_time(
    iters: u64,
    failure: &mut Option<Error>,
    mut one: impl FnMut() -> streamlab::Result<streamlab::demos::graph::Sample>,
) -> std::time::Duration {
    let mut ms = 0.0;
    for _ in 0..iters {
        match one() {
            Ok(s) => ms += s.gpu_ms,
            Err(e) => {
                failure.get_or_insert(e);
            }
        }
    }
    gpu_duration(ms)
}

fn dag_group(c: &mut Criterion, gpu: &Gpu) {
    let mut dag = GraphDag::new(gpu, DEFAULT_ELEMENTS, 1).unwrap_or_else(|e| fail(e));
    dag.build_graph(gpu, CaptureMode::Global)
        .unwrap_or_else(|e| fail(e));
    let mut failure = None;
    let mut group = c.benchmark_group("graph_dag");
    group
        .sample_size(20)
        .measurement_time(std::time::Duration::from_secs(2));
    group.bench_function(BenchmarkId::new("streams_events", "64K x 3 streams"), |b| {
        b.iter_custom(|iters| gpu_time(iters, &mut failure, || dag.run_streams(gpu)))
    });
    group.bench_function(BenchmarkId::new("graph", "64K x 3 streams"), |b| {
        b.iter_custom(|iters| gpu_time(iters, &mut failure, || dag.run_graph()))
    });
    group.finish();
    if let Some(e) = failure {
        fail(e);
    }
    dag.check_bitwise().unwrap_or_else(|e| fail(e));
}

fn launch_group(c: &mut Criterion, gpu: &Gpu) {
    let lo = LaunchOverhead::new(gpu, EMPTY_KERNELS).unwrap_or_else(|e| fail(e));
    let mut failure = None;
    let mut group = c.benchmark_group("launch_overhead");
    group
        .sample_size(20)
        .measurement_time(std::time::Duration::from_secs(2));
    let label = format!("{EMPTY_KERNELS} empty kernels");
    group.bench_function(BenchmarkId::new("stream_launches", &label), |b| {
        b.iter_custom(|iters| gpu_time(iters, &mut failure, || lo.run_stream(gpu)))
    });
    group.bench_function(BenchmarkId::new("one_graph", &label), |b| {
        b.iter_custom(|iters| gpu_time(iters, &mut failure, || lo.run_graph()))
    });
    group.finish();
    if let Some(e) = failure {
        fail(e);
    }
}

fn main() {
    let Some(gpu) = gpu_for_bench("graphs") else {
        return;
    };
    let mut c = Criterion::default().configure_from_args();
    dag_group(&mut c, &gpu);
    launch_group(&mut c, &gpu);
    c.final_summary();
}
