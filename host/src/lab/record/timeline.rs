//! Per-stream timelines: the events recorder, and the ASCII rows for the terminal.
//!
//! [`Timeline::record`] observes streams while a version runs (no lesson code changes) by
//! recording a pair of events around each operation: the fallback where CUPTI cannot be
//! loaded (see [`crate::lab::record::recorder`]). [`render`] draws one row per stream from any
//! recorder's spans, which is how overlap becomes visible:
//!
//! ```text
//! overlap-0 |HHHHCCCCCCDDDD                |
//! overlap-1 |    HHHHCCCCCCDDDD            |
//! ```
//!
//! Two things the events recorder must do for several GPUs:
//! - The driver times two events only within one device ("cudaEventElapsedTime() will fail
//!   if the two input events are associated to different devices", CUDA C++ Programming
//!   Guide, "Stream and Event Behavior"). So each device's spans are timed against a
//!   reference event of that device, recorded on an idle stream just before the run, and the
//!   devices are lined up by the host clock at which their references were recorded
//!   ([`on_one_clock`]). That alignment is approximate, to within the few microseconds a
//!   record takes to reach each GPU, and the recording's [`Source`] says so.
//! - NCCL enqueues collectives issued inside `ncclGroupStart`/`ncclGroupEnd` only at the
//!   group's end (NCCL docs, "Group Calls"), so the end event of such an all-reduce is
//!   recorded after `ncclGroupEnd` ([`Observer::group_end`]); recorded right after the
//!   `ncclAllReduce` call, it would come before the all-reduce and give it zero width.
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

pub use crate::lab::record::span::Span;
use crate::lab::record::span::{current_name, rows, Source, Work};
use crate::runtime::{nccl, Error, Event, Observer, Op, OpKind, Result, Stream};
use crate::t;
use crate::text::Lang;

/// The character a timeline row draws for this kind of work.
pub fn glyph(kind: Work) -> char {
    match kind {
        Work::CopyToDevice => 'H',
        Work::Kernel => 'K',
        Work::CopyToHost => 'D',
        Work::CopyOnDevice => 'd',
        Work::CopyPeer => 'P',
        Work::Memset => 'M',
        Work::HostFn => 'f',
        Work::Graph => 'G',
        Work::Collective => 'A',
    }
}

/// What an observer notes of an operation as it is enqueued: where it goes, what it is, and
/// the lesson's name for it. Both recorders start each span from one.
#[derive(Debug, Clone)]
pub struct OpNote {
    pub stream: String,
    pub device: u32,
    pub kind: Work,
    pub label: String,
    pub name: String,
    pub bytes: u64,
}

impl OpNote {
    /// The note of `op`, enqueued now on `stream`.
    pub fn of(stream: &Stream, op: &Op<'_>) -> OpNote {
        let kind = Work::from(op.kind);
        OpNote {
            stream: stream.name().to_owned(),
            device: stream.context().ordinal(),
            kind,
            label: op.label.to_owned(),
            name: current_name(kind),
            bytes: op.bytes as u64,
        }
    }
}

/// Whether `op` is an NCCL collective issued inside a group: enqueued only when the group
/// ends ([`nccl::in_group`]).
pub fn deferred(op: &Op<'_>) -> bool {
    op.kind == OpKind::Collective && nccl::in_group()
}

/// Runs `run` with `observer` attached to `streams`, and detaches it however `run` ends.
pub fn observing<T>(
    streams: &[&Stream],
    observer: Rc<dyn Observer>,
    run: impl FnOnce() -> Result<T>,
) -> Result<T> {
    for s in streams {
        s.observe(Rc::clone(&observer));
    }
    let outcome = run();
    for s in streams {
        s.unobserve();
    }
    outcome
}

/// Places spans timed per device on one clock: each entry is (`host_ms`: when the host
/// recorded the device's reference event, ms after the first device's; start and end in ms
/// after that reference). The result is in ms since the earliest start.
pub fn on_one_clock(timed: &[(f64, f64, f64)]) -> Vec<(f64, f64)> {
    let placed: Vec<(f64, f64)> = timed.iter().map(|(h, a, b)| (h + a, h + b)).collect();
    let origin = placed.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    placed.into_iter().map(|(a, b)| (a - origin, b - origin)).collect()
}

/// One device's reference event, and when the host recorded it.
struct Anchor {
    context: usize,
    event: Event,
    host_ms: f64,
}

struct Pending {
    span: Span,
    /// The context of the operation's stream (the key of its [`Anchor`]).
    context: usize,
    start: Event,
    /// Recorded after the operation, or after the NCCL group end that enqueued it.
    end: Option<Event>,
}

