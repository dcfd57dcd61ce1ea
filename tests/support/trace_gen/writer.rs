//! One process's recorder file, written line by line as a case makes its records: the
//! header lines first, then calls, GPU work and NVTX marks on one host thread's clock, with
//! each stream's and each copy engine's queue kept, and the closing lines last.
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use streamlab::runtime::cupti::trace_file::{
    main_path, ApiDomain, Direction, Line, MarkerPhase, Memory, SyncKind, FORMAT,
};

use super::Counts;

/// CUPTI's clock when every generated process starts recording, ns.
pub const START_NS: u64 = 1_000_000_000;
/// The context of every process, and its legacy default (NULL) stream.
pub const CONTEXT: u32 = 1;
pub const LEGACY_STREAM: u32 = 7;
/// A kernel launch call's host time, and the host's time between two calls.
pub const LAUNCH_NS: u64 = 4_000;
pub const HOST_GAP_NS: u64 = 1_000;
/// The earliest a GPU record starts after the call that issued it returned, and the
/// shortest time between two records of one stream.
pub const LATENCY_NS: u64 = 500;
pub const STREAM_GAP_NS: u64 = 1_000;
/// The host time an NVTX push, pop or mark takes.
pub const MARK_NS: u64 = 300;
/// A `Flushed` line after every so many records, as the recorder's periodic flush leaves.
const FLUSH_EVERY: u64 = 50_000;

/// What a process's header says about it.
pub struct ProcessSpec {
    pub pid: u32,
    pub device: u32,
    /// The streams it creates (CUPTI ids), and whether each was created non-blocking.
    pub streams: Vec<(u32, bool)>,
    /// Its command line.
    pub args: Vec<String>,
}

/// A driver or runtime call as written: its correlation id and host times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub correlation: u32,
    pub start: u64,
    pub end: u64,
}

/// GPU work as written: the call that issued it and the work's own times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Work {
    pub call: Call,
    pub start: u64,
    pub end: u64,
}

/// One process's file, open for writing. Every record takes the next of the process's
/// budget of records; [`ProcessFile::finish`] fills what is left with NVTX instant marks, so
/// that a process holds exactly its budget.
pub struct ProcessFile {
    out: BufWriter<File>,
    pub pid: u32,
    pub device: u32,
    /// The one host thread that makes every call (its id is the pid, as Linux numbers a
    /// process's main thread).
    pub thread: u64,
    /// When the host thread's next call or mark begins.
    pub host_ns: u64,
    /// When each stream's last work ends (by CUPTI stream id).
    stream_free: BTreeMap<u32, u64>,
    /// When the copy engine of each direction (in, out) is free again.
    copy_engine_free: [u64; 2],
    correlation: u32,
    marker_id: u32,
    /// The ids of the ranges pushed and not yet popped, innermost last.
    open: Vec<u32>,
    /// The latest time any record names.
    last_ns: u64,
    /// The earliest end and the latest start of the process's GPU work.
    gpu_first_end: u64,
    gpu_last_start: u64,
    budget: u64,
    since_flush: u64,
    pub counts: Counts,
}

