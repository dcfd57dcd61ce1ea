//! The recorder's clock: a flush every `flush_ms` on a thread of its own, each followed by
//! the records' decisions and writes (`keeper.rs`); the last flush among the process's exit
//! handlers, or as a fatal signal is handled (`signals.rs`); and what the recorder can see of
//! another CUPTI user in the process.
//!
//! Another CUPTI user (torch.profiler's kineto, Nsight, streamlab's own `--timeline` when
//! streamlab is the traced program) cannot be asked about; two things can be observed (the
//! host reads every note's sentence back by its words, `trace.file.*` in its catalogs:
//! change a sentence here and there together):
//! - another libcupti file mapped in the process (`/proc/self/maps`, read at most once a
//!   second): a fact worth a line, though a library loaded is not yet one recording. On a
//!   GPU run under the recorder, torch.profiler's kineto failed to subscribe
//!   (`CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED`) and recorded no CUDA activity,
//!   though the recorder never calls `cuptiSubscribe`: the note says what was seen and what
//!   may follow, not why;
//! - the probe: before each flush the flush thread makes one cheap driver call,
//!   `cuDriverGetVersion`, whose activity record comes back through the recorder's own
//!   buffers. CUPTI hands its buffers to one pair of callbacks per process, and its kinds are
//!   on or off for the whole process: when another client registers its own callbacks or
//!   turns recording off, the probe's records stop coming back. The check starts once one
//!   has come back (a CUPTI that does not record that call leaves it off, and says so at
//!   exit).
use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use streamlab_cupti::trace_file::{ApiDomain, Line};

use crate::crash_state::{crashing, hold};
use crate::{lock, Recorder, RECORDER};

/// The probe call's (domain, callback id): `CUPTI_DRIVER_TRACE_CBID_cuDriverGetVersion`.
pub const PROBE_CALL: (ApiDomain, u32) = (ApiDomain::Driver, 2);
/// How long the probe may leave no record before the recorder says so: well above a flush,
/// and above the time a buffer can wait for a long kernel's record in it to complete.
const PROBE_SILENCE_NS: u64 = 10_000_000_000;
/// The maps are read at most this often.
const MAPS_EVERY: Duration = Duration::from_secs(1);

/// When the probe's records came back.
#[derive(Default)]
pub struct Probe {
    sent: AtomicU64,
    /// Probes sent since one last came back.
    unanswered: AtomicU64,
    /// CUPTI's clock when a buffer last brought one back; 0 before the first.
    last_seen: AtomicU64,
}

impl Probe {
    pub fn seen(&self, now_ns: u64) {
        self.last_seen.store(now_ns, Ordering::Relaxed);
        self.unanswered.store(0, Ordering::Relaxed);
    }

    fn sent(&self) {
        self.sent.fetch_add(1, Ordering::Relaxed);
        self.unanswered.fetch_add(1, Ordering::Relaxed);
    }

    /// The note to write at exit when probes came back once and then stopped: a run shorter
    /// than the silence allowed is still caught. Two unanswered probes at least, since the
    /// last one sent may sit in a buffer the final flush has not returned yet.
    fn stopped_at_exit(&self) -> Option<String> {
        let last = self.last_seen.load(Ordering::Relaxed);
        let unanswered = self.unanswered.load(Ordering::Relaxed);
        (last != 0 && unanswered >= 2).then(|| {
            format!(
                "the recorder's probe call (cuDriverGetVersion, one per flush) left no record for its last {unanswered} flushes, since CUPTI time {last} ns, though it did before: another CUPTI client in the process registered its own activity buffers or turned recording off, and records after that time are missing"
            )
        })
    }

    /// The note to write when the probe has been silent too long at `now_ns`.
    fn silence(&self, now_ns: u64) -> Option<String> {
        let last = self.last_seen.load(Ordering::Relaxed);
        let quiet = now_ns.saturating_sub(last);
        (last != 0 && quiet > PROBE_SILENCE_NS).then(|| {
            format!(
                "the recorder's probe call (cuDriverGetVersion, one per flush) has left no record for {:.0} s, since CUPTI time {last} ns, though it did before: another CUPTI client in the process registering its own activity buffers or turning recording off does this (torch.profiler does as it starts and stops), and records after that time may be missing",
                quiet as f64 * 1e-9
            )
        })
    }

    /// The note to write at exit when no probe ever came back.
    fn never_seen(&self) -> Option<String> {
        let never =
            self.sent.load(Ordering::Relaxed) > 0 && self.last_seen.load(Ordering::Relaxed) == 0;
        never.then(|| "the recorder's probe call (cuDriverGetVersion) never left a record, so whether another CUPTI client took over the activity buffers was not checked".to_string())
    }
}

/// What the flush cycles share, under one lock: a cycle and the exit never overlap.
#[derive(Default)]
pub struct Cycle {
    /// Set by the exit handler: no flush after it.
    stopped: bool,
    /// The notes written, by key, so each is said once.
    noted: Vec<String>,
    last_maps: Option<Instant>,
}

