//! Streams: owners of `CUstream` that keep their context alive, and the asynchronous copies.
//! Events are in `event.rs`, except [`Event::record`], which takes a stream and is here.
//!
//! | CUDA C++                                     | streamlab                                   |
//! |----------------------------------------------|---------------------------------------------|
//! | `cudaStreamCreate(&s)`                       | `Stream::new(&gpu, "name")`                 |
//! | `cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)` | `Stream::non_blocking(&gpu, "name")` |
//! | `cudaStreamCreateWithPriority(&s, f, p)`     | `Stream::with_priority(&gpu, "name", p)`    |
//! | `0` / `cudaStreamLegacy`                     | `Stream::legacy_default(&gpu)` / `Stream::legacy(&gpu)` |
//! | `cudaStreamPerThread`                        | `Stream::per_thread_default(&gpu)`          |
//! | `cudaStreamSynchronize(s)` / `cudaStreamQuery(s)` | `s.synchronize()` / `s.is_idle()`      |
//! | `cudaStreamWaitEvent(s, e)`                  | `s.wait_event(&e)`                          |
//! | `cudaLaunchHostFunc(s, fn, data)`            | `s.launch_host_fn(closure)`                 |
//! | `cudaEventCreate` / `cudaEventRecord(e, s)`  | `Event::new(&gpu)` / `e.record(&s)`         |
//! | `cudaEventElapsedTime(&ms, a, b)`            | `b.elapsed_ms(&a)`                          |
//!
//! A stream names itself in every error, and calls the [`Observer`] attached to it around
//! every copy and launch (the lab's timeline is one). A copy from or into a host buffer
//! records that buffer's event behind it (`in_flight`): the host waits for that event, not
//! for the stream, before it touches the buffer again.
use std::cell::RefCell;
use std::ffi::c_void;
use std::rc::Rc;

use bytemuck::Pod;
use cudarc::driver::sys as cu;

use crate::runtime::context::{AsContext, Context};
use crate::runtime::driver;
use crate::runtime::error::{check, Error, Named, Result};
use crate::runtime::event::not_ready;
pub use crate::runtime::event::Event;
use crate::runtime::in_flight::{self, Access, Queue};
use crate::runtime::memory::{DeviceView, HostView};
use crate::runtime::op::{Op, OpKind};
use crate::t;

/// Watches a stream's operations (the runtime knows nothing of timelines or traces: the
/// lab's timeline is one observer). `enqueue` performs the driver call; an observer runs it
/// exactly once, and may record events or stamps around it.
pub trait Observer {
    fn observe(
        &self,
        stream: &Stream,
        op: &Op<'_>,
        enqueue: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()>;

    /// Called just before a host function is enqueued on `stream` (then [`observe`] is called
    /// for it): may wrap it, e.g. to stamp when it runs on the driver's thread. As it is by
    /// default.
    ///
    /// [`observe`]: Observer::observe
    fn wrap_host_fn(
        &self,
        _stream: &Stream,
        f: Box<dyn FnOnce() + Send>,
    ) -> Box<dyn FnOnce() + Send> {
        f
    }

    /// Called around `ncclGroupEnd` (by [`crate::runtime::nccl::group`]) when collectives
    /// were issued inside the group on a stream this observer watches: NCCL enqueues grouped
    /// collectives only there, not in the calls that [`observe`] saw, so an observer that
    /// brackets an operation must bracket this call for them. `end` performs `ncclGroupEnd`;
    /// an observer runs it exactly once, whatever else fails. As it is by default.
    ///
    /// [`observe`]: Observer::observe
    fn group_end(&self, end: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        end()
    }
}

/// What a stream synchronizes with implicitly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// Waits for, and is waited on by, the legacy default (NULL) stream: `cudaStreamDefault`.
    Blocking,
    /// No implicit synchronization with the legacy default stream: `cudaStreamNonBlocking`.
    NonBlocking,
    /// The legacy default stream itself (handle 0 or `CU_STREAM_LEGACY`): one stream for every
    /// host thread, which synchronizes with every blocking stream.
    LegacyDefault,
    /// The calling thread's own default stream (`CU_STREAM_PER_THREAD`, what stream 0 means
    /// under `nvcc --default-stream per-thread`): an ordinary blocking stream per host thread.
    PerThreadDefault,
}

/// `CU_STREAM_LEGACY`: the legacy default stream, named explicitly (whatever the build's
/// default stream is).
const CU_STREAM_LEGACY: usize = 0x1;
/// `CU_STREAM_PER_THREAD`: the calling thread's per-thread default stream.
const CU_STREAM_PER_THREAD: usize = 0x2;

