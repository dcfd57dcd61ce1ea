//! The recorder `streamlab trace` injects into a CUDA program: a shared library
//! (`libstreamlab_inject.so`) that the CUDA driver loads when the program calls `cuInit`,
//! because `CUDA_INJECTION64_PATH` names it. The driver then calls its
//! [`InitializeInjection`], which turns CUPTI's activity recording on for the whole process
//! and writes what CUPTI hands back to `<STREAMLAB_TRACE_DIR>/<pid>.jsonl` (and, when it keeps
//! the last records or a sample, to segment files `<pid>.<seq>.jsonl` beside it), one
//! [`trace_file::Line`] per line. Any CUDA program works unchanged (CUDA C++, PyTorch, CuPy,
//! streamlab itself): the driver does the loading.
//!
//! ## What the trace command sets
//! - `CUDA_INJECTION64_PATH`: this library; `STREAMLAB_TRACE_DIR`: the folder (without it the
//!   library does nothing); `STREAMLAB_TRACE_FLUSH_MS` (200), `STREAMLAB_TRACE_MAX_RECORDS`
//!   (500,000: see `config.rs` for why); `STREAMLAB_CUPTI`: the libcupti file to load, exactly
//!   (unset, it is searched for as the lessons do).
//! - `NVTX_INJECTION64_PATH`: the same libcupti file. NVTX calls (`nvtxRangePushA`, PyTorch's
//!   `torch.cuda.nvtx.range_push`, its `emit_nvtx()`) reach a tool only through that
//!   variable, and libcupti is such a tool (it exports `InitializeInjectionNvtx2`): without
//!   it the `MARKER` and `NAME` kinds record nothing, and the `Process` line says so.
//! - What to keep (`config.rs`; each written back in the `Process` line's `keep`):
//!   `STREAMLAB_TRACE_WHEN_FULL` (`first`, `last` or `sample`; unset: `first`),
//!   `STREAMLAB_TRACE_CAPTURE_RANGE` and `…_CAPTURE_COUNT`, `STREAMLAB_TRACE_DELAY_MS` and
//!   `…_DURATION_MS`, and `STREAMLAB_TRACE_STARTED_NS`, CLOCK_MONOTONIC when the trace command
//!   started the program (the delay counts from it; unset, from the recorder's start).
//!
//! ## What is recorded
//! The activity kinds `CONCURRENT_KERNEL` (never `KERNEL`, which serializes kernels),
//! `MEMCPY`, `MEMCPY2`, `MEMSET`, `SYNCHRONIZATION`, `MARKER`, `NAME`, `CONTEXT`, `STREAM`,
//! `DEVICE`, and the driver and runtime calls that bear on overlap (`calls.rs` lists them;
//! only those are enabled where CUPTI can enable single calls). Each record is decoded by
//! [`streamlab_cupti::decode`] (`buffers.rs`) and handed to the keeper (`keeper.rs`).
//!
//! ## What is kept in a long run
//! - The capture window (`gate.rs`, whose doc has the rules): records are kept from the start
//!   of the first NVTX range named as the capture range (push/pop or start/end, any thread,
//!   the program's own domains), until that many ranges of the name have ended, as Nsight
//!   Systems' NVTX capture range; and from the delay on, for the duration. No CUPTI callback
//!   of the recorder's decides it (a program's own profiler would conflict with one): the
//!   records of each flush are held back and decided at the end of the flush cycle, markers
//!   first, then host calls and synchronizations by their start, then GPU work with the call
//!   that launched it (by correlation id). `Gate` lines say when the window opened and
//!   closed, and why. Records outside it are neither written nor counted against the limit:
//!   a `Dropped` line counts them.
//! - The limit (`segments.rs`): at most `STREAMLAB_TRACE_MAX_RECORDS` records kept.
//!   `first` keeps the first ones in the main file (format 1's way); `last` writes segment
//!   files and deletes the oldest, saying up to when (`Dropped`'s `before`); `sample` writes
//!   one segment per occurrence of the sampled range and thins them evenly (`Sampled` says
//!   which). The main file always holds every line that describes (`Process`, `Device`,
//!   `Context`, `Stream`, `Name`, `Note`, `Dropped`, `Gate`, `Sampled`, `Flushed`, `Exit`,
//!   `Crashed`).
//! - Without a window and with `first` or `last`, nothing is held back: records are written
//!   as CUPTI hands their buffers over. After the window has closed for good CUPTI stays on:
//!   GPU work launched inside still completes later, and is kept.
//!
//! ## The file, and how a process ends
//! The `Process` line comes first (pid, parent, command line, CUPTI's file and version, the
//! flush interval, the limit, what to keep, `missing`: each kind that could not be turned
//! on, with CUPTI's reason). Then, as CUPTI completes buffers, their records; after each
//! periodic flush (a thread of the recorder's, `cuptiActivityFlushAll`) the records decided
//! and a `Flushed` line; at exit (`atexit`) a forced flush, every record left, then `Exit`.
//! Lines go straight to the files (the main file and the segments alike), so:
//! - a normal exit ends with `Exit`;
//! - SIGSEGV, SIGABRT (`abort()`), SIGBUS, SIGFPE and SIGILL do the exit's work first and end
//!   with `Crashed`, then the process dies by the signal as it would have (`signals.rs`);
//! - `_exit` or a kill (SIGKILL included) leaves everything up to the last `Flushed`, and
//!   neither `Exit` nor `Crashed`;
//! - records past the limit, outside the window, deleted or left out of the sample, records
//!   CUPTI had no buffer for, and work still running at exit are counted in `Dropped` lines
//!   (their counts add up);
//! - what the recorder saw of another CUPTI user is a `Note` (`watch.rs`).
//!
//! What the trace command can tell from the files: no file for a process means the recorder
//! never ran in it (the program never initialized CUDA, or the driver did not load the
//! library); a `Process` line whose `cupti_version` is 0 means the recorder ran but CUPTI did
//! not load (`missing` says why), so nothing could be recorded; a `Process` line with CUPTI
//! and no records means CUPTI was on and the program did no GPU work (or none in the window:
//! then a `Note` says the window never opened).
//!
//! ## Crashes: what is not async-signal-safe, and why it is accepted
//! The fatal-signal handler (`signals.rs`) runs the exit handler's path: it allocates,
//! formats JSON, takes the recorder's locks, writes files and calls CUPTI's forced flush,
//! none of which POSIX allows in a signal handler. A crash inside malloc (a corrupted heap's
//! `abort`), inside CUPTI or inside the recorder's own lock could make that path block or
//! fault again. It is accepted because it is a best effort on the way to death, and every way
//! it can go wrong ends as the crash would have: the recorder's own locks are waited for at
//! most 2 s each (so a crash inside one of them skips that part); a watchdog thread, told
//! through a pipe (`write` is safe), ends the process by the same signal if the handler has
//! not finished within 10 s; a fault inside the handler, with the signal blocked there,
//! ends the process by that signal at once. Without it, a program that crashed before its
//! first flush left no records at all.
//!
//! ## Children and forks
//! Child processes inherit the environment, so each one that initializes CUDA records into
//! its own `<pid>.jsonl`. A child forked without exec inherits this library's state and
//! CUPTI's buffers (copies of its parent's): every write checks the process id against the
//! file's, so such a child writes nothing, and its fatal signals go straight to the action
//! saved before the recorder's.
//!
//! ## Conflicts
//! A program that uses CUPTI itself (torch.profiler, Nsight) competes for one set of
//! activity buffers and one on/off switch per kind. The recorder does not call
//! `cuptiSubscribe` itself; yet on a GPU run under the recorder, torch.profiler's kineto
//! failed to subscribe (`CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED`) and recorded no
//! CUDA activity. Why was not established; what the recorder can see of the competition is
//! written as a `Note` (`watch.rs`).
//!
//! The notes, the reasons of `Dropped` lines, the `why` of `Gate` lines and the `missing`
//! items are English sentences that the host reads back by their words to say them in the
//! report's language (its catalogs' `trace.file.*`, and `host/src/trace/capture/file_text.rs`
//! for each shape): change a sentence here and there together.
//!
//! Nothing here may fail the program: [`InitializeInjection`] always returns success, no panic
//! crosses into C (CUPTI's callbacks, the exit and signal handlers and the entry point catch
//! them), and an error is a line in the file where there is one.
mod buffers;
mod calls;
mod config;
mod crash_state;
mod gate;
mod keeper;
mod segments;
mod signals;
mod watch;
mod writer;