impl Cycle {
    fn note_once(&mut self, key: &str, text: String, out: &mut String) {
        if !self.noted.iter().any(|k| k == key) {
            self.noted.push(key.to_string());
            out.push_str(&Line::Note { text }.to_json_line());
        }
    }
}

/// The libcupti files in a `/proc/self/maps` text other than `ours` (a canonical path).
pub fn other_cuptis(maps: &str, ours: &Path) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for line in maps.lines() {
        // address perms offset dev inode path: the path is the rest after five fields.
        let mut rest = line;
        for _ in 0..5 {
            rest = rest.trim_start();
            rest = rest.find(char::is_whitespace).map_or("", |at| &rest[at..]);
        }
        let path = rest.trim();
        let name = Path::new(path).file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("libcupti")
            && Path::new(path) != ours
            && !found.iter().any(|f| f == path)
        {
            found.push(path.to_string());
        }
    }
    found
}

/// The notes about other libcupti files mapped, read at most once a second.
fn scan_maps(recorder: &Recorder, cycle: &mut Cycle, out: &mut String) {
    if cycle.last_maps.is_some_and(|t| t.elapsed() < MAPS_EVERY) {
        return;
    }
    cycle.last_maps = Some(Instant::now());
    let Some(ours) = &recorder.cupti_real_path else { return };
    let Ok(maps) = fs::read_to_string("/proc/self/maps") else { return };
    for other in other_cuptis(&maps, ours) {
        let text = format!(
            "another CUPTI library is loaded in the process: {other} (the recorder's is {}); a profiler the program starts itself (torch.profiler) may record no CUDA activity while streamlab trace records",
            ours.display()
        );
        cycle.note_once(&format!("maps:{other}"), text, out);
    }
}

type DriverVersionFn = unsafe extern "C" fn(*mut i32) -> i32;

/// `cuDriverGetVersion` of the libcuda already loaded (the driver loaded the recorder).
fn probe_call() -> Option<DriverVersionFn> {
    static PROBE: OnceLock<Option<(libloading::os::unix::Library, DriverVersionFn)>> =
        OnceLock::new();
    let found = PROBE.get_or_init(|| {
        let flags = libc::RTLD_NOW | libc::RTLD_NOLOAD;
        // SAFETY: RTLD_NOLOAD only finds a library already loaded: no initialiser runs.
        let library =
            unsafe { libloading::os::unix::Library::open(Some("libcuda.so.1"), flags) }.ok()?;
        // SAFETY: `CUresult cuDriverGetVersion(int *)`; the library stays loaded beside it.
        let function = *unsafe { library.get::<DriverVersionFn>(b"cuDriverGetVersion\0") }.ok()?;
        Some((library, function))
    });
    found.as_ref().map(|(_, f)| *f)
}

/// One periodic cycle: probe, flush, look around, decide and write. `false` once the
/// recorder stopped (at exit, or as a crash is handled).
fn flush_cycle(recorder: &Recorder) -> bool {
    let Some(cupti) = recorder.cupti else { return false };
    if crashing() {
        return false;
    }
    let mut cycle = lock(&recorder.cycle);
    if cycle.stopped || std::process::id() != recorder.pid {
        return false;
    }
    if let Some(version) = probe_call() {
        let mut v = 0;
        // SAFETY: a valid out-pointer; the call needs no context.
        unsafe { version(&mut v) };
        recorder.probe.sent();
    }
    // Every marker before this time has been handed over once the flush returns.
    let time = cupti.now_ns();
    let mut text = String::new();
    let flushed = cupti.flush_all(false);
    if let Err(e) = &flushed {
        let why = format!("{e}: the periodic flush failed (first at CUPTI time {time} ns)");
        cycle.note_once("flush", why, &mut text);
    }
    scan_maps(recorder, &mut cycle, &mut text);
    if let Some(silence) = recorder.probe.silence(cupti.now_ns()) {
        cycle.note_once("probe", silence, &mut text);
    }
    let Some(mut keeper) = hold(&recorder.keeper) else { return false };
    keeper.settle(time, false);
    // `Flushed` promises every record completed before `time` is written: only after a flush.
    let end = flushed.is_ok().then_some(Line::Flushed { time });
    // Read after the records were written: a segment closed now holds nothing later.
    keeper.end_cycle(cupti.now_ns(), false, text, end);
    true
}

/// Starts the flush thread.
pub fn start_flushing(recorder: &'static Recorder) -> std::io::Result<()> {
    let every = Duration::from_millis(recorder.config.flush_ms);
    std::thread::Builder::new().name("streamlab-trace".into()).spawn(move || loop {
        std::thread::sleep(every);
        // A panic in one cycle is caught here and the next cycle runs.
        if !catch_unwind(AssertUnwindSafe(|| flush_cycle(recorder))).unwrap_or(true) {
            break;
        }
    })?;
    Ok(())
}

