//! Managed (unified) memory: one address that the host and the GPU both use, while the driver
//! moves the pages to whichever processor touches them.
//!
//! | CUDA C++                                                  | streamlab                               |
//! |-----------------------------------------------------------|-----------------------------------------|
//! | `cudaMemGetInfo(&free, &total)`                           | `gpu.context().memory()`                |
//! | `cudaMallocManaged(&p, bytes)` (then the host zeroes it)  | `ManagedBuffer::zeroed(&gpu, n)`        |
//! | `kernel<<<g, b, 0, s>>>(p + offset, ...)`                 | `gpu.compute(&s, m.slice(range)?, ..)`  |
//! | `cudaDeviceSynchronize(); memcpy(p, host, bytes)`         | `m.write_from_host(&values)`            |
//! | `cudaDeviceSynchronize(); memcpy(host, p, bytes)`         | `m.read_to_host(&mut out)`              |
//! | `cudaMemPrefetchAsync(p, bytes, device, s)`               | `s.prefetch(&m, range, Location::Device)` |
//! | `cudaMemPrefetchAsync(p, bytes, cudaCpuDeviceId, s)`      | `s.prefetch(&m, range, Location::Host)` |
//! | `cudaMemAdvise(p, bytes, cudaMemAdviseSetAccessedBy, device)` | `m.advise(Advice::AccessedBy(Location::Device))` |
//!
//! A page lives in one place at a time. A kernel that touches a page resident on the host
//! stalls on a page fault until the driver has migrated it; the host reading a page resident
//! on the GPU faults the same way. `cuMemPrefetchAsync` migrates a range on a stream instead,
//! in order with the stream's other work and before anyone asks. `cuMemAdvise` changes the
//! policy: where pages prefer to live, and which processor keeps a mapping of them so that it
//! reads them over the bus instead of faulting.
//!
//! Asking for more managed memory than the GPU has free makes the driver evict pages to the
//! host while kernels run (oversubscription); at worst the GPU stalls for a long time. So
//! [`ManagedBuffer::zeroed`] refuses, in one line, anything that does not fit in what
//! `cuMemGetInfo` reports free.
use bytemuck::Pod;
use cudarc::driver::sys::{self as cu, CUdevice_attribute as A};

use crate::runtime::context::{AsContext, Context};
use crate::runtime::driver;
use crate::runtime::error::{Error, Named, Result};
use crate::runtime::memory::{bytes_of, DeviceBuffer, DeviceView, Release};
use crate::runtime::op::{Op, OpKind};
use crate::runtime::stream::Stream;
use crate::t;

/// The first driver (12.2) with `cuMemPrefetchAsync_v2` and `cuMemAdvise_v2`, which name a
/// location instead of a device; older drivers get the first versions.
const LOCATION_API: i32 = 12020;
/// `CU_DEVICE_CPU`: the host, for the first versions of prefetch and advise.
const CU_DEVICE_CPU: cu::CUdevice = -1;

/// Where a managed range should be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// The GPU of the buffer's context.
    Device,
    /// Host memory (`cudaCpuDeviceId`).
    Host,
}

/// A hint for the driver about a managed range (`cudaMemAdvise`). Advice stays with the
/// memory until the buffer is freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    /// Pages stay at this location where they can: another processor that touches them
    /// gets a mapping if it can have one, else they migrate (`SetPreferredLocation`).
    PreferredLocation(Location),
    /// This processor keeps the pages mapped wherever they are: it reads and writes them
    /// over the bus instead of faulting (`SetAccessedBy`).
    AccessedBy(Location),
    /// Reads make read-only copies where they happen; a write drops every copy but one
    /// (`SetReadMostly`).
    ReadMostly,
}

/// `n` elements of `T` in managed memory (`cudaMallocManaged`). Kernels take it through
/// [`ManagedBuffer::slice`] (or `&buffer`, which converts to a [`DeviceView`]); the host
/// writes and reads it through [`ManagedBuffer::write_from_host`] and
/// [`ManagedBuffer::read_to_host`], which wait for the device first and touch the pages from
/// the CPU (so pages resident on the GPU fault back to the host). Freed with `cuMemFree`,
/// which waits for the device.
pub struct ManagedBuffer<T> {
    buffer: DeviceBuffer<T>,
    location_api: bool,
    context: Context,
}

