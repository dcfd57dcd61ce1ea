//! The GPU session: driver initialisation, the context, the embedded PTX module, and the
//! device facts the demos and `streamlab info` report.
use std::ffi::c_void;

use cust::context::Context as CuContext;
use cust::device::Device;
use cust::module::Module;
use cust::sys as cu;
use serde::Serialize;

use crate::error::{check, Context, Error, Result};

/// The PTX built from `kernels-gpu` by `build.rs`.
pub const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/kernels.ptx"));
/// The architecture the PTX was built for (`STREAMLAB_GPU_ARCH` at build time).
pub const PTX_ARCH: &str = env!("STREAMLAB_PTX_ARCH");
/// The kernels the PTX defines, comma-separated.
pub const KERNEL_NAMES: &str = env!("STREAMLAB_KERNEL_NAMES");

/// What `streamlab info` prints, and what demos use to size their work.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    pub ordinal: u32,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub multiprocessors: i32,
    /// Resident threads per SM (2048 on sm_75..sm_90 datacenter parts, 1536 on sm_86/sm_89).
    pub max_threads_per_multiprocessor: i32,
    pub total_memory_bytes: usize,
    pub free_memory_bytes: usize,
    pub clock_khz: i32,
    pub memory_clock_khz: i32,
    pub memory_bus_width_bits: i32,
    pub l2_cache_bytes: i32,
    /// Can run kernels from different streams at the same time.
    pub concurrent_kernels: bool,
    /// Copy engines: 1 overlaps copies with kernels, 2+ also overlaps copies in both directions.
    pub async_engine_count: i32,
    /// Can overlap one copy with kernel execution (the old `deviceOverlap` flag).
    pub device_overlap: bool,
    /// (least, greatest) stream priority; numerically the greatest is the smallest.
    pub priority_range: (i32, i32),
    pub driver_version: i32,
    pub ptx_arch: &'static str,
}

/// An initialised device with streamlab's kernels loaded. Create one per process; every
/// stream, event and buffer must be dropped before it.
pub struct Gpu {
    pub info: DeviceInfo,
    pub(crate) kernels: crate::kernels::Kernels,
    // Field order is drop order: the module before the context it lives in.
    _module: Module,
    _context: CuContext,
}

fn attribute(device: cu::CUdevice, attr: cu::CUdevice_attribute, name: &str) -> Result<i32> {
    let mut value = 0;
    // SAFETY: valid out-pointer and device handle.
    let status = unsafe { cu::cuDeviceGetAttribute(&mut value, attr, device) };
    check(status, format!("cuDeviceGetAttribute({name})"), None)?;
    Ok(value)
}

impl Gpu {
    /// Initialises the driver, makes device `ordinal`'s primary context current and loads the
    /// PTX (the driver JIT-compiles it for this GPU here).
    pub fn new(ordinal: u32) -> Result<Gpu> {
        Self::with_module(ordinal, None)
    }

    /// Like [`Gpu::new`], but the kernels come from `path` (a cubin, fatbin or PTX file)
    /// instead of the embedded PTX. `cuda-reference/kernels.cu` built by nvcc defines the same
    /// kernels with the same signatures, so any demo or bench can run CUDA C++'s machine code
    /// through the very same host code: the fairest Rust-vs-nvcc comparison.
    pub fn with_kernels_from(ordinal: u32, path: &std::path::Path) -> Result<Gpu> {
        Self::with_module(ordinal, Some(path))
    }

    fn with_module(ordinal: u32, path: Option<&std::path::Path>) -> Result<Gpu> {
        // cuInit fails on a machine without a driver or GPU: that is `NoDevice`, not a crash.
        // SAFETY: cuInit takes flags 0 and may be called more than once.
        let status = unsafe { cu::cuInit(0) };
        if status as u32 != 0 {
            let code = crate::error::DriverCode::from_status(status);
            return Err(Error::NoDevice(format!("cuInit: {code}")));
        }
        let count = Device::num_devices().context("cuDeviceGetCount")?;
        if count == 0 {
            return Err(Error::NoDevice("the driver reports 0 devices".into()));
        }
        if ordinal >= count {
            return Err(Error::InvalidInput(format!(
                "device {ordinal} does not exist: this machine has {count} CUDA device(s), 0 to {}",
                count - 1
            )));
        }
        let device = Device::get_device(ordinal).context("cuDeviceGet")?;
        let context = CuContext::new(device).context("cuDevicePrimaryCtxRetain")?;
        let module = match path {
            None => Module::from_ptx(PTX, &[])
                .context("cuModuleLoadData (JIT-compiling the embedded PTX)")?,
            Some(p) => {
                if !p.is_file() {
                    return Err(Error::InvalidInput(format!(
                        "kernel module {} does not exist",
                        p.display()
                    )));
                }
                Module::from_file(p).context(&format!("cuModuleLoad({})", p.display()))?
            }
        };
        let info = Self::read_info(ordinal, device)?;
        let kernels = crate::kernels::Kernels::load(&module)?;
        Ok(Gpu {
            info,
            kernels,
            _module: module,
            _context: context,
        })
    }

