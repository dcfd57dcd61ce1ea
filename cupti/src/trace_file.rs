//! The file the injected recorder writes, one per traced process, and `streamlab trace`
//! reads: `<dir>/<pid>.jsonl`, one JSON object per line. Lines are appended as CUPTI hands
//! its buffers over (at every periodic flush and at exit), so a process killed even with
//! SIGKILL leaves every line up to its last flush, and a cut last line is simply skipped.
//!
//! Where the recorder keeps the last records or a sample of ranges ([`WhenFull`]), the
//! records themselves (kernels, copies, peer copies, memsets, synchronizations, calls and NVTX
//! markers) go to segment files beside it, `<dir>/<pid>.<seq>.jsonl` ([`segment_path`]), so
//! that the oldest can be deleted whole; the main file keeps every other line. A reader takes
//! the main file, then the segments in `seq` order, as one process ([`file_name`]).
//!
//! Times are CUPTI timestamps in ns (one clock for every process of a host). Stream and
//! context ids are CUPTI's (not the `CUstream` handles).
use serde::{Deserialize, Serialize};

/// The format's version, written in the [`Line::Process`] line. Version 2 added the
/// `Process` line's `keep`, the `Gate`, `Sampled` and `Crashed` lines, `Dropped`'s `before`
/// and the segment files; a version 1 file reads as one that kept the first records.
pub const FORMAT: u32 = 2;

/// `<dir>/<pid>.jsonl`: a process's main file.
pub fn main_path(dir: &std::path::Path, pid: u32) -> std::path::PathBuf {
    dir.join(format!("{pid}.jsonl"))
}

/// `<dir>/<pid>.<seq>.jsonl`: one of a process's segment files.
pub fn segment_path(dir: &std::path::Path, pid: u32, seq: u64) -> std::path::PathBuf {
    dir.join(format!("{pid}.{seq}.jsonl"))
}

/// What a trace folder's file name says: `(pid, None)` for a main file, `(pid, Some(seq))`
/// for a segment; `None` for a name of neither shape.
pub fn file_name(name: &str) -> Option<(u32, Option<u64>)> {
    let stem = name.strip_suffix(".jsonl")?;
    match stem.split_once('.') {
        None => Some((stem.parse().ok()?, None)),
        Some((pid, seq)) => Some((pid.parse().ok()?, Some(seq.parse().ok()?))),
    }
}

/// The NVTX domains libraries mark their own calls in, as their sources name them: NCCL's
/// (`ncclAllReduce`, ...), NVSHMEM's, and RAPIDS' libcudf, librmm and cuVS (compared without
/// case). Every other domain, the default one (`""`) included, is the program's own: a
/// capture range ([`Keep::capture_range`]) and a sampled range are looked for there only.
pub const LIBRARY_DOMAINS: [&str; 5] = ["NCCL", "NVSHMEM", "libcudf", "librmm", "cuvs"];

/// Whether `domain` is one of [`LIBRARY_DOMAINS`].
pub fn library_domain(domain: &str) -> bool {
    LIBRARY_DOMAINS.iter().any(|d| d.eq_ignore_ascii_case(domain))
}

/// Which records the recorder keeps once it has kept `max_records`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenFull {
    /// The first ones: later records are counted as dropped (format 1's only way).
    #[default]
    First,
    /// The last ones: the oldest segment files are deleted ([`Line::Dropped`]'s `before`
    /// says up to when).
    Last,
    /// Whole occurrences of one NVTX range, thinned evenly over the run
    /// ([`Line::Sampled`] says which).
    Sample,
}

/// What the recorder was asked to keep: the `Process` line's `keep`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Keep {
    #[serde(default)]
    pub when_full: WhenFull,
    /// Records are kept from the start of the first NVTX range of this name (on any thread,
    /// in a domain of the program's: not one of [`LIBRARY_DOMAINS`])...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_range: Option<String>,
    /// ...until this many of them have ended (0: to the end of the run).
    #[serde(default)]
    pub capture_count: u64,
    /// Records are kept from this many ms after the program was started (where the trace
    /// command started it; else where the recorder started)... With a capture range too, the
    /// range is looked for from then on.
    #[serde(default)]
    pub delay_ms: u64,
    /// ...for this many ms (`None`: to the end of the run), counted from the end of the delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// Where a copy's source or destination lives (`CUpti_ActivityMemoryKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Memory {
    Pageable,
    Pinned,
    Device,
    Managed,
    Array,
    Unknown,
}

/// What a copy moved (`CUpti_ActivityMemcpyKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
    HostToHost,
    PeerToPeer,
    Other,
}

/// What a host synchronization waited for (`CUpti_ActivitySynchronizationType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncKind {
    Event,
    StreamWaitEvent,
    Stream,
    Context,
    Unknown,
}

/// Which API a call record is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApiDomain {
    Driver,
    Runtime,
}

/// An NVTX marker record's role: a range's start or end (paired by `id`), or an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkerPhase {
    Start,
    End,
    Instant,
}

