//! Host and device buffers, and the blocking copies between them.
//!
//! | CUDA C++                                         | streamlab                                   |
//! |--------------------------------------------------|---------------------------------------------|
//! | `cudaMallocHost(&p, bytes)`                      | `HostBuffer::pinned(&gpu, n)`               |
//! | `malloc` / `std::vector`                         | `HostBuffer::pageable(&gpu, n)`             |
//! | `cudaMalloc(&d, bytes)`                          | `DeviceBuffer::alloc(&gpu, n)`              |
//! | `cudaMalloc` then `cudaMemset(d, 0, bytes)`      | `DeviceBuffer::zeroed(&gpu, n)`             |
//! | `cudaMemset(d, value, bytes)`                    | `memset(&d, value)`                         |
//! | `cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice)`| `copy_to_device_sync(&h, &d)`               |
//! | `cudaMemcpyAsync(d, h, bytes, H2D, stream)`      | `stream.copy_to_device(&h, &d)`             |
//!
//! An asynchronous copy returns before it happens, which is why CUDA C++ programs crash when
//! they free or read the host side too early. Here a [`HostBuffer`] records an event after
//! each copy of it (into an event of its own, reused), and waits for that event, not for the
//! stream, when the host takes it back: [`HostBuffer::read`] waits for the copies that write
//! it, [`HostBuffer::write`] and dropping the buffer for every copy of it. Work queued on the
//! same stream after the last copy is not waited for, as with `cudaEventSynchronize` on an
//! event recorded after that copy in CUDA C++. While the host holds a borrow, copies that
//! would race with it are refused with an error. So the copies are safe calls.
use std::any::Any;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::ops::Range;
use std::rc::Rc;

use bytemuck::Pod;
use cudarc::driver::sys as cu;

use crate::runtime::context::{AsContext, Context};
use crate::runtime::driver::{self, DriverResult};
use crate::runtime::error::{Error, Named, Result};
use crate::runtime::in_flight::{self, Kept};
use crate::t;

mod host;
pub use host::{HostBuffer, HostMut, HostRef, HostView};

pub(crate) fn bytes_of<T>(n: usize, what: &str) -> Result<usize> {
    n.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
        Error::InvalidInput(t!("error.runtime.too_many_bytes", what = what.to_string(), n))
    })
}

fn check_range(range: &Range<usize>, len: usize, what: &str) -> Result<()> {
    if range.start <= range.end && range.end <= len {
        Ok(())
    } else {
        Err(Error::Internal(format!(
            "{what}: range {range:?} is outside a buffer of {len} elements"
        )))
    }
}

/// How a device allocation is given back.
pub(crate) enum Release {
    /// `cuMemFree`: waits for all work on the device first.
    Sync,
    /// `cuMemFreeAsync` on this stream (the `Box` keeps it alive): the memory goes back to
    /// its pool once the work enqueued there before the free is done.
    OnStream(cu::CUstream, #[allow(dead_code)] Box<dyn Any>),
}

impl Release {
    fn free(&self, ptr: cu::CUdeviceptr) -> DriverResult<()> {
        match self {
            // SAFETY: the caller owns `ptr`; cuMemFree waits for work using it to finish.
            Release::Sync => unsafe { driver::mem_free(ptr) },
            // SAFETY: the caller owns `ptr`, which came from cuMemAllocAsync; the stream is
            // alive (held by the box), and the free is ordered after its earlier work.
            Release::OnStream(stream, _) => unsafe { driver::mem_free_async(ptr, *stream) },
        }
    }
}

struct DeviceAlloc {
    ptr: cu::CUdeviceptr,
    release: RefCell<Release>,
    context: Context,
}

impl Drop for DeviceAlloc {
    fn drop(&mut self) {
        if self.ptr != 0 {
            // cuMemFree acts in the current context; another GPU's may be current now.
            let _ = self.context.bind();
            let _ = self.release.get_mut().free(self.ptr);
        }
    }
}

/// `n` elements of `T` in device memory (`cudaMalloc`). Allocation and freeing synchronize
/// the device: allocate in setup, never inside a timed region.
pub struct DeviceBuffer<T> {
    alloc: Rc<DeviceAlloc>,
    len: usize,
    _element: PhantomData<T>,
}

impl<T: Pod> DeviceBuffer<T> {
    /// `n` elements with `cuMemAlloc` alone (`cudaMalloc`): no memset, so the contents are
    /// whatever the memory held (any bits are a valid `T`); write them before reading. Dropped,
    /// it is freed with `cuMemFree`, which waits for the whole device.
    pub fn alloc(on: &impl AsContext, n: usize) -> Result<DeviceBuffer<T>> {
        let bytes = bytes_of::<T>(n, "cuMemAlloc")?;
        on.context().bind()?;
        // No allocation for no bytes: address 0, never freed.
        let ptr = if bytes > 0 { driver::mem_alloc(bytes).named("cuMemAlloc")? } else { 0 };
        Ok(Self::wrap(on, ptr, n, Release::Sync))
    }

