//! [`Gpu`]: a device's context, its facts, and streamlab's kernels loaded into it. The one
//! object a lesson is handed; it derefs to [`Kernels`], so a launch reads
//! `gpu.compute(&stream, &data, iters)`, as `compute_kernel<<<g, b, 0, stream>>>` does.
use std::ops::Deref;
use std::path::Path;

use crate::runtime::context::{AsContext, Context, DeviceInfo, KernelSource};
use crate::runtime::error::Result;
use crate::runtime::kernels::Kernels;
use crate::runtime::ptx;
use crate::text::Text;

pub struct Gpu {
    pub info: DeviceInfo,
    kernels: Kernels,
    context: Context,
}

impl Gpu {
    /// Initialises the driver, makes device `ordinal`'s primary context current and loads
    /// the embedded PTX for it: the newest architecture not newer than the device, or the
    /// one `STREAMLAB_GPU_ARCH` names ([`ptx::choose`]).
    pub fn new(ordinal: u32) -> Result<Gpu> {
        Self::with_ptx(ordinal, std::env::var(ptx::ARCH_ENV).ok().as_deref())
    }

    /// Like [`Gpu::new`], with `forced` in place of `STREAMLAB_GPU_ARCH` (`None`: the newest
    /// embedded PTX the device runs): benches put the embedded architectures side by side.
    pub fn with_ptx(ordinal: u32, forced: Option<&str>) -> Result<Gpu> {
        let set = ptx::embedded();
        // A name this build does not carry is refused before the driver is touched.
        ptx::forced(&set, forced)?;
        let context = Context::new(ordinal)?;
        let choice = ptx::choose(&set, context.compute_capability()?, forced)?;
        let kernels = Kernels::from_ptx(&context, choice.ptx)?;
        let source = KernelSource { arch: choice.ptx.arch.to_string(), why: choice.to_string() };
        Self::assemble(context, kernels, source)
    }

    /// Like [`Gpu::new`], but the kernels come from `path` (a cubin, fatbin or PTX file),
    /// checked against each kernel's declared parameters. `cuda-reference/kernels.cu` built
    /// by nvcc defines the same kernels, so nvcc's machine code runs under the very same
    /// host code: the fairest Rust-vs-nvcc comparison.
    pub fn with_kernels_from(ordinal: u32, path: &Path) -> Result<Gpu> {
        let context = Context::new(ordinal)?;
        let kernels = Kernels::from_file(&context, path)?;
        let why = format!("kernels loaded from {}, not the embedded PTX", path.display());
        Self::assemble(context, kernels, KernelSource { arch: "none".into(), why })
    }

    fn assemble(context: Context, kernels: Kernels, source: KernelSource) -> Result<Gpu> {
        Ok(Gpu { info: context.info(source)?, kernels, context })
    }

    /// Waits for all work on the device (`cudaDeviceSynchronize`).
    pub fn synchronize(&self) -> Result<()> {
        self.context.synchronize()
    }

    /// Fails with a one-line explanation when `bytes` of device memory are not free.
    pub fn ensure_device_memory(&self, bytes: usize, what: impl Into<Text>) -> Result<()> {
        self.context.ensure_device_memory(bytes, what)
    }
}

impl AsContext for Gpu {
    fn context(&self) -> &Context {
        &self.context
    }
}

impl Deref for Gpu {
    type Target = Kernels;
    fn deref(&self) -> &Kernels {
        &self.kernels
    }
}