fn supported(context: &Context, attr: A, name: &str) -> Result<bool> {
    let value = driver::device_get_attribute(attr, context.device())
        .named(format!("cuDeviceGetAttribute({name})"))?;
    Ok(value != 0)
}

impl<T: Pod> ManagedBuffer<T> {
    /// `n` zeroed elements. Refused in one line where the device cannot fault pages in on
    /// demand (`concurrentManagedAccess`: Pascal or newer, on Linux), and where the bytes are
    /// more than the GPU has free, before anything is allocated.
    pub fn zeroed(on: &impl AsContext, n: usize) -> Result<ManagedBuffer<T>> {
        let context = on.context();
        let attr = A::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS;
        if !supported(context, attr, "CONCURRENT_MANAGED_ACCESS")? {
            return Err(Error::NotRun(t!("error.runtime.no_managed_on_demand")));
        }
        let bytes = bytes_of::<T>(n, "cuMemAllocManaged")?;
        context.ensure_device_memory(bytes, t!("error.runtime.managed_alloc", n))?;
        let mut ptr = 0;
        if bytes > 0 {
            let flags = cu::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL as u32;
            // The context is current; the size fits (checked).
            ptr = driver::mem_alloc_managed(bytes, flags).named("cuMemAllocManaged")?;
        }
        let buffer = DeviceBuffer::wrap(context, ptr, n, Release::Sync);
        let location_api = context.driver_version()? >= LOCATION_API;
        let managed = ManagedBuffer { buffer, location_api, context: context.clone() };
        // The host's first touch: the pages start on the host, zeroed.
        managed.host_copy(|p, bytes| {
            // SAFETY: `p` holds `bytes` bytes and no device work is in flight.
            unsafe { std::ptr::write_bytes(p, 0, bytes) }
        })?;
        Ok(managed)
    }

    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    /// The elements `range`, for a kernel.
    pub fn slice(&self, range: std::ops::Range<usize>) -> Result<DeviceView<'_, T>> {
        self.buffer.slice(range)
    }

    /// Runs `touch` on the whole buffer's address and size after every piece of work in the
    /// context is done.
    fn host_copy(&self, touch: impl FnOnce(*mut u8, usize)) -> Result<()> {
        // No kernel, copy or prefetch of this context may use the memory while the CPU does:
        // wait for all of them (this buffer is not `Send`, so no other thread has it).
        self.context.synchronize()?;
        let bytes = self.buffer.len() * std::mem::size_of::<T>();
        if bytes > 0 {
            touch(self.address() as *mut u8, bytes);
        }
        Ok(())
    }

    fn address(&self) -> cu::CUdeviceptr {
        DeviceView::from(&self.buffer).device_ptr()
    }

    /// Waits for the device, then the CPU writes `values` into the buffer: every page it
    /// writes is (or becomes) resident on the host.
    pub fn write_from_host(&self, values: &[T]) -> Result<()> {
        same_length(values.len(), self.len(), "write_from_host")?;
        self.host_copy(|p, bytes| {
            // SAFETY: both hold `bytes` bytes and do not overlap (`values` is host memory the
            // caller borrows); no device work uses the buffer now (`host_copy` waited).
            unsafe { std::ptr::copy_nonoverlapping(values.as_ptr().cast::<u8>(), p, bytes) }
        })
    }

    /// Waits for the device, then the CPU reads the buffer into `out`: pages resident on the
    /// GPU fault back to the host as they are read.
    pub fn read_to_host(&self, out: &mut [T]) -> Result<()> {
        same_length(out.len(), self.len(), "read_to_host")?;
        self.host_copy(|p, bytes| {
            // SAFETY: as in `write_from_host`, with `out` borrowed mutably by the caller.
            unsafe { std::ptr::copy_nonoverlapping(p.cast_const(), out.as_mut_ptr().cast(), bytes) }
        })
    }

    /// The contents, read by the CPU (see [`ManagedBuffer::read_to_host`]).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut out = vec![T::zeroed(); self.len()];
        self.read_to_host(&mut out)?;
        Ok(out)
    }

    /// Gives the driver `advice` for the whole buffer (`cudaMemAdvise`).
    pub fn advise(&self, advice: Advice) -> Result<()> {
        use cu::CUmem_advise as M;
        let (how, at) = match advice {
            Advice::PreferredLocation(at) => (M::CU_MEM_ADVISE_SET_PREFERRED_LOCATION, at),
            Advice::AccessedBy(at) => (M::CU_MEM_ADVISE_SET_ACCESSED_BY, at),
            // The location is ignored for read-mostly.
            Advice::ReadMostly => (M::CU_MEM_ADVISE_SET_READ_MOSTLY, Location::Device),
        };
        let bytes = self.buffer.len() * std::mem::size_of::<T>();
        if bytes == 0 {
            return Ok(());
        }
        let (ptr, context) = (self.address(), &self.context);
        let advised = if self.location_api {
            // SAFETY: a managed range of this context, whole; the advice and location are
            // valid enum values.
            unsafe { driver::mem_advise_v2(ptr, bytes, how, location(context, at)) }
        } else {
            // SAFETY: as above, with the device handle (or CU_DEVICE_CPU) of the first version.
            unsafe { driver::mem_advise(ptr, bytes, how, device(context, at)) }
        };
        advised.named(format!("cuMemAdvise({advice:?})"))
    }
}

