//! One process's lines into its columns, as they are read ([`ProcessBuilder::line`]), then
//! put in order once ([`ProcessBuilder::finish`]): GPU work and calls sorted by start, streams
//! named and marked legacy or blocking, NVTX ranges paired and nested, how the record ended.
//! Names that a line may give after the records that use them (a stream's NVTX name, a
//! context's legacy stream) are resolved in `finish`.
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use crate::lab::record::drawing::LEGACY_STREAM;
use crate::lab::record::span::Work;
use crate::runtime::cupti::trace_file::{
    library_domain, Direction, MarkerPhase, Memory, SyncKind, FORMAT,
};
use crate::t;
use crate::trace::read::flat_line::FlatLine;
use crate::trace::read::model::{
    Device, Dropped, Ending, Gate, GpuWork, HostMemory, Mark, Process, Range, Row, Sampled, Thread,
    Wait, WaitKind,
};
use crate::trace::read::names::{call_kind, call_name, is_nccl_kernel, kernel_name};

/// A recorder's sentence for records dropped past the limit, keeping the first ones.
const OVER_THE_LIMIT: &str = "over the limit of";

/// An NVTX range whose start was read and whose end is awaited.
struct OpenRange {
    thread: u64,
    name: u32,
    start: u64,
    library: bool,
}

/// A synchronization as read, resolved in `finish`.
struct RawWait {
    kind: WaitKind,
    context: u32,
    stream: Option<u32>,
    correlation: u32,
    start: u64,
    end: u64,
}

/// One process's columns as its lines come in.
pub struct ProcessBuilder {
    p: Process,
    seen_process_line: bool,
    /// context -> (device, its legacy default stream)
    contexts: HashMap<u32, (u32, u32)>,
    stream_names: HashMap<u32, String>,
    thread_names: HashMap<u64, String>,
    /// (context, stream) -> created non-blocking, from CUPTI's stream records.
    non_blocking: HashMap<(u32, u32), bool>,
    /// (context, stream, device) of each row, by first appearance.
    raw_rows: Vec<(u32, u32, u32)>,
    row_of: HashMap<(u32, u32, u32), u32>,
    thread_of: HashMap<u64, u32>,
    /// Interned strings: their ids in `p.names`.
    name_of: HashMap<String, u32>,
    /// A kernel's raw (mangled) name -> its demangled label's id: demangled once per name.
    label_of_kernel: HashMap<String, u32>,
    launch_of: HashMap<([u32; 3], [u32; 3]), u32>,
    /// Calls with the thread's raw id (mapped to an index in `finish`).
    raw_waits: Vec<RawWait>,
    open: HashMap<u32, OpenRange>,
    /// Closed ranges: (thread id, name, start, end, library, unclosed).
    closed: Vec<(u64, u32, u64, u64, bool, bool)>,
    /// Marks with the thread's raw id.
    raw_marks: Vec<(u64, u32, u64)>,
    flushed: Option<u64>,
    exit: Option<u64>,
    crashed: Option<(i32, u64)>,
    /// The last Flushed time before the first over-the-limit Dropped line.
    last_flushed: u64,
}

impl ProcessBuilder {
    /// A process read from `files` (its pid from the file's name until its Process line).
    pub fn new(pid: u32, files: Vec<PathBuf>) -> ProcessBuilder {
        let first = files.first().cloned().unwrap_or_default();
        let mut p = Process::empty(pid, first);
        p.files = files;
        ProcessBuilder {
            p,
            seen_process_line: false,
            contexts: HashMap::new(),
            stream_names: HashMap::new(),
            thread_names: HashMap::new(),
            non_blocking: HashMap::new(),
            raw_rows: Vec::new(),
            row_of: HashMap::new(),
            thread_of: HashMap::new(),
            name_of: HashMap::new(),
            label_of_kernel: HashMap::new(),
            launch_of: HashMap::new(),
            raw_waits: Vec::new(),
            open: HashMap::new(),
            closed: Vec::new(),
            raw_marks: Vec::new(),
            flushed: None,
            exit: None,
            crashed: None,
            last_flushed: 0,
        }
    }

    /// A line that did not parse.
    pub fn skip(&mut self) {
        self.p.skipped += 1;
    }

    fn intern(&mut self, text: &str) -> u32 {
        if let Some(&id) = self.name_of.get(text) {
            return id;
        }
        let id = self.p.names.strings.len() as u32;
        self.p.names.strings.push(text.to_string());
        self.name_of.insert(text.to_string(), id);
        id
    }

