//! Reading a trace folder: every `<pid>.jsonl` the injected recorder wrote (one per traced
//! process: a program's children and `streamlab launch`'s ranks give several), line by line
//! ([`crate::runtime::cupti::trace_file::Line`]), into a [`Capture`].
//!
//! A line that does not parse is counted and skipped: the last line of a process killed
//! mid-write is cut short, and a newer recorder may write kinds this streamlab does not know.
//! Records are placed on one clock: CUPTI's timestamps are one clock for every process of a
//! host, so each time becomes ms since the earliest record of any process.
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::lab::record::drawing::LEGACY_STREAM;
use crate::lab::record::span::{HostSpan, HostWork, Span, Work};
use crate::runtime::cupti::trace_file::{Direction, Line, MarkerPhase, Memory, SyncKind, FORMAT};
use crate::t;
use crate::trace::capture::model::{
    call_kind, call_name, is_nccl_kernel, kernel_name, Capture, Device, Dropped, Ending, Process,
};
use crate::trace::inspect::host::{HostCall, HostWait, Range, WaitKind};

/// The NVTX domains libraries mark their own calls in, as their sources name them: NCCL's
/// (`ncclAllReduce`, ...), NVSHMEM's, and RAPIDS' libcudf, librmm and cuVS. Their ranges are
/// drawn on the host rows but make no window of the report, which is for the phases the
/// program marks, in the default domain or a domain of its own. PyTorch
/// (`torch.cuda.nvtx`, `emit_nvtx()`) and Transformer Engine mark the default domain.
pub const LIBRARY_DOMAINS: [&str; 5] = ["NCCL", "NVSHMEM", "libcudf", "librmm", "cuvs"];

/// Whether a range of `domain` is a library's (see [`LIBRARY_DOMAINS`]).
fn library_domain(domain: &str) -> bool {
    LIBRARY_DOMAINS.iter().any(|d| d.eq_ignore_ascii_case(domain))
}

/// One file's lines as parsed, and how many did not parse.
pub struct File {
    pub path: PathBuf,
    pub lines: Vec<Line>,
    pub skipped: u64,
}

/// Every `*.jsonl` file of `dir`, read into one capture.
pub fn read_dir(dir: &Path) -> Result<Capture, String> {
    let shown = dir.display();
    let entries = std::fs::read_dir(dir).map_err(|e| format!("reading {shown}: {e}"))?;
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file())
        .collect();
    paths.sort();
    let files = paths.iter().map(|p| read_file(p)).collect::<Result<Vec<_>, _>>()?;
    Ok(capture(files))
}

/// One file's lines. Read as bytes: a line cut mid-character is skipped like any cut line.
pub fn read_file(path: &Path) -> Result<File, String> {
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("reading {shown}: {e}"))?;
    let (mut lines, mut skipped) = (Vec::new(), 0);
    for line in BufReader::new(file).split(b'\n') {
        let bytes = line.map_err(|e| format!("reading {shown}: {e}"))?;
        let text = String::from_utf8_lossy(&bytes);
        if text.trim().is_empty() {
            continue;
        }
        match Line::parse(&text) {
            Some(l) => lines.push(l),
            None => skipped += 1,
        }
    }
    Ok(File { path: path.to_path_buf(), lines, skipped })
}

/// A record's start and end in CUPTI's ns (an NVTX marker's time twice); None for lines
/// that are no record.
fn times(line: &Line) -> Option<(u64, u64)> {
    match line {
        Line::Kernel { start, end, .. }
        | Line::Copy { start, end, .. }
        | Line::Peer { start, end, .. }
        | Line::Memset { start, end, .. }
        | Line::Sync { start, end, .. }
        | Line::Api { start, end, .. } => Some((*start, *end)),
        Line::Marker { time, .. } => Some((*time, *time)),
        _ => None,
    }
}

/// Whether CUPTI gave the record a time (it leaves 0 where it has none).
fn valid((start, end): (u64, u64)) -> bool {
    start > 0 && end >= start
}