/// The process's exit handler (`atexit`). Nothing in a forked child, which inherits the
/// handler but not the file.
pub extern "C" fn at_exit() {
    let _ = catch_unwind(|| {
        let Some(recorder) = RECORDER.get() else { return };
        if std::process::id() == recorder.pid {
            finish(recorder, None);
        }
    });
}

/// The last cycle, at exit or (with the `signal`) as a fatal signal is handled: the forced
/// flush (records of work still running come too, and are counted as unfinished), every
/// record left decided and written, the notes, the `Dropped` and `Sampled` lines, and `Exit`
/// or `Crashed`. As a crash is handled, each lock is waited for a bounded time
/// ([`hold`]): where the flush cycle's cannot be had (the crash came inside a cycle), the
/// flush is skipped and what was already handed over is still written.
pub fn finish(recorder: &Recorder, signal: Option<i32>) {
    let mut text = String::new();
    let mut time = 0;
    if let Some(mut cycle) = hold(&recorder.cycle) {
        if cycle.stopped {
            return;
        }
        cycle.stopped = true;
        if let Some(cupti) = recorder.cupti {
            if let Err(e) = cupti.flush_all(true) {
                cycle.note_once("exit flush", format!("{e}: the flush at exit failed"), &mut text);
            }
            cycle.last_maps = None;
            scan_maps(recorder, &mut cycle, &mut text);
            if let Some(never) = recorder.probe.never_seen() {
                cycle.note_once("probe never", never, &mut text);
            }
            if let Some(stopped) = recorder.probe.stopped_at_exit() {
                cycle.note_once("probe", stopped, &mut text);
            }
        }
    } else if signal.is_none() {
        return;
    }
    if let Some(cupti) = recorder.cupti {
        time = cupti.now_ns();
    }
    let Some(mut keeper) = hold(&recorder.keeper) else { return };
    keeper.settle(time, true);
    let end = match signal {
        Some(signal) => Line::Crashed { signal, time },
        None => Line::Exit { time },
    };
    keeper.end_cycle(time, true, text, Some(end));
}

/// The canonical path of the loaded libcupti, as `/proc/self/maps` shows it; `None` for a
/// bare name the loader resolved (then the maps cannot tell it from another).
pub fn real_path(path: &Path) -> Option<PathBuf> {
    path.is_absolute().then(|| fs::canonicalize(path).ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_cupti_libraries_are_found_in_the_maps() {
        let maps = "\
7f0000000000-7f0000100000 r-xp 00000000 08:01 1234 /usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti.so.2025.3.0
7f0000100000-7f0000200000 r--p 00100000 08:01 1234 /usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti.so.2025.3.0
7f1000000000-7f1000100000 r-xp 00000000 08:01 99 /opt/torch/.venv/lib/python3.12/site-packages/nvidia/cuda_cupti/lib/libcupti.so.12
7f1000100000-7f1000200000 r--p 00100000 08:01 99 /opt/torch/.venv/lib/python3.12/site-packages/nvidia/cuda_cupti/lib/libcupti.so.12
7f2000000000-7f2000100000 r-xp 00000000 08:01 7 /usr/lib/x86_64-linux-gnu/libcuda.so.580.1
7f3000000000-7f3000001000 rw-p 00000000 00:00 0 
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
";
        let ours = Path::new("/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti.so.2025.3.0");
        assert_eq!(
            other_cuptis(maps, ours),
            ["/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cuda_cupti/lib/libcupti.so.12"]
        );
        assert_eq!(other_cuptis(maps, Path::new("/elsewhere/libcupti.so.13")).len(), 2);
    }

    #[test]
    fn the_probe_speaks_only_after_it_has_worked() {
        let probe = Probe::default();
        // Never seen: no silence note, whatever the time; at exit, said once probes were sent.
        assert_eq!(probe.silence(60 * PROBE_SILENCE_NS), None);
        assert_eq!(probe.never_seen(), None);
        probe.sent.store(3, Ordering::Relaxed);
        assert!(probe.never_seen().is_some());
        assert_eq!(probe.stopped_at_exit(), None);
        probe.seen(1_000);
        assert_eq!(probe.never_seen(), None);
        // Seen, then two probes sent without answer: said at exit, however short the run.
        probe.sent();
        assert_eq!(probe.stopped_at_exit(), None);
        probe.sent();
        assert!(probe.stopped_at_exit().unwrap().contains("its last 2 flushes"));
        assert_eq!(probe.silence(1_000 + PROBE_SILENCE_NS), None);
        let note = probe.silence(1_000 + PROBE_SILENCE_NS + 1).unwrap();
        assert!(note.contains("since CUPTI time 1000 ns"), "{note}");
        // One answer clears the count.
        probe.seen(2_000);
        assert_eq!(probe.stopped_at_exit(), None);
    }
}
