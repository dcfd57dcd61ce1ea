//! What a traced program left, as columns ([`Capture`]): per process, its header (command
//! line, CUPTI, devices, what it was asked to keep and what it lost), its GPU work, its host
//! calls, waits and NVTX ranges. Times stay CUPTI's nanoseconds (one clock for every process
//! of a host) until they are shown: [`Capture::ms`] turns one into ms from the trace's origin.
//!
//! Columns, not objects: a record of GPU work is some 40 bytes here (a million of them fit in
//! 40 MB), its names interned ([`Names`]) and its stream a row number ([`Row`]).
use std::path::PathBuf;

use serde::Serialize;

use crate::lab::record::span::Work;
use crate::runtime::cupti::trace_file::{Keep, Memory};

/// A time on CUPTI's clock, in ns.
pub type Ns = u64;

/// A device a process used, as its Device line names it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Device {
    pub id: u32,
    pub name: String,
    pub compute_capability: [u32; 2],
    pub multiprocessors: u32,
    pub copy_engines: u32,
}

/// How a process's recording ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ending {
    /// It reached its exit handlers, and the recorder's last flush finished (its Exit line).
    Exit { at: Ns },
    /// A fatal signal reached it; the recorder flushed what it could first (its Crashed line).
    Crashed { signal: i32, at: Ns },
    /// No Exit line: the process was killed, crashed past the recorder or is still running;
    /// what was recorded reaches the last periodic flush.
    LastFlush { at: Ns },
    /// Neither: not even one flush finished (the file may end inside the first).
    NoFlush,
}

/// Records lost, and why (the recorder's words).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dropped {
    pub count: u64,
    pub why: String,
}

/// Where a stream's work is drawn and how the rules treat it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub device: u32,
    /// The program's NVTX name for the stream, the legacy default stream, or `stream N`.
    pub name: String,
    /// A context's legacy default (NULL) stream.
    pub legacy: bool,
    /// Created blocking, as CUPTI's stream records show (it waits for the legacy stream, and
    /// the legacy stream for it); false where the records do not say.
    pub blocking: bool,
}

/// A host thread, by CUPTI's id, with the name the program gave it (else `thread N`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Thread {
    pub id: u64,
    pub name: String,
}

/// Strings said once and referred to by number: kernel names (demangled), call names, NVTX
/// names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Names {
    pub strings: Vec<String>,
}

impl Names {
    pub fn get(&self, id: u32) -> &str {
        &self.strings[id as usize]
    }
}

/// The host side of a copy, where it has one: what the pageable-copy rule reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HostMemory {
    None,
    Pageable,
    Pinned,
    Other,
}

impl HostMemory {
    /// How `Span::memory` names it.
    pub fn name(self) -> &'static str {
        match self {
            HostMemory::None | HostMemory::Other => "",
            HostMemory::Pageable => "pageable",
            HostMemory::Pinned => "pinned",
        }
    }

    pub fn of(memory: Memory) -> HostMemory {
        match memory {
            Memory::Pageable => HostMemory::Pageable,
            Memory::Pinned => HostMemory::Pinned,
            _ => HostMemory::Other,
        }
    }
}

/// Kernels, copies, memsets and collectives of one process, by start (then end), as columns:
/// record `i` is `start[i]`, `end[i]`, `row[i]`, ...
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuWork {
    pub start: Vec<Ns>,
    pub end: Vec<Ns>,
    /// Index into [`Process::rows`] (the row knows the device).
    pub row: Vec<u32>,
    pub kind: Vec<Work>,
    /// The kernel's demangled name or the copy's label, in [`Process::names`].
    pub label: Vec<u32>,
    /// The id CUPTI gives the call that launched it, and the work.
    pub correlation: Vec<u32>,
    pub bytes: Vec<u64>,
    pub memory: Vec<HostMemory>,
    /// A kernel's grid and block, index into [`Process::launches`] (`u32::MAX` for others).
    pub launch: Vec<u32>,
}

impl GpuWork {
    pub fn len(&self) -> usize {
        self.start.len()
    }

    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }

    pub fn ns(&self, i: usize) -> Ns {
        self.end[i] - self.start[i]
    }
}

/// What a host call does, for the findings (the rest is `Other`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// `cuMemAlloc*`, `cudaMalloc*` (not the stream-ordered `…Async` ones).
    Alloc,
    /// `cuMemFree*`, `cudaFree*` (not the stream-ordered `…Async` ones).
    Free,
    /// A kernel launch or graph launch.
    Launch,
    /// A copy or memset call.
    Copy,
    /// A synchronization call (stream, event, context or device).
    Sync,
    Other,
}

/// Driver and runtime calls of one process, by start, as columns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Calls {
    pub start: Vec<Ns>,
    pub end: Vec<Ns>,
    /// Index into [`Process::threads`].
    pub thread: Vec<u32>,
    /// Without CUPTI's version suffix, in [`Process::names`].
    pub name: Vec<u32>,
    pub kind: Vec<CallKind>,
    pub correlation: Vec<u32>,
    /// A synchronization record says the host blocked in it (drawn as a wait, not an issue).
    pub waited: Vec<bool>,
}