fn same_length(host: usize, managed: usize, op: &str) -> Result<()> {
    if host == managed {
        return Ok(());
    }
    Err(Error::Internal(format!("{op}: host has {host} elements, the managed buffer {managed}")))
}

fn location(context: &Context, at: Location) -> cu::CUmemLocation {
    match at {
        Location::Device => cu::CUmemLocation {
            type_: cu::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: context.device(),
        },
        Location::Host => {
            cu::CUmemLocation { type_: cu::CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST, id: 0 }
        }
    }
}

fn device(context: &Context, at: Location) -> cu::CUdevice {
    match at {
        Location::Device => context.device(),
        Location::Host => CU_DEVICE_CPU,
    }
}

impl<'a, T: Pod> From<&'a ManagedBuffer<T>> for DeviceView<'a, T> {
    fn from(buffer: &'a ManagedBuffer<T>) -> Self {
        DeviceView::from(&buffer.buffer)
    }
}

impl Stream {
    /// Enqueues the migration of `buffer[range]` to `to` (`cudaMemPrefetchAsync`): in order
    /// with this stream's other work, so a kernel enqueued after it finds the pages in place
    /// instead of faulting on them. The observer sees it as a copy labelled "prefetch".
    pub fn prefetch<T: Pod>(
        &self,
        buffer: &ManagedBuffer<T>,
        range: std::ops::Range<usize>,
        to: Location,
    ) -> Result<()> {
        let view = buffer.slice(range)?;
        let (ptr, bytes) = (view.device_ptr(), view.bytes());
        let (kind, label) = match to {
            Location::Device => (OpKind::CopyToDevice, "prefetch to device"),
            Location::Host => (OpKind::CopyToHost, "prefetch to host"),
        };
        if bytes == 0 {
            return Ok(());
        }
        let op = Op { kind, label, bytes, launch: None };
        let context = &buffer.context;
        self.enqueue(op, || {
            let prefetched = if buffer.location_api {
                // SAFETY: a range inside a live managed allocation (checked by `slice`) on a
                // live stream; migrating pages never changes what they hold.
                unsafe {
                    driver::mem_prefetch_async_v2(ptr, bytes, location(context, to), self.as_raw())
                }
            } else {
                // SAFETY: as above, with the first version's device handle.
                unsafe {
                    driver::mem_prefetch_async(ptr, bytes, device(context, to), self.as_raw())
                }
            };
            prefetched.named_on("cuMemPrefetchAsync", self.name())
        })
    }
}
