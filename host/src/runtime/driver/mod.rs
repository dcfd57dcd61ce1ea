//! The driver layer: one function per raw driver call (`cudarc::driver::sys`), as cudarc's
//! `result` layer is. It is the only part of streamlab that calls the driver; the safe types
//! of `runtime/` call these functions instead.
//!
//! Each function turns the call's status into a [`DriverResult`] and its out-pointers into
//! return values; it names nothing. The safe types name the operation and the stream when a
//! call fails (`error::Named`), so an error still reads
//! `cuMemcpyHtoDAsync on stream "overlap-3": CUDA_ERROR_INVALID_VALUE (1): invalid argument`.
//!
//! A function is safe where any argument it takes is fine for the driver: device ordinals,
//! sizes, flags, buffers it owns. It is an `unsafe fn` where the caller must keep something
//! valid: a handle (stream, event, context, module, graph, pool) must be live, that is made
//! and not yet destroyed, in a context still retained; a device or host address must point
//! into a live allocation of the size passed.
//!
//! One module in files by what the calls act on, each a few hundred lines: `device` (devices
//! and contexts), `stream` (streams, events, host functions), `memory` (allocations and
//! copies), `module` (modules and kernel launches), `graph` (stream capture and graphs); the
//! library itself and its error strings are here. Callers name them all `driver::…`.
use std::ffi::CStr;

use cudarc::driver::sys::{self as cu, CUresult};

mod device;
mod graph;
mod memory;
mod module;
mod stream;

pub(crate) use device::*;
pub(crate) use graph::*;
pub(crate) use memory::*;
pub(crate) use module::*;
pub(crate) use stream::*;

/// What a driver call returned: `Ok` for `CUDA_SUCCESS`, else the status it failed with.
pub(crate) type DriverResult<T> = std::result::Result<T, CUresult>;

fn result(status: CUresult) -> DriverResult<()> {
    match status {
        CUresult::CUDA_SUCCESS => Ok(()),
        failed => Err(failed),
    }
}

/// Whether `libcuda` is on the loader's path (cudarc's `dynamic-loading` check).
pub(crate) fn library_present() -> bool {
    // SAFETY: only looks for the library; nothing in it is called.
    unsafe { cu::is_culib_present() }
}

/// `cuInit(0)`: may be called more than once.
pub(crate) fn init() -> DriverResult<()> {
    // SAFETY: flags 0 is the only documented value.
    result(unsafe { cu::cuInit(0) })
}

/// `cuGetErrorString`: the driver's description of `status`, if it knows the code.
pub(crate) fn get_error_string(status: CUresult) -> DriverResult<Option<&'static CStr>> {
    let mut text = std::ptr::null();
    // SAFETY: valid out-pointer; the driver needs no context for this.
    result(unsafe { cu::cuGetErrorString(status, &mut text) })?;
    // SAFETY: checked non-null; the driver writes a pointer to a static NUL-terminated string.
    Ok((!text.is_null()).then(|| unsafe { CStr::from_ptr(text) }))
}

/// `cuDriverGetVersion`: e.g. 13000 for 13.0.
pub(crate) fn driver_get_version() -> DriverResult<i32> {
    let mut version = 0;
    // SAFETY: valid out-pointer.
    result(unsafe { cu::cuDriverGetVersion(&mut version) })?;
    Ok(version)
}
