//! The activity API: the records CUPTI writes of each kernel, copy and memset (one per
//! operation, in buffers this module hands to CUPTI), and reading them.
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::find::{CUPTI, CUPTI_SUCCESS};
use crate::layout;

/// What kind of GPU work an activity record describes.
#[derive(Debug, Clone, PartialEq)]
pub enum Work {
    Kernel {
        name: String,
        grid: [u32; 3],
        block: [u32; 3],
    },
    Copy {
        kind: CopyKind,
        src: MemoryKind,
        dst: MemoryKind,
    },
    /// A copy between two devices (`MEMCPY2` records).
    Peer {
        src_device: u32,
        dst_device: u32,
    },
    Memset,
}

/// `CUpti_ActivityMemcpyKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyKind {
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
    HostToHost,
    PeerToPeer,
    Other(u8),
}

impl CopyKind {
    fn from_raw(raw: u8) -> CopyKind {
        match raw {
            1 => CopyKind::HostToDevice,
            2 => CopyKind::DeviceToHost,
            8 => CopyKind::DeviceToDevice,
            9 => CopyKind::HostToHost,
            10 => CopyKind::PeerToPeer,
            other => CopyKind::Other(other),
        }
    }
}

/// `CUpti_ActivityMemoryKind`: where a copy's source or destination lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    Pageable,
    Pinned,
    Device,
    Managed,
    Other(u8),
}

impl MemoryKind {
    fn from_raw(raw: u8) -> MemoryKind {
        match raw {
            1 => MemoryKind::Pageable,
            2 => MemoryKind::Pinned,
            3 | 6 => MemoryKind::Device,
            5 | 7 => MemoryKind::Managed,
            other => MemoryKind::Other(other),
        }
    }
}

/// One activity record: an operation as the GPU ran it. Times are CUPTI timestamps (ns).
#[derive(Debug, Clone, PartialEq)]
pub struct Activity {
    pub work: Work,
    pub start_ns: u64,
    pub end_ns: u64,
    pub device: u32,
    /// CUPTI's id of the stream (not the `CUstream` handle).
    pub stream: u32,
    pub correlation: u32,
    pub bytes: u64,
}

/// Whether a [`Session`](super::Session) is recording: otherwise the callback and the buffers
/// keep nothing.
pub(super) static RECORDING: AtomicBool = AtomicBool::new(false);
/// The records delivered while recording, and how many were of kinds not read.
pub(super) static ACTIVITIES: Mutex<Vec<Activity>> = Mutex::new(Vec::new());
pub(super) static SKIPPED: AtomicUsize = AtomicUsize::new(0);

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned sink still holds valid records; a panic elsewhere must not lose them.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The activity kinds a session records.
pub(super) const KINDS: [u32; 4] = [
    layout::KIND_CONCURRENT_KERNEL,
    layout::KIND_MEMCPY,
    layout::KIND_MEMCPY2,
    layout::KIND_MEMSET,
];

/// The record struct `T` from the start of `bytes`, if there are enough of them.
fn read<T: bytemuck::Pod>(bytes: &[u8]) -> Option<T> {
    bytes.get(..std::mem::size_of::<T>()).map(bytemuck::pod_read_unaligned)
}

impl layout::Transfer {
    fn activity(self, work: Work, correlation: u32) -> Activity {
        Activity {
            work,
            start_ns: self.start,
            end_ns: self.end,
            device: self.device_id,
            stream: self.stream_id,
            correlation,
            bytes: self.bytes,
        }
    }
}

/// Reads a record's leading bytes (at least [`layout::prefix_len`] of its kind). A kernel's
/// name is a pointer in the record: `kernel_name` turns it into text. `None` for kinds this
/// module does not read, or a prefix too short.
pub fn parse_record(bytes: &[u8], kernel_name: impl FnOnce(usize) -> String) -> Option<Activity> {
    use layout::*;
    let kind: u32 = read(bytes)?;
    let activity = match kind {
        KIND_CONCURRENT_KERNEL => {
            let k: Kernel = read(bytes)?;
            Activity {
                work: Work::Kernel {
                    name: kernel_name(k.name as usize),
                    grid: k.grid,
                    block: k.block,
                },
                start_ns: k.start,
                end_ns: k.end,
                device: k.device_id,
                stream: k.stream_id,
                correlation: k.correlation_id,
                bytes: 0,
            }
        }
        KIND_MEMCPY | KIND_MEMSET => {
            let c: Memcpy = read(bytes)?;
            let [copy, src, dst, _flags] = c.transfer.head;
            let work = if kind == KIND_MEMSET {
                Work::Memset
            } else {
                Work::Copy {
                    kind: CopyKind::from_raw(copy),
                    src: MemoryKind::from_raw(src),
                    dst: MemoryKind::from_raw(dst),
                }
            };
            c.transfer.activity(work, c.correlation_id)
        }
        KIND_MEMCPY2 => {
            let p: MemcpyPtoP = read(bytes)?;
            let work = Work::Peer { src_device: p.src_device_id, dst_device: p.dst_device_id };
            p.transfer.activity(work, p.correlation_id)
        }
        _ => return None,
    };
    Some(activity)
}

