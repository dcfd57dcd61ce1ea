//! Streams and events: thin owners of `CUstream` / `CUevent`.
//!
//! | CUDA C++                                     | streamlab                                   |
//! |----------------------------------------------|---------------------------------------------|
//! | `cudaStreamCreate(&s)`                       | `Stream::new("name")`                       |
//! | `cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)` | `Stream::non_blocking("name")`    |
//! | `cudaStreamCreateWithPriority(&s, f, p)`     | `Stream::with_priority("name", p)`          |
//! | `cudaStreamSynchronize(s)` / `cudaStreamQuery(s)` | `s.synchronize()` / `s.is_idle()`      |
//! | `cudaStreamWaitEvent(s, e)`                  | `s.wait_event(&e)`                          |
//! | `cudaLaunchHostFunc(s, fn, data)`            | `s.launch_host_fn(closure)`                 |
//! | `cudaEventCreate` / `cudaEventRecord(e, s)`  | `Event::new()` / `e.record(&s)`             |
//! | `cudaEventElapsedTime(&ms, a, b)`            | `b.elapsed_ms(&a)`                          |
//!
//! Why not `cust::stream::Stream` and `cust::event::Event`? cust 0.3.2's `Stream::new` silently
//! drops `NON_BLOCKING` (so the default-stream demo could not show the difference), and its
//! `Stream::wait_event` consumes the event (so one event cannot be waited on every iteration,
//! nor by several streams). These two types call the same driver functions cust does, keep
//! both flags, and add what the demos need: names for error messages, and an optional
//! [`Timeline`] that records a start/end event pair around every copy and launch.
use std::cell::RefCell;
use std::ffi::c_void;
use std::rc::Rc;

use cust::sys as cu;

use crate::error::{check, DriverCode, Result};
use crate::timeline::{OpKind, Timeline};

/// What a stream synchronizes with implicitly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// Waits for, and is waited on by, the legacy default (NULL) stream: `cudaStreamDefault`.
    Blocking,
    /// No implicit synchronization with the legacy default stream: `cudaStreamNonBlocking`.
    NonBlocking,
    /// The legacy default stream itself (handle 0): synchronizes with every blocking stream.
    LegacyDefault,
}

/// A CUDA stream: an in-order queue of GPU work.
pub struct Stream {
    raw: cu::CUstream,
    name: String,
    kind: StreamKind,
    timeline: RefCell<Option<Rc<Timeline>>>,
}

impl Stream {
    /// A blocking stream at the default priority (`cudaStreamCreate`).
    pub fn new(name: impl Into<String>) -> Result<Stream> {
        Self::create(name.into(), StreamKind::Blocking, 0)
    }

    /// A stream that does not synchronize with the legacy default stream.
    pub fn non_blocking(name: impl Into<String>) -> Result<Stream> {
        Self::create(name.into(), StreamKind::NonBlocking, 0)
    }

    /// A blocking stream with a priority; lower numbers are greater priorities (see
    /// [`crate::gpu::DeviceInfo::priority_range`]).
    pub fn with_priority(name: impl Into<String>, priority: i32) -> Result<Stream> {
        Self::create(name.into(), StreamKind::Blocking, priority)
    }

    /// The legacy default stream (`0` in `<<<g, b, s, 0>>>`). Dropping it destroys nothing.
    pub fn legacy_default() -> Stream {
        Stream {
            raw: std::ptr::null_mut(),
            name: "legacy default stream".into(),
            kind: StreamKind::LegacyDefault,
            timeline: RefCell::new(None),
        }
    }

