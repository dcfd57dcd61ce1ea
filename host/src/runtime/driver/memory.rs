//! Memory: device, pinned, managed and stream-ordered allocations, and the copies.
use std::ffi::c_void;

use cudarc::driver::sys as cu;

use super::{result, DriverResult};

// Device and pinned memory.

/// `cuMemAlloc`, in the current context: `bytes` must not be 0.
pub(crate) fn mem_alloc(bytes: usize) -> DriverResult<cu::CUdeviceptr> {
    let mut ptr = 0;
    // SAFETY: valid out-pointer; a size of 0 is an error status.
    result(unsafe { cu::cuMemAlloc_v2(&mut ptr, bytes) })?;
    Ok(ptr)
}

/// `cuMemFree`: waits for the device's work first.
///
/// # Safety
/// The caller owns `ptr` (from [`mem_alloc`] or [`mem_alloc_managed`]) and uses it no more.
pub(crate) unsafe fn mem_free(ptr: cu::CUdeviceptr) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuMemFree_v2(ptr) })
}

/// `cuMemsetD8`, on the legacy default stream: on device memory it returns before the memset
/// has run.
///
/// # Safety
/// `ptr` holds at least `bytes` bytes of a live allocation of the current context.
pub(crate) unsafe fn memset_d8(ptr: cu::CUdeviceptr, value: u8, bytes: usize) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuMemsetD8_v2(ptr, value, bytes) })
}

/// `cuMemHostAlloc`: page-locked host memory, to be freed with [`mem_free_host`].
pub(crate) fn mem_host_alloc(bytes: usize, flags: u32) -> DriverResult<*mut c_void> {
    let mut ptr = std::ptr::null_mut();
    // SAFETY: valid out-pointer; bad flags are an error status.
    result(unsafe { cu::cuMemHostAlloc(&mut ptr, bytes, flags) })?;
    Ok(ptr)
}

/// `cuMemFreeHost`.
///
/// # Safety
/// The caller owns `ptr` (from [`mem_host_alloc`]), no copy of it is in flight, and it is
/// used no more.
pub(crate) unsafe fn mem_free_host(ptr: *mut c_void) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuMemFreeHost(ptr) })
}

/// `cuMemHostRegister` (`cudaHostRegister`): page-locks `bytes` of existing host memory at
/// `ptr` for the copy engines; undone with [`mem_host_unregister`].
///
/// # Safety
/// `ptr` points to `bytes` bytes of live host memory that stays where it is until
/// [`mem_host_unregister`].
pub(crate) unsafe fn mem_host_register(
    ptr: *mut c_void,
    bytes: usize,
    flags: u32,
) -> DriverResult<()> {
    // SAFETY: the caller's contract; bad flags or a range already registered are statuses.
    result(unsafe { cu::cuMemHostRegister_v2(ptr, bytes, flags) })
}

/// `cuMemHostUnregister`.
///
/// # Safety
/// `ptr` was registered with [`mem_host_register`] and no copy of it is in flight.
pub(crate) unsafe fn mem_host_unregister(ptr: *mut c_void) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuMemHostUnregister(ptr) })
}

/// `cuMemHostGetDevicePointer(host, 0)`: the device's address of pinned host memory.
///
/// # Safety
/// `host` points into a live [`mem_host_alloc`] allocation.
pub(crate) unsafe fn mem_host_get_device_pointer(
    host: *mut c_void,
) -> DriverResult<cu::CUdeviceptr> {
    let mut device = 0;
    // SAFETY: valid out-pointer; `host` is the caller's contract; flags must be 0.
    result(unsafe { cu::cuMemHostGetDevicePointer_v2(&mut device, host, 0) })?;
    Ok(device)
}

/// `cuMemcpyHtoD`, blocking.
///
/// # Safety
/// `src` holds `bytes` readable bytes; `dst` holds `bytes` bytes of a live allocation.
pub(crate) unsafe fn memcpy_htod(
    dst: cu::CUdeviceptr,
    src: *const c_void,
    bytes: usize,
) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuMemcpyHtoD_v2(dst, src, bytes) })
}

/// `cuMemcpyDtoH`, blocking.
///
/// # Safety
/// `dst` holds `bytes` writable bytes nothing else uses; `src` holds `bytes` bytes of a
/// live allocation.
pub(crate) unsafe fn memcpy_dtoh(
    dst: *mut c_void,
    src: cu::CUdeviceptr,
    bytes: usize,
) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuMemcpyDtoH_v2(dst, src, bytes) })
}

/// `cuMemcpyHtoDAsync`: returns before the copy is done.
///
/// # Safety
/// As for [`memcpy_htod`], until `stream`, a live stream, has passed the copy.
pub(crate) unsafe fn memcpy_htod_async(
    dst: cu::CUdeviceptr,
    src: *const c_void,
    bytes: usize,
    stream: cu::CUstream,
) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuMemcpyHtoDAsync_v2(dst, src, bytes, stream) })
}

/// `cuMemcpyDtoHAsync`: returns before the copy is done.
///
/// # Safety
/// As for [`memcpy_dtoh`], until `stream`, a live stream, has passed the copy.
pub(crate) unsafe fn memcpy_dtoh_async(
    dst: *mut c_void,
    src: cu::CUdeviceptr,
    bytes: usize,
    stream: cu::CUstream,
) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuMemcpyDtoHAsync_v2(dst, src, bytes, stream) })
}

/// `cuMemcpyDtoDAsync`.
///
/// # Safety
/// `src` and `dst` hold `bytes` bytes of live allocations until `stream`, a live stream,
/// has passed the copy.
pub(crate) unsafe fn memcpy_dtod_async(
    dst: cu::CUdeviceptr,
    src: cu::CUdeviceptr,
    bytes: usize,
    stream: cu::CUstream,
) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuMemcpyDtoDAsync_v2(dst, src, bytes, stream) })
}