pub(crate) struct StreamInner {
    raw: cu::CUstream,
    name: String,
    kind: StreamKind,
    observer: RefCell<Option<Rc<dyn Observer>>>,
    // Last: the context outlives the stream it destroys in `drop`.
    context: Context,
}

impl StreamInner {
    pub(crate) fn synchronize(&self) -> Result<()> {
        // The legacy and per-thread handles mean the current context's stream.
        self.context.bind()?;
        // SAFETY: `raw` is a live stream (or the legacy default stream) of a live context.
        unsafe { driver::stream_synchronize(self.raw) }.named_on("cuStreamSynchronize", &self.name)
    }
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        if self.kind == StreamKind::Blocking || self.kind == StreamKind::NonBlocking {
            // SAFETY: we own `raw`; work still queued completes after destroy (driver docs).
            let _ = unsafe { driver::stream_destroy(self.raw) };
        }
    }
}

/// A CUDA stream: an in-order queue of GPU work.
pub struct Stream {
    inner: Rc<StreamInner>,
}

impl Stream {
    /// A blocking stream at the default priority (`cudaStreamCreate`).
    pub fn new(on: &impl AsContext, name: impl Into<String>) -> Result<Stream> {
        Self::create(on.context(), name.into(), StreamKind::Blocking, 0)
    }

    /// A stream that does not synchronize with the legacy default stream.
    pub fn non_blocking(on: &impl AsContext, name: impl Into<String>) -> Result<Stream> {
        Self::create(on.context(), name.into(), StreamKind::NonBlocking, 0)
    }

    /// A blocking stream with a priority; lower numbers are greater priorities (see
    /// [`DeviceInfo::priority_range`](crate::runtime::context::DeviceInfo)).
    pub fn with_priority(
        on: &impl AsContext,
        name: impl Into<String>,
        priority: i32,
    ) -> Result<Stream> {
        Self::create(on.context(), name.into(), StreamKind::Blocking, priority)
    }

    /// A non-blocking stream with a priority.
    pub fn non_blocking_with_priority(
        on: &impl AsContext,
        name: impl Into<String>,
        priority: i32,
    ) -> Result<Stream> {
        Self::create(on.context(), name.into(), StreamKind::NonBlocking, priority)
    }

    /// The legacy default stream (`0` in `<<<g, b, s, 0>>>`). Dropping it destroys nothing.
    pub fn legacy_default(on: &impl AsContext) -> Stream {
        Self::special(on, 0, "legacy default stream", StreamKind::LegacyDefault)
    }

    /// The legacy default stream by its explicit handle (`cudaStreamLegacy`): the same one
    /// stream from every host thread.
    pub fn legacy(on: &impl AsContext) -> Stream {
        Self::special(on, CU_STREAM_LEGACY, "legacy default stream", StreamKind::LegacyDefault)
    }

    /// The default stream of the host thread that enqueues on it (`cudaStreamPerThread`):
    /// each thread gets its own, which waits for no other thread's. It still synchronizes
    /// with the legacy default stream, as a blocking stream does. Use the handle on the
    /// thread that made it (it is not `Send`); the context must be current there, as it is
    /// on a [`Worker`](crate::runtime::Worker)'s thread.
    pub fn per_thread_default(on: &impl AsContext) -> Stream {
        let name = "per-thread default stream";
        Self::special(on, CU_STREAM_PER_THREAD, name, StreamKind::PerThreadDefault)
    }

    fn special(on: &impl AsContext, handle: usize, name: &str, kind: StreamKind) -> Stream {
        Stream {
            inner: Rc::new(StreamInner {
                raw: handle as cu::CUstream,
                name: name.into(),
                kind,
                observer: RefCell::new(None),
                context: on.context().clone(),
            }),
        }
    }

