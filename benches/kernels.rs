//! The compute kernel alone: 4,194,304 floats x 100 iterations of `x = sin(x) * cos(x)`.
//!
//! Group `compute_kernel` times streamlab's Rust kernel, and, when `STREAMLAB_NVCC_KERNELS`
//! names a cubin built from `cuda-reference/kernels.cu`, nvcc's build of the same kernel,
//! through the same host code, in the same process. GPU time comes from CUDA events around
//! each launch; the input is restored before every launch (outside the timed span), so each
//! one starts from the same random values.
use criterion::{BenchmarkId, Criterion};
use streamlab::data::random_inputs;
use streamlab::memory::{copy_to_device_sync, device};
use streamlab::{Event, Gpu, Stream};
use testkit::{gpu_duration, gpu_for_bench};

const N: usize = 4_194_304;
const ITERS: u32 = 100;

fn bench_compute(c: &mut Criterion, label: &str, gpu: &Gpu) -> streamlab::Result<()> {
    let stream = Stream::new("bench")?;
    let pristine = device::<f32>(N)?;
    copy_to_device_sync(&random_inputs(N, 1), &pristine)?;
    let work = device::<f32>(N)?;
    let (start, stop) = (Event::new()?, Event::new()?);
    let mut group = c.benchmark_group("compute_kernel");
    group.throughput(criterion::Throughput::Elements(N as u64));
    let mut failure = None;
    group.bench_function(BenchmarkId::new(label, "4M x 100"), |b| {
        b.iter_custom(|iters| {
            let mut total_ms = 0.0;
            for _ in 0..iters {
                let run = || -> streamlab::Result<f64> {
                    stream.copy_on_device(&pristine, &work)?;
                    start.record(&stream)?;
                    gpu.compute(&stream, &work, ITERS)?;
                    stop.record(&stream)?;
                    stop.synchronize()?;
                    stop.elapsed_ms(&start)
                };
                match run() {
                    Ok(ms) => total_ms += ms,
                    Err(e) => failure = Some(e),
                }
            }
            gpu_duration(total_ms)
        })
    });
    group.finish();
    failure.map_or(Ok(()), Err)
}

fn main() {
    let Some(gpu) = gpu_for_bench("kernels") else {
        return;
    };
    let mut c = Criterion::default().configure_from_args();
    let mut failed = false;
    if let Err(e) = bench_compute(&mut c, "rust", &gpu) {
        eprintln!("kernels bench (rust): {e}");
        failed = true;
    }
    drop(gpu);
    match std::env::var_os("STREAMLAB_NVCC_KERNELS") {
        Some(path) => match Gpu::with_kernels_from(0, std::path::Path::new(&path)) {
            Ok(nvcc) => {
                if let Err(e) = bench_compute(&mut c, "nvcc", &nvcc) {
                    eprintln!("kernels bench (nvcc): {e}");
                    failed = true;
                }
            }
            Err(e) => {
                eprintln!("kernels bench: cannot load {}: {e}", path.to_string_lossy());
                failed = true;
            }
        },
        None => println!("compute_kernel/nvcc: not run: set STREAMLAB_NVCC_KERNELS to a cubin of cuda-reference/kernels.cu"),
    }
    // Experiments: STREAMLAB_EXTRA_KERNELS="label=path,label=path" adds other builds
    // (another STREAMLAB_GPU_ARCH, another unroll) to the same group.
    let extra = std::env::var("STREAMLAB_EXTRA_KERNELS").unwrap_or_default();
    for (label, path) in extra.split(',').filter_map(|kv| kv.split_once('=')) {
        let outcome = Gpu::with_kernels_from(0, std::path::Path::new(path))
            .and_then(|g| bench_compute(&mut c, label, &g));
        if let Err(e) = outcome {
            eprintln!("kernels bench ({label}): {e}");
            failed = true;
        }
    }
    c.final_summary();
    if failed {
        std::process::exit(1);
    }
}
