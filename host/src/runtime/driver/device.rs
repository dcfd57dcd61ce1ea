//! Devices and their contexts: ordinals, attributes, names, peers, and the primary context.
use std::ffi::{c_char, CStr};

use cudarc::driver::sys as cu;

use super::{result, DriverResult};

// Devices.

/// `cuDeviceGetCount`.
pub(crate) fn device_get_count() -> DriverResult<i32> {
    let mut count = 0;
    // SAFETY: valid out-pointer.
    result(unsafe { cu::cuDeviceGetCount(&mut count) })?;
    Ok(count)
}

/// `cuDeviceGet`: the device handle of ordinal `ordinal` (an error if there is none).
pub(crate) fn device_get(ordinal: i32) -> DriverResult<cu::CUdevice> {
    let mut device = 0;
    // SAFETY: valid out-pointer; a bad ordinal is an error status.
    result(unsafe { cu::cuDeviceGet(&mut device, ordinal) })?;
    Ok(device)
}

/// `cuDeviceGetAttribute`.
pub(crate) fn device_get_attribute(
    attr: cu::CUdevice_attribute,
    device: cu::CUdevice,
) -> DriverResult<i32> {
    let mut value = 0;
    // SAFETY: valid out-pointer; a bad device or attribute is an error status.
    result(unsafe { cu::cuDeviceGetAttribute(&mut value, attr, device) })?;
    Ok(value)
}

/// `cuDeviceGetName`.
pub(crate) fn device_get_name(device: cu::CUdevice) -> DriverResult<String> {
    let mut name = [0 as c_char; 256];
    // SAFETY: the buffer holds 256 bytes, the length we pass; the driver NUL-terminates.
    result(unsafe { cu::cuDeviceGetName(name.as_mut_ptr(), 256, device) })?;
    // SAFETY: NUL-terminated by the driver within the buffer.
    Ok(unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned())
}

/// `cuDeviceGetPCIBusId`: "0000:19:00.0".
pub(crate) fn device_get_pci_bus_id(device: cu::CUdevice) -> DriverResult<String> {
    let mut id = [0 as c_char; 32];
    // SAFETY: the buffer holds 32 bytes, the length we pass; the driver NUL-terminates.
    result(unsafe { cu::cuDeviceGetPCIBusId(id.as_mut_ptr(), 32, device) })?;
    // SAFETY: NUL-terminated by the driver within the buffer.
    Ok(unsafe { CStr::from_ptr(id.as_ptr()) }.to_string_lossy().into_owned())
}

/// `cuDeviceCanAccessPeer`.
pub(crate) fn device_can_access_peer(from: cu::CUdevice, to: cu::CUdevice) -> DriverResult<bool> {
    let mut access = 0;
    // SAFETY: valid out-pointer; bad devices are an error status.
    result(unsafe { cu::cuDeviceCanAccessPeer(&mut access, from, to) })?;
    Ok(access != 0)
}

/// `cuDeviceGetP2PAttribute`.
pub(crate) fn device_get_p2p_attribute(
    attr: cu::CUdevice_P2PAttribute,
    from: cu::CUdevice,
    to: cu::CUdevice,
) -> DriverResult<i32> {
    let mut value = 0;
    // SAFETY: valid out-pointer; bad devices are an error status.
    result(unsafe { cu::cuDeviceGetP2PAttribute(&mut value, attr, from, to) })?;
    Ok(value)
}

/// `cuDeviceGetDefaultMemPool`: the pool lives as long as the device's context.
pub(crate) fn device_get_default_mem_pool(device: cu::CUdevice) -> DriverResult<cu::CUmemoryPool> {
    let mut pool = std::ptr::null_mut();
    // SAFETY: valid out-pointer; a bad device is an error status.
    result(unsafe { cu::cuDeviceGetDefaultMemPool(&mut pool, device) })?;
    Ok(pool)
}

// Contexts.

/// `cuDevicePrimaryCtxRetain`: to be balanced by [`device_primary_ctx_release`].
pub(crate) fn device_primary_ctx_retain(device: cu::CUdevice) -> DriverResult<cu::CUcontext> {
    let mut context = std::ptr::null_mut();
    // SAFETY: valid out-pointer; a bad device is an error status.
    result(unsafe { cu::cuDevicePrimaryCtxRetain(&mut context, device) })?;
    Ok(context)
}

/// `cuDevicePrimaryCtxRelease`.
///
/// # Safety
/// Balances one [`device_primary_ctx_retain`] of `device`, after the last handle made in
/// that retain's context is gone.
pub(crate) unsafe fn device_primary_ctx_release(device: cu::CUdevice) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuDevicePrimaryCtxRelease_v2(device) })
}

/// `cuCtxSetCurrent`, for the calling thread.
///
/// # Safety
/// `context` is retained for as long as it may be current.
pub(crate) unsafe fn ctx_set_current(context: cu::CUcontext) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuCtxSetCurrent(context) })
}

/// `cuCtxSynchronize`: waits for the current context's work.
pub(crate) fn ctx_synchronize() -> DriverResult<()> {
    // SAFETY: no arguments; without a current context it is an error status.
    result(unsafe { cu::cuCtxSynchronize() })
}

/// `cuCtxGetStreamPriorityRange` of the current context: (least, greatest).
pub(crate) fn ctx_get_stream_priority_range() -> DriverResult<(i32, i32)> {
    let (mut least, mut greatest) = (0, 0);
    // SAFETY: valid out-pointers.
    result(unsafe { cu::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) })?;
    Ok((least, greatest))
}

/// `cuMemGetInfo` of the current context's device: (free, total) bytes.
pub(crate) fn mem_get_info() -> DriverResult<(usize, usize)> {
    let (mut free, mut total) = (0, 0);
    // SAFETY: valid out-pointers.
    result(unsafe { cu::cuMemGetInfo_v2(&mut free, &mut total) })?;
    Ok((free, total))
}

/// `cuCtxEnablePeerAccess(peer, 0)`, from the current context.
///
/// # Safety
/// `peer` is a live context.
pub(crate) unsafe fn ctx_enable_peer_access(peer: cu::CUcontext) -> DriverResult<()> {
    // SAFETY: the caller's contract; flags must be 0.
    result(unsafe { cu::cuCtxEnablePeerAccess(peer, 0) })
}

/// `cuCtxDisablePeerAccess`, from the current context.
///
/// # Safety
/// `peer` is a live context.
pub(crate) unsafe fn ctx_disable_peer_access(peer: cu::CUcontext) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuCtxDisablePeerAccess(peer) })
}
