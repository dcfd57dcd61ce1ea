//! CUPTI, the CUDA Profiling Tools Interface, opened at run time: what each copy and kernel
//! really did on the GPU (start and end on the engine, stream, device, bytes, grid), plus the
//! driver calls that enqueued and waited for them.
//!
//! Two CUPTI APIs are used, the way PyTorch's profiler uses them:
//! - the **activity API** with `CONCURRENT_KERNEL` (not `KERNEL`, which serializes kernels),
//!   `MEMCPY`, `MEMCPY2` (peer copies) and `MEMSET`: one record per operation, delivered in
//!   buffers this module hands to CUPTI;
//! - a **callback subscription** on the driver API, for a fixed list of calls (launches,
//!   copies, memsets, host functions, graph launches, event records and waits,
//!   synchronizations). The callback runs on the calling thread when the call enters and
//!   exits: it notes the call's correlation id, its host-side span, and the "op tag" the
//!   caller set with [`with_op_tag`], so each activity record (which carries the same
//!   correlation id) can be named by whoever enqueued it.
//!
//! ## Why not cudarc's `cupti` module
//! cudarc opens libcupti by name through the dynamic loader only, with names built from the
//! CUDA version its features select (`libcupti.so.12` for the `cuda-12080` bindings the
//! runtime uses), so it does not find `libcupti.so.13` in
//! `/usr/local/cuda-13.0/targets/x86_64-linux/lib`, which is not on the loader path, nor the
//! copy in PyTorch's wheels; and it panics when no candidate loads. Its record structs are
//! those of one CUDA version. So this module is a minimal FFI over `libloading` (the loader
//! cudarc itself uses): [`candidates`] searches the CUDA roots and Python packages
//! explicitly, the newest library wins, and failure is a one-line reason the lab reports
//! ("timeline from events") instead of a panic.
//!
//! ## Record layouts
//! CUPTI writes the newest version of each record struct it knows (`CUpti_ActivityKernel9`
//! in CUDA 12.x, `…Kernel10`/`11`/`12`/`13` in 13.x; `Memcpy5`/`6`/`7`, `MemcpyPtoP4`,
//! `Memset4`/`5`). Versions only append fields, so this module reads the `kind` first, skips
//! unknown kinds, and for the four kinds it knows reads only the leading fields that every
//! version from CUDA 12.0 (CUPTI API version 18) to 13.x shares ([`layout`]'s structs,
//! transcribed from `cupti_activity.h`). Older CUPTI versions are refused.
//!
//! ## Where it lives
//! `find` looks for the library and loads it; [`layout`] transcribes the record structs;
//! `activity` hands CUPTI its buffers and reads the records; `callback` notes the traced driver
//! calls. This file is the safe API over them: [`Cupti::enable`], [`Enabled::start`],
//! [`Session::finish`].
//!
//! The recorder `streamlab trace` injects into other programs (the `streamlab-inject` crate)
//! uses the same library through `direct` (its own buffer callbacks, kinds, flushes), decodes
//! more kinds ([`decode`]: synchronizations, NVTX markers, driver and runtime calls, names,
//! contexts, streams, devices) and writes them as [`trace_file`] lines.
mod activity;
mod callback;
pub mod decode;
mod direct;
mod find;
pub mod layout;
pub mod trace_file;

use std::ffi::{c_void, CStr};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};

use crate::activity::{
    buffer_completed, buffer_requested, lock, ready_buffers, ACTIVITIES, KINDS, RECORDING, SKIPPED,
};
use crate::callback::{on_driver_call, traced_ids, CALLS, DOMAIN_DRIVER_API};
use crate::find::CUPTI_SUCCESS;

pub use crate::activity::{parse_record, Activity, CopyKind, MemoryKind, Work};
pub use crate::callback::{with_op_tag, ApiCall};
pub use crate::find::python_sites;
pub use crate::find::{candidates, candidates_in, load, load_file, Cupti, OLDEST_API_VERSION};
pub use crate::find::{CompleteFn, RequestFn};