/// Activity buffers: a few thousand records each (CUPTI asks for another when one fills).
const BUFFER_BYTES: usize = 2 << 20;
const BUFFER_ALIGN: usize = 8;
/// Buffers kept ready before a recording starts.
const BUFFERS_READY: usize = 4;

/// Buffers CUPTI handed back, kept for its next request (addresses). A fresh allocation is
/// fresh pages, faulted in as CUPTI first writes them, on the thread enqueueing the work and
/// inside the recorded run: with a new 8 MiB buffer per recording, the first copy of an H200
/// run finished 2 to 4 ms late (recording cost +25%). Reused buffers are resident.
static POOL: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn buffer_layout(size: usize) -> Option<std::alloc::Layout> {
    std::alloc::Layout::from_size_align(size, BUFFER_ALIGN).ok()
}

/// A buffer of [`BUFFER_BYTES`], from the pool or newly allocated (null when out of memory).
fn take_buffer() -> *mut u8 {
    if let Some(address) = lock(&POOL).pop() {
        return address as *mut u8;
    }
    match buffer_layout(BUFFER_BYTES) {
        // SAFETY: a non-zero size with a valid alignment.
        Some(l) => unsafe { std::alloc::alloc(l) },
        None => std::ptr::null_mut(),
    }
}

/// Fills the pool up to [`BUFFERS_READY`] buffers with every page touched, so no recorded
/// run pays for faulting them in.
pub(super) fn ready_buffers() {
    let missing = BUFFERS_READY.saturating_sub(lock(&POOL).len());
    for _ in 0..missing {
        let buffer = take_buffer();
        if buffer.is_null() {
            return;
        }
        // SAFETY: a fresh allocation of BUFFER_BYTES bytes that nothing else uses.
        unsafe { std::ptr::write_bytes(buffer, 0, BUFFER_BYTES) };
        lock(&POOL).push(buffer as usize);
    }
}

/// CUPTI asks for an empty activity buffer.
pub(super) unsafe extern "C" fn buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max: *mut usize,
) {
    let memory = take_buffer();
    // SAFETY: CUPTI passes valid out-pointers.
    unsafe {
        *buffer = memory;
        *size = if memory.is_null() { 0 } else { BUFFER_BYTES };
        *max = 0;
    }
}

