//! Host buffers: pinned, pageable or registered memory that asynchronous copies use, and the
//! borrows that keep the host and the device from racing on it (see the parent module).
use std::cell::{Cell, RefCell};
use std::ops::{Deref, DerefMut, Range};
use std::rc::Rc;

use bytemuck::Pod;
use cudarc::driver::sys as cu;

use super::{bytes_of, check_range};
use crate::runtime::context::{AsContext, Context};
use crate::runtime::driver;
use crate::runtime::error::{Error, Named, Result};
use crate::runtime::event::Event;
use crate::runtime::in_flight::{self, Access, HostUse, InFlight, Kept, Queue, Tracked};
use crate::t;

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
            return Err(Error::InvalidInput(t!("error.runtime.pageable_mapped")));
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