    fn create(context: &Context, name: String, kind: StreamKind, priority: i32) -> Result<Stream> {
        let flags = match kind {
            StreamKind::NonBlocking => cu::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
            _ => cu::CUstream_flags::CU_STREAM_DEFAULT as u32,
        };
        context.bind()?;
        let raw = driver::stream_create_with_priority(flags, priority)
            .named_on("cuStreamCreateWithPriority", &name)?;
        Ok(Stream {
            inner: Rc::new(StreamInner {
                raw,
                name,
                kind,
                observer: RefCell::new(None),
                context: context.clone(),
            }),
        })
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn kind(&self) -> StreamKind {
        self.inner.kind
    }

    pub fn context(&self) -> &Context {
        &self.inner.context
    }

    /// The raw handle, for driver calls this module does not wrap.
    pub fn as_raw(&self) -> cu::CUstream {
        self.inner.raw
    }

    /// Another handle to this same stream (it is destroyed when the last handle goes): for
    /// the lab, which observes a lesson's streams while the lesson runs.
    pub fn handle(&self) -> Stream {
        Stream { inner: Rc::clone(&self.inner) }
    }

    /// A second owner of this stream, for the host buffers its copies use: they record
    /// their events on it.
    pub(crate) fn share(&self) -> Rc<dyn Queue<Event>> {
        Rc::clone(&self.inner) as Rc<dyn Queue<Event>>
    }

    /// Calls `observer` around every following copy, launch and host function on this
    /// stream, until [`Stream::unobserve`].
    pub fn observe(&self, observer: Rc<dyn Observer>) {
        *self.inner.observer.borrow_mut() = Some(observer);
    }

    pub fn unobserve(&self) {
        *self.inner.observer.borrow_mut() = None;
    }

    /// The observer attached to this stream, if any.
    pub(crate) fn observer(&self) -> Option<Rc<dyn Observer>> {
        self.inner.observer.borrow().clone()
    }

    /// Whether an observer is attached (no clone of it: for checks on the hot path).
    pub(crate) fn is_observed(&self) -> bool {
        self.inner.observer.borrow().is_some()
    }

    /// Checks a driver status, naming this stream in the error.
    pub fn check(&self, status: cu::CUresult, op: &str) -> Result<()> {
        check(status, op, Some(&self.inner.name))
    }

    /// Enqueues one operation through the attached observer, if any. Every copy, launch and
    /// host function in streamlab goes through here.
    pub(crate) fn enqueue(&self, op: Op<'_>, mut call: impl FnMut() -> Result<()>) -> Result<()> {
        self.inner.context.bind()?;
        let observer = self.inner.observer.borrow().clone();
        match observer {
            None => call(),
            Some(o) => o.observe(self, &op, &mut call),
        }
    }

    /// Blocks the host until all work queued so far on this stream is done.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.synchronize()
    }

    /// `true` when all work queued so far has finished (`cudaStreamQuery`), without blocking.
    pub fn is_idle(&self) -> Result<bool> {
        self.inner.context.bind()?;
        // SAFETY: `raw` is a live stream.
        let idle = unsafe { driver::stream_query(self.inner.raw) };
        if not_ready(&idle) {
            return Ok(false);
        }
        idle.named_on("cuStreamQuery", self.name()).map(|()| true)
    }

    /// Work queued on this stream after this call waits until `event` has completed. The
    /// event may belong to another GPU's context; the call is made in this stream's.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        self.inner.context.bind()?;
        // SAFETY: both handles are live.
        let waited = unsafe { driver::stream_wait_event(self.inner.raw, event.as_raw()) };
        waited.named_on("cuStreamWaitEvent", self.name())
    }

    /// Enqueues a host function (`cuLaunchHostFunc`): it runs on a driver thread once all
    /// earlier work on this stream is done, and later work waits for it to return. It must
    /// not call CUDA: the driver thread would deadlock or fail. Refused during a graph
    /// capture: a graph would run the closure at every launch, and it runs only once.
    pub fn launch_host_fn<F: FnOnce() + Send + 'static>(&self, f: F) -> Result<()> {
        if in_flight::capturing() {
            return Err(Error::Capture {
                op: "cuLaunchHostFunc".into(),
                stream: Some(self.name().to_string()),
                status: "active".into(),
                cause: Box::new(t!("error.capture.no_host_functions")),
            });
        }
        let op = Op { kind: OpKind::HostFn, label: "host function", bytes: 0, launch: None };
        let observer = self.inner.observer.borrow().clone();
        let f: Box<dyn FnOnce() + Send> = match observer {
            Some(o) => o.wrap_host_fn(self, Box::new(f)),
            None => Box::new(f),
        };
        let mut f = Some(f);
        self.enqueue(op, || {
            let Some(f) = f.take() else {
                return Err(Error::Internal("a host function was enqueued twice".into()));
            };
            let boxed: Box<Box<dyn FnOnce() + Send>> = Box::new(f);
            let data = Box::into_raw(boxed) as *mut c_void;
            // SAFETY: `trampoline` matches CUhostFn and takes back ownership of `data` exactly
            // once, when the driver calls it; on failure we take it back here instead.
            let launched =
                unsafe { driver::launch_host_func(self.inner.raw, Some(trampoline), data) };
            if launched.is_err() {
                // SAFETY: the driver did not accept the function, so it will never call it.
                drop(unsafe { Box::from_raw(data as *mut Box<dyn FnOnce() + Send>) });
            }
            launched.named_on("cuLaunchHostFunc", self.name())
        })
    }
}

