//! Host and device buffers, and the copies between them.
//!
//! | CUDA C++                                         | streamlab                                   |
//! |--------------------------------------------------|---------------------------------------------|
//! | `cudaMallocHost(&p, bytes)`                      | `pinned(n)` (cust `LockedBuffer`)           |
//! | `cudaMalloc(&d, bytes)`                          | `device(n)` (cust `DeviceBuffer`)           |
//! | `cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice)`| `copy_to_device_sync(h, d)`                 |
//! | `cudaMemcpyAsync(d, h, bytes, H2D, stream)`      | `stream.copy_to_device(h, d)` (unsafe)      |
//! | `cudaMemcpyAsync(h, d, bytes, D2H, stream)`      | `stream.copy_to_host(d, h)` (unsafe)        |
//!
//! The asynchronous copies are `unsafe` for the reason CUDA C++ programs crash: the call
//! returns before the copy happens, so the host memory must stay alive and untouched until
//! the stream has passed the copy. Every call site says why that holds.
use std::ffi::c_void;

use cust::memory::{DeviceBuffer, DeviceCopy, DeviceSlice, LockedBuffer};
use cust::sys as cu;

use crate::error::{check, Context, Error, Result};
use crate::stream::Stream;
use crate::timeline::OpKind;

/// `n` page-locked (pinned) host elements, zeroed: the only host memory the copy engines can
/// read or write asynchronously.
pub fn pinned<T: DeviceCopy + Default>(n: usize) -> Result<LockedBuffer<T>> {
    LockedBuffer::new(&T::default(), n).context("cuMemHostAlloc (pinned buffer)")
}

/// A pinned copy of `values`.
pub fn pinned_from<T: DeviceCopy>(values: &[T]) -> Result<LockedBuffer<T>> {
    LockedBuffer::from_slice(values).context("cuMemHostAlloc (pinned buffer)")
}

/// `n` zeroed device elements. Allocation synchronizes the device: never inside a timed region.
pub fn device<T: DeviceCopy + bytemuck::Zeroable>(n: usize) -> Result<DeviceBuffer<T>> {
    DeviceBuffer::zeroed(n).context("cuMemAlloc")
}

fn check_lengths(host: usize, device: usize, op: &str) -> Result<()> {
    if host == device {
        Ok(())
    } else {
        Err(Error::Internal(format!(
            "{op}: host has {host} elements, device {device}"
        )))
    }
}

/// Blocking host-to-device copy on the legacy default stream (`cudaMemcpy`).
pub fn copy_to_device_sync<T: DeviceCopy>(src: &[T], dst: &DeviceSlice<T>) -> Result<()> {
    check_lengths(src.len(), dst.len(), "cuMemcpyHtoD")?;
    // SAFETY: lengths match; the call returns only when the copy is done, so `src` outlives it.
    let status = unsafe {
        cu::cuMemcpyHtoD_v2(
            dst.as_device_ptr().as_raw(),
            src.as_ptr() as *const c_void,
            std::mem::size_of_val(src),
        )
    };
    check(status, "cuMemcpyHtoD", Some("legacy default stream"))
}

/// Blocking device-to-host copy on the legacy default stream (`cudaMemcpy`).
pub fn copy_to_host_sync<T: DeviceCopy>(src: &DeviceSlice<T>, dst: &mut [T]) -> Result<()> {
    check_lengths(dst.len(), src.len(), "cuMemcpyDtoH")?;
    // SAFETY: lengths match; blocking copy into memory we hold mutably.
    let status = unsafe {
        cu::cuMemcpyDtoH_v2(
            dst.as_mut_ptr() as *mut c_void,
            src.as_device_ptr().as_raw(),
            std::mem::size_of_val(dst),
        )
    };
    check(status, "cuMemcpyDtoH", Some("legacy default stream"))
}

impl Stream {
    /// Enqueues a device-to-device copy (`cudaMemcpyAsync(..., cudaMemcpyDeviceToDevice, s)`).
    /// Safe: both sides are device memory that the borrow keeps allocated, and freeing device
    /// memory waits for the device.
    pub fn copy_on_device<T: DeviceCopy>(
        &self,
        src: &DeviceSlice<T>,
        dst: &DeviceSlice<T>,
    ) -> Result<()> {
        check_lengths(src.len(), dst.len(), "cuMemcpyDtoDAsync")?;
        self.enqueue(OpKind::CopyOnDevice, "copy on device", || {
            // SAFETY: lengths match and both pointers are live device allocations.
            let status = unsafe {
                cu::cuMemcpyDtoDAsync_v2(
                    dst.as_device_ptr().as_raw(),
                    src.as_device_ptr().as_raw(),
                    std::mem::size_of::<T>() * src.len(),
                    self.as_raw(),
                )
            };
            self.check(status, "cuMemcpyDtoDAsync")
        })
    }

    /// Enqueues a host-to-device copy (`cudaMemcpyAsync`). From pinned memory it returns at
    /// once; from pageable memory the driver first stages the data, and returns after that.
    ///
    /// # Safety
    /// `src` must stay alive and unmodified until the copy has completed (a synchronize of
    /// this stream, or of an event recorded after this call, has returned).
    pub unsafe fn copy_to_device<T: DeviceCopy>(
        &self,
        src: &[T],
        dst: &DeviceSlice<T>,
    ) -> Result<()> {
        check_lengths(src.len(), dst.len(), "cuMemcpyHtoDAsync")?;
        self.enqueue(OpKind::CopyToDevice, "copy to device", || {
            // SAFETY: lengths match; the lifetime of `src` is the caller's contract.
            let status = unsafe {
                cu::cuMemcpyHtoDAsync_v2(
                    dst.as_device_ptr().as_raw(),
                    src.as_ptr() as *const c_void,
                    std::mem::size_of_val(src),
                    self.as_raw(),
                )
            };
            self.check(status, "cuMemcpyHtoDAsync")
        })
    }

    /// Enqueues a device-to-host copy (`cudaMemcpyAsync`).
    ///
    /// # Safety
    /// `dst` must stay alive and must not be read or written by the host until the copy has
    /// completed (a synchronize of this stream, or of an event recorded after it).
    pub unsafe fn copy_to_host<T: DeviceCopy>(
        &self,
        src: &DeviceSlice<T>,
        dst: &mut [T],
    ) -> Result<()> {
        check_lengths(dst.len(), src.len(), "cuMemcpyDtoHAsync")?;
        self.enqueue(OpKind::CopyToHost, "copy to host", || {
            // SAFETY: lengths match; the lifetime of `dst` is the caller's contract.
            let status = unsafe {
                cu::cuMemcpyDtoHAsync_v2(
                    dst.as_mut_ptr() as *mut c_void,
                    src.as_device_ptr().as_raw(),
                    std::mem::size_of_val(dst),
                    self.as_raw(),
                )
            };
            self.check(status, "cuMemcpyDtoHAsync")
        })
    }
}
