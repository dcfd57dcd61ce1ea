//! CUPTI's activity buffers: empty ones handed out on request, full ones decoded and handed
//! to the keeper (`keeper.rs`), which writes or holds their lines.
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};

use streamlab_cupti::decode::Decoded;
use streamlab_cupti::trace_file::Line;

use crate::crash_state::{crashing, hold};
use crate::{lock, watch, RECORDER};

/// Buffers of 2 MiB, some ten thousand records each; CUPTI asks for another as one fills.
const BUFFER_BYTES: usize = 2 << 20;
const BUFFER_ALIGN: usize = 8;
/// Buffers handed back and kept for the next request: their pages are already faulted in.
const POOL_MOST: usize = 16;
static POOL: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// The pool, locked; while a crash is handled, only if it is free at once (else a buffer is
/// allocated or leaked: a lock held by the crashed thread would never be let go).
fn pool() -> Option<MutexGuard<'static, Vec<usize>>> {
    if crashing() {
        POOL.try_lock().ok()
    } else {
        Some(lock(&POOL))
    }
}

fn buffer_layout() -> std::alloc::Layout {
    // A non-zero size and a power-of-two alignment: this cannot fail.
    std::alloc::Layout::from_size_align(BUFFER_BYTES, BUFFER_ALIGN).expect("buffer layout")
}

/// CUPTI asks for an empty buffer.
pub unsafe extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max: *mut usize) {
    let taken = catch_unwind(|| {
        if let Some(address) = pool().and_then(|mut p| p.pop()) {
            return address as *mut u8;
        }
        // SAFETY: a layout of non-zero size.
        unsafe { std::alloc::alloc(buffer_layout()) }
    });
    let memory = taken.unwrap_or(std::ptr::null_mut());
    // SAFETY: CUPTI passes valid out-pointers. A null buffer of size 0 tells it there is none
    // (it then drops records and counts them).
    unsafe {
        *buffer = memory;
        *size = if memory.is_null() { 0 } else { BUFFER_BYTES };
        *max = 0;
    }
}

/// CUPTI hands back a buffer of records, from its own thread or inside a flush.
pub unsafe extern "C" fn buffer_completed(
    context: *mut c_void,
    stream: u32,
    buffer: *mut u8,
    size: usize,
    valid: usize,
) {
    if buffer.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: CUPTI's own buffer, context and stream, inside its completion callback.
        unsafe { write_records(context, stream, buffer, valid) }
    }));
    if size != BUFFER_BYTES {
        return; // not one of ours: left alone
    }
    let Some(mut pool) = pool() else { return };
    if pool.len() < POOL_MOST {
        pool.push(buffer as usize);
    } else {
        drop(pool);
        // SAFETY: `buffer` came from `buffer_requested`, allocated with this layout.
        unsafe { std::alloc::dealloc(buffer, buffer_layout()) };
    }
}

/// Decodes a completed buffer's records and hands them to the keeper. Without a flush thread
/// they are settled at once, at the time the buffer came.
///
/// # Safety
/// The arguments are those of CUPTI's completion callback this is called from.
unsafe fn write_records(context: *mut c_void, stream: u32, buffer: *mut u8, valid: usize) {
    let Some(recorder) = RECORDER.get() else { return };
    let Some(cupti) = recorder.cupti else { return };
    if std::process::id() != recorder.pid {
        return; // a forked child: these are copies of the parent's records
    }
    let mut lines = Vec::new();
    let mut calls = |domain, cbid| {
        if (domain, cbid) == watch::PROBE_CALL {
            recorder.probe.seen(cupti.now_ns());
        }
        recorder.calls.get(&(domain, cbid)).cloned()
    };
    let mut each = |decoded| {
        if let Decoded::Line(line) = decoded {
            lines.push(line);
        }
    };
    // SAFETY: the caller's promise.
    unsafe { cupti.decode_buffer(buffer, valid, &mut calls, &mut each) };
    let mut said = String::new();
    // SAFETY: the caller's promise.
    if let Ok(count @ 1..) = unsafe { cupti.dropped_in(context, stream) } {
        let why = "dropped by CUPTI: it had no buffer to write them in".to_string();
        said.push_str(&Line::Dropped { count: count as u64, why, before: None }.to_json_line());
    }
    let Some(mut keeper) = hold(&recorder.keeper) else { return };
    keeper.receive(lines, &said);
    if recorder.no_flush_thread.load(Ordering::Relaxed) && !crashing() {
        let now = cupti.now_ns();
        keeper.settle(now, false);
        keeper.end_cycle(now, false, String::new(), None);
    }
}