unsafe extern "C" fn trampoline(data: *mut c_void) {
    // SAFETY: `data` came from Box::into_raw in `launch_host_fn`, and the driver calls each
    // host function of a stream once (captured ones are refused).
    let f = unsafe { Box::from_raw(data as *mut Box<dyn FnOnce() + Send>) };
    // A panic must not unwind into the driver's thread.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream({:?}, {:?})", self.inner.name, self.inner.kind)
    }
}

/// Makes every stream in `waiters` wait for everything queued so far on `on`, through
/// `event` (recorded on `on`): the fork of a fork/join.
pub fn fork(event: &Event, on: &Stream, waiters: &[&Stream]) -> Result<()> {
    event.record(on)?;
    waiters.iter().try_for_each(|w| w.wait_event(event))
}

/// Makes `on` wait for everything queued so far on each of `others`, through one event per
/// stream (`events[i]` is recorded on `others[i]`): the join.
pub fn join(events: &[Event], on: &Stream, others: &[&Stream]) -> Result<()> {
    if events.len() < others.len() {
        return Err(Error::Internal(format!(
            "join: {} events for {} streams",
            events.len(),
            others.len()
        )));
    }
    for (e, s) in events.iter().zip(others) {
        e.record(s)?;
        on.wait_event(e)?;
    }
    Ok(())
}

impl Event {
    /// Marks the point in `stream` reached once all work queued before it is done. The
    /// stream must be of the event's context (a record on another GPU's stream is refused
    /// by the driver); the call is made in that context, whichever GPU was used last.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        // SAFETY: `stream` is live, in its own context.
        unsafe { self.record_raw(stream.as_raw(), stream.context(), stream.name()) }
    }
}

impl in_flight::Marker for Event {
    fn wait(&self) -> Result<()> {
        self.synchronize()
    }
}

/// A stream as the host buffers see it: they record their own events on it after each copy.
impl Queue<Event> for StreamInner {
    fn id(&self) -> usize {
        self as *const StreamInner as usize
    }

    fn is_capturing(&self) -> bool {
        // Only `graph::capture` begins a capture, and it tells this thread's `in_flight`.
        if !in_flight::capturing() {
            return false;
        }
        // SAFETY: `raw` is a live stream (or a special handle) of a live context.
        let status = unsafe { driver::stream_is_capturing(self.raw) };
        // Not known: recorded, and a wait on a captured event then fails with an error.
        matches!(status, Ok(s) if s != 0)
    }

    fn can_record(&self, event: &Event) -> bool {
        event.context().as_raw() == self.context.as_raw()
    }

    fn new_marker(&self) -> Result<Event> {
        Event::without_timing(&self.context)
    }

    fn record(&self, event: &Event) -> Result<()> {
        // SAFETY: `raw` is a live stream of `context` (or one of its special handles).
        unsafe { event.record_raw(self.raw, &self.context, &self.name) }
    }

    fn synchronize(&self) -> Result<()> {
        StreamInner::synchronize(self)
    }
}

/// The asynchronous copies. They are safe: a host buffer records an event after each copy of
/// it and waits for that event before the host touches it (see [`crate::runtime::memory`]).
impl Stream {
    /// Enqueues a host-to-device copy (`cudaMemcpyAsync(d, h, bytes, H2D, s)`). From pinned
    /// memory it returns at once; from pageable memory the driver first stages the data, and
    /// returns after that.
    pub fn copy_to_device<'h, 'd, T: Pod>(
        &self,
        src: impl Into<HostView<'h, T>>,
        dst: impl Into<DeviceView<'d, T>>,
    ) -> Result<()> {
        let (src, dst) = (src.into(), dst.into());
        check_lengths(src.len(), dst.len(), "cuMemcpyHtoDAsync", self.name())?;
        let host = src.admit(Access::DeviceReads)?;
        let op = Op {
            kind: OpKind::CopyToDevice,
            label: if src.is_pinned() { "copy to device" } else { "copy to device (pageable)" },
            bytes: src.bytes(),
            launch: None,
        };
        self.enqueue(op, || {
            // SAFETY: lengths match; the host buffer stays allocated until this copy is done
            // (it records an event after it and waits for that event before it is freed or
            // lent to the host for writing).
            let copied = unsafe {
                driver::memcpy_htod_async(dst.device_ptr(), host.cast(), src.bytes(), self.as_raw())
            };
            copied.named_on("cuMemcpyHtoDAsync", self.name())
        })?;
        src.in_flight_on(self.share(), Access::DeviceReads);
        Ok(())
    }

