//! What is in flight: the host buffers that device work still uses, and who may touch them
//! when. A host buffer remembers which streams have copies of it in flight, and the host
//! waits for them before it reads or writes the buffer; a graph capture remembers every buffer
//! its copies and kernels use, so the graph keeps them alive and each launch marks them in
//! flight again. This is what makes asynchronous copies safe to call: no lesson needs
//! `unsafe` to enqueue from borrowed memory.
use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;

use crate::runtime::error::{Error, Result};

/// Something the host can wait for: a stream with work in flight.
pub(crate) trait Pending {
    fn wait(&self) -> Result<()>;
    /// Tells two handles of the same stream apart from two streams.
    fn id(&self) -> usize;
}

/// How the device uses a host buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The device reads it (a copy to the device).
    DeviceReads,
    /// The device writes it (a copy to the host).
    DeviceWrites,
}

/// A host buffer as the device side sees it.
pub(crate) trait Tracked {
    /// Refuses (with an error, not UB) when the host holds a borrow that the access would
    /// race with: any borrow for a device write, a mutable one for a device read.
    fn admit(&self, access: Access) -> Result<()>;
    /// Remembers that `stream` has work in flight on this buffer.
    fn in_flight_on(&self, stream: Rc<dyn Pending>);
}

/// What a captured graph holds on to.
pub(crate) enum Kept {
    Host(Rc<dyn Tracked>, Access),
    /// Held, never read: it keeps a device allocation alive.
    Device(#[allow(dead_code)] Rc<dyn Any>),
}

thread_local! {
    static CAPTURE: RefCell<Option<Vec<Kept>>> = const { RefCell::new(None) };
}

/// Whether this thread is capturing a graph through `graph::capture`.
pub(crate) fn capturing() -> bool {
    CAPTURE.with(|c| c.borrow().is_some())
}

/// Records `kept` in the capture in progress, if any.
pub(crate) fn keep(kept: impl FnOnce() -> Kept) {
    CAPTURE.with(|c| {
        if let Some(list) = c.borrow_mut().as_mut() {
            list.push(kept());
        }
    });
}

/// Starts recording; one capture per thread at a time.
pub(crate) fn begin_capture() -> Result<()> {
    CAPTURE.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_some() {
            return Err(Error::InvalidInput(
                "a graph capture is already in progress on this thread: captures do not nest"
                    .into(),
            ));
        }
        *c = Some(Vec::new());
        Ok(())
    })
}

/// Stops recording and returns what the capture used.
pub(crate) fn end_capture() -> Vec<Kept> {
    CAPTURE.with(|c| c.borrow_mut().take().unwrap_or_default())
}
