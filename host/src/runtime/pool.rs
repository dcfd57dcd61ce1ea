//! Stream-ordered allocation: device memory allocated and freed *on a stream*, from the
//! device's memory pool, instead of by calls that act on the whole device.
//!
//! | CUDA C++                                              | streamlab                               |
//! |-------------------------------------------------------|-----------------------------------------|
//! | `cudaMalloc(&d, bytes)` (no memset)                   | `DeviceBuffer::alloc(&gpu, n)`          |
//! | `cudaMallocAsync(&d, bytes, s)`                       | `DeviceBuffer::alloc_async(&s, n)`      |
//! | `cudaFreeAsync(d, s)`                                 | `d.free_async(&s)`, or drop `d`         |
//! | `cudaDeviceGetDefaultMemPool(&pool, device)`          | `gpu.context().default_mem_pool()`      |
//! | `cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &b)` | `pool.set_release_threshold(b)` |
//! | `cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &b)` | `pool.reserved_bytes()` |
//! | `cudaMemPoolTrimTo(pool, b)`                          | `pool.trim_to(b)`                       |
//!
//! `cuMemFree` waits until the whole device is idle, so a free inside a loop over several
//! streams drains every stream. `cuMemAllocAsync` and `cuMemFreeAsync` are operations in one
//! stream's queue instead: the memory is the stream's from the point the allocation is reached
//! until the free is, and the pool hands it to the next allocation on that stream without
//! asking the driver. The pool keeps freed memory up to its *release threshold* (0 by
//! default); above it, the next stream, event or context synchronize gives memory back to the
//! operating system, and the next allocation must map it again.
use bytemuck::Pod;
use cudarc::driver::sys::{self as cu, CUmemPool_attribute as Attr};

use crate::runtime::context::Context;
use crate::runtime::driver;
use crate::runtime::error::{Error, Named, Result};
use crate::runtime::in_flight;
use crate::runtime::memory::{bytes_of, DeviceBuffer, DeviceView, Release};
use crate::runtime::stream::{Event, Stream};
use crate::t;

fn refuse_in_capture(op: &str, stream: &Stream) -> Result<()> {
    if in_flight::capturing() {
        return Err(Error::Capture {
            op: op.to_string(),
            stream: Some(stream.name().to_string()),
            status: "active".into(),
            cause: Box::new(t!("error.capture.no_allocations")),
        });
    }
    Ok(())
}

impl<T: Pod> DeviceBuffer<T> {
    /// `n` elements allocated on `stream` from the device's default memory pool
    /// (`cudaMallocAsync`): usable by work enqueued on `stream` after this call (work on
    /// another stream must wait for `stream` through an event first). The contents are
    /// unspecified, as with [`DeviceBuffer::alloc`].
    pub fn alloc_async(stream: &Stream, n: usize) -> Result<StreamBuffer<T>> {
        refuse_in_capture("cuMemAllocAsync", stream)?;
        let bytes = bytes_of::<T>(n, "cuMemAllocAsync")?;
        let mut ptr = 0;
        if bytes > 0 {
            // SAFETY: the stream is live and not capturing (checked above).
            let allocated = unsafe { driver::mem_alloc_async(bytes, stream.as_raw()) };
            ptr = allocated.named_on("cuMemAllocAsync", stream.name())?;
        }
        let release = Release::OnStream(stream.as_raw(), Box::new(stream.handle()));
        let buffer = DeviceBuffer::wrap(stream.context(), ptr, n, release);
        Ok(StreamBuffer { buffer, stream: stream.handle() })
    }
}

/// Device memory from [`DeviceBuffer::alloc_async`]. Use it wherever a [`DeviceBuffer`] goes
/// (it derefs to one: `.slice(range)`, `.len()`; `&buffer` converts to a [`DeviceView`]).
/// Give it back with [`StreamBuffer::free_async`]; dropped without that, it is freed on the
/// stream it was allocated on, after the work enqueued there before the drop.
pub struct StreamBuffer<T> {
    buffer: DeviceBuffer<T>,
    stream: Stream,
}

