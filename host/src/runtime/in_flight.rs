//! What is in flight: the host buffers that device work still uses, and who may touch them
//! when. A host buffer remembers, for each stream that has copies of it in flight, an event
//! recorded right after the latest of them; the host waits for those events, not for the
//! streams, before it reads, writes or frees the buffer. So a read waits for the buffer's own
//! last copy, as `cudaEventSynchronize` on an event recorded after it would in CUDA C++, and
//! not for later work queued on the same stream. A graph capture remembers every buffer its
//! copies and kernels use, so the graph keeps them alive and each launch marks them in flight
//! again. This is what makes asynchronous copies safe to call: no lesson needs `unsafe` to
//! enqueue from borrowed memory.
//!
//! [`InFlight`] is the bookkeeping, generic over the marker (an event on a GPU, a stand-in in
//! the tests below) so that it is tested without a GPU.
use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;

use crate::runtime::error::{Error, Result};
use crate::runtime::event::Event;
use crate::t;

/// A point in a stream the host can wait for: an event recorded after a copy.
pub(crate) trait Marker {
    /// Blocks the host until the work queued before the marker's last record is done.
    fn wait(&self) -> Result<()>;
}

/// A stream, as the host buffers it copies see it.
pub(crate) trait Queue<M> {
    /// Tells two handles of the same stream apart from two streams.
    fn id(&self) -> usize;
    /// Whether work enqueued here now is being captured into a graph: it does not run, so
    /// nothing is in flight until the graph is launched (and the launch marks it then).
    fn is_capturing(&self) -> bool;
    /// Whether `marker` can be recorded here (an event, on a stream of its own context).
    fn can_record(&self, marker: &M) -> bool;
    /// A new marker that can be recorded here.
    fn new_marker(&self) -> Result<M>;
    /// Records `marker` after all the work queued here so far.
    fn record(&self, marker: &M) -> Result<()>;
    /// Waits for all the work queued here so far: what is waited for when no marker could
    /// be recorded, which is wider but as safe.
    fn synchronize(&self) -> Result<()>;
}

/// How the device uses a host buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The device reads it (a copy to the device).
    DeviceReads,
    /// The device writes it (a copy to the host).
    DeviceWrites,
}

/// What the host is about to do with a buffer, and so which copies it must wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostUse {
    /// Read it: wait for the copies that write it; copies that only read it may go on.
    Read,
    /// Write or free it: wait for every copy of it.
    WriteOrFree,
}

/// The copies of one stream that use a buffer and are still in flight.
struct OnStream<M> {
    /// Held so that the stream, and with it `id`, outlives the wait.
    stream: Rc<dyn Queue<M>>,
    /// Recorded after the latest of those copies; `None` when no marker could be recorded,
    /// and then the whole stream is waited for.
    marker: Option<M>,
    /// Whether any of them writes the buffer.
    writes: bool,
}

/// The copies of one host buffer still in flight: per stream, a marker recorded after the
/// latest one. Markers are reused: the one a stream was waited through goes back to `spare`
/// for the next copy, so a buffer used on one stream records into one marker all its life.
pub(crate) struct InFlight<M> {
    on: Vec<OnStream<M>>,
    spare: Vec<M>,
}

impl<M: Marker> InFlight<M> {
    /// Nothing in flight; `spare` are markers made ahead (the buffer's own event).
    pub(crate) fn new(spare: Vec<M>) -> InFlight<M> {
        InFlight { on: Vec::new(), spare }
    }

    /// After a copy that `access`es the buffer was enqueued on `stream`: records the
    /// stream's marker after it. Never fails: where no marker can be recorded, the host
    /// waits for the whole stream instead.
    pub(crate) fn enqueued(&mut self, stream: Rc<dyn Queue<M>>, access: Access) {
        if stream.is_capturing() {
            return;
        }
        let writes = access == Access::DeviceWrites;
        let at = match self.on.iter().position(|o| o.stream.id() == stream.id()) {
            Some(at) => at,
            None => {
                let marker = self.marker_for(stream.as_ref());
                self.on.push(OnStream { stream, marker, writes: false });
                self.on.len() - 1
            }
        };
        let on = &mut self.on[at];
        on.writes |= writes;
        // A marker whose record failed may still hold an earlier point: drop it.
        on.marker = on.marker.take().filter(|m| on.stream.record(m).is_ok());
    }