    /// Enqueues a device-to-host copy (`cudaMemcpyAsync(h, d, bytes, D2H, s)`).
    pub fn copy_to_host<'h, 'd, T: Pod>(
        &self,
        src: impl Into<DeviceView<'d, T>>,
        dst: impl Into<HostView<'h, T>>,
    ) -> Result<()> {
        let (src, dst) = (src.into(), dst.into());
        check_lengths(dst.len(), src.len(), "cuMemcpyDtoHAsync", self.name())?;
        let host = dst.admit(Access::DeviceWrites)?;
        let op = Op {
            kind: OpKind::CopyToHost,
            label: if dst.is_pinned() { "copy to host" } else { "copy to host (pageable)" },
            bytes: dst.bytes(),
            launch: None,
        };
        self.enqueue(op, || {
            // SAFETY: lengths match; the host buffer admitted a device write (no host borrow
            // is live) and will wait for the event it records after this copy before it is
            // read, written or freed.
            let copied = unsafe {
                driver::memcpy_dtoh_async(host.cast(), src.device_ptr(), dst.bytes(), self.as_raw())
            };
            copied.named_on("cuMemcpyDtoHAsync", self.name())
        })?;
        dst.in_flight_on(self.share(), Access::DeviceWrites);
        Ok(())
    }

    /// Enqueues a device-to-device copy (`cudaMemcpyAsync(..., cudaMemcpyDeviceToDevice, s)`).
    pub fn copy_on_device<'a, 'b, T: Pod>(
        &self,
        src: impl Into<DeviceView<'a, T>>,
        dst: impl Into<DeviceView<'b, T>>,
    ) -> Result<()> {
        let (src, dst) = (src.into(), dst.into());
        check_lengths(src.len(), dst.len(), "cuMemcpyDtoDAsync", self.name())?;
        let op = Op {
            kind: OpKind::CopyOnDevice,
            label: "copy on device",
            bytes: src.bytes(),
            launch: None,
        };
        self.enqueue(op, || {
            // SAFETY: lengths match; both are live device allocations (freeing one waits).
            let copied = unsafe {
                driver::memcpy_dtod_async(
                    dst.device_ptr(),
                    src.device_ptr(),
                    src.bytes(),
                    self.as_raw(),
                )
            };
            copied.named_on("cuMemcpyDtoDAsync", self.name())
        })
    }
}

impl Stream {
    /// Enqueues a copy from one GPU's memory to another's (`cudaMemcpyPeerAsync`). With peer
    /// access on ([`crate::runtime::peer::enable_access`]) it goes over the link directly;
    /// without, the driver stages it through host memory.
    pub fn copy_peer<'a, 'b, T: Pod>(
        &self,
        src: impl Into<DeviceView<'a, T>>,
        dst: impl Into<DeviceView<'b, T>>,
    ) -> Result<()> {
        let (src, dst) = (src.into(), dst.into());
        check_lengths(src.len(), dst.len(), "cuMemcpyPeerAsync", self.name())?;
        let op =
            Op { kind: OpKind::CopyPeer, label: "peer copy", bytes: src.bytes(), launch: None };
        self.enqueue(op, || {
            // SAFETY: lengths match; both are live device allocations of live contexts
            // (freeing either waits for the device).
            let copied = unsafe {
                driver::memcpy_peer_async(
                    dst.device_ptr(),
                    dst.context().as_raw(),
                    src.device_ptr(),
                    src.context().as_raw(),
                    src.bytes(),
                    self.as_raw(),
                )
            };
            copied.named_on("cuMemcpyPeerAsync", self.name())
        })
    }
}

fn check_lengths(host: usize, device: usize, op: &str, stream: &str) -> Result<()> {
    if host == device {
        Ok(())
    } else {
        Err(Error::Internal(format!(
            "{op} on stream \"{stream}\": the source has {host} elements, the destination {device}"
        )))
    }
}