/// The capture of `files`, on one clock.
pub fn capture(files: Vec<File>) -> Capture {
    let origin_ns = files
        .iter()
        .flat_map(|f| f.lines.iter().filter_map(times))
        .filter(|t| valid(*t))
        .map(|(start, _)| start)
        .min()
        .unwrap_or(0);
    let mut keyed: Vec<(u64, Process)> = files
        .into_iter()
        .map(|f| {
            let began = f.lines.iter().find_map(|l| match l {
                Line::Process { start_ns, .. } => Some(*start_ns),
                _ => None,
            });
            let first = f.lines.iter().filter_map(times).filter(|t| valid(*t)).map(|t| t.0).min();
            let key = began.or(first).unwrap_or(u64::MAX);
            (key, process(f, origin_ns))
        })
        .collect();
    keyed.sort_by_key(|(key, p)| (*key, p.pid));
    Capture { processes: keyed.into_iter().map(|(_, p)| p).collect(), origin_ns }
}

/// The host side of a copy, as `Span::memory` names it.
fn memory_name(m: Memory) -> &'static str {
    match m {
        Memory::Pageable => "pageable",
        Memory::Pinned => "pinned",
        Memory::Device => "device",
        Memory::Managed => "managed",
        Memory::Array => "array",
        Memory::Unknown => "",
    }
}

/// A copy's kind of work, its label, and the memory on its host side (where it has one).
fn copy_kind(direction: Direction, src: Memory, dst: Memory) -> (Work, &'static str, &'static str) {
    match direction {
        Direction::HostToDevice => (Work::CopyToDevice, "memcpy HtoD", memory_name(src)),
        Direction::DeviceToHost => (Work::CopyToHost, "memcpy DtoH", memory_name(dst)),
        Direction::DeviceToDevice => (Work::CopyOnDevice, "memcpy DtoD", ""),
        Direction::HostToHost => (Work::CopyOnDevice, "memcpy HtoH", memory_name(src)),
        Direction::PeerToPeer => (Work::CopyPeer, "memcpy PtoP", ""),
        Direction::Other => (Work::CopyOnDevice, "memcpy (other kind)", ""),
    }
}

/// What a wait is called on a host row.
fn wait_name(kind: SyncKind, stream: Option<&str>) -> String {
    let what = match kind {
        SyncKind::Stream => "stream synchronize",
        SyncKind::Event => "event synchronize",
        SyncKind::Context => "context synchronize",
        SyncKind::StreamWaitEvent => "stream wait event",
        SyncKind::Unknown => "synchronize",
    };
    match stream {
        Some(s) => format!("{what} ({s})"),
        None => what.to_string(),
    }
}

/// What names things in a file: its Process line, devices, contexts and NVTX names.
#[derive(Default)]
struct Names {
    /// context -> (device, its legacy default stream)
    contexts: HashMap<u32, (u32, u32)>,
    streams: HashMap<u32, String>,
    threads: HashMap<u64, String>,
    /// (context, stream) -> created non-blocking, from CUPTI's stream records.
    non_blocking: HashMap<(u32, u32), bool>,
}

impl Names {
    /// A stream's row: the program's NVTX name, the legacy default stream, or `stream N`.
    fn stream(&self, context: u32, stream: u32) -> String {
        if let Some(name) = self.streams.get(&stream) {
            return name.clone();
        }
        match self.contexts.get(&context) {
            Some((_, null)) if *null == stream => LEGACY_STREAM.into(),
            _ => format!("stream {stream}"),
        }
    }

    /// A host thread's row: its NVTX name, else `thread N` (`NVTX` where CUPTI gave none).
    fn thread(&self, thread: u64) -> String {
        match self.threads.get(&thread) {
            Some(name) => name.clone(),
            None if thread == 0 => "NVTX".into(),
            None => format!("thread {thread}"),
        }
    }
}