    fn read_info(ordinal: u32, device: Device) -> Result<DeviceInfo> {
        use cu::CUdevice_attribute_enum as A;
        let raw = device.as_raw();
        let (free, total) = mem_info()?;
        let mut least = 0;
        let mut greatest = 0;
        // SAFETY: valid out-pointers; the context was made current above.
        let status = unsafe { cu::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) };
        check(status, "cuCtxGetStreamPriorityRange", None)?;
        let mut driver_version = 0;
        // SAFETY: valid out-pointer.
        check(
            unsafe { cu::cuDriverGetVersion(&mut driver_version) },
            "cuDriverGetVersion",
            None,
        )?;
        Ok(DeviceInfo {
            ordinal,
            name: device.name().context("cuDeviceGetName")?,
            compute_capability: (
                attribute(
                    raw,
                    A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                    "major",
                )?,
                attribute(
                    raw,
                    A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                    "minor",
                )?,
            ),
            multiprocessors: attribute(
                raw,
                A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                "sm count",
            )?,
            max_threads_per_multiprocessor: attribute(
                raw,
                A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
                "max threads per SM",
            )?,
            total_memory_bytes: total,
            free_memory_bytes: free,
            clock_khz: attribute(raw, A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "clock rate")?,
            memory_clock_khz: attribute(
                raw,
                A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE,
                "memory clock",
            )?,
            memory_bus_width_bits: attribute(
                raw,
                A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH,
                "bus width",
            )?,
            l2_cache_bytes: attribute(raw, A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size")?,
            concurrent_kernels: attribute(
                raw,
                A::CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS,
                "concurrentKernels",
            )? != 0,
            async_engine_count: attribute(
                raw,
                A::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT,
                "asyncEngineCount",
            )?,
            device_overlap: attribute(raw, A::CU_DEVICE_ATTRIBUTE_GPU_OVERLAP, "deviceOverlap")?
                != 0,
            priority_range: (least, greatest),
            driver_version,
            ptx_arch: PTX_ARCH,
        })
    }

    /// Waits for all work on the device (`cudaDeviceSynchronize`).
    pub fn synchronize(&self) -> Result<()> {
        cust::context::CurrentContext::synchronize().context("cuCtxSynchronize")
    }

    /// How many blocks of `threads` threads fit on one SM at once (by thread count; the
    /// sleep kernel uses no shared memory and few registers, so threads are the limit).
    pub fn resident_blocks_per_sm(&self, threads: u32) -> u32 {
        (self.info.max_threads_per_multiprocessor as u32 / threads.max(1)).max(1)
    }

    /// How many clock ticks of an SM make `micros` microseconds, at the rated clock.
    pub fn cycles_for_micros(&self, micros: f64) -> u64 {
        (micros * self.info.clock_khz as f64 / 1000.0).round() as u64
    }

    /// Fails with a one-line explanation when `bytes` of device memory are not free.
    pub fn ensure_device_memory(&self, bytes: usize, what: &str) -> Result<()> {
        let (free, _) = mem_info()?;
        // Leave room for the context, the module and the driver's own allocations.
        let usable = free.saturating_sub(256 << 20);
        if bytes > usable {
            return Err(Error::InvalidInput(format!(
                "{what} needs {:.1} MiB of device memory but only {:.1} MiB is free",
                bytes as f64 / 1048576.0,
                usable as f64 / 1048576.0
            )));
        }
        Ok(())
    }
}

/// (free, total) device memory in bytes.
pub fn mem_info() -> Result<(usize, usize)> {
    let mut free = 0;
    let mut total = 0;
    // SAFETY: valid out-pointers; a context is current.
    check(
        unsafe { cu::cuMemGetInfo_v2(&mut free, &mut total) },
        "cuMemGetInfo",
        None,
    )?;
    Ok((free, total))
}

/// Launch geometry.
#[derive(Debug, Clone, Copy)]
pub struct LaunchConfig {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub shared_bytes: u32,
}

impl LaunchConfig {
    /// One thread per element, 256 threads a block.
    pub fn for_elements(n: usize) -> LaunchConfig {
        let blocks = n.div_ceil(256).clamp(1, i32::MAX as usize) as u32;
        LaunchConfig {
            grid: (blocks, 1, 1),
            block: (256, 1, 1),
            shared_bytes: 0,
        }
    }

    pub fn new(grid: (u32, u32, u32), block: (u32, u32, u32)) -> LaunchConfig {
        LaunchConfig {
            grid,
            block,
            shared_bytes: 0,
        }
    }
}

/// `cuLaunchKernel`: what CUDA C++'s `kernel<<<grid, block, shared, stream>>>(args...)` and
/// cust's `launch!` both compile to. `args` holds one pointer to each argument's value.
///
/// # Safety
/// `args` must match the kernel's parameter list in number, order and type, and every
/// device pointer among them must be valid for what the kernel accesses.
pub(crate) unsafe fn launch_raw(
    function: cu::CUfunction,
    config: LaunchConfig,
    stream: &crate::stream::Stream,
    args: &mut [*mut c_void],
    name: &str,
) -> Result<()> {
    let (gx, gy, gz) = config.grid;
    let (bx, by, bz) = config.block;
    // SAFETY: forwarded from this function's contract; `stream` is live.
    let status = unsafe {
        cu::cuLaunchKernel(
            function,
            gx,
            gy,
            gz,
            bx,
            by,
            bz,
            config.shared_bytes,
            stream.as_raw(),
            args.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    stream.check(status, &format!("cuLaunchKernel({name})"))
}
