//! What a traced program left, as `streamlab trace` reads it ([`Capture`]): per process, its
//! command line, devices, device spans, host calls, waits and NVTX ranges, what was dropped
//! and how its recording ended, all in ms from one origin (the earliest record of any
//! process), so that processes line up on one clock.
use std::path::PathBuf;

use serde::Serialize;

use crate::lab::record::span::{HostSpan, Span};
use crate::trace::inspect::host::{CallKind, HostCall, HostWait, Range};

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
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "how", rename_all = "snake_case")]
pub enum Ending {
    /// It reached its exit handlers, and the recorder's last flush finished (its Exit line).
    Exit { at_ms: f64 },
    /// No Exit line: the process was killed, crashed or is still running; what was recorded
    /// reaches the last periodic flush.
    LastFlush { at_ms: f64 },
    /// Neither: not even one flush finished (the file may end inside the first).
    NoFlush,
}

/// Records lost, and why (the recorder's words).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Dropped {
    pub count: u64,
    pub why: String,
}

/// One traced process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    /// Its command line (empty when the file has no Process line).
    pub args: Vec<String>,
    /// The file it was read from.
    pub file: PathBuf,
    /// The libcupti file its recorder loaded, and CUPTI's API version.
    pub cupti: String,
    pub cupti_version: u32,
    pub flush_ms: u64,
    pub max_records: u64,
    /// What its recorder could not turn on, one reason each.
    pub missing: Vec<String>,
    pub devices: Vec<Device>,
    /// Kernels, copies, memsets and collectives, by start time.
    #[serde(skip)]
    pub spans: Vec<Span>,
    /// Driver and runtime calls, for the findings.
    #[serde(skip)]
    pub calls: Vec<HostCall>,
    /// Times the host blocked for the GPU (stream, event, context synchronizations).
    #[serde(skip)]
    pub waits: Vec<HostWait>,
    /// NVTX ranges, with their depth on their thread.
    #[serde(skip)]
    pub ranges: Vec<Range>,
    /// What the host rows of a drawing show: calls, waits, ranges and NVTX marks.
    #[serde(skip)]
    pub host: Vec<HostSpan>,
    /// NVTX ranges that never ended: closed at `last_ms`.
    pub unclosed: Vec<String>,
    /// The rows (`Span::stream`) of a context's legacy default (NULL) stream that ran work,
    /// whatever name the program gave them.
    pub legacy_rows: Vec<String>,
    /// The rows of streams CUPTI's stream records show were created blocking (they wait for
    /// the legacy default stream, and it for them), that ran work.
    pub blocking_rows: Vec<String>,
    /// Records kept (device spans, calls, waits, NVTX markers).
    pub records: u64,
    pub dropped: Vec<Dropped>,
    /// What the recorder, or the reading, has to say (another CUPTI user, say).
    pub notes: Vec<String>,
    /// Lines not read: cut short by a kill mid-write, or of a kind this streamlab does not
    /// know, or records without a valid time.
    pub skipped: u64,
    pub ending: Ending,
    /// The first and last times any record of the process names.
    pub first_ms: f64,
    pub last_ms: f64,
}