/// A recorder that streams call around each operation (see [`Observer`]): it brackets every
/// operation with two events. A span then starts when the stream reaches the operation, not
/// when an engine starts it, so queueing shows up as work.
pub struct Timeline {
    anchors: Vec<Anchor>,
    pending: RefCell<Vec<Pending>>,
    /// Grouped collectives waiting for their group's end: their index in `pending`, and
    /// their stream.
    grouped: RefCell<Vec<(usize, Stream)>>,
}

fn context_key(stream: &Stream) -> usize {
    stream.context().as_raw() as usize
}

impl Observer for Timeline {
    fn observe(
        &self,
        stream: &Stream,
        op: &Op<'_>,
        enqueue: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()> {
        let start = Event::new(stream.context())?;
        start.record(stream)?;
        enqueue()?;
        let end = if deferred(op) {
            let index = self.pending.borrow().len();
            self.grouped.borrow_mut().push((index, stream.handle()));
            None
        } else {
            let end = Event::new(stream.context())?;
            end.record(stream)?;
            Some(end)
        };
        let note = OpNote::of(stream, op);
        let mut span = Span::new(&note.stream, note.kind, &note.label, 0.0, 0.0);
        (span.name, span.device, span.bytes) = (note.name, note.device, note.bytes);
        span.grid = op.launch.map(|l| [l.grid.0, l.grid.1, l.grid.2]);
        span.block = op.launch.map(|l| [l.block.0, l.block.1, l.block.2]);
        if matches!(span.kind, Work::CopyToDevice | Work::CopyToHost) {
            span.memory = if op.label.contains("pageable") { "pageable" } else { "pinned" }.into();
        }
        let context = context_key(stream);
        self.pending.borrow_mut().push(Pending { span, context, start, end });
        Ok(())
    }

    /// Ends the group, then records the end event of each of its collectives on its stream:
    /// after the work `ncclGroupEnd` enqueued there.
    fn group_end(&self, end: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let grouped = std::mem::take(&mut *self.grouped.borrow_mut());
        end()?;
        for (index, stream) in grouped {
            let event = Event::new(stream.context())?;
            event.record(&stream)?;
            if let Some(p) = self.pending.borrow_mut().get_mut(index) {
                p.end = Some(event);
            }
        }
        Ok(())
    }
}

impl Timeline {
    /// A recorder for `streams`, with a reference event on each of their devices (see the
    /// module doc): the first stream of each device is synchronized, then the references
    /// are recorded one after another, each stamped with the host's clock.
    fn anchored(streams: &[&Stream]) -> Result<Timeline> {
        let mut firsts: Vec<&Stream> = Vec::new();
        for s in streams {
            if !firsts.iter().any(|f| context_key(f) == context_key(s)) {
                firsts.push(s);
            }
        }
        let mut events = Vec::new();
        for s in &firsts {
            s.synchronize()?;
            events.push(Event::new(s.context())?);
        }
        let t0 = Instant::now();
        let mut anchors = Vec::new();
        for (s, event) in firsts.iter().zip(events) {
            let before = t0.elapsed().as_secs_f64();
            event.record(s)?;
            let after = t0.elapsed().as_secs_f64();
            let host_ms = (before + after) / 2.0 * 1e3;
            anchors.push(Anchor { context: context_key(s), event, host_ms });
        }
        Ok(Timeline { anchors, pending: RefCell::default(), grouped: RefCell::default() })
    }

    /// Observes `streams` while `run` runs, then resolves what it recorded. `run` must have
    /// completed its work (synchronized) when it returns.
    pub fn record(streams: &[&Stream], run: impl FnOnce() -> Result<()>) -> Result<Vec<Span>> {
        let timeline = Rc::new(Timeline::anchored(streams)?);
        observing(streams, Rc::clone(&timeline) as Rc<dyn Observer>, run)?;
        timeline.resolve()
    }

    /// Whether the streams recorded span several devices, whose spans are then lined up by
    /// the host clock (approximately).
    pub fn across_devices(streams: &[&Stream]) -> bool {
        let Some(first) = streams.first() else { return false };
        streams.iter().any(|s| s.context().ordinal() != first.context().ordinal())
    }