    /// `n` zeroed elements: [`DeviceBuffer::alloc`], then [`memset`] to 0, waited for. The
    /// memset runs on the legacy default stream and returns before it has run, and work on a
    /// non-blocking stream does not wait for the legacy stream: without the wait, such work
    /// could read the buffer before it is zero, or be zeroed under its own writes.
    pub fn zeroed(on: &impl AsContext, n: usize) -> Result<DeviceBuffer<T>> {
        let buffer = Self::alloc(on, n)?;
        if !buffer.is_empty() {
            memset(&buffer, 0)?;
            on.context().synchronize()?;
        }
        Ok(buffer)
    }

    /// Owns `n` elements at `ptr` (0 when `n` is 0), given back by `release` when dropped.
    pub(crate) fn wrap(
        on: &impl AsContext,
        ptr: cu::CUdeviceptr,
        n: usize,
        release: Release,
    ) -> Self {
        let alloc =
            DeviceAlloc { ptr, release: RefCell::new(release), context: on.context().clone() };
        DeviceBuffer { alloc: Rc::new(alloc), len: n, _element: PhantomData }
    }

    /// Gives the memory back through `release` now and returns what the driver said, or,
    /// while a captured graph still holds the allocation, leaves it to the graph to give back
    /// that way.
    pub(crate) fn release(self, release: Release) -> DriverResult<()> {
        match Rc::try_unwrap(self.alloc) {
            Ok(mut alloc) => {
                let freed = if alloc.ptr != 0 { release.free(alloc.ptr) } else { Ok(()) };
                alloc.ptr = 0;
                freed
            }
            Err(shared) => {
                *shared.release.borrow_mut() = release;
                Ok(())
            }
        }
    }

    /// A device copy of `values` (allocates, copies with `cudaMemcpy`, and waits until the
    /// bytes have landed).
    pub fn from_slice(on: &impl AsContext, values: &[T]) -> Result<DeviceBuffer<T>> {
        let buffer = Self::zeroed(on, values.len())?;
        // Landed, not only staged: the buffer is read next by work on non-blocking streams,
        // which do not wait for the legacy stream's copy (see `copy_to_device_landed`).
        copy_to_device_landed(values, &buffer)?;
        Ok(buffer)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements `range` of this buffer, for a copy or a launch.
    pub fn slice(&self, range: Range<usize>) -> Result<DeviceView<'_, T>> {
        check_range(&range, self.len, "device buffer")?;
        Ok(DeviceView { buffer: self, range })
    }

    /// The whole buffer copied to a new `Vec` (`cudaMemcpy`, blocking).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut out = vec![T::zeroed(); self.len];
        copy_to_host_sync(self, &mut out)?;
        Ok(out)
    }
}

/// A range of a [`DeviceBuffer`].
pub struct DeviceView<'a, T> {
    buffer: &'a DeviceBuffer<T>,
    range: Range<usize>,
}

impl<T> Clone for DeviceView<'_, T> {
    fn clone(&self) -> Self {
        DeviceView { buffer: self.buffer, range: self.range.clone() }
    }
}