    /// A spare marker `stream` can record, or a new one; `None` if none can be made.
    fn marker_for(&mut self, stream: &dyn Queue<M>) -> Option<M> {
        match self.spare.iter().position(|m| stream.can_record(m)) {
            Some(at) => Some(self.spare.swap_remove(at)),
            None => stream.new_marker().ok(),
        }
    }

    /// Waits for the copies `host_use` must not race with. On an error, what was not waited
    /// for stays, and the next access waits for it again.
    pub(crate) fn wait(&mut self, host_use: HostUse) -> Result<()> {
        let mut at = 0;
        while at < self.on.len() {
            let on = &self.on[at];
            if host_use == HostUse::Read && !on.writes {
                at += 1;
                continue;
            }
            match &on.marker {
                Some(marker) => marker.wait()?,
                None => on.stream.synchronize()?,
            }
            let done = self.on.swap_remove(at);
            self.spare.extend(done.marker);
        }
        Ok(())
    }

    /// How many streams have copies of the buffer in flight (for the tests).
    #[cfg(test)]
    fn streams(&self) -> usize {
        self.on.len()
    }
}

/// A host buffer as the device side sees it.
pub(crate) trait Tracked {
    /// Refuses (with an error, not UB) when the host holds a borrow that the access would
    /// race with: any borrow for a device write, a mutable one for a device read.
    fn admit(&self, access: Access) -> Result<()>;
    /// Remembers that `stream` has work in flight that `access`es this buffer, enqueued
    /// just now: the host will wait for the point after it.
    fn in_flight_on(&self, stream: Rc<dyn Queue<Event>>, access: Access);
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
            return Err(Error::InvalidInput(t!("error.runtime.nested_capture")));
        }
        *c = Some(Vec::new());
        Ok(())
    })
}

