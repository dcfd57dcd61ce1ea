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
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut, Range};
use std::rc::Rc;

use bytemuck::Pod;
use cudarc::driver::sys as cu;

use crate::runtime::context::{AsContext, Context};
use crate::runtime::driver::{self, DriverResult};
use crate::runtime::error::{Error, Named, Result};
use crate::runtime::event::Event;
use crate::runtime::in_flight::{self, Access, HostUse, InFlight, Kept, Queue, Tracked};

pub(crate) fn bytes_of<T>(n: usize, what: &str) -> Result<usize> {
    n.checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| Error::InvalidInput(format!("{what}: {n} elements do not fit in memory")))
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

enum Storage<T> {
    /// Page-locked memory from `cuMemHostAlloc`, freed with `cuMemFreeHost`.
    Pinned,
    /// Ordinary (pageable) memory: the driver stages async copies of it through its own
    /// pinned buffer, so they are not asynchronous.
    Pageable(#[allow(dead_code)] Vec<T>),
    /// A `Vec` page-locked in place with `cuMemHostRegister`, unregistered before it is freed:
    /// its copies are as asynchronous as pinned memory's.
    Registered(#[allow(dead_code)] Vec<T>),
}

struct HostAlloc<T> {
    ptr: *mut T,
    len: usize,
    storage: Storage<T>,
    /// 0: free; n > 0: n shared borrows by the host; -1: one mutable borrow.
    borrows: Cell<isize>,
    /// The copies in flight: per stream, the event recorded after the latest one.
    in_flight: RefCell<InFlight<Event>>,
    _context: Context,
}

impl<T> HostAlloc<T> {
    /// Waits for the copies that `host_use` would race with (the events after them).
    fn wait_for_device(&self, host_use: HostUse) -> Result<()> {
        self.in_flight.borrow_mut().wait(host_use)
    }
}

impl<T> Tracked for HostAlloc<T> {
    fn admit(&self, access: Access) -> Result<()> {
        let borrows = self.borrows.get();
        let refused = match access {
            Access::DeviceReads => borrows < 0,
            Access::DeviceWrites => borrows != 0,
        };
        if refused {
            return Err(Error::Internal(format!(
                "a copy {} a host buffer that the host is still {} (drop the borrow first)",
                if access == Access::DeviceWrites { "into" } else { "from" },
                if borrows < 0 { "writing" } else { "reading" }
            )));
        }
        Ok(())
    }

    fn in_flight_on(&self, stream: Rc<dyn Queue<Event>>, access: Access) {
        self.in_flight.borrow_mut().enqueued(stream, access);
    }
}

impl<T> Drop for HostAlloc<T> {
    fn drop(&mut self) {
        // A copy still in flight would write into freed memory: wait for it. An error here
        // has nowhere to go, and the device is then unusable anyway.
        let _ = self.wait_for_device(HostUse::WriteOrFree);
        match self.storage {
            Storage::Pinned => {
                // SAFETY: `ptr` came from cuMemHostAlloc and no copy of it is in flight.
                let _ = unsafe { driver::mem_free_host(self.ptr.cast()) };
            }
            Storage::Registered(_) => {
                // SAFETY: `ptr` was registered at creation and no copy of it is in flight;
                // the Vec is freed after this, when the storage drops.
                let _ = unsafe { driver::mem_host_unregister(self.ptr.cast()) };
            }
            _ => {}
        }
    }
}

/// `n` elements of `T` in host memory that copies to and from the device can use.
pub struct HostBuffer<T> {
    alloc: Rc<HostAlloc<T>>,
}

impl<T: Pod> HostBuffer<T> {
    /// `n` zeroed elements of page-locked (pinned) memory (`cudaMallocHost`): the only host
    /// memory the copy engines can read or write while the host goes on.
    pub fn pinned(on: &impl AsContext, n: usize) -> Result<HostBuffer<T>> {
        let bytes = bytes_of::<T>(n, "cuMemHostAlloc")?;
        // Before the memory: nothing to give back if it cannot be made.
        let own_event = Event::without_timing(on)?;
        on.context().bind()?;
        // Portable: pinned for every context, so a copy from another GPU's stream is as
        // asynchronous as one from this GPU's (`cudaHostAllocPortable`).
        let flags = cu::CU_MEMHOSTALLOC_PORTABLE;
        let ptr =
            driver::mem_host_alloc(bytes.max(1), flags).named("cuMemHostAlloc (pinned buffer)")?;
        // SAFETY: the allocation holds at least `bytes` bytes; zero bytes are a valid `T`.
        unsafe { std::ptr::write_bytes(ptr.cast::<u8>(), 0, bytes) };
        Ok(Self::wrap(on, ptr.cast(), n, Storage::Pinned, own_event))
    }

    /// A pinned copy of `values`.
    pub fn pinned_from(on: &impl AsContext, values: &[T]) -> Result<HostBuffer<T>> {
        let buffer = Self::pinned(on, values.len())?;
        buffer.write()?.copy_from_slice(values);
        Ok(buffer)
    }

    /// `n` zeroed elements of ordinary pageable memory (a `Vec`).
    pub fn pageable(on: &impl AsContext, n: usize) -> Result<HostBuffer<T>> {
        Self::pageable_from_vec(on, vec![T::zeroed(); n])
    }

    /// Pageable memory holding `values`.
    pub fn pageable_from_vec(on: &impl AsContext, mut values: Vec<T>) -> Result<HostBuffer<T>> {
        let own_event = Event::without_timing(on)?;
        let (ptr, len) = (values.as_mut_ptr(), values.len());
        Ok(Self::wrap(on, ptr, len, Storage::Pageable(values), own_event))
    }

    /// `values` page-locked where they are (`cudaHostRegister`), for a buffer that already
    /// exists: its copies are then as asynchronous as [`HostBuffer::pinned`]'s. Registering
    /// costs time in proportion to the size (every page is locked), so it is done once, not
    /// per copy; and like any pinned memory it is taken from what the OS can page.
    pub fn registered_from_vec(on: &impl AsContext, mut values: Vec<T>) -> Result<HostBuffer<T>> {
        let bytes = bytes_of::<T>(values.len(), "cuMemHostRegister")?;
        let own_event = Event::without_timing(on)?;
        on.context().bind()?;
        let (ptr, len) = (values.as_mut_ptr(), values.len());
        if bytes == 0 {
            // Nothing to lock: the driver refuses an empty range.
            return Ok(Self::wrap(on, ptr, len, Storage::Pageable(values), own_event));
        }
        // Portable, as `pinned` is: registered for every context; mapped, so that a kernel can
        // reach it as it reaches pinned memory (`mapped`).
        let flags = cu::CU_MEMHOSTREGISTER_PORTABLE | cu::CU_MEMHOSTREGISTER_DEVICEMAP;
        // SAFETY: `values` owns `bytes` bytes at `ptr`, and the buffer keeps the Vec (so the
        // memory stays where it is) until its drop unregisters it.
        unsafe { driver::mem_host_register(ptr.cast(), bytes, flags) }
            .named("cuMemHostRegister (registered buffer)")?;
        Ok(Self::wrap(on, ptr, len, Storage::Registered(values), own_event))
    }

    /// Owns the memory at `ptr`. `own_event` is what its copies on `on`'s streams are
    /// recorded into, made with the buffer so that no copy makes one (a stream of another
    /// context gets an event of its own at its first copy).
    fn wrap(
        on: &impl AsContext,
        ptr: *mut T,
        len: usize,
        storage: Storage<T>,
        own_event: Event,
    ) -> HostBuffer<T> {
        HostBuffer {
            alloc: Rc::new(HostAlloc {
                ptr,
                len,
                storage,
                borrows: Cell::new(0),
                in_flight: RefCell::new(InFlight::new(vec![own_event])),
                _context: on.context().clone(),
            }),
        }
    }

    pub fn len(&self) -> usize {
        self.alloc.len
    }

    pub fn is_empty(&self) -> bool {
        self.alloc.len == 0
    }

    pub fn is_pinned(&self) -> bool {
        // Registered memory is page-locked too: the copy engines read it as pinned memory.
        !matches!(self.alloc.storage, Storage::Pageable(_))
    }

    /// The elements `range`, for a copy.
    pub fn slice(&self, range: Range<usize>) -> Result<HostView<'_, T>> {
        check_range(&range, self.alloc.len, "host buffer")?;
        Ok(HostView { buffer: self, range })
    }

    /// Waits for the copies into this buffer that are in flight (each through the event
    /// recorded after it, not for its whole stream), then lends it to the host for reading.
    /// Copies from it may go on meanwhile: they only read it too.
    pub fn read(&self) -> Result<HostRef<'_, T>> {
        if self.alloc.borrows.get() < 0 {
            return Err(Error::Internal("a host buffer is read while it is being written".into()));
        }
        self.alloc.wait_for_device(HostUse::Read)?;
        self.alloc.borrows.set(self.alloc.borrows.get() + 1);
        Ok(HostRef { buffer: self })
    }