impl<'a, T: Pod> From<&'a DeviceBuffer<T>> for DeviceView<'a, T> {
    fn from(buffer: &'a DeviceBuffer<T>) -> Self {
        DeviceView { buffer, range: 0..buffer.len }
    }
}

impl<T: Pod> DeviceView<'_, T> {
    pub fn len(&self) -> usize {
        self.range.len()
    }

    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }

    /// The device address of the first element. Also tells a capture in progress that the
    /// graph must keep this buffer alive.
    pub(crate) fn device_ptr(&self) -> cu::CUdeviceptr {
        in_flight::keep(|| Kept::Device(Rc::clone(&self.buffer.alloc) as Rc<dyn Any>));
        self.buffer.alloc.ptr + (self.range.start * std::mem::size_of::<T>()) as u64
    }

    pub(crate) fn bytes(&self) -> usize {
        self.range.len() * std::mem::size_of::<T>()
    }

    /// The context (device) the memory belongs to.
    pub fn context(&self) -> &Context {
        &self.buffer.alloc.context
    }
}

fn check_lengths(host: usize, device: usize, op: &str) -> Result<()> {
    if host == device {
        Ok(())
    } else {
        Err(Error::Internal(format!("{op}: host has {host} elements, device {device}")))
    }
}

/// Blocking host-to-device copy on the legacy default stream (`cudaMemcpy`).
pub fn copy_to_device_sync<'d, T: Pod>(src: &[T], dst: impl Into<DeviceView<'d, T>>) -> Result<()> {
    let dst = dst.into();
    check_lengths(src.len(), dst.len(), "cuMemcpyHtoD")?;
    dst.context().bind()?;
    // SAFETY: lengths match; the call returns only when the copy is done, so `src` outlives it.
    let copied = unsafe { driver::memcpy_htod(dst.device_ptr(), src.as_ptr().cast(), dst.bytes()) };
    copied.named_on("cuMemcpyHtoD", "legacy default stream")
}

/// [`copy_to_device_sync`], then waits until the bytes have landed. From pageable memory
/// `cuMemcpyHtoD` returns once the bytes are staged, and the last of them may still be on
/// their way when work on a non-blocking stream (which does not wait for the legacy stream)
/// starts: a buffer cleared this way before a run could be cleared again under the run's
/// own writes (seen in p2p's check at 1 MiB on two H100s).
pub fn copy_to_device_landed<'d, T: Pod>(
    src: &[T],
    dst: impl Into<DeviceView<'d, T>>,
) -> Result<()> {
    let dst = dst.into();
    copy_to_device_sync(src, dst.clone())?;
    dst.context().synchronize()
}

/// Blocking device-to-host copy on the legacy default stream (`cudaMemcpy`).
pub fn copy_to_host_sync<'d, T: Pod>(
    src: impl Into<DeviceView<'d, T>>,
    dst: &mut [T],
) -> Result<()> {
    let src = src.into();
    check_lengths(dst.len(), src.len(), "cuMemcpyDtoH")?;
    src.context().bind()?;
    // SAFETY: lengths match; a blocking copy into memory we hold mutably.
    let copied =
        unsafe { driver::memcpy_dtoh(dst.as_mut_ptr().cast(), src.device_ptr(), src.bytes()) };
    copied.named_on("cuMemcpyDtoH", "legacy default stream")
}

/// `cudaMemset(d, value, bytes)`: every byte of `dst` set to `value`, on the legacy default
/// stream. On device memory it returns before the memset has run ("API synchronization
/// behavior" in the CUDA Runtime API reference), and, like all work on the legacy default
/// stream, the memset runs only after the work enqueued earlier on every blocking stream.
pub fn memset<'d, T: Pod>(dst: impl Into<DeviceView<'d, T>>, value: u8) -> Result<()> {
    let dst = dst.into();
    if dst.is_empty() {
        return Ok(());
    }
    dst.context().bind()?;
    // SAFETY: the view lies inside a live allocation of its context, made current above.
    let set = unsafe { driver::memset_d8(dst.device_ptr(), value, dst.bytes()) };
    set.named_on("cuMemsetD8", "legacy default stream")
}