/// Stops recording and returns what the capture used.
pub(crate) fn end_capture() -> Vec<Kept> {
    CAPTURE.with(|c| c.borrow_mut().take().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};
    use std::rc::Rc;

    use super::*;

    /// What the fake streams and markers did, in order.
    type Log = Rc<RefCell<Vec<String>>>;

    /// A marker: its number, the context it belongs to, and the log.
    struct FakeMarker {
        number: usize,
        context: usize,
        fails: bool,
        log: Log,
    }

    impl Marker for FakeMarker {
        fn wait(&self) -> Result<()> {
            self.log.borrow_mut().push(format!("wait marker {}", self.number));
            if self.fails {
                return Err(Error::Internal("the wait failed".into()));
            }
            Ok(())
        }
    }

    struct FakeStream {
        id: usize,
        context: usize,
        capturing: bool,
        records_fail: bool,
        made: Cell<usize>,
        log: Log,
    }

    impl Queue<FakeMarker> for FakeStream {
        fn id(&self) -> usize {
            self.id
        }
        fn is_capturing(&self) -> bool {
            self.capturing
        }
        fn can_record(&self, marker: &FakeMarker) -> bool {
            marker.context == self.context
        }
        fn new_marker(&self) -> Result<FakeMarker> {
            self.made.set(self.made.get() + 1);
            let number = 100 * self.id + self.made.get();
            Ok(FakeMarker { number, context: self.context, fails: false, log: self.log.clone() })
        }
        fn record(&self, marker: &FakeMarker) -> Result<()> {
            self.log.borrow_mut().push(format!("record marker {} on {}", marker.number, self.id));
            if self.records_fail {
                return Err(Error::Internal("the record failed".into()));
            }
            Ok(())
        }
        fn synchronize(&self) -> Result<()> {
            self.log.borrow_mut().push(format!("synchronize {}", self.id));
            Ok(())
        }
    }

    fn stream(id: usize, context: usize, log: &Log) -> FakeStream {
        FakeStream {
            id,
            context,
            capturing: false,
            records_fail: false,
            made: Cell::new(0),
            log: log.clone(),
        }
    }

    /// A buffer of context 0 with its own marker, number 1, made ahead.
    fn buffer(log: &Log) -> InFlight<FakeMarker> {
        let own = FakeMarker { number: 1, context: 0, fails: false, log: log.clone() };
        InFlight::new(vec![own])
    }

    fn taken(log: &Log) -> Vec<String> {
        std::mem::take(&mut *log.borrow_mut())
    }

    #[test]
    fn copies_on_one_stream_record_into_the_buffers_own_marker_and_a_wait_uses_it() {
        let log = Log::default();
        let (mut buffer, s) = (buffer(&log), Rc::new(stream(1, 0, &log)));
        buffer.enqueued(s.clone(), Access::DeviceReads);
        buffer.enqueued(s.clone(), Access::DeviceWrites);
        buffer.wait(HostUse::Read).unwrap();
        // The same marker each time, and the stream itself never synchronized.
        let expected = ["record marker 1 on 1", "record marker 1 on 1", "wait marker 1"];
        assert_eq!(taken(&log), expected);
        assert_eq!(s.made.get(), 0, "no marker made per copy");
        // Waited: nothing is left to wait for, and the marker is reused.
        buffer.wait(HostUse::WriteOrFree).unwrap();
        assert!(taken(&log).is_empty());
        buffer.enqueued(s.clone(), Access::DeviceWrites);
        assert_eq!(taken(&log), ["record marker 1 on 1"]);
    }

    #[test]
    fn reading_waits_only_for_copies_that_write_the_buffer() {
        let log = Log::default();
        let mut buffer = buffer(&log);
        let (reads_it, writes_it) = (Rc::new(stream(1, 0, &log)), Rc::new(stream(2, 0, &log)));
        buffer.enqueued(reads_it.clone(), Access::DeviceReads);
        buffer.enqueued(writes_it.clone(), Access::DeviceWrites);
        taken(&log);
        buffer.wait(HostUse::Read).unwrap();
        assert_eq!(taken(&log), ["wait marker 201"]);
        assert_eq!(buffer.streams(), 1, "the copy that reads it is still in flight");
        // Writing (or freeing) waits for the copy that reads it too.
        buffer.wait(HostUse::WriteOrFree).unwrap();
        assert_eq!(taken(&log), ["wait marker 1"]);
        assert_eq!(buffer.streams(), 0);
    }

    #[test]
    fn each_stream_gets_a_marker_of_its_own_context() {
        let log = Log::default();
        let mut buffer = buffer(&log);
        let (other_gpu, same_gpu) = (Rc::new(stream(7, 1, &log)), Rc::new(stream(2, 0, &log)));
        buffer.enqueued(other_gpu.clone(), Access::DeviceReads);
        buffer.enqueued(same_gpu.clone(), Access::DeviceReads);
        // The buffer's own marker (context 0) cannot be recorded on context 1's stream.
        assert_eq!(taken(&log), ["record marker 701 on 7", "record marker 1 on 2"]);
        buffer.wait(HostUse::WriteOrFree).unwrap();
        let mut waited = taken(&log);
        waited.sort();
        assert_eq!(waited, ["wait marker 1", "wait marker 701"]);
        // Both go back to the spares and are reused, each by a stream of its context.
        buffer.enqueued(Rc::new(stream(3, 1, &log)), Access::DeviceWrites);
        buffer.enqueued(Rc::new(stream(4, 0, &log)), Access::DeviceWrites);
        assert_eq!(taken(&log), ["record marker 701 on 3", "record marker 1 on 4"]);
    }

    #[test]
    fn a_failed_record_falls_back_to_the_whole_stream() {
        let log = Log::default();
        let mut buffer = buffer(&log);
        let s = Rc::new(FakeStream { records_fail: true, ..stream(5, 0, &log) });
        buffer.enqueued(s.clone(), Access::DeviceWrites);
        buffer.wait(HostUse::Read).unwrap();
        assert_eq!(taken(&log), ["record marker 1 on 5", "synchronize 5"]);
    }

    #[test]
    fn a_captured_copy_is_not_in_flight() {
        let log = Log::default();
        let mut buffer = buffer(&log);
        let s = Rc::new(FakeStream { capturing: true, ..stream(6, 0, &log) });
        buffer.enqueued(s, Access::DeviceWrites);
        buffer.wait(HostUse::WriteOrFree).unwrap();
        assert!(taken(&log).is_empty());
        assert_eq!(buffer.streams(), 0);
    }

    #[test]
    fn what_a_failed_wait_left_is_waited_for_again() {
        let log = Log::default();
        let failing = FakeMarker { number: 9, context: 0, fails: true, log: log.clone() };
        let mut buffer = InFlight::new(vec![failing]);
        buffer.enqueued(Rc::new(stream(1, 0, &log)), Access::DeviceWrites);
        assert!(buffer.wait(HostUse::Read).is_err());
        assert_eq!(buffer.streams(), 1);
        assert!(buffer.wait(HostUse::WriteOrFree).is_err());
        assert_eq!(taken(&log), ["record marker 9 on 1", "wait marker 9", "wait marker 9"]);
    }
}
