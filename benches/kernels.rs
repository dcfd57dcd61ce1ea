//! The compute kernel alone: 4,194,304 floats x 100 iterations of `x = sin(x) * cos(x)`.
//!
//! Group `compute_kernel` times streamlab's Rust kernel, and, when `STREAMLAB_NVCC_KERNELS`
//! names a cubin built from `cuda-reference/kernels.cu`, nvcc's build of the same kernel,
//! through the same host code, in the same process. GPU time comes from CUDA events around
//! each launch; the input is restored before every launch (outside the timed span), so each
//! one starts from the same random values. Afterwards every build's output is compared with
//! the Rust kernel's bit for bit (libdevice's sinf/cosf are nvcc's), and with the CPU.
use criterion::{BenchmarkId, Criterion};
use streamlab::lab::data::{ensure_bitwise_equal, ensure_close_to_reference, random_inputs};
use streamlab::math::compute_element;
use streamlab::runtime::{DeviceBuffer, Event, Stream};
use streamlab::{Gpu, Result};
use testkit::bench::{fail, gpu_timed};
use testkit::gpu_for_bench;

const N: usize = 4_194_304;
const ITERS: u32 = 100;

struct ComputeBench {
    stream: Stream,
    pristine: DeviceBuffer<f32>,
    work: DeviceBuffer<f32>,
    start: Event,
    stop: Event,
}

impl ComputeBench {
    fn new(gpu: &Gpu, input: &[f32]) -> Result<ComputeBench> {
        Ok(ComputeBench {
            stream: Stream::new(gpu, "bench")?,
            pristine: DeviceBuffer::from_slice(gpu, input)?,
            work: DeviceBuffer::zeroed(gpu, N)?,
            start: Event::new(gpu)?,
            stop: Event::new(gpu)?,
        })
    }

    /// Restores the input, then times one launch with events.
    fn once(&self, gpu: &Gpu) -> Result<f64> {
        self.stream.copy_on_device(&self.pristine, &self.work)?;
        self.start.record(&self.stream)?;
        gpu.compute(&self.stream, &self.work, ITERS)?;
        self.stop.record(&self.stream)?;
        self.stop.synchronize()?;
        self.stop.elapsed_ms(&self.start)
    }

    /// One more launch, and its output.
    fn output(&self, gpu: &Gpu) -> Result<Vec<f32>> {
        self.once(gpu)?;
        self.work.to_vec()
    }
}

/// Benches one build of the kernels and returns its output for the checks.
fn bench_build(c: &mut Criterion, label: &str, gpu: &Gpu, input: &[f32]) -> Result<Vec<f32>> {
    let bench = ComputeBench::new(gpu, input)?;
    let mut group = c.benchmark_group("compute_kernel");
    group.throughput(criterion::Throughput::Elements(N as u64));
    let mut failure = None;
    gpu_timed(&mut group, BenchmarkId::new(label, "4M x 100"), &mut failure, || bench.once(gpu));
    group.finish();
    failure.map_or(Ok(()), Err)?;
    bench.output(gpu)
}

fn main() {
    let Some(gpu) = gpu_for_bench("kernels") else {
        return;
    };
    let input = random_inputs(N, 1);
    let mut c = Criterion::default().configure_from_args();
    let rust =
        bench_build(&mut c, "rust", &gpu, &input).unwrap_or_else(|e| fail("kernels (rust)", e));
    let reference = ensure_close_to_reference("Rust kernel vs CPU", &rust, 4096, |i| {
        compute_element(input[i], ITERS)
    });
    if let Err(e) = reference {
        fail("kernels", e);
    }
    drop(gpu);
    // Other builds of the same kernels: nvcc's, and any experiments
    // (STREAMLAB_EXTRA_KERNELS="label=path,label=path": another STREAMLAB_GPU_ARCH, ...).
    let mut builds: Vec<(String, String)> = Vec::new();
    match std::env::var("STREAMLAB_NVCC_KERNELS") {
        Ok(path) => builds.push(("nvcc".into(), path)),
        Err(_) => println!("compute_kernel/nvcc: not run: set STREAMLAB_NVCC_KERNELS to a cubin of cuda-reference/kernels.cu"),
    }
    let extra = std::env::var("STREAMLAB_EXTRA_KERNELS").unwrap_or_default();
    builds.extend(
        extra
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(l, p)| (l.to_string(), p.to_string())),
    );
    for (label, path) in builds {
        let outcome = Gpu::with_kernels_from(0, std::path::Path::new(&path))
            .and_then(|g| bench_build(&mut c, &label, &g, &input))
            .and_then(|out| {
                ensure_bitwise_equal(&format!("{label} kernel vs Rust kernel"), &out, &rust)
            });
        match outcome {
            Ok(_) => println!(
                "compute_kernel/{label}: output identical to the Rust kernel's, bit for bit"
            ),
            Err(e) => fail(&format!("kernels ({label})"), e),
        }
    }
    c.final_summary();
}