/// The header lines of a file (Process, Device, Context, Name) into `p` and the names.
fn read_names(lines: &[Line], p: &mut Process) -> Names {
    let mut names = Names::default();
    let mut seen_process = false;
    for line in lines {
        match line {
            Line::Process {
                format,
                pid,
                ppid,
                args,
                cupti,
                cupti_version,
                flush_ms,
                max_records,
                missing,
                ..
            } if !seen_process => {
                seen_process = true;
                (p.pid, p.ppid, p.args) = (*pid, *ppid, args.clone());
                (p.cupti, p.cupti_version) = (cupti.clone(), *cupti_version);
                (p.flush_ms, p.max_records, p.missing) = (*flush_ms, *max_records, missing.clone());
                if *format > FORMAT {
                    p.notes
                        .push(t!("trace.file.other_format", format = *format, ours = FORMAT).en());
                }
            }
            Line::Device { id, name, compute_capability, multiprocessors, copy_engines } => {
                if !p.devices.iter().any(|d| d.id == *id) {
                    p.devices.push(Device {
                        id: *id,
                        name: name.clone(),
                        compute_capability: *compute_capability,
                        multiprocessors: *multiprocessors,
                        copy_engines: *copy_engines,
                    });
                }
            }
            Line::Context { context, device, null_stream } => {
                names.contexts.insert(*context, (*device, *null_stream));
            }
            Line::Stream { context, stream, non_blocking, .. } => {
                names.non_blocking.insert((*context, *stream), *non_blocking);
            }
            Line::Name { object, id, name } => match object.to_ascii_lowercase().as_str() {
                "stream" => drop(names.streams.insert(*id, name.clone())),
                "thread" => drop(names.threads.insert(u64::from(*id), name.clone())),
                _ => {}
            },
            _ => {}
        }
    }
    if !seen_process {
        p.notes.push(t!("trace.file.no_process_line").en());
    }
    names
}

/// An empty process read from `path` (its pid from the file's name until its Process line).
fn empty(path: &Path, skipped: u64) -> Process {
    let pid = path.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse().ok());
    Process { skipped, ..Process::empty(pid.unwrap_or(0), path.to_path_buf()) }
}

