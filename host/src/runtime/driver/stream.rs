//! Streams, events and host functions.
use std::ffi::c_void;

use cudarc::driver::sys as cu;

use super::{result, DriverResult};

// Streams.

/// `cuStreamCreateWithPriority`, in the current context.
pub(crate) fn stream_create_with_priority(flags: u32, priority: i32) -> DriverResult<cu::CUstream> {
    let mut stream = std::ptr::null_mut();
    // SAFETY: valid out-pointer; bad flags are an error status.
    result(unsafe { cu::cuStreamCreateWithPriority(&mut stream, flags, priority) })?;
    Ok(stream)
}

/// `cuStreamDestroy`: work still queued completes after it.
///
/// # Safety
/// The caller owns `stream`, a live stream, and uses it no more.
pub(crate) unsafe fn stream_destroy(stream: cu::CUstream) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuStreamDestroy_v2(stream) })
}

/// `cuStreamSynchronize`.
///
/// # Safety
/// `stream` is live (or the legacy or per-thread handle, with its context current).
pub(crate) unsafe fn stream_synchronize(stream: cu::CUstream) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuStreamSynchronize(stream) })
}

/// `cuStreamQuery`: `Err(CUDA_ERROR_NOT_READY)` while work is queued.
///
/// # Safety
/// As for [`stream_synchronize`].
pub(crate) unsafe fn stream_query(stream: cu::CUstream) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuStreamQuery(stream) })
}

/// `cuStreamWaitEvent(stream, event, 0)`.
///
/// # Safety
/// Both handles are live.
pub(crate) unsafe fn stream_wait_event(
    stream: cu::CUstream,
    event: cu::CUevent,
) -> DriverResult<()> {
    // SAFETY: the caller's contract; flags 0 is the only documented value.
    result(unsafe { cu::cuStreamWaitEvent(stream, event, 0) })
}

/// `cuLaunchHostFunc`: the driver calls `f(data)` once, on a thread of its own.
///
/// # Safety
/// `stream` is live; `f` may be called with `data` on another thread, once, when the
/// call succeeds (and never when it fails).
pub(crate) unsafe fn launch_host_func(
    stream: cu::CUstream,
    f: cu::CUhostFn,
    data: *mut c_void,
) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuLaunchHostFunc(stream, f, data) })
}

// Events.

/// `cuEventCreate`, in the current context.
pub(crate) fn event_create(flags: u32) -> DriverResult<cu::CUevent> {
    let mut event = std::ptr::null_mut();
    // SAFETY: valid out-pointer; bad flags are an error status.
    result(unsafe { cu::cuEventCreate(&mut event, flags) })?;
    Ok(event)
}

/// `cuEventDestroy`: destroying a recorded event is allowed.
///
/// # Safety
/// The caller owns `event`, a live event, and uses it no more.
pub(crate) unsafe fn event_destroy(event: cu::CUevent) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuEventDestroy_v2(event) })
}

/// `cuEventRecord`.
///
/// # Safety
/// Both handles are live.
pub(crate) unsafe fn event_record(event: cu::CUevent, stream: cu::CUstream) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuEventRecord(event, stream) })
}

/// `cuEventSynchronize`.
///
/// # Safety
/// `event` is live.
pub(crate) unsafe fn event_synchronize(event: cu::CUevent) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuEventSynchronize(event) })
}

/// `cuEventQuery`: `Err(CUDA_ERROR_NOT_READY)` until the event has completed.
///
/// # Safety
/// `event` is live.
pub(crate) unsafe fn event_query(event: cu::CUevent) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuEventQuery(event) })
}

/// `cuEventElapsedTime(start, end)`, milliseconds.
///
/// # Safety
/// Both events are live.
pub(crate) unsafe fn event_elapsed_time(start: cu::CUevent, end: cu::CUevent) -> DriverResult<f32> {
    let mut ms = 0f32;
    // SAFETY: valid out-pointer; the handles are the caller's contract.
    result(unsafe { cu::cuEventElapsedTime(&mut ms, start, end) })?;
    Ok(ms)
}