/// Everything a trace folder held.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capture {
    /// In the order they started (then by pid).
    pub processes: Vec<Process>,
    /// CUPTI's clock at the origin of every time in ms: the earliest record of any process.
    pub origin_ns: u64,
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
            file,
            cupti: String::new(),
            cupti_version: 0,
            flush_ms: 0,
            max_records: 0,
            missing: Vec::new(),
            devices: Vec::new(),
            spans: Vec::new(),
            calls: Vec::new(),
            waits: Vec::new(),
            ranges: Vec::new(),
            host: Vec::new(),
            unclosed: Vec::new(),
            legacy_rows: Vec::new(),
            blocking_rows: Vec::new(),
            records: 0,
            dropped: Vec::new(),
            notes: Vec::new(),
            skipped: 0,
            ending: Ending::NoFlush,
            first_ms: 0.0,
            last_ms: 0.0,
        }
    }

    /// `pid 1234 · python train.py --epochs 1`: how a drawing and the report name it (the
    /// program's own file name, not its folder; cut at `COMMAND_CHARS` characters).
    pub fn label(&self) -> String {
        let Some((program, rest)) = self.args.split_first() else {
            return format!("pid {}", self.pid);
        };
        let program = program.rsplit('/').next().unwrap_or(program);
        let mut command = std::iter::once(program).chain(rest.iter().map(String::as_str));
        let mut text = command.next().unwrap_or_default().to_string();
        for word in command {
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
}

/// What a driver or runtime call does, for the findings, from its name (`cuMemAlloc_v2`,
/// `cudaLaunchKernel_ptsz`). The stream-ordered `…Async` allocations are not `Alloc`/`Free`:
/// they do not synchronize the device.
pub fn call_kind(name: &str) -> CallKind {
    let starts = |prefixes: &[&str]| prefixes.iter().any(|p| name.starts_with(p));
    let ordered = name.contains("Async");
    if starts(&["cuMemAlloc", "cudaMalloc"]) && !ordered {
        CallKind::Alloc
    } else if starts(&["cuMemFree", "cudaFree"]) && !ordered {
        CallKind::Free
    } else if starts(&["cuLaunch", "cudaLaunch", "cuGraphLaunch", "cudaGraphLaunch"]) {
        CallKind::Launch
    } else if starts(&["cuMemcpy", "cudaMemcpy", "cuMemset", "cudaMemset"]) {
        CallKind::Copy
    } else if name.contains("Synchronize") {
        CallKind::Sync
    } else {
        CallKind::Other
    }
}

/// A kernel's name as people write it: a C++ (Itanium) mangled name demangled, its parameter
/// list and template arguments left out (`at::native::vectorized_elementwise_kernel`); any
/// other name as it is (Rust's `#[no_mangle]` kernels, `extern "C"` ones).
pub fn kernel_name(raw: &str) -> String {
    let Ok(symbol) = cpp_demangle::Symbol::new(raw) else {
        return raw.to_string();
    };
    let options = cpp_demangle::DemangleOptions::new().no_params().no_return_type();
    match symbol.demangle(&options) {
        Ok(full) => without_template_arguments(&full),
        Err(_) => raw.to_string(),
    }
}

/// `a::b<c<d>>::e<f>` -> `a::b::e` (every `<…>`, nested ones included, left out).
fn without_template_arguments(name: &str) -> String {
    let mut depth = 0usize;
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' if depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// A driver or runtime call's name without CUPTI's version suffix (`cudaMalloc_v3020` ->
/// `cudaMalloc`, `cuMemAlloc_v2` -> `cuMemAlloc`).
pub fn call_name(raw: &str) -> &str {
    match raw.rsplit_once("_v") {
        Some((name, version))
            if !version.is_empty() && version.bytes().all(|b| b.is_ascii_digit()) =>
        {
            name
        }
        _ => raw,
    }
}

/// Whether a kernel is one of NCCL's (a collective's work).
pub fn is_nccl_kernel(name: &str) -> bool {
    name.starts_with("ncclDevKernel") || name.starts_with("ncclKernel")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_and_call_names_read_as_people_write_them() {
        assert_eq!(
            kernel_name("_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_16tanh_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE0_clEvENKUlvE0_clEvEUlfE_St5arrayIPcLm2EEEEviT0_T1_"),
            "at::native::vectorized_elementwise_kernel"
        );
        assert_eq!(kernel_name("_Z12chunk_kernelPfjjj"), "chunk_kernel");
        // Not mangled (Rust's #[no_mangle] kernels, extern "C" ones): as it is.
        assert_eq!(kernel_name("compute_kernel"), "compute_kernel");
        assert_eq!(
            kernel_name("ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
        );
        assert_eq!(call_name("cudaMalloc_v3020"), "cudaMalloc");
        assert_eq!(call_name("cuMemAlloc_v2"), "cuMemAlloc");
        assert_eq!(call_name("cuLaunchKernel"), "cuLaunchKernel");
        assert_eq!(call_name("cuMemcpyHtoDAsync_v2"), "cuMemcpyHtoDAsync");
        assert_eq!(call_name("cudaStreamSynchronize_v"), "cudaStreamSynchronize_v");
    }

    #[test]
    fn calls_are_sorted_by_what_they_do() {
        for (name, kind) in [
            ("cuMemAlloc_v2", CallKind::Alloc),
            ("cudaMalloc", CallKind::Alloc),
            ("cudaMallocHost", CallKind::Alloc),
            ("cuMemAllocAsync", CallKind::Other),
            ("cudaMallocAsync_ptsz", CallKind::Other),
            ("cuMemFree_v2", CallKind::Free),
            ("cudaFree", CallKind::Free),
            ("cudaFreeAsync", CallKind::Other),
            ("cuLaunchKernel", CallKind::Launch),
            ("cudaLaunchKernel_ptsz", CallKind::Launch),
            ("cudaGraphLaunch", CallKind::Launch),
            ("cuMemcpyHtoDAsync_v2", CallKind::Copy),
            ("cudaMemsetAsync", CallKind::Copy),
            ("cudaStreamSynchronize", CallKind::Sync),
            ("cuCtxSynchronize", CallKind::Sync),
            ("cuStreamWaitEvent", CallKind::Other),
            ("cuMemPrefetchAsync", CallKind::Other),
        ] {
            assert_eq!(call_kind(name), kind, "{name}");
        }
        assert!(is_nccl_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
        assert!(is_nccl_kernel("ncclKernel_AllReduce_RING_LL_Sum_float"));
        assert!(!is_nccl_kernel("my_ncclDevKernel"));
    }

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