    /// Every recorded operation in ms since the earliest start. All recorded work must have
    /// completed.
    pub fn resolve(&self) -> Result<Vec<Span>> {
        let pending = self.pending.borrow();
        let mut timed = Vec::with_capacity(pending.len());
        for p in pending.iter() {
            let Some(anchor) = self.anchors.iter().find(|a| a.context == p.context) else {
                return Err(Error::Internal(format!(
                    "timeline: no reference event on GPU {} (stream \"{}\" was not observed from the start)",
                    p.span.device, p.span.stream
                )));
            };
            let Some(end) = &p.end else {
                return Err(Error::Internal(format!(
                    "timeline: the {} on stream \"{}\" was issued in an NCCL group that never ended",
                    p.span.title(),
                    p.span.stream
                )));
            };
            let start_ms = p.start.elapsed_ms(&anchor.event)?;
            timed.push((anchor.host_ms, start_ms, end.elapsed_ms(&anchor.event)?));
        }
        Ok(on_one_clock(&timed)
            .into_iter()
            .zip(pending.iter())
            .map(|((start_ms, end_ms), p)| Span { start_ms, end_ms, ..p.span.clone() })
            .collect())
    }
}

/// The source of an events recording of `streams` (`why`: why not CUPTI).
pub fn events_source(why: String, streams: &[&Stream]) -> Source {
    if Timeline::across_devices(streams) {
        Source::EventsAcrossDevices { why }
    } else {
        Source::Events { why }
    }
}

/// Draws one row per stream (per device, where there are several), `width` characters
/// wide, in order of first appearance, with the legend in English (a lesson's report
/// translates its timeline as a whole, `report.rs`'s `timeline_in`).
pub fn render(spans: &[Span], width: usize) -> String {
    render_in(spans, width, Lang::En)
}

/// [`render`] with the legend in `lang`.
pub fn render_in(spans: &[Span], width: usize, lang: Lang) -> String {
    let end = spans.iter().map(|s| s.end_ms).fold(0.0, f64::max);
    if spans.is_empty() || end <= 0.0 || width == 0 {
        return String::new();
    }
    let rows = rows(spans);
    let devices = rows.iter().any(|(d, _)| *d != rows[0].0);
    let row_name = |(d, s): &(u32, String)| crate::lab::record::span::row_name(*d, s, devices);
    let name_width = rows.iter().map(|r| row_name(r).chars().count()).max().unwrap_or(0);
    let scale = width as f64 / end;
    let mut out = String::new();
    for (device, stream) in &rows {
        let name = row_name(&(*device, stream.clone()));
        let mut row = vec![' '; width];
        for s in spans.iter().filter(|s| s.device == *device && s.stream == *stream) {
            let a = ((s.start_ms * scale) as usize).min(width - 1);
            let b = ((s.end_ms * scale).ceil() as usize).clamp(a + 1, width);
            row[a..b].iter_mut().for_each(|c| *c = glyph(s.kind));
        }
        out.push_str(&format!("{name:>name_width$} |{}|\n", row.into_iter().collect::<String>()));
    }
    out.push_str(&format!(
        "{:>name_width$}  0 ms{:>w$}\n",
        "",
        format!("{end:.3} ms"),
        w = width.saturating_sub(3)
    ));
    out.push_str(&format!("{:>name_width$}  {}\n", "", t!("timeline.legend").render(lang)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(stream: &str, kind: Work, a: f64, b: f64) -> Span {
        Span::new(stream, kind, "", a, b)
    }

    #[test]
    fn rows_show_overlap_in_time_order() {
        let spans = [
            span("s0", Work::CopyToDevice, 0.0, 1.0),
            span("s0", Work::Kernel, 1.0, 2.0),
            span("s1", Work::CopyToDevice, 1.0, 2.0),
            span("s1", Work::CopyToHost, 2.0, 4.0),
        ];
        let text = render(&spans, 8);
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows[0], "s0 |HHKK    |");
        assert_eq!(rows[1], "s1 |  HHDDDD|");
    }

    #[test]
    fn devices_get_their_own_rows() {
        let mut other = span("s0", Work::CopyPeer, 0.0, 2.0);
        other.device = 1;
        let text = render(&[span("s0", Work::Kernel, 0.0, 1.0), other], 4);
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows[0], "GPU 0 · s0 |KK  |");
        assert_eq!(rows[1], "GPU 1 · s0 |PPPP|");
    }

    #[test]
    fn each_device_is_placed_by_when_the_host_recorded_its_reference() {
        // GPU 1's reference was recorded 0.25 ms after GPU 0's: 1 ms after it is 1.25 ms
        // after GPU 0's reference.
        let timed = [(0.0, 1.0, 3.0), (0.25, 1.0, 2.5), (0.25, 0.5, 0.75)];
        let placed = on_one_clock(&timed);
        let near =
            |a: (f64, f64), b: (f64, f64)| (a.0 - b.0).abs() < 1e-12 && (a.1 - b.1).abs() < 1e-12;
        // The earliest start (GPU 1's, at 0.75 ms on the host clock) is the origin.
        assert!(near(placed[0], (0.25, 2.25)), "{placed:?}");
        assert!(near(placed[1], (0.5, 2.0)), "{placed:?}");
        assert!(near(placed[2], (0.0, 0.25)), "{placed:?}");
        assert!(on_one_clock(&[]).is_empty());
    }

    #[test]
    fn one_device_keeps_its_own_times() {
        let placed = on_one_clock(&[(0.0, 0.5, 1.0), (0.0, 0.75, 2.0)]);
        assert_eq!(placed, [(0.0, 0.5), (0.25, 1.5)]);
    }

    #[test]
    fn empty_timeline_renders_nothing() {
        assert_eq!(render(&[], 40), "");
    }
}