use std::collections::HashMap;
use std::panic::catch_unwind;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Mutex, MutexGuard, OnceLock};

use streamlab_cupti::layout;
use streamlab_cupti::trace_file::{self, ApiDomain, Line, WhenFull};
use streamlab_cupti::Cupti;

use crate::config::Config;
use crate::gate::{Gate, Plan};
use crate::keeper::Keeper;
use crate::segments::Store;
use crate::watch::{Cycle, Probe};
use crate::writer::Writer;

/// The recorder of this process, set once by [`InitializeInjection`].
pub(crate) struct Recorder {
    /// The process recorded (a forked child has another id and records nothing).
    pid: u32,
    /// `None` when no libcupti could be loaded: then only `Process` and `Exit` are written.
    cupti: Option<&'static Cupti>,
    /// The loaded libcupti's canonical path, to tell it from others in the maps.
    cupti_real_path: Option<PathBuf>,
    config: Config,
    /// The main file, the gate and the store, under one lock (never held across a flush).
    keeper: Mutex<Keeper>,
    /// The calls recorded, by (domain, callback id), with CUPTI's names for them.
    calls: HashMap<(ApiDomain, u32), String>,
    probe: Probe,
    /// Held for a whole flush cycle (taken before `keeper`, never after it).
    cycle: Mutex<Cycle>,
    /// The flush thread could not be started: buffers are settled as they come.
    no_flush_thread: AtomicBool,
}