/// One file's process, its times in ms since `origin` (CUPTI ns).
fn process(file: File, origin: u64) -> Process {
    let ms = |ns: u64| ns.saturating_sub(origin) as f64 / 1e6;
    let mut p = empty(&file.path, file.skipped);
    let names = read_names(&file.lines, &mut p);
    let pid = p.pid;
    // The thread each call ran on (a wait's thread), and the calls that are waits.
    let mut call_threads: HashMap<u32, u64> = HashMap::new();
    let mut waited: HashSet<u32> = HashSet::new();
    for line in &file.lines {
        match line {
            Line::Api { correlation, thread, .. } => {
                call_threads.insert(*correlation, *thread);
            }
            Line::Sync { correlation, .. } => {
                waited.insert(*correlation);
            }
            _ => {}
        }
    }
    let (mut first_ns, mut last_ns) = (u64::MAX, 0u64);
    let (mut flushed, mut exit) = (None::<u64>, None::<u64>);
    // Open NVTX ranges by id: (thread, name, start).
    let mut open: BTreeMap<u32, (u64, String, u64, String)> = BTreeMap::new();
    // Ranges a library marks in its own NVTX domain (NCCL's "ncclAllReduce", …): drawn, but
    // no window of the report, which is for the ranges the program marks itself, in the
    // default domain or one of its own.
    let mut library_ranges: Vec<(u64, String, u64, u64)> = Vec::new();
    let mut ranges: Vec<(u64, String, u64, u64)> = Vec::new();
    for line in file.lines {
        if let Some(t) = times(&line) {
            if !valid(t) {
                p.skipped += 1;
                continue;
            }
            (first_ns, last_ns) = (first_ns.min(t.0), last_ns.max(t.1));
            p.records += 1;
        }
        match line {
            Line::Kernel { device, context, stream, start, end, name, grid, block, .. } => {
                let name = kernel_name(&name);
                let kind = if is_nccl_kernel(&name) { Work::Collective } else { Work::Kernel };
                let row = names.stream(context, stream);
                let mut s = Span::new(&row, kind, &name, ms(start), ms(end));
                (s.device, s.grid, s.block) = (device, Some(grid), Some(block));
                p.spans.push(s);
            }
            Line::Copy {
                device, context, stream, start, end, bytes, direction, src, dst, ..
            } => {
                let (kind, label, memory) = copy_kind(direction, src, dst);
                let row = names.stream(context, stream);
                let mut s = Span::new(&row, kind, label, ms(start), ms(end));
                (s.device, s.bytes, s.memory) = (device, bytes, memory.into());
                p.spans.push(s);
            }
            Line::Peer {
                device,
                context,
                stream,
                start,
                end,
                bytes,
                src_device,
                dst_device,
                ..
            } => {
                let label = format!("memcpy peer GPU{src_device} to GPU{dst_device}");
                let row = names.stream(context, stream);
                let mut s = Span::new(&row, Work::CopyPeer, &label, ms(start), ms(end));
                (s.device, s.bytes) = (device, bytes);
                p.spans.push(s);
            }
            Line::Memset { device, context, stream, start, end, bytes, .. } => {
                let row = names.stream(context, stream);
                let mut s = Span::new(&row, Work::Memset, "memset", ms(start), ms(end));
                (s.device, s.bytes) = (device, bytes);
                p.spans.push(s);
            }
            Line::Sync { kind, context, stream, start, end, correlation } => {
                let row = stream.map(|s| names.stream(context, s));
                let thread = call_threads.get(&correlation).map(|t| names.thread(*t));
                p.host.push(HostSpan {
                    thread: thread.unwrap_or_else(|| "synchronizations".into()),
                    kind: HostWork::Wait,
                    name: wait_name(kind, row.as_deref()),
                    start_ms: ms(start),
                    end_ms: ms(end),
                });
                let kind = match kind {
                    SyncKind::Stream => WaitKind::Stream,
                    SyncKind::Event => WaitKind::Event,
                    SyncKind::Context => WaitKind::Context,
                    // It enqueues a wait on a stream: the host does not block in it.
                    SyncKind::StreamWaitEvent => continue,
                    SyncKind::Unknown => WaitKind::Other,
                };
                let device = names.contexts.get(&context).map_or(0, |c| c.0);
                let (start_ms, end_ms) = (ms(start), ms(end));
                p.waits.push(HostWait {
                    process: pid,
                    kind,
                    device,
                    stream: row,
                    start_ms,
                    end_ms,
                });
            }
            Line::Api { name, thread, start, end, correlation, .. } => {
                let name = call_name(&name).to_string();
                if !waited.contains(&correlation) {
                    p.host.push(HostSpan {
                        thread: names.thread(thread),
                        kind: HostWork::Issue,
                        name: name.clone(),
                        start_ms: ms(start),
                        end_ms: ms(end),
                    });
                }
                let kind = call_kind(&name);
                let (start_ms, end_ms) = (ms(start), ms(end));
                p.calls.push(HostCall { process: pid, thread, name, kind, start_ms, end_ms });
            }
            Line::Marker { phase, id, thread, time, name, domain } => match phase {
                MarkerPhase::Start => drop(open.insert(id, (thread, name, time, domain))),
                MarkerPhase::End => {
                    if let Some((thread, name, start, domain)) = open.remove(&id) {
                        let library = library_domain(&domain);
                        let to = if library { &mut library_ranges } else { &mut ranges };
                        to.push((thread, name, start, time));
                    }
                }
                MarkerPhase::Instant => p.host.push(HostSpan {
                    thread: names.thread(thread),
                    kind: HostWork::Range,
                    name,
                    start_ms: ms(time),
                    end_ms: ms(time),
                }),
            },
            Line::Dropped { count, why, .. } => match p.dropped.iter_mut().find(|d| d.why == why) {
                Some(d) => d.count += count,
                None => p.dropped.push(Dropped { count, why }),
            },
            Line::Note { text } => p.notes.push(text),
            Line::Flushed { time } => flushed = flushed.max(Some(time)),
            Line::Exit { time } => exit = exit.max(Some(time)),
            _ => {}
        }
    }
    let ended = [flushed, exit].into_iter().flatten().max().unwrap_or(0);
    last_ns = last_ns.max(ended);
    // A range still open closes where the record ends, and says so.
    for (_, (thread, name, start, domain)) in open {
        if !library_domain(&domain) {
            p.unclosed.push(name.clone());
            ranges.push((thread, name, start, last_ns.max(start)));
        }
    }
    // The rows of the contexts' legacy default streams that ran work.
    let mut legacy: Vec<String> =
        names.contexts.iter().map(|(c, (_, null))| names.stream(*c, *null)).collect();
    legacy.sort();
    legacy.dedup();
    legacy.retain(|row| p.spans.iter().any(|s| s.stream == *row));
    // The rows of streams the records show were created blocking, that ran work.
    let mut blocking: Vec<String> = names
        .non_blocking
        .iter()
        .filter(|(_, non_blocking)| !**non_blocking)
        .map(|((context, stream), _)| names.stream(*context, *stream))
        .filter(|row| !legacy.contains(row) && p.spans.iter().any(|s| s.stream == *row))
        .collect();
    blocking.sort();
    blocking.dedup();
    p.legacy_rows = legacy;
    p.blocking_rows = blocking;
    p.ranges = nest(pid, ranges, &ms);
    for r in p.ranges.iter().chain(&nest(pid, library_ranges, &ms)) {
        p.host.push(HostSpan {
            thread: names.thread(r.thread),
            kind: HostWork::Range,
            name: r.name.clone(),
            start_ms: r.start_ms,
            end_ms: r.end_ms,
        });
    }
    p.ending = match (exit, flushed) {
        (Some(t), _) => Ending::Exit { at_ms: ms(t) },
        (None, Some(t)) => Ending::LastFlush { at_ms: ms(t) },
        (None, None) => Ending::NoFlush,
    };
    if first_ns != u64::MAX {
        (p.first_ms, p.last_ms) = (ms(first_ns), ms(last_ns));
    }
    // Every span says whose it is: the report's windows are per process and device.
    p.spans.iter_mut().for_each(|s| s.process = pid);
    let by_start = |a: f64, b: f64| a.total_cmp(&b);
    p.spans.sort_by(|a, b| by_start(a.start_ms, b.start_ms));
    p.host.sort_by(|a, b| by_start(a.start_ms, b.start_ms));
    p.calls.sort_by(|a, b| by_start(a.start_ms, b.start_ms));
    p.waits.sort_by(|a, b| by_start(a.start_ms, b.start_ms));
    p
}

/// The ranges (thread, name, start ns, end ns) with their depth on their thread: how many
/// ranges of the same thread enclose each (pushes and pops nest; one that started earlier
/// and ends no earlier encloses).
fn nest(pid: u32, mut ranges: Vec<(u64, String, u64, u64)>, ms: &dyn Fn(u64) -> f64) -> Vec<Range> {
    ranges.sort_by(|a, b| {
        (a.0, a.2, std::cmp::Reverse(a.3)).cmp(&(b.0, b.2, std::cmp::Reverse(b.3)))
    });
    let mut out = Vec::with_capacity(ranges.len());
    // The ends of the ranges enclosing the current one, innermost last.
    let mut enclosing: Vec<u64> = Vec::new();
    let mut thread = None;
    for (t, name, start, end) in ranges {
        if thread != Some(t) {
            (thread, enclosing) = (Some(t), Vec::new());
        }
        while enclosing.last().is_some_and(|e| *e < end) {
            enclosing.pop();
        }
        out.push(Range {
            process: pid,
            thread: t,
            name,
            start_ms: ms(start),
            end_ms: ms(end),
            depth: enclosing.len() as u32,
        });
        enclosing.push(end);
    }
    out.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
    out
}