impl Calls {
    pub fn len(&self) -> usize {
        self.start.len()
    }

    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }
}

/// What a host wait waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    Stream,
    Event,
    Context,
    Other,
}

/// A time the host blocked until the GPU got somewhere (a stream's wait for an event is not
/// one: the host does not block in it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Wait {
    pub kind: WaitKind,
    pub device: u32,
    /// The stream's row name where it waited for one stream.
    pub stream: Option<String>,
    /// The thread that waited (index into [`Process::threads`]) where its call was recorded.
    pub thread: Option<u32>,
    pub start: Ns,
    pub end: Ns,
}

/// An NVTX range the program marked (push/pop or start/end), on one thread.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Range {
    /// Index into [`Process::threads`].
    pub thread: u32,
    /// In [`Process::names`].
    pub name: u32,
    pub start: Ns,
    pub end: Ns,
    /// 0 for a range no other range of its thread encloses.
    pub depth: u32,
    /// Its end was never recorded: closed at the last record.
    pub unclosed: bool,
    /// Marked in a library's own NVTX domain (NCCL, ...): drawn, but no window of the report.
    pub library: bool,
}

/// An NVTX mark (an instant).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mark {
    pub thread: u32,
    pub name: u32,
    pub time: Ns,
}

/// A time the recorder began or stopped keeping records, and why (its Gate lines).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gate {
    pub time: Ns,
    pub open: bool,
    pub why: String,
}

/// Which occurrences of a range the recorder kept, sampling (its last Sampled line).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sampled {
    pub range: String,
    pub every: u64,
    pub total: u64,
    pub kept: Vec<u64>,
}

/// One traced process (the report's JSON says it in `capture::summary`).
#[derive(Debug, Clone, PartialEq)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    /// Its command line (empty when the file has no Process line).
    pub args: Vec<String>,
    /// The files it was read from: its main file, then its segments.
    pub files: Vec<PathBuf>,
    /// The libcupti file its recorder loaded, and CUPTI's API version.
    pub cupti: String,
    pub cupti_version: u32,
    pub flush_ms: u64,
    pub max_records: u64,
    /// What the recorder was asked to keep.
    pub keep: Keep,
    /// CUPTI's clock when the recorder started (0 when the file does not say).
    pub start_ns: Ns,
    /// What its recorder could not turn on, one reason each.
    pub missing: Vec<String>,
    pub devices: Vec<Device>,
    pub rows: Vec<Row>,
    pub threads: Vec<Thread>,
    pub names: Names,
    /// Kernels' grids and blocks, each pair once.
    pub launches: Vec<([u32; 3], [u32; 3])>,
    pub gpu: GpuWork,
    pub calls: Calls,
    /// By start.
    pub waits: Vec<Wait>,
    /// By start (then the enclosing one first).
    pub ranges: Vec<Range>,
    pub marks: Vec<Mark>,
    /// NVTX ranges whose end was not recorded, by name (see [`Process::cut_at`] for why).
    pub unclosed: Vec<String>,
    /// Records kept (device spans, calls, waits, NVTX markers).
    pub records: u64,
    pub dropped: Vec<Dropped>,
    /// Every record dropped to keep the last ones had completed before this time (ring).
    pub dropped_before: Option<Ns>,
    /// Records past the limit were dropped (the first ones kept) from the flush after this.
    pub full_after: Option<Ns>,
    pub gates: Vec<Gate>,
    pub sampled: Option<Sampled>,
    /// What the recorder, or the reading, has to say (another CUPTI user, say).
    pub notes: Vec<String>,
    /// Lines not read: cut short by a kill mid-write, or of a kind this streamlab does not
    /// know, or records without a valid time.
    pub skipped: u64,
    pub ending: Ending,
    /// The first and last times any record of the process names (0 with no record).
    pub first_ns: Ns,
    pub last_ns: Ns,
}

/// Everything a trace folder held.
#[derive(Debug, Clone, PartialEq)]
pub struct Capture {
    /// In the order they started (then by pid).
    pub processes: Vec<Process>,
    /// CUPTI's clock at the origin of every time in ms: the earliest record of any process,
    /// else the earliest time any line names.
    pub origin_ns: Ns,
}

/// How many characters of a command line a label keeps.
const COMMAND_CHARS: usize = 60;