/// What a session collected.
#[derive(Debug, Default)]
pub struct Collected {
    pub activities: Vec<Activity>,
    pub calls: Vec<ApiCall>,
    /// Records of kinds this module does not read (skipped, counted).
    pub skipped: usize,
    /// Records CUPTI dropped for lack of buffer space.
    pub dropped: usize,
}

/// CUPTI on for one holder at a time: its activity buffers are process-wide.
static ENABLED: Mutex<()> = Mutex::new(());
const FLUSH_FORCED: u32 = 1;

impl Cupti {
    fn check(&self, status: u32, call: &str) -> std::result::Result<(), String> {
        if status == CUPTI_SUCCESS {
            return Ok(());
        }
        let mut text = std::ptr::null();
        // SAFETY: valid out-pointer; CUPTI returns a static string or an error.
        let known = unsafe { (self.api.get_result_string)(status, &mut text) } == CUPTI_SUCCESS;
        let why = if known && !text.is_null() {
            // SAFETY: checked non-null; CUPTI owns a static NUL-terminated string.
            unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
        } else {
            format!("CUPTI error {status}")
        };
        Err(format!("{call}: {why}"))
    }

    fn subscriber(&'static self) -> std::result::Result<*mut c_void, String> {
        let handle = self.subscriber.get_or_init(|| {
            // SAFETY: the buffer functions match CUpti_BuffersCallbackRequestFunc and
            // CompleteFunc, and stay valid for the life of the process.
            let status = unsafe {
                (self.api.activity_register_callbacks)(buffer_requested, buffer_completed)
            };
            self.check(status, "cuptiActivityRegisterCallbacks")?;
            let mut subscriber = std::ptr::null_mut();
            // SAFETY: valid out-pointer; `on_driver_call` matches CUpti_CallbackFunc and
            // needs no user data.
            let status = unsafe {
                (self.api.subscribe)(&mut subscriber, on_driver_call, std::ptr::null_mut())
            };
            self.check(status, "cuptiSubscribe")?;
            Ok(subscriber as usize)
        });
        handle.clone().map(|h| h as *mut c_void)
    }

    /// Turns the traced calls' callbacks on or off. A call this CUPTI does not know is left
    /// out; it is an error only when none could be turned on.
    fn set_callbacks(&self, subscriber: *mut c_void, on: bool) -> std::result::Result<(), String> {
        let mut first_error = None;
        let mut done = 0;
        for cbid in traced_ids() {
            // SAFETY: a live subscriber handle and a callback id of the driver API domain.
            let status = unsafe {
                (self.api.enable_callback)(on as u32, subscriber, DOMAIN_DRIVER_API, cbid)
            };
            match self.check(status, "cuptiEnableCallback") {
                Ok(()) => done += 1,
                Err(e) => first_error = first_error.or(Some(e)),
            }
        }
        match first_error {
            Some(e) if done == 0 => Err(e),
            _ => Ok(()),
        }
    }

    /// Turns the recorded activity kinds on or off. Kernels and copies must be there; peer
    /// copies and memsets are recorded where this CUPTI allows it.
    fn set_activities(&self, on: bool) -> std::result::Result<(), String> {
        for kind in KINDS {
            // SAFETY: plain enum arguments.
            let status = unsafe {
                if on {
                    (self.api.activity_enable)(kind)
                } else {
                    (self.api.activity_disable)(kind)
                }
            };
            let call = if on { "cuptiActivityEnable" } else { "cuptiActivityDisable" };
            let required = kind == layout::KIND_CONCURRENT_KERNEL || kind == layout::KIND_MEMCPY;
            match self.check(status, call) {
                Err(e) if required => return Err(format!("{e} (activity kind {kind})")),
                _ => {}
            }
        }
        Ok(())
    }

    /// Turns CUPTI on: the four activity kinds and the traced driver calls, until the
    /// returned [`Enabled`] drops. One at a time in a process (a second waits): CUPTI's
    /// activity buffers are process-wide.
    ///
    /// Turning CUPTI on and off is kept out of the runs: enable once, run the work once as a
    /// warm-up whose records are thrown away, then record each run with
    /// [`Enabled::start`], which only clears the sinks.
    pub fn enable(&'static self) -> std::result::Result<Enabled, String> {
        self.enable_with(true)
    }