impl ProcessFile {
    /// Creates `<dir>/<pid>.jsonl` and writes its header: Process, Device, Context, the
    /// host thread's NVTX name, and a Stream line for each stream of `spec`. It may hold
    /// `budget` records.
    pub fn create(dir: &Path, spec: &ProcessSpec, budget: u64) -> io::Result<ProcessFile> {
        let out = BufWriter::with_capacity(1 << 20, File::create(main_path(dir, spec.pid))?);
        let mut file = ProcessFile {
            out,
            pid: spec.pid,
            device: spec.device,
            thread: u64::from(spec.pid),
            host_ns: START_NS + 10_000,
            stream_free: BTreeMap::new(),
            copy_engine_free: [0, 0],
            correlation: 0,
            marker_id: 0,
            open: Vec::new(),
            last_ns: START_NS,
            gpu_first_end: u64::MAX,
            gpu_last_start: 0,
            budget,
            since_flush: 0,
            counts: Counts::default(),
        };
        file.write(&Line::Process {
            format: FORMAT,
            pid: spec.pid,
            ppid: 1,
            args: spec.args.clone(),
            cupti: "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti.so.13".into(),
            cupti_version: 130001,
            flush_ms: 200,
            max_records: 1 << 40,
            start_ns: START_NS,
            keep: Default::default(),
            missing: Vec::new(),
        })?;
        file.write(&Line::Device {
            id: spec.device,
            name: "NVIDIA H100 80GB HBM3".into(),
            compute_capability: [9, 0],
            multiprocessors: 132,
            copy_engines: 3,
        })?;
        file.write(&Line::Context {
            context: CONTEXT,
            device: spec.device,
            null_stream: LEGACY_STREAM,
        })?;
        file.write(&Line::Name { object: "thread".into(), id: spec.pid, name: "main".into() })?;
        for &(stream, non_blocking) in &spec.streams {
            file.write(&Line::Stream { context: CONTEXT, stream, priority: 0, non_blocking })?;
        }
        Ok(file)
    }

    /// Records the process may still write.
    pub fn remaining(&self) -> u64 {
        self.budget.saturating_sub(self.counts.records)
    }

    /// When `stream`'s last work ends (0 before any).
    pub fn stream_free(&self, stream: u32) -> u64 {
        self.stream_free.get(&stream).copied().unwrap_or(0)
    }

    /// The latest end of any stream's work.
    pub fn device_free(&self) -> u64 {
        self.stream_free.values().copied().max().unwrap_or(0)
    }

    /// Makes `stream`'s next work wait for `other`'s last (an event recorded on `other` and
    /// waited for on `stream`: the `cudaStreamWaitEvent` call is written).
    pub fn stream_waits(&mut self, stream: u32, other: u32) -> io::Result<Call> {
        let call = self.call("cudaStreamWaitEvent", 2_000)?;
        let ready = self.stream_free(other).max(self.stream_free(stream));
        self.stream_free.insert(stream, ready);
        Ok(call)
    }

    fn write(&mut self, line: &Line) -> io::Result<()> {
        self.out.write_all(line.to_json_line().as_bytes())?;
        self.counts.lines += 1;
        let end = match line {
            Line::Kernel { end, .. }
            | Line::Copy { end, .. }
            | Line::Memset { end, .. }
            | Line::Sync { end, .. }
            | Line::Api { end, .. } => Some(*end),
            Line::Marker { time, .. } => Some(*time),
            _ => None,
        };
        if let Some(end) = end {
            self.counts.records += 1;
            self.last_ns = self.last_ns.max(end);
            self.since_flush += 1;
            if self.since_flush == FLUSH_EVERY {
                self.since_flush = 0;
                self.write(&Line::Flushed { time: self.last_ns })?;
            }
        }
        Ok(())
    }

    /// A runtime call of `ns` on the host thread, at its clock, which moves past it.
    pub fn call(&mut self, name: &str, ns: u64) -> io::Result<Call> {
        self.call_until(name, self.host_ns + ns)
    }

    /// A runtime call from the host thread's clock to `end` (a call that blocks until then).
    pub fn call_until(&mut self, name: &str, end: u64) -> io::Result<Call> {
        self.correlation += 1;
        let call = Call { correlation: self.correlation, start: self.host_ns, end };
        self.write(&Line::Api {
            domain: ApiDomain::Runtime,
            name: name.into(),
            thread: self.thread,
            start: call.start,
            end: call.end,
            correlation: call.correlation,
            status: 0,
        })?;
        self.counts.calls += 1;
        self.host_ns = end + HOST_GAP_NS;
        Ok(call)
    }

    /// When work issued by `call` on `stream` can start: after the call returned and after
    /// the stream's last work.
    pub fn queued(&self, stream: u32, call: &Call) -> u64 {
        (call.end + LATENCY_NS).max(self.stream_free(stream) + STREAM_GAP_NS)
    }