    /// Waits for every copy of this buffer in flight (each through the event recorded after
    /// it), then lends it to the host for writing.
    pub fn write(&self) -> Result<HostMut<'_, T>> {
        if self.alloc.borrows.get() != 0 {
            return Err(Error::Internal("a host buffer is written while it is borrowed".into()));
        }
        self.alloc.wait_for_device(HostUse::WriteOrFree)?;
        self.alloc.borrows.set(-1);
        Ok(HostMut { buffer: self })
    }

    /// A copy of the contents, after the copies in flight.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        Ok(self.read()?.to_vec())
    }
}

impl<'a, T: Pod> From<&'a HostBuffer<T>> for HostView<'a, T> {
    fn from(buffer: &'a HostBuffer<T>) -> Self {
        HostView { buffer, range: 0..buffer.len() }
    }
}

/// A range of a [`HostBuffer`], for a copy.
pub struct HostView<'a, T> {
    buffer: &'a HostBuffer<T>,
    range: Range<usize>,
}

impl<T: Pod> HostView<'_, T> {
    pub fn len(&self) -> usize {
        self.range.len()
    }

    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }

    pub fn is_pinned(&self) -> bool {
        self.buffer.is_pinned()
    }

    /// Admits a device access (see [`Tracked::admit`]), records it in a capture in progress,
    /// and returns the address of the first element.
    pub(crate) fn admit(&self, access: Access) -> Result<*mut T> {
        self.buffer.alloc.admit(access)?;
        in_flight::keep(|| Kept::Host(Rc::clone(&self.buffer.alloc) as Rc<dyn Tracked>, access));
        // SAFETY: `range` was checked against the allocation's length.
        Ok(unsafe { self.buffer.alloc.ptr.add(self.range.start) })
    }

    /// The device's address of the first element, after admitting `access` as a copy does:
    /// for a kernel that reads or writes this host memory itself. Pinned memory is mapped
    /// into the device's address space (`cuMemHostGetDevicePointer`); pageable memory is not,
    /// and is refused.
    pub(crate) fn mapped(&self, access: Access) -> Result<cu::CUdeviceptr> {
        if !self.is_pinned() {
            return Err(Error::InvalidInput(
                "a kernel can reach pinned host memory only, and this buffer is pageable".into(),
            ));
        }
        let host = self.admit(access)?;
        // SAFETY: `host` points into live page-locked memory: a cuMemHostAlloc allocation, or
        // a registered one (mapped by CU_MEMHOSTREGISTER_DEVICEMAP).
        let device = unsafe { driver::mem_host_get_device_pointer(host.cast()) };
        device.named("cuMemHostGetDevicePointer")
    }

    /// Marks the buffer in flight on `stream` after a copy that `access`es it was enqueued
    /// there.
    pub(crate) fn in_flight_on(&self, stream: Rc<dyn Queue<Event>>, access: Access) {
        self.buffer.alloc.in_flight_on(stream, access);
    }

    pub(crate) fn bytes(&self) -> usize {
        self.range.len() * std::mem::size_of::<T>()
    }
}