    fn kernel_label(&mut self, raw: &str) -> u32 {
        if let Some(&id) = self.label_of_kernel.get(raw) {
            return id;
        }
        let id = self.intern(&kernel_name(raw));
        self.label_of_kernel.insert(raw.to_string(), id);
        id
    }

    fn row(&mut self, context: u32, stream: u32, device: u32) -> u32 {
        let key = (context, stream, device);
        if let Some(&row) = self.row_of.get(&key) {
            return row;
        }
        let row = self.raw_rows.len() as u32;
        self.raw_rows.push(key);
        self.row_of.insert(key, row);
        row
    }

    fn thread(&mut self, thread: u64) -> u32 {
        if let Some(&index) = self.thread_of.get(&thread) {
            return index;
        }
        let index = self.p.threads.len() as u32;
        self.p.threads.push(Thread { id: thread, name: String::new() });
        self.thread_of.insert(thread, index);
        index
    }

    fn launch(&mut self, grid: [u32; 3], block: [u32; 3]) -> u32 {
        if let Some(&index) = self.launch_of.get(&(grid, block)) {
            return index;
        }
        let index = self.p.launches.len() as u32;
        self.p.launches.push((grid, block));
        self.launch_of.insert((grid, block), index);
        index
    }

    #[allow(clippy::too_many_arguments)]
    fn push_work(
        &mut self,
        line: &FlatLine,
        kind: Work,
        label: u32,
        memory: HostMemory,
        launch: u32,
        (start, end): (u64, u64),
    ) {
        let device = line.device.unwrap_or(0);
        let row = self.row(line.context.unwrap_or(0), line.stream.unwrap_or(0), device);
        let gpu = &mut self.p.gpu;
        gpu.start.push(start);
        gpu.end.push(end);
        gpu.row.push(row);
        gpu.kind.push(kind);
        gpu.label.push(label);
        gpu.correlation.push(line.correlation.unwrap_or(0));
        gpu.bytes.push(line.bytes.unwrap_or(0));
        gpu.memory.push(memory);
        gpu.launch.push(launch);
    }

    /// One parsed line into the columns.
    pub fn line(&mut self, line: &FlatLine) {
        if let Some(times) = line.times() {
            if !valid(times) {
                self.p.skipped += 1;
                return;
            }
            let p = &mut self.p;
            if p.records == 0 {
                (p.first_ns, p.last_ns) = times;
            }
            (p.first_ns, p.last_ns) = (p.first_ns.min(times.0), p.last_ns.max(times.1));
            p.records += 1;
            self.record(line, times);
        } else {
            self.describing(line);
        }
    }

    /// Kernels, copies, memsets, syncs, calls and markers.
    fn record(&mut self, line: &FlatLine, times: (u64, u64)) {
        match line.kind.as_ref() {
            "kernel" => {
                let label = self.kernel_label(line.name());
                let kind = match is_nccl_kernel(self.p.names.get(label)) {
                    true => Work::Collective,
                    false => Work::Kernel,
                };
                let launch = self.launch(line.grid.unwrap_or([0; 3]), line.block.unwrap_or([0; 3]));
                self.push_work(line, kind, label, HostMemory::None, launch, times);
            }
            "copy" => {
                let direction = line.direction.unwrap_or(Direction::Other);
                let src = line.src.unwrap_or(Memory::Unknown);
                let dst = line.dst.unwrap_or(Memory::Unknown);
                let (kind, label, memory) = copy_kind(direction, src, dst);
                let label = self.intern(label);
                self.push_work(line, kind, label, memory, u32::MAX, times);
            }
            "peer" => {
                let (from, to) = (line.src_device.unwrap_or(0), line.dst_device.unwrap_or(0));
                let label = self.intern(&format!("memcpy peer GPU{from} to GPU{to}"));
                self.push_work(line, Work::CopyPeer, label, HostMemory::None, u32::MAX, times);
            }
            "memset" => {
                let label = self.intern("memset");
                self.push_work(line, Work::Memset, label, HostMemory::None, u32::MAX, times);
            }
            "sync" => {
                let kind = match line.sync_kind.unwrap_or(SyncKind::Unknown) {
                    SyncKind::Stream => WaitKind::Stream,
                    SyncKind::Event => WaitKind::Event,
                    SyncKind::Context => WaitKind::Context,
                    // It enqueues a wait on a stream: the host does not block in it.
                    SyncKind::StreamWaitEvent => return,
                    SyncKind::Unknown => WaitKind::Other,
                };
                self.raw_waits.push(RawWait {
                    kind,
                    context: line.context.unwrap_or(0),
                    stream: line.stream,
                    correlation: line.correlation.unwrap_or(0),
                    start: times.0,
                    end: times.1,
                });
            }
            "api" => {
                let name = call_name(line.name());
                let kind = call_kind(name);
                let name = self.intern(name);
                let thread = self.thread(line.thread.unwrap_or(0));
                let calls = &mut self.p.calls;
                calls.start.push(times.0);
                calls.end.push(times.1);
                calls.thread.push(thread);
                calls.name.push(name);
                calls.kind.push(kind);
                calls.correlation.push(line.correlation.unwrap_or(0));
                calls.waited.push(false);
            }
            "marker" => self.marker(line, times.0),
            _ => {}
        }
    }