/// `cuMemcpyPeerAsync`: from one context's memory to another's.
///
/// # Safety
/// As for [`memcpy_dtod_async`], with `dst` of `dst_context` and `src` of `src_context`,
/// both live.
pub(crate) unsafe fn memcpy_peer_async(
    dst: cu::CUdeviceptr,
    dst_context: cu::CUcontext,
    src: cu::CUdeviceptr,
    src_context: cu::CUcontext,
    bytes: usize,
    stream: cu::CUstream,
) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuMemcpyPeerAsync(dst, dst_context, src, src_context, bytes, stream) })
}

// Managed memory.

/// `cuMemAllocManaged`, in the current context: `bytes` must not be 0.
pub(crate) fn mem_alloc_managed(bytes: usize, flags: u32) -> DriverResult<cu::CUdeviceptr> {
    let mut ptr = 0;
    // SAFETY: valid out-pointer; bad sizes or flags are an error status.
    result(unsafe { cu::cuMemAllocManaged(&mut ptr, bytes, flags) })?;
    Ok(ptr)
}

/// `cuMemAdvise`, the first version: the processor is a device handle or `CU_DEVICE_CPU`.
///
/// # Safety
/// `ptr` and `bytes` are a range of a live managed allocation.
pub(crate) unsafe fn mem_advise(
    ptr: cu::CUdeviceptr,
    bytes: usize,
    advice: cu::CUmem_advise,
    device: cu::CUdevice,
) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuMemAdvise(ptr, bytes, advice, device) })
}

/// `cuMemAdvise_v2` (driver 12.2 and later): the processor is a location.
///
/// # Safety
/// As for [`mem_advise`].
pub(crate) unsafe fn mem_advise_v2(
    ptr: cu::CUdeviceptr,
    bytes: usize,
    advice: cu::CUmem_advise,
    location: cu::CUmemLocation,
) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuMemAdvise_v2(ptr, bytes, advice, location) })
}

/// `cuMemPrefetchAsync`, the first version: to a device handle or `CU_DEVICE_CPU`.
///
/// # Safety
/// As for [`mem_advise`], and `stream` is live.
pub(crate) unsafe fn mem_prefetch_async(
    ptr: cu::CUdeviceptr,
    bytes: usize,
    device: cu::CUdevice,
    stream: cu::CUstream,
) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuMemPrefetchAsync(ptr, bytes, device, stream) })
}

/// `cuMemPrefetchAsync_v2(ptr, bytes, location, 0, stream)` (driver 12.2 and later).
///
/// # Safety
/// As for [`mem_prefetch_async`].
pub(crate) unsafe fn mem_prefetch_async_v2(
    ptr: cu::CUdeviceptr,
    bytes: usize,
    location: cu::CUmemLocation,
    stream: cu::CUstream,
) -> DriverResult<()> {
    // SAFETY: the caller's contract; flags must be 0.
    result(unsafe { cu::cuMemPrefetchAsync_v2(ptr, bytes, location, 0, stream) })
}

// Stream-ordered allocation.

/// `cuMemAllocAsync`, from the device's current pool: `bytes` must not be 0.
///
/// # Safety
/// `stream` is live.
pub(crate) unsafe fn mem_alloc_async(
    bytes: usize,
    stream: cu::CUstream,
) -> DriverResult<cu::CUdeviceptr> {
    let mut ptr = 0;
    // SAFETY: valid out-pointer; the stream is the caller's contract.
    result(unsafe { cu::cuMemAllocAsync(&mut ptr, bytes, stream) })?;
    Ok(ptr)
}

/// `cuMemFreeAsync`: the memory goes back to its pool once `stream` reaches the free.
///
/// # Safety
/// The caller owns `ptr` (from [`mem_alloc_async`]) and uses it no more; `stream` is live.
pub(crate) unsafe fn mem_free_async(
    ptr: cu::CUdeviceptr,
    stream: cu::CUstream,
) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuMemFreeAsync(ptr, stream) })
}

/// `cuMemPoolGetAttribute`, for the attributes that are a `cuuint64_t`.
///
/// # Safety
/// `pool` is live and `attr` is one of its `cuuint64_t` attributes.
pub(crate) unsafe fn mem_pool_get_attribute(
    pool: cu::CUmemoryPool,
    attr: cu::CUmemPool_attribute,
) -> DriverResult<u64> {
    let mut value = 0u64;
    // SAFETY: `value` is a cuuint64_t, what the caller's attribute is.
    result(unsafe { cu::cuMemPoolGetAttribute(pool, attr, (&mut value as *mut u64).cast()) })?;
    Ok(value)
}

/// `cuMemPoolSetAttribute`, for the attributes that are a `cuuint64_t`.
///
/// # Safety
/// As for [`mem_pool_get_attribute`].
pub(crate) unsafe fn mem_pool_set_attribute(
    pool: cu::CUmemoryPool,
    attr: cu::CUmemPool_attribute,
    mut value: u64,
) -> DriverResult<()> {
    // SAFETY: `value` is a cuuint64_t, what the caller's attribute is.
    result(unsafe { cu::cuMemPoolSetAttribute(pool, attr, (&mut value as *mut u64).cast()) })
}

/// `cuMemPoolTrimTo`: never touches memory that is allocated.
///
/// # Safety
/// `pool` is live.
pub(crate) unsafe fn mem_pool_trim_to(pool: cu::CUmemoryPool, bytes: usize) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuMemPoolTrimTo(pool, bytes) })
}