/// One line of a trace file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Line {
    /// The first line: who was traced, with what, and how.
    Process {
        format: u32,
        pid: u32,
        ppid: u32,
        /// The program's command line as `/proc/self/cmdline` gives it.
        args: Vec<String>,
        /// The libcupti file loaded, and its API version (`cuptiGetVersion`).
        cupti: String,
        cupti_version: u32,
        /// How often the recorder asks CUPTI for its records.
        flush_ms: u64,
        /// The most records kept; records past it are counted in [`Line::Dropped`].
        max_records: u64,
        /// CUPTI's clock when recording began.
        start_ns: u64,
        /// What it was asked to keep (format 1 files have none: the first records).
        #[serde(default)]
        keep: Keep,
        /// What the recorder could not turn on, one reason each ("NVTX markers: …").
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        missing: Vec<String>,
    },
    Device {
        id: u32,
        name: String,
        compute_capability: [u32; 2],
        multiprocessors: u32,
        copy_engines: u32,
    },
    /// A context, and the id of its legacy default (NULL) stream.
    Context { context: u32, device: u32, null_stream: u32 },
    /// A stream's creation flags and priority (`CUPTI_ACTIVITY_KIND_STREAM`).
    Stream { context: u32, stream: u32, priority: i32, non_blocking: bool },
    Kernel {
        device: u32,
        context: u32,
        stream: u32,
        start: u64,
        end: u64,
        correlation: u32,
        name: String,
        grid: [u32; 3],
        block: [u32; 3],
    },
    Copy {
        device: u32,
        context: u32,
        stream: u32,
        start: u64,
        end: u64,
        correlation: u32,
        bytes: u64,
        direction: Direction,
        src: Memory,
        dst: Memory,
    },
    /// A copy between two devices (`MEMCPY2` records).
    Peer {
        device: u32,
        context: u32,
        stream: u32,
        start: u64,
        end: u64,
        correlation: u32,
        bytes: u64,
        src_device: u32,
        dst_device: u32,
    },
    Memset {
        device: u32,
        context: u32,
        stream: u32,
        start: u64,
        end: u64,
        correlation: u32,
        bytes: u64,
    },
    /// The host blocked in a synchronization call. `stream` is `None` where it waited for
    /// a whole context or an event.
    Sync {
        kind: SyncKind,
        context: u32,
        stream: Option<u32>,
        start: u64,
        end: u64,
        correlation: u32,
    },
    /// A driver or runtime call on a host thread (`cuMemAlloc_v2`, `cudaLaunchKernel`, …).
    Api {
        domain: ApiDomain,
        name: String,
        thread: u64,
        start: u64,
        end: u64,
        correlation: u32,
        /// The call's return code (0: success).
        status: u32,
    },
    /// An NVTX marker or one end of an NVTX range.
    Marker {
        phase: MarkerPhase,
        id: u32,
        /// The host thread that emitted it (0 where CUPTI did not say).
        thread: u64,
        time: u64,
        /// Set on starts and instants; empty on ends.
        name: String,
        domain: String,
    },
    /// A name the program gave a stream, a device, a context or a thread through NVTX.
    Name { object: String, id: u32, name: String },
    /// Records lost or left out: past `max_records`, dropped by CUPTI itself for want of
    /// buffers, outside the capture window, or deleted to keep the last records or a sample.
    /// `before`, where the oldest records were dropped to keep the last ones: every record
    /// dropped had completed before this time, and every record that completed later is kept
    /// (the recorder's clock read when the last segment deleted was closed, at the end of a
    /// flush: just after that flush's `Flushed` time).
    Dropped {
        count: u64,
        why: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before: Option<u64>,
    },
    /// The recorder began (`open`) or stopped keeping records at `time`, for the reason
    /// `why` (a capture range's start, its last end, `--delay`, `--duration`). A host call or
    /// marker is kept by its start (a range's end with its start); GPU work by the call that
    /// launched it, or by its own start where that call was never recorded. The window opens
    /// once and closes at most once; without a capture range or a delay it is open from the
    /// start (no `Gate` line says so).
    Gate { time: u64, open: bool, why: String },
    /// Per-range sampling: of the `total` occurrences of the NVTX range `range` seen so far,
    /// these (numbered from 1) are kept whole, every `every`-th; the records of the others
    /// were deleted. Occurrence `n`'s records (and those that follow it until the next one
    /// starts; GPU work with the call that launched it) are segment `n`; segment 0 holds those
    /// before the first occurrence, and is always kept. The last such line holds.
    Sampled { range: String, every: u64, total: u64, kept: Vec<u64> },
    /// A fatal signal reached the process; the recorder flushed what it could first.
    Crashed { signal: i32, time: u64 },
    /// Something the recorder saw and the report should say (another CUPTI user, say).
    Note { text: String },
    /// A periodic flush finished: every record CUPTI completed up to `time` is above (or in
    /// the segment files, where records go there).
    Flushed { time: u64 },
    /// The process reached its exit handlers and the last flush finished.
    Exit { time: u64 },
}

impl Line {
    /// One line of the file, newline included.
    pub fn to_json_line(&self) -> String {
        // Serializing these plain enums cannot fail (no maps with non-string keys).
        let mut text = serde_json::to_string(self).unwrap_or_default();
        text.push('\n');
        text
    }

    /// Reads one line; `None` for a line cut short (a process killed mid-write) or not ours.
    pub fn parse(text: &str) -> Option<Line> {
        serde_json::from_str(text.trim_end()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_round_trips_and_a_cut_line_is_skipped() {
        let line = Line::Copy {
            device: 0,
            context: 1,
            stream: 7,
            start: 100,
            end: 250,
            correlation: 9,
            bytes: 4096,
            direction: Direction::HostToDevice,
            src: Memory::Pageable,
            dst: Memory::Device,
        };
        let text = line.to_json_line();
        assert!(text.ends_with('\n'));
        assert!(text.starts_with("{\"type\":\"copy\""), "{text}");
        assert_eq!(Line::parse(&text), Some(line));
        assert_eq!(Line::parse(&text[..text.len() / 2]), None);
    }
}