    fn marker(&mut self, line: &FlatLine, time: u64) {
        let id = line.id.unwrap_or(0);
        let thread = line.thread.unwrap_or(0);
        match line.phase {
            Some(MarkerPhase::Start) => {
                let name = self.intern(line.name());
                let library = library_domain(line.domain.as_deref().unwrap_or(""));
                self.open.insert(id, OpenRange { thread, name, start: time, library });
            }
            Some(MarkerPhase::End) => {
                if let Some(r) = self.open.remove(&id) {
                    self.closed.push((r.thread, r.name, r.start, time, r.library, false));
                }
            }
            Some(MarkerPhase::Instant) => {
                let name = self.intern(line.name());
                self.raw_marks.push((thread, name, time));
            }
            None => self.p.skipped += 1,
        }
    }

    /// The lines that describe: the process, devices, contexts, streams, names, drops,
    /// notes, gates, samples, flushes and endings.
    fn describing(&mut self, line: &FlatLine) {
        let p = &mut self.p;
        match line.kind.as_ref() {
            "process" if !self.seen_process_line => {
                self.seen_process_line = true;
                p.pid = line.pid.unwrap_or(p.pid);
                p.ppid = line.ppid.unwrap_or(0);
                p.args = line.args.clone().unwrap_or_default();
                p.cupti = line.cupti.clone().unwrap_or_default();
                p.cupti_version = line.cupti_version.unwrap_or(0);
                p.flush_ms = line.flush_ms.unwrap_or(0);
                p.max_records = line.max_records.unwrap_or(0);
                p.start_ns = line.start_ns.unwrap_or(0);
                p.missing = line.missing.clone().unwrap_or_default();
                p.keep = line.keep.clone().unwrap_or_default();
                let format = line.format.unwrap_or(0);
                if format > FORMAT {
                    p.notes.push(t!("trace.file.other_format", format, ours = FORMAT).en());
                }
            }
            "device" => {
                let id = line.id.unwrap_or(0);
                if !p.devices.iter().any(|d| d.id == id) {
                    p.devices.push(Device {
                        id,
                        name: line.name().to_string(),
                        compute_capability: line.compute_capability.unwrap_or([0, 0]),
                        multiprocessors: line.multiprocessors.unwrap_or(0),
                        copy_engines: line.copy_engines.unwrap_or(0),
                    });
                }
            }
            "context" => {
                let context = line.context.unwrap_or(0);
                let device = line.device.unwrap_or(0);
                self.contexts.insert(context, (device, line.null_stream.unwrap_or(u32::MAX)));
            }
            "stream" => {
                let key = (line.context.unwrap_or(0), line.stream.unwrap_or(0));
                self.non_blocking.insert(key, line.non_blocking.unwrap_or(true));
            }
            "name" => {
                let (id, name) = (line.id.unwrap_or(0), line.name().to_string());
                match line.object.as_deref().unwrap_or("").to_ascii_lowercase().as_str() {
                    "stream" => drop(self.stream_names.insert(id, name)),
                    "thread" => drop(self.thread_names.insert(u64::from(id), name)),
                    _ => {}
                }
            }
            "dropped" => self.dropped(line),
            "note" => p.notes.push(line.text.clone().unwrap_or_default()),
            "gate" => p.gates.push(Gate {
                time: line.time.unwrap_or(0),
                open: line.open.unwrap_or(false),
                why: line.why.clone().unwrap_or_default(),
            }),
            "sampled" => {
                p.sampled = Some(Sampled {
                    range: line.range.clone().unwrap_or_default(),
                    every: line.every.unwrap_or(1),
                    total: line.total.unwrap_or(0),
                    kept: line.kept.clone().unwrap_or_default(),
                })
            }
            "flushed" => {
                let time = line.time.unwrap_or(0);
                self.flushed = self.flushed.max(Some(time));
                if p.full_after.is_none() {
                    self.last_flushed = time;
                }
            }
            "exit" => self.exit = self.exit.max(line.time),
            "crashed" => self.crashed = Some((line.signal.unwrap_or(0), line.time.unwrap_or(0))),
            "process" => {}
            _ => p.skipped += 1,
        }
    }