pub(crate) static RECORDER: OnceLock<Recorder> = OnceLock::new();

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic caught in a callback must not stop every later write.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// CLOCK_MONOTONIC in ns: the clock the trace command's `STREAMLAB_TRACE_STARTED_NS` is on.
fn monotonic_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}

/// The activity kinds turned on, each with what it records (for `missing`).
const KINDS: [(u32, &str); 10] = [
    (layout::KIND_DEVICE, "devices"),
    (layout::KIND_CONTEXT, "contexts"),
    (layout::KIND_STREAM, "streams"),
    (layout::KIND_NAME, "names"),
    (layout::KIND_CONCURRENT_KERNEL, "kernels"),
    (layout::KIND_MEMCPY, "copies"),
    (layout::KIND_MEMCPY2, "peer copies"),
    (layout::KIND_MEMSET, "memsets"),
    (layout::KIND_SYNCHRONIZATION, "synchronizations"),
    (layout::KIND_MARKER, "NVTX ranges and markers"),
];

/// The CUDA driver calls this once, inside the program's first `cuInit`. It returns 1,
/// success, whatever happens: a recorder that cannot record must not stop the program.
#[no_mangle]
#[allow(non_snake_case)]
pub extern "C" fn InitializeInjection() -> i32 {
    let _ = catch_unwind(start);
    1
}

fn start() {
    let Some(config) = Config::from_env() else { return };
    if RECORDER.get().is_some() {
        return; // already recording: a second call changes nothing
    }
    let pid = std::process::id();
    let writer = match Writer::create(&config.dir, pid) {
        Ok(w) => w,
        Err(e) => {
            let file = trace_file::main_path(&config.dir, pid);
            eprintln!(
                "streamlab trace: cannot write {}: {e} (nothing is recorded)",
                file.display()
            );
            return;
        }
    };
    let loaded = match &config.cupti {
        Some(file) => streamlab_cupti::load_file(file),
        None => streamlab_cupti::load(),
    };
    let (cupti, mut missing) = match loaded {
        Ok(c) => (Some(c), Vec::new()),
        Err(e) => (None, vec![format!("everything: CUPTI could not be loaded: {e}")]),
    };
    let start_ns = cupti.map_or(0, |c| c.now_ns());
    let started = gate::program_start(start_ns, monotonic_ns(), config.started_ns);
    let when_full = config.keep.when_full;
    let gate = Gate::new(Plan::new(&config.keep, started, when_full == WhenFull::Sample));
    let store = Store::new(when_full, config.max_records, config.dir.clone(), pid);
    let recorder = RECORDER.get_or_init(|| Recorder {
        pid,
        cupti,
        cupti_real_path: cupti.and_then(|c| watch::real_path(c.path())),
        calls: cupti.map(kept_calls).unwrap_or_default(),
        keeper: Mutex::new(Keeper::new(writer, gate, store)),
        probe: Probe::default(),
        cycle: Mutex::new(Cycle::default()),
        no_flush_thread: AtomicBool::new(false),
        config,
    });
    if let Some(c) = cupti {
        missing.extend(turn_on(c, recorder));
        missing.extend(nvtx_reaches(recorder));
    }
    let config = &recorder.config;
    let process = Line::Process {
        format: trace_file::FORMAT,
        pid,
        ppid: std::os::unix::process::parent_id(),
        args: command_line(),
        cupti: cupti.map_or_else(
            || config.cupti.as_ref().map_or(String::new(), |p| p.display().to_string()),
            |c| c.path().display().to_string(),
        ),
        cupti_version: cupti.map_or(0, |c| c.version()),
        flush_ms: config.flush_ms,
        max_records: config.max_records,
        start_ns,
        keep: config.keep.clone(),
        missing,
    };
    lock(&recorder.keeper).writer.start(&process);
    // SAFETY: `at_exit` is a plain `extern "C" fn()` that catches its panics, in a library
    // that is never unloaded.
    unsafe { libc::atexit(watch::at_exit) };
    signals::install();
    if cupti.is_some() {
        if let Err(e) = watch::start_flushing(recorder) {
            recorder.no_flush_thread.store(true, std::sync::atomic::Ordering::Relaxed);
            let text = format!(
                "no flush thread ({e}): records are written only as buffers fill and at exit"
            );
            lock(&recorder.keeper).writer.append(&Line::Note { text }.to_json_line());
        }
    }
}

