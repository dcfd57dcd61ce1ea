//! The compute kernel alone: 4,194,304 floats x 100 iterations of `x = sin(x) * cos(x)`.
//!
//! Group `compute_kernel` times streamlab's Rust kernel (from the PTX the GPU loads, and from
//! the other embedded architectures' PTX it can run, `rust-sm_75`, ...), and, when
//! `STREAMLAB_NVCC_KERNELS` names a cubin built from `cuda-reference/kernels.cu`, nvcc's build
//! of the same kernel (both unrolled 16 times), through the same host code, in the same
//! process. GPU time comes from CUDA events around
//! each launch; the input is restored before every launch (outside the timed span), so each
//! one starts from the same random values. Afterwards every build's output is compared with
//! the Rust kernel's bit for bit (libdevice's sinf/cosf are nvcc's), and with the CPU; so is
//! one iteration on arguments far outside [-π, π] (the slow path of the argument reduction,
//! infinities, NaN, subnormals), where a sincosf could differ from separate sinf and cosf.
use criterion::{BenchmarkId, Criterion};
use streamlab::lab::harness::data::{
    ensure_bitwise_equal, ensure_close_to_reference, random_inputs,
};
use streamlab::math::compute_element;
use streamlab::runtime::{ptx, DeviceBuffer, Event, Stream};
use streamlab::{Gpu, Result};
use testkit::bench::{fail, gpu_timed};
use testkit::gpu_for_bench;

const N: usize = 4_194_304;

/// Where a build of the kernels comes from: an embedded PTX, or a module file (nvcc's cubin).
enum Build {
    Embedded(&'static str),
    File(String),
}
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

/// Arguments that take every path of sin and cos: random values scaled by 10^-40 to 10^38
/// (the reduction's slow path starts at 105615), the path's edge, ±0, ±inf and NaN.
fn wide_inputs() -> Vec<f32> {
    let mut v = random_inputs(4096, 7);
    for (i, x) in v.iter_mut().enumerate() {
        *x *= 10f32.powi((i % 79) as i32 - 40);
    }
    v.extend([0.0, -0.0, 105614.9, 105615.0, 105615.1, f32::INFINITY, f32::NEG_INFINITY]);
    v.extend([f32::NAN, f32::MAX, f32::MIN_POSITIVE, 1e-45]);
    v
}

/// One iteration of the compute kernel on [`wide_inputs`].
fn wide_output(gpu: &Gpu) -> Result<Vec<f32>> {
    let data = DeviceBuffer::from_slice(gpu, &wide_inputs())?;
    let stream = Stream::new(gpu, "wide")?;
    gpu.compute(&stream, &data, 1)?;
    stream.synchronize()?;
    data.to_vec()
}

/// Benches one build of the kernels and returns its outputs for the checks: the benched
/// one, and [`wide_output`].
fn bench_build(
    c: &mut Criterion,
    label: &str,
    gpu: &Gpu,
    input: &[f32],
) -> Result<(Vec<f32>, Vec<f32>)> {
    let bench = ComputeBench::new(gpu, input)?;
    let mut group = c.benchmark_group("compute_kernel");
    group.throughput(criterion::Throughput::Elements(N as u64));
    let mut failure = None;
    gpu_timed(&mut group, BenchmarkId::new(label, "4M x 100"), &mut failure, || bench.once(gpu));
    group.finish();
    failure.map_or(Ok(()), Err)?;
    Ok((bench.output(gpu)?, wide_output(gpu)?))
}

fn main() {
    let Some(gpu) = gpu_for_bench("kernels") else {
        return;
    };
    let input = random_inputs(N, 1);
    let mut c = Criterion::default().configure_from_args();
    println!("compute_kernel/rust: PTX {}", gpu.info.ptx_choice);
    let loaded = gpu.info.ptx_arch.clone();
    let (rust, rust_wide) =
        bench_build(&mut c, "rust", &gpu, &input).unwrap_or_else(|e| fail("kernels (rust)", e));
    let reference = ensure_close_to_reference("Rust kernel vs CPU", &rust, 4096, |i| {
        compute_element(input[i], ITERS)
    });
    if let Err(e) = reference {
        fail("kernels", e);
    }
    let cc = gpu.info.compute_capability;
    drop(gpu);
    // Other builds of the same kernels: the other embedded PTX this GPU runs, nvcc's, and any
    // experiments (STREAMLAB_EXTRA_KERNELS="label=path,label=path").
    let mut builds: Vec<(String, Build)> = Vec::new();
    for ptx in ptx::embedded() {
        if ptx::device_runs(ptx.arch, cc) && ptx.arch != loaded {
            builds.push((format!("rust-{}", ptx.arch), Build::Embedded(ptx.arch)));
        }
    }
    match std::env::var("STREAMLAB_NVCC_KERNELS") {
        Ok(path) if !path.is_empty() => builds.push(("nvcc".into(), Build::File(path))),
        _ => println!("compute_kernel/nvcc: not run: set STREAMLAB_NVCC_KERNELS to a cubin of cuda-reference/kernels.cu"),
    }
    let extra = std::env::var("STREAMLAB_EXTRA_KERNELS").unwrap_or_default();
    builds.extend(
        extra
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(l, p)| (l.to_string(), Build::File(p.to_string()))),
    );
    for (label, build) in builds {
        let gpu = match &build {
            Build::Embedded(arch) => Gpu::with_ptx(0, Some(arch)),
            Build::File(path) => Gpu::with_kernels_from(0, std::path::Path::new(path)),
        };
        let outcome =
            gpu.and_then(|g| bench_build(&mut c, &label, &g, &input)).and_then(|(out, wide)| {
                ensure_bitwise_equal(&format!("{label} kernel vs Rust kernel"), &out, &rust)?;
                let what = format!("{label} kernel vs Rust kernel, wide arguments");
                ensure_bitwise_equal(&what, &wide, &rust_wide)
            });
        match outcome {
            Ok(_) => println!(
                "compute_kernel/{label}: output identical to the Rust kernel's, bit for bit (and on {} wide arguments)",
                rust_wide.len()
            ),
            Err(e) => fail(&format!("kernels ({label})"), e),
        }
    }
    c.final_summary();
}
