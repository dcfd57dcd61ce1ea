//! The driver and the context: loading `libcuda`, `cuInit`, a device's primary context, and
//! the device facts that decide what can overlap.
//!
//! Every handle the runtime hands out (stream, event, buffer, module, graph) holds a
//! [`Context`], a reference-counted owner of the primary context, so the context is released
//! only after the last of them is gone: drop order is enforced by the types, not by comments.
use std::cell::Cell;
use std::rc::Rc;

use cudarc::driver::sys::{self as cu, CUdevice_attribute as A};
use serde::Serialize;

use crate::runtime::driver;
use crate::runtime::error::{DriverCode, Error, Named, Result};
use crate::t;
use crate::text::Text;

/// `bytes` in MiB with one decimal, as an error line says it.
fn mib(bytes: usize) -> String {
    format!("{:.1}", bytes as f64 / 1048576.0)
}

/// Loads the driver library and initialises it. The library is opened at run time, so a
/// machine without the NVIDIA driver gets this one-line error instead of a loader failure.
fn init_driver() -> Result<()> {
    if !driver::library_present() {
        return Err(Error::NoDevice(t!("error.runtime.no_libcuda")));
    }
    driver::init().map_err(|status| {
        let code = DriverCode::from_status(status).to_string();
        Error::NoDevice(t!("error.runtime.cu_init", code))
    })
}

/// Whether the driver's library (`libcuda`) can be loaded, without initialising it:
/// `streamlab trace` asks before it starts a program, and leaves CUDA to the program.
pub fn driver_library_present() -> bool {
    driver::library_present()
}

/// How many CUDA devices the driver sees, or why there are none.
pub fn device_count() -> Result<u32> {
    init_driver()?;
    let count = driver::device_get_count().named("cuDeviceGetCount")?;
    Ok(count.max(0) as u32)
}

thread_local! {
    /// The context streamlab last made current on this thread (null: none yet).
    static CURRENT: Cell<cu::CUcontext> = const { Cell::new(std::ptr::null_mut()) };
}

struct Primary {
    raw: cu::CUcontext,
    device: cu::CUdevice,
    ordinal: u32,
}

impl Drop for Primary {
    fn drop(&mut self) {
        // SAFETY: balances the retain in `Context::new`; every handle that used the context
        // held an Rc to it, so none is left.
        let _ = unsafe { driver::device_primary_ctx_release(self.device) };
    }
}

/// A device's primary context (what the CUDA runtime uses), retained while any clone lives.
#[derive(Clone)]
pub struct Context {
    primary: Rc<Primary>,
}

/// Anything that can say which context it works in: lets `Stream::new(&gpu, ..)` and
/// `Stream::new(&context, ..)` read the same.
pub trait AsContext {
    fn context(&self) -> &Context;
}

impl AsContext for Context {
    fn context(&self) -> &Context {
        self
    }
}

impl Context {
    /// Initialises the driver and retains device `ordinal`'s primary context, current on
    /// this thread.
    pub fn new(ordinal: u32) -> Result<Context> {
        let count = device_count()?;
        if count == 0 {
            return Err(Error::NoDevice(t!("error.runtime.zero_devices")));
        }
        if ordinal >= count {
            let last = count - 1;
            return Err(Error::InvalidInput(t!(
                "error.runtime.no_such_device",
                ordinal,
                count,
                last
            )));
        }
        let device = driver::device_get(ordinal as i32).named("cuDeviceGet")?;
        // Released in `Primary::drop`.
        let raw = driver::device_primary_ctx_retain(device).named("cuDevicePrimaryCtxRetain")?;
        let context = Context { primary: Rc::new(Primary { raw, device, ordinal }) };
        context.make_current()?;
        Ok(context)
    }

    /// Makes this context current on the calling thread (`cuCtxSetCurrent`).
    pub fn make_current(&self) -> Result<()> {
        // SAFETY: the context is retained for as long as `self` lives.
        unsafe { driver::ctx_set_current(self.primary.raw) }.named("cuCtxSetCurrent")?;
        CURRENT.with(|c| c.set(self.primary.raw));
        Ok(())
    }

    /// Forgets which context is current on this thread, after a library (NCCL) that may have
    /// changed it behind our back: the next [`Context::bind`] sets it again.
    pub(crate) fn forget_current() {
        CURRENT.with(|c| c.set(std::ptr::null_mut()));
    }

    /// Makes this context current unless it already is: every allocation, stream, event and
    /// enqueue calls this, so work for two GPUs can be issued from one thread, as
    /// `cudaSetDevice` does in CUDA C++. One thread-local compare when one GPU is used.
    pub(crate) fn bind(&self) -> Result<()> {
        if CURRENT.with(Cell::get) == self.primary.raw {
            return Ok(());
        }
        self.make_current()
    }

    pub fn ordinal(&self) -> u32 {
        self.primary.ordinal
    }

    pub fn as_raw(&self) -> cu::CUcontext {
        self.primary.raw
    }

    pub(crate) fn device(&self) -> cu::CUdevice {
        self.primary.device
    }