    fn create(name: String, kind: StreamKind, priority: i32) -> Result<Stream> {
        let flags = match kind {
            StreamKind::NonBlocking => cu::CUstream_flags_enum::CU_STREAM_NON_BLOCKING as u32,
            _ => cu::CUstream_flags_enum::CU_STREAM_DEFAULT as u32,
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer. Without a current context the driver returns
        // CUDA_ERROR_INVALID_CONTEXT, which `check` turns into an error.
        let status = unsafe { cu::cuStreamCreateWithPriority(&mut raw, flags, priority) };
        check(status, "cuStreamCreateWithPriority", Some(&name))?;
        Ok(Stream {
            raw,
            name,
            kind,
            timeline: RefCell::new(None),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn kind(&self) -> StreamKind {
        self.kind
    }

    /// The raw handle, for driver calls this module does not wrap (graph capture).
    pub fn as_raw(&self) -> cu::CUstream {
        self.raw
    }

    /// Records every following copy and launch on this stream into `timeline`.
    pub fn attach_timeline(&self, timeline: &Rc<Timeline>) {
        *self.timeline.borrow_mut() = Some(Rc::clone(timeline));
    }

    pub fn detach_timeline(&self) {
        *self.timeline.borrow_mut() = None;
    }

    /// Checks a driver status, naming this stream in the error.
    pub fn check(&self, status: cu::CUresult, op: &str) -> Result<()> {
        check(status, op, Some(&self.name))
    }

    /// Enqueues one operation, bracketed by timeline events when a timeline is attached.
    /// Every copy and launch in streamlab goes through here.
    pub(crate) fn enqueue(
        &self,
        kind: OpKind,
        label: &str,
        op: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let timeline = self.timeline.borrow().clone();
        match timeline {
            None => op(),
            Some(t) => {
                let start = Event::new()?;
                start.record(self)?;
                op()?;
                let end = Event::new()?;
                end.record(self)?;
                t.push(&self.name, kind, label, start, end);
                Ok(())
            }
        }
    }

    /// Blocks the host until all work queued so far on this stream is done.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: `raw` is a live stream (or the legacy default stream).
        self.check(
            unsafe { cu::cuStreamSynchronize(self.raw) },
            "cuStreamSynchronize",
        )
    }

    /// `true` when all work queued so far has finished (`cudaStreamQuery`), without blocking.
    pub fn is_idle(&self) -> Result<bool> {
        // SAFETY: `raw` is a live stream.
        let status = unsafe { cu::cuStreamQuery(self.raw) };
        if status as u32 == DriverCode::NOT_READY {
            return Ok(false);
        }
        self.check(status, "cuStreamQuery").map(|_| true)
    }

    /// Work queued on this stream after this call waits until `event` has completed.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        // SAFETY: both handles are live; flags 0 is the only documented value.
        let status = unsafe { cu::cuStreamWaitEvent(self.raw, event.raw, 0) };
        self.check(status, "cuStreamWaitEvent")
    }

    /// Enqueues a host function (`cuLaunchHostFunc`): it runs on a driver thread once all
    /// earlier work on this stream is done, and later work waits for it to return. It must
    /// not call CUDA: the driver thread would deadlock or fail.
    pub fn launch_host_fn<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<()> {
        let boxed: Box<Box<dyn FnOnce() + Send>> = Box::new(Box::new(f));
        let data = Box::into_raw(boxed) as *mut c_void;
        // SAFETY: `trampoline` matches CUhostFn and takes back ownership of `data` exactly
        // once, when the driver calls it; on failure we take it back here instead.
        let status = unsafe { cu::cuLaunchHostFunc(self.raw, Some(trampoline), data) };
        if status as u32 != 0 {
            // SAFETY: the driver did not accept the function, so it will never call it.
            drop(unsafe { Box::from_raw(data as *mut Box<dyn FnOnce() + Send>) });
        }
        self.check(status, "cuLaunchHostFunc")
    }
}

unsafe extern "C" fn trampoline(data: *mut c_void) {
    // SAFETY: `data` came from Box::into_raw in `launch_host_fn` and the driver calls each
    // host function once.
    let f = unsafe { Box::from_raw(data as *mut Box<dyn FnOnce() + Send>) };
    // A panic must not unwind into the driver's thread.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.kind != StreamKind::LegacyDefault {
            // SAFETY: we own `raw`; pending work still completes after destroy (driver docs).
            unsafe { cu::cuStreamDestroy_v2(self.raw) };
        }
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream({:?}, {:?})", self.name, self.kind)
    }
}

/// A CUDA event: a marker in a stream, for timing and for cross-stream dependencies.
pub struct Event {
    raw: cu::CUevent,
}