    fn dropped(&mut self, line: &FlatLine) {
        let p = &mut self.p;
        let (count, why) = (line.count.unwrap_or(0), line.why.clone().unwrap_or_default());
        if let Some(before) = line.before {
            p.dropped_before = p.dropped_before.max(Some(before));
        } else if why.starts_with(OVER_THE_LIMIT) && p.full_after.is_none() {
            p.full_after = Some(self.last_flushed.max(p.start_ns));
        }
        match p.dropped.iter_mut().find(|d| d.why == why) {
            Some(d) => d.count += count,
            None => p.dropped.push(Dropped { count, why }),
        }
    }

    /// The columns in order, every name resolved.
    pub fn finish(mut self) -> Process {
        if !self.seen_process_line {
            self.p.notes.push(t!("trace.file.no_process_line").en());
        }
        let ended = [self.flushed, self.exit, self.crashed.map(|c| c.1)].into_iter().flatten();
        let ended = ended.max().unwrap_or(0);
        if self.p.records > 0 {
            self.p.last_ns = self.p.last_ns.max(ended);
        } else {
            self.p.last_ns = ended;
        }
        self.finish_rows();
        self.finish_threads();
        sort_gpu(&mut self.p.gpu);
        self.finish_calls_and_waits();
        self.finish_ranges();
        self.p.ending = match (self.crashed, self.exit, self.flushed) {
            (Some((signal, at)), _, _) => Ending::Crashed { signal, at },
            (None, Some(at), _) => Ending::Exit { at },
            (None, None, Some(at)) => Ending::LastFlush { at },
            (None, None, None) => Ending::NoFlush,
        };
        self.p
    }

    fn finish_rows(&mut self) {
        let rows = self.raw_rows.iter().map(|&(context, stream, device)| {
            let legacy = self.contexts.get(&context).is_some_and(|(_, null)| *null == stream);
            let name = match self.stream_names.get(&stream) {
                Some(name) => name.clone(),
                None if legacy => LEGACY_STREAM.to_string(),
                None => format!("stream {stream}"),
            };
            let blocking = !legacy && self.non_blocking.get(&(context, stream)) == Some(&false);
            Row { device, name, legacy, blocking }
        });
        self.p.rows = rows.collect();
    }

    fn finish_threads(&mut self) {
        // Threads that only marked NVTX ranges or waited are threads too.
        let marked: Vec<u64> = self.closed.iter().map(|c| c.0).collect();
        let open: Vec<u64> = self.open.values().map(|o| o.thread).collect();
        let marks: Vec<u64> = self.raw_marks.iter().map(|m| m.0).collect();
        for id in marked.into_iter().chain(open).chain(marks) {
            self.thread(id);
        }
        for t in &mut self.p.threads {
            t.name = match self.thread_names.get(&t.id) {
                Some(name) => name.clone(),
                None if t.id == 0 => "NVTX".into(),
                None => format!("thread {}", t.id),
            };
        }
    }

    fn finish_calls_and_waits(&mut self) {
        let calls = &mut self.p.calls;
        let order = order_by(&calls.start, &calls.end);
        calls.start = permute(&calls.start, &order);
        calls.end = permute(&calls.end, &order);
        calls.thread = permute(&calls.thread, &order);
        calls.name = permute(&calls.name, &order);
        calls.kind = permute(&calls.kind, &order);
        calls.correlation = permute(&calls.correlation, &order);
        let waited: HashSet<u32> = self.raw_waits.iter().map(|w| w.correlation).collect();
        calls.waited = calls.correlation.iter().map(|c| waited.contains(c)).collect();
        // The thread of each wait, by its call's correlation.
        let thread_of: HashMap<u32, u32> = calls
            .correlation
            .iter()
            .zip(&calls.thread)
            .filter(|(c, _)| waited.contains(c))
            .map(|(c, t)| (*c, *t))
            .collect();
        let mut waits: Vec<Wait> = self
            .raw_waits
            .iter()
            .map(|w| Wait {
                kind: w.kind,
                device: self.contexts.get(&w.context).map_or(0, |c| c.0),
                stream: w.stream.map(|s| self.stream_row_name(w.context, s)),
                thread: thread_of.get(&w.correlation).copied(),
                start: w.start,
                end: w.end,
            })
            .collect();
        waits.sort_by_key(|w| (w.start, w.end));
        self.p.waits = waits;
    }