impl<T: Pod> Tracked for HostBuffer<T> {
    fn admit(&self, access: Access) -> Result<()> {
        self.alloc.admit(access)
    }

    fn in_flight_on(&self, stream: Rc<dyn Queue<Event>>, access: Access) {
        self.alloc.in_flight_on(stream, access);
    }
}

/// A host buffer lent for reading; copies into it are refused until it is dropped.
pub struct HostRef<'a, T> {
    buffer: &'a HostBuffer<T>,
}

impl<T> Deref for HostRef<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        let a = &self.buffer.alloc;
        // SAFETY: `ptr` holds `len` initialised elements; the borrow count keeps every device
        // write out until this guard is dropped, and in-flight ones were waited for (device
        // reads may go on: they do not change the bytes).
        unsafe { std::slice::from_raw_parts(a.ptr, a.len) }
    }
}

impl<T> Drop for HostRef<'_, T> {
    fn drop(&mut self) {
        let b = &self.buffer.alloc.borrows;
        b.set(b.get() - 1);
    }
}

/// A host buffer lent for writing; every copy of it is refused until it is dropped.
pub struct HostMut<'a, T> {
    buffer: &'a HostBuffer<T>,
}

impl<T> Deref for HostMut<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        let a = &self.buffer.alloc;
        // SAFETY: as in `HostRef`, and this is the only borrow.
        unsafe { std::slice::from_raw_parts(a.ptr, a.len) }
    }
}

impl<T> DerefMut for HostMut<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        let a = &self.buffer.alloc;
        // SAFETY: the borrow count is -1: no other host borrow and no device access exists.
        unsafe { std::slice::from_raw_parts_mut(a.ptr, a.len) }
    }
}

impl<T> Drop for HostMut<'_, T> {
    fn drop(&mut self) {
        self.buffer.alloc.borrows.set(0);
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