/// The calls to record, by (domain, id), with CUPTI's names.
fn kept_calls(cupti: &Cupti) -> HashMap<(ApiDomain, u32), String> {
    let mut kept = HashMap::new();
    for domain in [ApiDomain::Driver, ApiDomain::Runtime] {
        for (id, name) in cupti.call_names(domain) {
            if calls::kept(&name) {
                kept.insert((domain, id), name);
            }
        }
    }
    kept
}

/// Registers the buffers and turns every kind on; returns what could not be, with why.
fn turn_on(cupti: &Cupti, recorder: &Recorder) -> Vec<String> {
    if let Err(e) = cupti.register_buffers(buffers::buffer_requested, buffers::buffer_completed) {
        return vec![format!("everything: {e}")];
    }
    let mut missing = Vec::new();
    for (kind, what) in KINDS {
        if let Err(e) = cupti.enable_kind(kind) {
            missing.push(format!("{what}: {e}"));
        }
    }
    for (domain, kind, what) in [
        (ApiDomain::Driver, layout::KIND_DRIVER, "driver calls"),
        (ApiDomain::Runtime, layout::KIND_RUNTIME, "runtime calls"),
    ] {
        let mut ids: Vec<u32> =
            recorder.calls.keys().filter(|(d, _)| *d == domain).map(|(_, id)| *id).collect();
        if domain == watch::PROBE_CALL.0 {
            ids.push(watch::PROBE_CALL.1);
        }
        // Only the kept calls where CUPTI can; else the whole domain, read and filtered.
        let mut enabled = 0;
        if cupti.can_enable_calls() {
            for id in ids {
                enabled += usize::from(cupti.enable_call(domain, id).is_ok());
            }
        }
        if enabled == 0 {
            if let Err(e) = cupti.enable_kind(kind) {
                missing.push(format!("{what}: {e}"));
            }
        }
    }
    missing
}

/// Whether NVTX calls will reach the CUPTI the recorder loaded.
fn nvtx_reaches(recorder: &Recorder) -> Option<String> {
    let what = "NVTX ranges and markers";
    let Some(nvtx) = &recorder.config.nvtx_injection else {
        return Some(format!(
            "{what}: NVTX_INJECTION64_PATH is not set, so the program's NVTX calls reach no tool"
        ));
    };
    let ours = recorder.cupti_real_path.as_ref()?;
    let theirs = std::fs::canonicalize(nvtx).unwrap_or_else(|_| nvtx.clone());
    (&theirs != ours).then(|| {
        format!(
            "{what}: NVTX_INJECTION64_PATH names {}, not the recorder's CUPTI {}",
            nvtx.display(),
            ours.display()
        )
    })
}

/// The program's command line, as `/proc/self/cmdline` holds it (NUL-separated).
fn command_line() -> Vec<String> {
    let bytes = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    bytes
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}