    /// A stream's row name, whether or not it ran work.
    fn stream_row_name(&self, context: u32, stream: u32) -> String {
        if let Some(name) = self.stream_names.get(&stream) {
            return name.clone();
        }
        match self.contexts.get(&context) {
            Some((_, null)) if *null == stream => LEGACY_STREAM.into(),
            _ => format!("stream {stream}"),
        }
    }

    fn finish_ranges(&mut self) {
        let last = self.p.last_ns;
        let mut unclosed: Vec<(u32, u64)> = Vec::new();
        for r in std::mem::take(&mut self.open).into_values() {
            if !r.library {
                unclosed.push((r.name, r.start));
            }
            self.closed.push((r.thread, r.name, r.start, last.max(r.start), r.library, true));
        }
        unclosed.sort_by_key(|u| u.1);
        self.p.unclosed = unclosed.iter().map(|(name, _)| self.p.names.get(*name).into()).collect();
        let closed = std::mem::take(&mut self.closed);
        let ranges = closed
            .into_iter()
            .map(|(thread, name, start, end, library, unclosed)| Range {
                thread: self.thread_of[&thread],
                name,
                start,
                end,
                depth: 0,
                unclosed,
                library,
            })
            .collect();
        self.p.ranges = nest(ranges);
        let marks = self.raw_marks.iter().map(|&(thread, name, time)| Mark {
            thread: self.thread_of[&thread],
            name,
            time,
        });
        let mut marks: Vec<Mark> = marks.collect();
        marks.sort_by_key(|m| m.time);
        self.p.marks = marks;
    }
}

/// Whether CUPTI gave the record a time (it leaves 0 where it has none).
fn valid((start, end): (u64, u64)) -> bool {
    start > 0 && end >= start
}

/// A copy's kind of work, its label, and the memory on its host side (where it has one).
fn copy_kind(direction: Direction, src: Memory, dst: Memory) -> (Work, &'static str, HostMemory) {
    match direction {
        Direction::HostToDevice => (Work::CopyToDevice, "memcpy HtoD", HostMemory::of(src)),
        Direction::DeviceToHost => (Work::CopyToHost, "memcpy DtoH", HostMemory::of(dst)),
        Direction::DeviceToDevice => (Work::CopyOnDevice, "memcpy DtoD", HostMemory::None),
        Direction::HostToHost => (Work::CopyOnDevice, "memcpy HtoH", HostMemory::of(src)),
        Direction::PeerToPeer => (Work::CopyPeer, "memcpy PtoP", HostMemory::None),
        Direction::Other => (Work::CopyOnDevice, "memcpy (other kind)", HostMemory::None),
    }
}

/// The indices of `start` (then `end`) in increasing order.
fn order_by(start: &[u64], end: &[u64]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..start.len() as u32).collect();
    order.sort_by_key(|&i| (start[i as usize], end[i as usize]));
    order
}

fn permute<T: Copy>(column: &[T], order: &[u32]) -> Vec<T> {
    order.iter().map(|&i| column[i as usize]).collect()
}

/// GPU work in order of start, then end.
fn sort_gpu(gpu: &mut GpuWork) {
    let order = order_by(&gpu.start, &gpu.end);
    if order.iter().enumerate().all(|(at, &i)| at == i as usize) {
        return;
    }
    gpu.start = permute(&gpu.start, &order);
    gpu.end = permute(&gpu.end, &order);
    gpu.row = permute(&gpu.row, &order);
    gpu.kind = permute(&gpu.kind, &order);
    gpu.label = permute(&gpu.label, &order);
    gpu.correlation = permute(&gpu.correlation, &order);
    gpu.bytes = permute(&gpu.bytes, &order);
    gpu.memory = permute(&gpu.memory, &order);
    gpu.launch = permute(&gpu.launch, &order);
}

/// The ranges with their depth on their thread: how many ranges of the same thread enclose
/// each (pushes and pops nest; one that started earlier and ends no earlier encloses);
/// library ranges nest apart from the program's. Sorted by start, the enclosing one first.
fn nest(mut ranges: Vec<Range>) -> Vec<Range> {
    ranges.sort_by_key(|r| (r.library, r.thread, r.start, std::cmp::Reverse(r.end)));
    // The ends of the ranges enclosing the current one, innermost last.
    let mut enclosing: Vec<u64> = Vec::new();
    let mut group = None;
    for r in &mut ranges {
        if group != Some((r.library, r.thread)) {
            (group, enclosing) = (Some((r.library, r.thread)), Vec::new());
        }
        while enclosing.last().is_some_and(|e| *e < r.end) {
            enclosing.pop();
        }
        r.depth = enclosing.len() as u32;
        enclosing.push(r.end);
    }
    ranges.sort_by_key(|r| (r.start, std::cmp::Reverse(r.end)));
    ranges
}