/// CUPTI hands back a buffer of records (on its own thread, or in a flush).
pub(super) unsafe extern "C" fn buffer_completed(
    _context: *mut c_void,
    _stream: u32,
    buffer: *mut u8,
    size: usize,
    valid: usize,
) {
    if buffer.is_null() {
        return;
    }
    // Records of work done while nothing records (warm-ups, runs between sessions) are
    // discarded unread.
    let recording = RECORDING.load(Ordering::SeqCst);
    if let (true, Some(Ok(cupti))) = (recording, CUPTI.get()) {
        let mut parsed = Vec::new();
        let mut record: *mut c_void = std::ptr::null_mut();
        loop {
            // SAFETY: `buffer` holds `valid` bytes of records; CUPTI advances `record`.
            let status =
                unsafe { (cupti.api.activity_get_next_record)(buffer, valid, &mut record) };
            if status != CUPTI_SUCCESS || record.is_null() {
                break; // CUPTI_ERROR_MAX_LIMIT_REACHED: no more records
            }
            // SAFETY: every record starts with its 4-byte kind.
            let kind = unsafe { (record as *const u32).read_unaligned() };
            let Some(len) = layout::prefix_len(kind) else {
                SKIPPED.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            // SAFETY: a record of this kind is at least `len` bytes (module doc, Record
            // layouts), inside the valid part of the buffer.
            let bytes = unsafe { std::slice::from_raw_parts(record as *const u8, len) };
            let name = |ptr: usize| {
                if ptr == 0 {
                    return String::new();
                }
                // SAFETY: a kernel record's name is a NUL-terminated string CUPTI keeps
                // alive at least while its buffer is being read.
                unsafe { CStr::from_ptr(ptr as *const c_char) }.to_string_lossy().into_owned()
            };
            match parse_record(bytes, name) {
                Some(a) => parsed.push(a),
                None => {
                    SKIPPED.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        lock(&ACTIVITIES).extend(parsed);
    }
    if size == BUFFER_BYTES {
        lock(&POOL).push(buffer as usize);
    } else if let Some(l) = buffer_layout(size) {
        // SAFETY: `buffer` came from `buffer_requested` with this size and alignment.
        unsafe { std::alloc::dealloc(buffer, l) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(len: usize, fields: &[(usize, &[u8])]) -> Vec<u8> {
        let mut b = vec![0u8; len];
        for (at, bytes) in fields {
            b[*at..*at + bytes.len()].copy_from_slice(bytes);
        }
        b
    }

    /// The offsets of the fields read, as `cupti_activity.h` lays them out (CUDA 12.0 to 13.x):
    /// a transcription error in `layout` moves one of them.
    // The records below are written at the header's offsets (numbers, not `layout`'s names).

    #[test]
    fn a_kernel_record_is_read_from_its_shared_prefix() {
        // A CUpti_ActivityKernel10 is 256 bytes; only the prefix is read.
        let grid: Vec<u8> = [4096u32, 1, 1].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let block: Vec<u8> = [256u32, 1, 1].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let b = record(
            256,
            &[
                (0, &10u32.to_ne_bytes()),
                (16, &1_000u64.to_ne_bytes()), // start
                (24, &3_500u64.to_ne_bytes()), // end
                (40, &1u32.to_ne_bytes()),     // deviceId
                (48, &13u32.to_ne_bytes()),    // streamId
                (52, &grid),
                (64, &block),
                (92, &77u32.to_ne_bytes()),      // correlationId
                (104, &0xABCDu64.to_ne_bytes()), // name
            ],
        );
        let a = parse_record(&b, |ptr| format!("kernel@{ptr:x}")).unwrap();
        assert_eq!(
            a,
            Activity {
                work: Work::Kernel {
                    name: "kernel@abcd".into(),
                    grid: [4096, 1, 1],
                    block: [256, 1, 1]
                },
                start_ns: 1_000,
                end_ns: 3_500,
                device: 1,
                stream: 13,
                correlation: 77,
                bytes: 0,
            }
        );
    }

    #[test]
    fn copies_peer_copies_and_memsets_are_read() {
        // Memcpy, PtoP and Memset share bytes (8), start (16), end (24), deviceId (32) and
        // streamId (40); `tail` writes the u32 fields after those.
        let transfer = |len: usize, kind: u32, head: [u8; 4], tail: &[(usize, u32)]| {
            let mut b = record(
                len,
                &[
                    (0, &kind.to_ne_bytes()),
                    (4, &head),
                    (8, &(8u64 << 20).to_ne_bytes()),
                    (16, &10u64.to_ne_bytes()),
                    (24, &20u64.to_ne_bytes()),
                    (32, &2u32.to_ne_bytes()),
                    (40, &7u32.to_ne_bytes()),
                ],
            );
            for (at, v) in tail {
                b[*at..*at + 4].copy_from_slice(&v.to_ne_bytes());
            }
            let a = parse_record(&b, |_| unreachable!()).unwrap();
            assert_eq!(
                (a.bytes, a.start_ns, a.end_ns, a.device, a.stream),
                (8 << 20, 10, 20, 2, 7)
            );
            (a.work, a.correlation)
        };
        // A CUpti_ActivityMemcpy6 is 88 bytes; only the prefix is read. 44: correlationId.
        let pinned_to_device = Work::Copy {
            kind: CopyKind::HostToDevice,
            src: MemoryKind::Pinned,
            dst: MemoryKind::Device,
        };
        assert_eq!(transfer(88, 1, [1, 2, 3, 0], &[(44, 5)]), (pinned_to_device, 5));
        // 44: srcDeviceId, 52: dstDeviceId, 60: correlationId.
        let peer = Work::Peer { src_device: 0, dst_device: 1 };
        assert_eq!(transfer(64, 22, [10, 3, 3, 0], &[(44, 0), (52, 1), (60, 9)]), (peer, 9));
        // A memset's bytes 4..8 are its value.
        assert_eq!(transfer(48, 2, 0xFFu32.to_ne_bytes(), &[(44, 6)]), (Work::Memset, 6));
    }

    #[test]
    fn unknown_kinds_and_short_records_are_skipped() {
        assert!(
            parse_record(&record(64, &[(0, &4u32.to_ne_bytes())]), |_| unreachable!()).is_none()
        );
        assert!(
            parse_record(&record(40, &[(0, &10u32.to_ne_bytes())]), |_| unreachable!()).is_none()
        );
        assert!(
            parse_record(&record(44, &[(0, &1u32.to_ne_bytes())]), |_| unreachable!()).is_none()
        );
        assert!(parse_record(&[1, 0], |_| unreachable!()).is_none());
    }
}
