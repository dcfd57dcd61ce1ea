//! Events: markers in a stream, for timing, for dependencies between streams, and for the
//! host to wait for one point of a stream instead of all of it. [`Event::record`] takes a
//! [`Stream`](crate::runtime::stream::Stream), so it is written beside the stream (in
//! `stream.rs`); the rest is here.
//!
//! | CUDA C++                                     | streamlab                                   |
//! |----------------------------------------------|---------------------------------------------|
//! | `cudaEventCreate` / `cudaEventRecord(e, s)`  | `Event::new(&gpu)` / `e.record(&s)`         |
//! | `cudaEventSynchronize(e)` / `cudaEventQuery(e)` | `e.synchronize()` / `e.is_complete()`    |
//! | `cudaEventElapsedTime(&ms, a, b)`            | `b.elapsed_ms(&a)`                          |
use cudarc::driver::sys as cu;

use crate::runtime::context::{AsContext, Context};
use crate::runtime::driver::{self, DriverResult};
use crate::runtime::error::{DriverCode, Named, Result};

/// A CUDA event: a marker in a stream, for timing and for cross-stream dependencies.
pub struct Event {
    raw: cu::CUevent,
    context: Context,
}

impl Event {
    /// An event with timing enabled (`cudaEventCreate`).
    pub fn new(on: &impl AsContext) -> Result<Event> {
        Self::with_flags(on, cu::CUevent_flags::CU_EVENT_DEFAULT as u32, "cuEventCreate")
    }

    /// An event whose `synchronize` puts the host thread to sleep instead of spinning
    /// (`cudaEventBlockingSync`).
    pub fn blocking_sync(on: &impl AsContext) -> Result<Event> {
        Self::with_flags(
            on,
            cu::CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32,
            "cuEventCreate(BLOCKING_SYNC)",
        )
    }

    /// An event without timing (`cudaEventDisableTiming`): the cheapest for dependencies.
    pub fn without_timing(on: &impl AsContext) -> Result<Event> {
        Self::with_flags(
            on,
            cu::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32,
            "cuEventCreate(DISABLE_TIMING)",
        )
    }

    fn with_flags(on: &impl AsContext, flags: u32, op: &str) -> Result<Event> {
        on.context().bind()?;
        // The context is current.
        let raw = driver::event_create(flags).named(op)?;
        Ok(Event { raw, context: on.context().clone() })
    }

    pub fn as_raw(&self) -> cu::CUevent {
        self.raw
    }

    /// The context (device) the event belongs to: it can be recorded on that context's
    /// streams only.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// [`Event::record`] on a raw stream of `context`, named `name` in errors.
    ///
    /// # Safety
    /// `raw` is a live stream of `context` (or that context's legacy or per-thread handle).
    pub(crate) unsafe fn record_raw(
        &self,
        raw: cu::CUstream,
        context: &Context,
        name: &str,
    ) -> Result<()> {
        context.bind()?;
        // SAFETY: the event is live; the stream is the caller's contract.
        let recorded = unsafe { driver::event_record(self.raw, raw) };
        recorded.named_on("cuEventRecord", name)
    }

    /// Blocks the host until the event has completed.
    pub fn synchronize(&self) -> Result<()> {
        self.context.bind()?;
        // SAFETY: live handle.
        unsafe { driver::event_synchronize(self.raw) }.named("cuEventSynchronize")
    }

    /// `true` once the event has completed (`cudaEventQuery`), without blocking.
    pub fn is_complete(&self) -> Result<bool> {
        self.context.bind()?;
        // SAFETY: live handle.
        let complete = unsafe { driver::event_query(self.raw) };
        if not_ready(&complete) {
            return Ok(false);
        }
        complete.named("cuEventQuery").map(|()| true)
    }

    /// Milliseconds from `start` to this event; both must have completed.
    pub fn elapsed_ms(&self, start: &Event) -> Result<f64> {
        self.context.bind()?;
        // SAFETY: both handles live.
        let ms = unsafe { driver::event_elapsed_time(start.raw, self.raw) }
            .named("cuEventElapsedTime")?;
        Ok(ms as f64)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: we own `raw`; destroying a recorded event is allowed.
        let _ = unsafe { driver::event_destroy(self.raw) };
    }
}

/// `CUDA_ERROR_NOT_READY`: a query's "not yet", not an error.
pub(crate) fn not_ready(queried: &DriverResult<()>) -> bool {
    matches!(queried, Err(status) if *status as u32 == DriverCode::NOT_READY)
}