    /// `cudaLaunchKernel`, and the kernel `name` running `ns` on `stream` once the stream's
    /// earlier work is done.
    pub fn kernel(&mut self, stream: u32, name: &str, ns: u64) -> io::Result<Work> {
        let call = self.call("cudaLaunchKernel", LAUNCH_NS)?;
        let start = self.queued(stream, &call);
        self.kernel_at(stream, name, call, start, start + ns)
    }

    /// The kernel `name` that `call` launched, running from `start` to `end` on `stream`.
    pub fn kernel_at(
        &mut self,
        stream: u32,
        name: &str,
        call: Call,
        start: u64,
        end: u64,
    ) -> io::Result<Work> {
        self.write(&Line::Kernel {
            device: self.device,
            context: CONTEXT,
            stream,
            start,
            end,
            correlation: call.correlation,
            name: name.into(),
            grid: [1024, 1, 1],
            block: [256, 1, 1],
        })?;
        self.counts.kernels += 1;
        self.ran(stream, start, end);
        Ok(Work { call, start, end })
    }

    /// `cudaMemcpyAsync` of `bytes` between device memory and `host` memory, taking `ns` on
    /// the copy engine of its direction, on `stream`. From pageable memory the call returns
    /// only once the copy is done, as the driver stages it.
    pub fn copy(
        &mut self,
        stream: u32,
        direction: Direction,
        host: Memory,
        bytes: u64,
        ns: u64,
    ) -> io::Result<Work> {
        let (engine, src, dst) = match direction {
            Direction::DeviceToHost => (1, Memory::Device, host),
            _ => (0, host, Memory::Device),
        };
        let earliest = (self.host_ns + LAUNCH_NS + LATENCY_NS)
            .max(self.stream_free(stream) + STREAM_GAP_NS)
            .max(self.copy_engine_free[engine] + STREAM_GAP_NS);
        let (start, end) = (earliest, earliest + ns);
        let call_end =
            if host == Memory::Pageable { end + LATENCY_NS } else { self.host_ns + LAUNCH_NS };
        let call = self.call_until("cudaMemcpyAsync", call_end)?;
        self.write(&Line::Copy {
            device: self.device,
            context: CONTEXT,
            stream,
            start,
            end,
            correlation: call.correlation,
            bytes,
            direction,
            src,
            dst,
        })?;
        self.counts.copies += 1;
        if host == Memory::Pageable {
            self.counts.pageable_copies += 1;
        }
        self.copy_engine_free[engine] = end;
        self.ran(stream, start, end);
        Ok(Work { call, start, end })
    }

    /// `cudaMemsetAsync` of `bytes` on `stream`, taking `ns`.
    pub fn memset(&mut self, stream: u32, bytes: u64, ns: u64) -> io::Result<Work> {
        let call = self.call("cudaMemsetAsync", LAUNCH_NS)?;
        let start = self.queued(stream, &call);
        let end = start + ns;
        self.write(&Line::Memset {
            device: self.device,
            context: CONTEXT,
            stream,
            start,
            end,
            correlation: call.correlation,
            bytes,
        })?;
        self.counts.memsets += 1;
        self.ran(stream, start, end);
        Ok(Work { call, start, end })
    }

    fn ran(&mut self, stream: u32, start: u64, end: u64) {
        let free = self.stream_free.entry(stream).or_insert(0);
        *free = (*free).max(end);
        self.gpu_first_end = self.gpu_first_end.min(end);
        self.gpu_last_start = self.gpu_last_start.max(start);
    }

    /// Whether the device had work of the process both ended by `call`'s start and starting
    /// after its end, so far.
    pub fn between_work(&self, call: &Call) -> bool {
        self.gpu_first_end <= call.start && self.gpu_last_start >= call.end
    }