    /// The device's PCI address, "0000:19:00.0" (`cuDeviceGetPCIBusId`).
    pub fn pci_bus_id(&self) -> Result<String> {
        driver::device_get_pci_bus_id(self.device()).named("cuDeviceGetPCIBusId")
    }

    /// Waits for all work on the device (`cudaDeviceSynchronize`).
    pub fn synchronize(&self) -> Result<()> {
        // cuCtxSynchronize waits for the current context: make it this one.
        self.bind()?;
        driver::ctx_synchronize().named("cuCtxSynchronize")
    }

    /// The driver's CUDA version, e.g. 13000 for 13.0 (`cuDriverGetVersion`).
    pub fn driver_version(&self) -> Result<i32> {
        driver::driver_get_version().named("cuDriverGetVersion")
    }

    /// (free, total) device memory in bytes (`cudaMemGetInfo`).
    pub fn memory(&self) -> Result<(usize, usize)> {
        // cuMemGetInfo reports the current context's device: make it this one.
        self.bind()?;
        driver::mem_get_info().named("cuMemGetInfo")
    }

    /// Fails with a one-line explanation when `bytes` of device memory are not free.
    /// `what` names what needs them: a label, or a sentence of the catalogs.
    pub fn ensure_device_memory(&self, bytes: usize, what: impl Into<Text>) -> Result<()> {
        let (free, _) = self.memory()?;
        // Leave room for the context, the module and the driver's own allocations.
        let usable = free.saturating_sub(256 << 20);
        if bytes > usable {
            let (what, need, free) = (what.into(), mib(bytes), mib(usable));
            return Err(Error::InvalidInput(t!("error.runtime.device_memory", what, need, free)));
        }
        Ok(())
    }

    fn attribute(&self, attr: A, name: &str) -> Result<i32> {
        driver::device_get_attribute(attr, self.device())
            .named(format!("cuDeviceGetAttribute({name})"))
    }

    /// (major, minor): what decides which embedded PTX the device loads.
    pub fn compute_capability(&self) -> Result<(i32, i32)> {
        Ok((
            self.attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "major")?,
            self.attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "minor")?,
        ))
    }

    /// The device facts `streamlab info` prints and lessons size their work by; `kernels`
    /// says where the loaded kernels came from.
    pub fn info(&self, kernels: KernelSource) -> Result<DeviceInfo> {
        // Binds this context, which the priority range below is asked of.
        let (free, total) = self.memory()?;
        let (least, greatest) =
            driver::ctx_get_stream_priority_range().named("cuCtxGetStreamPriorityRange")?;
        let driver_version = self.driver_version()?;
        let name = driver::device_get_name(self.device()).named("cuDeviceGetName")?;
        let a = |attr, what| self.attribute(attr, what);
        Ok(DeviceInfo {
            ordinal: self.ordinal(),
            name,
            compute_capability: self.compute_capability()?,
            multiprocessors: a(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count")?,
            max_threads_per_multiprocessor: a(
                A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
                "max threads per SM",
            )?,
            total_memory_bytes: total,
            free_memory_bytes: free,
            clock_khz: a(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "clock rate")?,
            memory_clock_khz: a(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, "memory clock")?,
            memory_bus_width_bits: a(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, "bus width")?,
            l2_cache_bytes: a(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size")?,
            concurrent_kernels: a(A::CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, "concurrentKernels")?
                != 0,
            async_engine_count: a(A::CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, "asyncEngineCount")?,
            device_overlap: a(A::CU_DEVICE_ATTRIBUTE_GPU_OVERLAP, "deviceOverlap")? != 0,
            priority_range: (least, greatest),
            driver_version,
            ptx_arch: kernels.arch,
            ptx_choice: kernels.why,
        })
    }
}

/// What `streamlab info` prints, and what lessons use to size their work.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceInfo {
    pub ordinal: u32,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub multiprocessors: i32,
    /// Resident threads per SM (2048 on sm_80 and sm_90, 1536 on sm_86 and sm_89, 1024 on sm_75).
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
    /// The embedded PTX the kernels were loaded from (`sm_90`), or `none` where they came
    /// from a file (`Gpu::with_kernels_from`).
    pub ptx_arch: String,
    /// Why that PTX (`runtime::ptx::Choice`'s words), or the file the kernels came from.
    pub ptx_choice: String,
}

/// Where a context's kernels came from, as [`DeviceInfo`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSource {
    pub arch: String,
    pub why: String,
}

impl DeviceInfo {
    /// How many blocks of `threads` threads fit on one SM at once (by thread count; the
    /// sleep kernel uses no shared memory and few registers, so threads are the limit).
    pub fn resident_blocks_per_sm(&self, threads: u32) -> u32 {
        (self.max_threads_per_multiprocessor as u32 / threads.max(1)).max(1)
    }

    /// How many clock ticks of an SM make `micros` microseconds, at the rated clock.
    pub fn cycles_for_micros(&self, micros: f64) -> u64 {
        (micros * self.clock_khz as f64 / 1000.0).round() as u64
    }
}