impl<T: Pod> StreamBuffer<T> {
    /// The stream this buffer was allocated on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Frees the memory on `stream` (`cudaFreeAsync`): the pool may hand it out again once
    /// `stream` reaches the free. On another stream than the allocating one, `stream` first
    /// waits for the allocating stream's work so far (work on any third stream that uses the
    /// buffer must be ordered before the free by the caller, as in CUDA C++).
    pub fn free_async(self, stream: &Stream) -> Result<()> {
        refuse_in_capture("cuMemFreeAsync", stream)?;
        if stream.as_raw() != self.stream.as_raw() {
            let done = Event::without_timing(stream.context())?;
            done.record(&self.stream)?;
            stream.wait_event(&done)?;
        }
        let freed =
            self.buffer.release(Release::OnStream(stream.as_raw(), Box::new(stream.handle())));
        freed.named_on("cuMemFreeAsync", stream.name())
    }
}

impl<T> std::ops::Deref for StreamBuffer<T> {
    type Target = DeviceBuffer<T>;
    fn deref(&self) -> &DeviceBuffer<T> {
        &self.buffer
    }
}

impl<'a, T: Pod> From<&'a StreamBuffer<T>> for DeviceView<'a, T> {
    fn from(buffer: &'a StreamBuffer<T>) -> Self {
        DeviceView::from(&buffer.buffer)
    }
}

/// A device's memory pool: where stream-ordered allocations come from. The default pool
/// lives as long as the context; this handle only names it.
pub struct MemPool {
    raw: cu::CUmemoryPool,
    _context: Context,
}

impl Context {
    /// The device's default memory pool (`cudaDeviceGetDefaultMemPool`), the one
    /// [`DeviceBuffer::alloc_async`] allocates from. Fails in one line where the device or
    /// driver has no memory pools.
    pub fn default_mem_pool(&self) -> Result<MemPool> {
        let attr = cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED;
        let supported = driver::device_get_attribute(attr, self.device())
            .named("cuDeviceGetAttribute(MEMORY_POOLS_SUPPORTED)")?;
        if supported == 0 {
            return Err(Error::NotRun(t!("error.runtime.no_mem_pools")));
        }
        // The default pool is never destroyed: this handle stays valid with the context.
        let raw = driver::device_get_default_mem_pool(self.device())
            .named("cuDeviceGetDefaultMemPool")?;
        Ok(MemPool { raw, _context: self.clone() })
    }
}

impl MemPool {
    fn get(&self, attr: Attr, name: &str) -> Result<u64> {
        // SAFETY: a live pool; every attribute read here is a cuuint64_t.
        let value = unsafe { driver::mem_pool_get_attribute(self.raw, attr) };
        value.named(format!("cuMemPoolGetAttribute({name})"))
    }

    /// Keep up to `bytes` of freed memory in the pool across synchronizations
    /// (`cudaMemPoolAttrReleaseThreshold`); `u64::MAX` keeps all of it. Above the threshold, a
    /// stream, event or context synchronize gives the rest back to the operating system.
    pub fn set_release_threshold(&self, bytes: u64) -> Result<()> {
        let attr = Attr::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD;
        // SAFETY: a live pool; the release threshold is a cuuint64_t.
        let set = unsafe { driver::mem_pool_set_attribute(self.raw, attr, bytes) };
        set.named("cuMemPoolSetAttribute(RELEASE_THRESHOLD)")
    }

    /// The release threshold, bytes.
    pub fn release_threshold(&self) -> Result<u64> {
        self.get(Attr::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, "RELEASE_THRESHOLD")
    }

    /// Memory the pool holds now, in use or kept for reuse, bytes.
    pub fn reserved_bytes(&self) -> Result<u64> {
        self.get(Attr::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, "RESERVED_MEM_CURRENT")
    }

    /// Memory of the pool in use by allocations now, bytes.
    pub fn used_bytes(&self) -> Result<u64> {
        self.get(Attr::CU_MEMPOOL_ATTR_USED_MEM_CURRENT, "USED_MEM_CURRENT")
    }

    /// Gives memory no allocation uses back to the operating system, until the pool holds
    /// `bytes` or less, or nothing unused is left (`cudaMemPoolTrimTo`).
    pub fn trim_to(&self, bytes: usize) -> Result<()> {
        // SAFETY: a live pool; trimming never touches memory that is allocated.
        unsafe { driver::mem_pool_trim_to(self.raw, bytes) }.named("cuMemPoolTrimTo")
    }
}
