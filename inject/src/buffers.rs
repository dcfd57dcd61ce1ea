//! CUPTI's activity buffers: empty ones handed out on request, full ones read and written as
//! lines, and the record limit.
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use streamlab_cupti::decode::Decoded;
use streamlab_cupti::trace_file::Line;

use crate::{lock, watch, RECORDER};

/// Buffers of 2 MiB, some ten thousand records each; CUPTI asks for another as one fills.
const BUFFER_BYTES: usize = 2 << 20;
const BUFFER_ALIGN: usize = 8;
/// Buffers handed back and kept for the next request: their pages are already faulted in.
const POOL_MOST: usize = 16;
static POOL: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn buffer_layout() -> std::alloc::Layout {
    // A non-zero size and a power-of-two alignment: this cannot fail.
    std::alloc::Layout::from_size_align(BUFFER_BYTES, BUFFER_ALIGN).expect("buffer layout")
}

/// CUPTI asks for an empty buffer.
pub unsafe extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max: *mut usize) {
    let taken = catch_unwind(|| {
        if let Some(address) = lock(&POOL).pop() {
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
    let mut pool = lock(&POOL);
    if pool.len() < POOL_MOST {
        pool.push(buffer as usize);
    } else {
        drop(pool);
        // SAFETY: `buffer` came from `buffer_requested`, allocated with this layout.
        unsafe { std::alloc::dealloc(buffer, buffer_layout()) };
    }
}

/// Writes a completed buffer's records as lines, within the limit.
///
/// # Safety
/// The arguments are those of CUPTI's completion callback this is called from.
unsafe fn write_records(context: *mut c_void, stream: u32, buffer: *mut u8, valid: usize) {
    let Some(recorder) = RECORDER.get() else { return };
    let Some(cupti) = recorder.cupti else { return };
    if std::process::id() != recorder.pid {
        return; // a forked child: these are copies of the parent's records
    }
    let mut text = String::new();
    let mut calls = |domain, cbid| {
        if (domain, cbid) == watch::PROBE_CALL {
            recorder.probe.seen(cupti.now_ns());
        }
        recorder.calls.get(&(domain, cbid)).cloned()
    };
    let mut each = |decoded| {
        if let Decoded::Line(line) = decoded {
            if recorder.budget.admit(&line) {
                text.push_str(&line.to_json_line());
            }
        }
    };
    // SAFETY: the caller's promise.
    unsafe { cupti.decode_buffer(buffer, valid, &mut calls, &mut each) };
    // SAFETY: the caller's promise.
    if let Ok(count @ 1..) = unsafe { cupti.dropped_in(context, stream) } {
        let why = "dropped by CUPTI: it had no buffer to write them in".to_string();
        text.push_str(&Line::Dropped { count: count as u64, why, before: None }.to_json_line());
    }
    lock(&recorder.writer).append(&text);
}

/// The record limit. Records of GPU work, synchronizations, calls and markers count; the
/// lines that describe devices, contexts, streams and names do not (they are few, and a
/// trace cannot be read without them).
pub struct Budget {
    max: u64,
    counted: AtomicU64,
    over: AtomicU64,
    unfinished: AtomicU64,
    /// What the `Dropped` lines written so far have said.
    over_written: AtomicU64,
    unfinished_written: AtomicU64,
}

impl Budget {
    pub fn new(max: u64) -> Budget {
        Budget {
            max,
            counted: AtomicU64::new(0),
            over: AtomicU64::new(0),
            unfinished: AtomicU64::new(0),
            over_written: AtomicU64::new(0),
            unfinished_written: AtomicU64::new(0),
        }
    }

    /// Whether `line` is written. A span with no end is work still running when a forced
    /// flush (at exit) took its record: counted apart, never written.
    pub fn admit(&self, line: &Line) -> bool {
        let span = match line {
            Line::Kernel { start, end, .. }
            | Line::Copy { start, end, .. }
            | Line::Peer { start, end, .. }
            | Line::Memset { start, end, .. }
            | Line::Sync { start, end, .. }
            | Line::Api { start, end, .. } => Some((*start, *end)),
            Line::Marker { .. } => None,
            _ => return true,
        };
        if span.is_some_and(|(start, end)| end == 0 || end < start) {
            self.unfinished.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        if self.counted.fetch_add(1, Ordering::Relaxed) < self.max {
            return true;
        }
        self.over.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// `Dropped` lines for what was left out since the last call (the counts of a process's
    /// `Dropped` lines add up).
    pub fn dropped_lines(&self) -> String {
        let mut text = String::new();
        let mut since = |count: &AtomicU64, written: &AtomicU64, why: String| {
            let now = count.load(Ordering::Relaxed);
            let before = written.swap(now, Ordering::Relaxed);
            if now > before {
                text.push_str(
                    &Line::Dropped { count: now - before, why, before: None }.to_json_line(),
                );
            }
        };
        let over = format!("over the limit of {} records (STREAMLAB_TRACE_MAX_RECORDS)", self.max);
        since(&self.over, &self.over_written, over);
        let unfinished = "work still running at exit: its records had no end".to_string();
        since(&self.unfinished, &self.unfinished_written, unfinished);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(start: u64, end: u64) -> Line {
        Line::Kernel {
            device: 0,
            context: 1,
            stream: 7,
            start,
            end,
            correlation: 1,
            name: "k".into(),
            grid: [1, 1, 1],
            block: [1, 1, 1],
        }
    }

    #[test]
    fn the_limit_keeps_the_first_records_and_counts_the_rest_once() {
        let budget = Budget::new(2);
        let stream = Line::Stream { context: 1, stream: 7, priority: 0, non_blocking: true };
        let kept: Vec<bool> = [kernel(1, 2), stream.clone(), kernel(3, 4), kernel(5, 6), stream]
            .iter()
            .map(|l| budget.admit(l))
            .collect();
        assert_eq!(kept, [true, true, true, false, true]);
        // Unfinished work is counted apart and never written.
        assert!(!budget.admit(&kernel(7, 0)));
        let lines: Vec<Line> =
            budget.dropped_lines().lines().map(|l| Line::parse(l).unwrap()).collect();
        let [Line::Dropped { count: 1, why: over, .. }, Line::Dropped { count: 1, why: running, .. }] =
            &lines[..]
        else {
            panic!("{lines:?}")
        };
        assert!(over.contains("limit of 2"), "{over}");
        assert!(running.contains("still running"), "{running}");
        // Said once: nothing new, no line.
        assert_eq!(budget.dropped_lines(), "");
        assert!(!budget.admit(&kernel(9, 10)));
        assert!(budget.dropped_lines().contains("\"count\":1"));
    }
}