    /// A blocking call `name` that returns just after `until` (or after 2 µs where that has
    /// passed), with its Sync line: what it waited for (`kind`, `stream`).
    fn wait(
        &mut self,
        name: &str,
        kind: SyncKind,
        stream: Option<u32>,
        until: u64,
    ) -> io::Result<Call> {
        let end = (self.host_ns + 2_000).max(until + LATENCY_NS);
        let call = self.call_until(name, end)?;
        self.write(&Line::Sync {
            kind,
            context: CONTEXT,
            stream,
            start: call.start,
            end: call.end,
            correlation: call.correlation,
        })?;
        self.counts.syncs += 1;
        Ok(call)
    }

    /// `cudaStreamSynchronize(stream)`: the host waits for the stream's last work.
    pub fn synchronize_stream(&mut self, stream: u32) -> io::Result<Call> {
        let until = self.stream_free(stream);
        self.wait("cudaStreamSynchronize", SyncKind::Stream, Some(stream), until)
    }

    /// `cudaDeviceSynchronize()`: the host waits for every stream.
    pub fn synchronize_device(&mut self) -> io::Result<Call> {
        let until = self.device_free();
        self.wait("cudaDeviceSynchronize", SyncKind::Context, None, until)
    }

    /// `cudaEventSynchronize` on an event recorded after work that ends at `until`.
    pub fn synchronize_event(&mut self, until: u64) -> io::Result<Call> {
        self.wait("cudaEventSynchronize", SyncKind::Event, None, until)
    }

    /// Writes a marker at the host thread's clock; returns its time.
    fn mark(&mut self, phase: MarkerPhase, id: u32, name: &str, domain: &str) -> io::Result<u64> {
        let time = self.host_ns;
        self.write(&Line::Marker {
            phase,
            id,
            thread: self.thread,
            time,
            name: name.into(),
            domain: domain.into(),
        })?;
        self.counts.markers += 1;
        self.host_ns += MARK_NS;
        Ok(time)
    }

    /// Pushes the NVTX range `name` of the default domain (`nvtxRangePushA`); returns when.
    pub fn push(&mut self, name: &str) -> io::Result<u64> {
        self.push_in(name, "")
    }

    /// Pushes the NVTX range `name` of `domain` (a library's, such as NCCL's).
    pub fn push_in(&mut self, name: &str, domain: &str) -> io::Result<u64> {
        self.marker_id += 1;
        let id = self.marker_id;
        self.open.push(id);
        self.mark(MarkerPhase::Start, id, name, domain)
    }

    /// Pops the innermost open range (its end mark has no name, as the recorder writes
    /// ends); returns when.
    pub fn pop(&mut self) -> io::Result<u64> {
        self.pop_in("")
    }

    /// Pops the innermost open range, of `domain`.
    pub fn pop_in(&mut self, domain: &str) -> io::Result<u64> {
        let id = self.open.pop().expect("a pop with no range open");
        self.mark(MarkerPhase::End, id, "", domain)
    }

    /// An NVTX instant mark (`nvtxMarkA`).
    pub fn instant(&mut self, name: &str) -> io::Result<()> {
        self.marker_id += 1;
        self.mark(MarkerPhase::Instant, self.marker_id, name, "")?;
        Ok(())
    }

    /// Closes the file: fills the budget left with instant marks "mark", then writes the last
    /// flush and the Exit line. Every range must have been popped, and the budget not
    /// overrun: a case that breaks either is wrong, so this panics.
    pub fn finish(mut self) -> io::Result<Counts> {
        assert!(self.open.is_empty(), "pid {}: {} ranges left open", self.pid, self.open.len());
        assert!(
            self.counts.records <= self.budget,
            "pid {}: {} records written over a budget of {}",
            self.pid,
            self.counts.records,
            self.budget
        );
        while self.remaining() > 0 {
            self.instant("mark")?;
        }
        let last = self.last_ns.max(self.host_ns);
        self.write(&Line::Flushed { time: last })?;
        self.write(&Line::Exit { time: last + 1_000 })?;
        self.out.flush()?;
        Ok(self.counts)
    }
}