impl Process {
    /// A process with nothing read yet but its pid and file.
    pub fn empty(pid: u32, file: PathBuf) -> Process {
        Process {
            pid,
            ppid: 0,
            args: Vec::new(),
            files: vec![file],
            cupti: String::new(),
            cupti_version: 0,
            flush_ms: 0,
            max_records: 0,
            keep: Keep::default(),
            start_ns: 0,
            missing: Vec::new(),
            devices: Vec::new(),
            rows: Vec::new(),
            threads: Vec::new(),
            names: Names::default(),
            launches: Vec::new(),
            gpu: GpuWork::default(),
            calls: Calls::default(),
            waits: Vec::new(),
            ranges: Vec::new(),
            marks: Vec::new(),
            unclosed: Vec::new(),
            records: 0,
            dropped: Vec::new(),
            dropped_before: None,
            full_after: None,
            gates: Vec::new(),
            sampled: None,
            notes: Vec::new(),
            skipped: 0,
            ending: Ending::NoFlush,
            first_ns: 0,
            last_ns: 0,
        }
    }

    /// `pid 1234 · python train.py --epochs 1`: how a drawing and the report name it (the
    /// program's own file name, not its folder; cut at `COMMAND_CHARS` characters).
    pub fn label(&self) -> String {
        let Some((program, rest)) = self.args.split_first() else {
            return format!("pid {}", self.pid);
        };
        let program = program.rsplit('/').next().unwrap_or(program);
        let mut text = program.to_string();
        for word in rest {
            text.push(' ');
            text.push_str(word);
        }
        // One line: a `python -c` program's newlines (and any other white space) become spaces.
        let mut text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if text.chars().count() > COMMAND_CHARS {
            text = text.chars().take(COMMAND_CHARS - 1).collect::<String>() + "…";
        }
        format!("pid {} · {text}", self.pid)
    }

    /// The names of the devices it used, each once.
    pub fn device_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for d in &self.devices {
            if !names.contains(&d.name) {
                names.push(d.name.clone());
            }
        }
        names
    }

    /// Records dropped, all reasons together.
    pub fn dropped_count(&self) -> u64 {
        self.dropped.iter().map(|d| d.count).sum()
    }

    /// The devices its GPU work ran on, in order.
    pub fn work_devices(&self) -> Vec<u32> {
        let mut devices: Vec<u32> = self.rows.iter().map(|r| r.device).collect();
        devices.sort_unstable();
        devices.dedup();
        devices
    }

    /// A thread's row name.
    pub fn thread_name(&self, thread: u32) -> &str {
        &self.threads[thread as usize].name
    }

    /// The time from which every record is kept: the recorder dropped older ones to keep the
    /// last (`Dropped`'s `before`), or opened its gate only then; `None` when it kept from
    /// its start.
    pub fn kept_from(&self) -> Option<Ns> {
        let gate = self.gates.iter().find(|g| g.open).map(|g| g.time);
        [self.dropped_before, gate].into_iter().flatten().max()
    }

    /// Where the record stops being whole, and the reason: the recorder closed its gate,
    /// reached its limit keeping the first records, or the process ended without its exit
    /// handlers; `None` when it was recorded to its exit.
    pub fn cut_at(&self) -> Option<(Ns, Cut)> {
        if let Some(closed) = self.gates.last().filter(|g| !g.open) {
            return Some((closed.time, Cut::Gate));
        }
        if let Some(at) = self.full_after {
            return Some((at, Cut::Limit));
        }
        match self.ending {
            Ending::Exit { .. } => None,
            _ => Some((self.last_ns, Cut::Ended)),
        }
    }
}

/// Why a process's record stops being whole ([`Process::cut_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cut {
    /// The recorder stopped keeping records (a capture range's end, `--duration`).
    Gate,
    /// The record limit was reached with the first records kept.
    Limit,
    /// The process ended without reaching its exit handlers.
    Ended,
}

impl Capture {
    pub fn records(&self) -> u64 {
        self.processes.iter().map(|p| p.records).sum()
    }

    pub fn dropped(&self) -> u64 {
        self.processes.iter().map(Process::dropped_count).sum()
    }

    pub fn skipped(&self) -> u64 {
        self.processes.iter().map(|p| p.skipped).sum()
    }

    /// A CUPTI time in ms since the origin (a time before it is 0).
    pub fn ms(&self, ns: Ns) -> f64 {
        ms_since(self.origin_ns, ns)
    }
}

/// `ns` in ms since `origin` (0 before it).
pub fn ms_since(origin: Ns, ns: Ns) -> f64 {
    ns.saturating_sub(origin) as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_names_the_pid_and_the_program_without_its_folder() {
        let mut p =
            Process { flush_ms: 200, max_records: 1, ..Process::empty(42, "42.jsonl".into()) };
        assert_eq!(p.label(), "pid 42");
        p.args = vec!["/usr/bin/python3".into(), "train.py".into(), "--epochs".into(), "1".into()];
        assert_eq!(p.label(), "pid 42 · python3 train.py --epochs 1");
        p.args = vec!["python".into(), "-c".into(), "\nimport torch\nx = 1\n".into()];
        assert_eq!(p.label(), "pid 42 · python -c import torch x = 1");
        p.args = vec!["x".repeat(100)];
        let label = p.label();
        assert_eq!(label.chars().count(), "pid 42 · ".chars().count() + COMMAND_CHARS);
        assert!(label.ends_with('…'), "{label}");
    }
}