    /// [`Cupti::enable`], with the driver calls traced only if `host_calls`: without them
    /// the recording has the GPU's work only (what tracing the host costs can be measured).
    pub fn enable_with(&'static self, host_calls: bool) -> std::result::Result<Enabled, String> {
        let exclusive = lock(&ENABLED);
        let subscriber = self.subscriber()?;
        let enabled = Enabled { cupti: self, subscriber, _exclusive: exclusive };
        // `enabled` turns off whatever was turned on should either step fail.
        if host_calls {
            self.set_callbacks(subscriber, true)?;
        }
        self.set_activities(true)?;
        Ok(enabled)
    }

    /// Delivers every buffered record of completed work to [`buffer_completed`].
    fn flush(&self) -> std::result::Result<(), String> {
        // SAFETY: plain flag argument; buffers are delivered to `buffer_completed`.
        let status = unsafe { (self.api.activity_flush_all)(FLUSH_FORCED) };
        self.check(status, "cuptiActivityFlushAll")
    }

    /// Records CUPTI dropped for lack of buffer space since the last call.
    fn dropped(&self) -> std::result::Result<usize, String> {
        let mut dropped = 0;
        // SAFETY: valid out-pointer; a null context and stream 0 ask for all of them.
        let status = unsafe { (self.api.activity_dropped)(std::ptr::null_mut(), 0, &mut dropped) };
        self.check(status, "cuptiActivityGetNumDroppedRecords")?;
        Ok(dropped)
    }
}

/// CUPTI turned on (see [`Cupti::enable`]); dropping it turns CUPTI off again. While no
/// [`Session`] records, the callback returns at once and delivered records are discarded.
pub struct Enabled {
    cupti: &'static Cupti,
    subscriber: *mut c_void,
    _exclusive: MutexGuard<'static, ()>,
}

impl Enabled {
    /// The library that is on.
    pub fn cupti(&self) -> &'static Cupti {
        self.cupti
    }

    /// Starts recording, until [`Session::finish`]. Nothing is enabled or flushed here (a
    /// flush makes CUPTI set up a new buffer on the next record, inside the run): the sinks
    /// are cleared, and records of earlier work still buffered are left out by their start.
    pub fn start(&mut self) -> std::result::Result<Session<'_>, String> {
        let c = self.cupti;
        c.dropped()?;
        lock(&ACTIVITIES).clear();
        lock(&CALLS).clear();
        SKIPPED.store(0, Ordering::Relaxed);
        ready_buffers();
        let start_ns = c.now_ns();
        RECORDING.store(true, Ordering::SeqCst);
        Ok(Session { enabled: self, start_ns })
    }
}

impl Drop for Enabled {
    fn drop(&mut self) {
        let c = self.cupti;
        let _ = c.set_activities(false);
        let _ = c.set_callbacks(self.subscriber, false);
        // Records still buffered are delivered now (and discarded: nothing records).
        let _ = c.flush();
    }
}

/// A recording in progress; dropping it without [`Session::finish`] stops it too (CUPTI
/// stays on until its [`Enabled`] drops).
pub struct Session<'a> {
    enabled: &'a mut Enabled,
    start_ns: u64,
}

impl Session<'_> {
    /// Stops recording and hands over everything recorded. Call it once the recorded work
    /// has completed: records of unfinished work are not delivered.
    pub fn finish(self) -> std::result::Result<Collected, String> {
        let c = self.enabled.cupti;
        c.flush()?;
        RECORDING.store(false, Ordering::SeqCst);
        let dropped = c.dropped()?;
        let mut activities = std::mem::take(&mut *lock(&ACTIVITIES));
        // Work enqueued before the session cannot be in it, whenever CUPTI delivered it.
        activities.retain(|a| a.start_ns >= self.start_ns);
        activities.sort_by_key(|a| (a.start_ns, a.correlation));
        Ok(Collected {
            activities,
            calls: std::mem::take(&mut *lock(&CALLS)),
            skipped: SKIPPED.swap(0, Ordering::Relaxed),
            dropped,
        })
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        RECORDING.store(false, Ordering::SeqCst);
    }
}