impl Event {
    /// An event with timing enabled (`cudaEventCreate`).
    pub fn new() -> Result<Event> {
        Self::with_flags(
            cu::CUevent_flags_enum::CU_EVENT_DEFAULT as u32,
            "cuEventCreate",
        )
    }

    /// An event whose `synchronize` puts the host thread to sleep instead of spinning
    /// (`cudaEventBlockingSync`).
    pub fn blocking_sync() -> Result<Event> {
        Self::with_flags(
            cu::CUevent_flags_enum::CU_EVENT_BLOCKING_SYNC as u32,
            "cuEventCreate(BLOCKING_SYNC)",
        )
    }

    /// An event without timing (`cudaEventDisableTiming`): the cheapest for dependencies.
    pub fn without_timing() -> Result<Event> {
        Self::with_flags(
            cu::CUevent_flags_enum::CU_EVENT_DISABLE_TIMING as u32,
            "cuEventCreate(DISABLE_TIMING)",
        )
    }

    fn with_flags(flags: u32, op: &str) -> Result<Event> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid out-pointer; without a current context the driver returns an error.
        check(unsafe { cu::cuEventCreate(&mut raw, flags) }, op, None)?;
        Ok(Event { raw })
    }

    pub fn as_raw(&self) -> cu::CUevent {
        self.raw
    }

    /// Marks the point in `stream` reached once all work queued before it is done.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        // SAFETY: both handles are live.
        stream.check(
            unsafe { cu::cuEventRecord(self.raw, stream.raw) },
            "cuEventRecord",
        )
    }

    /// Blocks the host until the event has completed.
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: live handle.
        check(
            unsafe { cu::cuEventSynchronize(self.raw) },
            "cuEventSynchronize",
            None,
        )
    }

    /// `true` once the event has completed (`cudaEventQuery`), without blocking.
    pub fn is_complete(&self) -> Result<bool> {
        // SAFETY: live handle.
        let status = unsafe { cu::cuEventQuery(self.raw) };
        if status as u32 == DriverCode::NOT_READY {
            return Ok(false);
        }
        check(status, "cuEventQuery", None).map(|_| true)
    }

    /// Milliseconds from `start` to this event; both must have completed.
    pub fn elapsed_ms(&self, start: &Event) -> Result<f64> {
        let mut ms = 0f32;
        // SAFETY: valid out-pointer, both handles live.
        let status = unsafe { cu::cuEventElapsedTime(&mut ms, start.raw, self.raw) };
        check(status, "cuEventElapsedTime", None)?;
        Ok(ms as f64)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: we own `raw`; destroying a recorded event is allowed.
        unsafe { cu::cuEventDestroy_v2(self.raw) };
    }
}

/// Makes every stream in `waiters` wait for everything queued so far on `on`: the fork of a
/// fork/join. Returns the event so a capture can keep it alive.
pub fn fork(on: &Stream, waiters: &[&Stream]) -> Result<Event> {
    let e = Event::without_timing()?;
    e.record(on)?;
    for w in waiters {
        w.wait_event(&e)?;
    }
    Ok(e)
}

/// Makes `on` wait for everything queued so far on each of `others`: the join.
pub fn join(on: &Stream, others: &[&Stream]) -> Result<Vec<Event>> {
    others
        .iter()
        .map(|s| {
            let e = Event::without_timing()?;
            e.record(s)?;
            on.wait_event(&e)?;
            Ok(e)
        })
        .collect()
}

/// Runs `enqueue`; if it fails part-way, first waits for everything already queued on the
/// device (`cuCtxSynchronize`) and only then returns the error. Without this, a copy queued
/// before the failure could still be reading or writing host memory that the caller frees
/// or reads as soon as it sees the error. Every demo wraps its enqueuing in this, which is
/// what its `// SAFETY:` comments rely on.
pub fn drain_on_error<T>(enqueue: impl FnOnce() -> Result<T>) -> Result<T> {
    let result = enqueue();
    if result.is_err() {
        // The original error is the one to report; a failing synchronize adds nothing.
        let _ = cust::context::CurrentContext::synchronize();
    }
    result
}
