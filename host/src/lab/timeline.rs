//! Per-stream timelines: the events recorder, and the ASCII rows for the terminal.
//!
//! [`Timeline::record`] observes streams while a version runs (no lesson code changes) by
//! recording a pair of events around each operation: the fallback where CUPTI cannot be
//! loaded (see [`crate::lab::record`]). [`render`] draws one row per stream from any
//! recorder's spans, which is how overlap becomes visible:
//!
//! ```text
//! overlap-0 |HHHHCCCCCCDDDD                |
//! overlap-1 |    HHHHCCCCCCDDDD            |
//! ```
use std::cell::RefCell;
use std::rc::Rc;

pub use crate::lab::span::Span;
use crate::lab::span::{current_name, rows, Work};
use crate::runtime::{Event, Observer, Op, Result, Stream};
use crate::t;

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

struct Pending {
    span: Span,
    start: Event,
    end: Event,
}

/// A recorder that streams call around each operation (see [`Observer`]): it brackets every
/// operation with two events. A span then starts when the stream reaches the operation, not
/// when an engine starts it, so queueing shows up as work.
#[derive(Default)]
pub struct Timeline {
    pending: RefCell<Vec<Pending>>,
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
        let end = Event::new(stream.context())?;
        end.record(stream)?;
        let note = OpNote::of(stream, op);
        let mut span = Span::new(&note.stream, note.kind, &note.label, 0.0, 0.0);
        (span.name, span.device, span.bytes) = (note.name, note.device, note.bytes);
        span.grid = op.launch.map(|l| [l.grid.0, l.grid.1, l.grid.2]);
        span.block = op.launch.map(|l| [l.block.0, l.block.1, l.block.2]);
        if matches!(span.kind, Work::CopyToDevice | Work::CopyToHost) {
            span.memory = if op.label.contains("pageable") { "pageable" } else { "pinned" }.into();
        }
        self.pending.borrow_mut().push(Pending { span, start, end });
        Ok(())
    }
}

impl Timeline {
    /// Observes `streams` while `run` runs, then resolves what it recorded. `run` must have
    /// completed its work (synchronized) when it returns.
    pub fn record(streams: &[&Stream], run: impl FnOnce() -> Result<()>) -> Result<Vec<Span>> {
        let timeline = Rc::new(Timeline::default());
        observing(streams, Rc::clone(&timeline) as Rc<dyn Observer>, run)?;
        timeline.resolve()
    }

    /// Every recorded operation in ms since the earliest start. All recorded work must have
    /// completed.
    pub fn resolve(&self) -> Result<Vec<Span>> {
        let pending = self.pending.borrow();
        let Some(first) = pending.first() else {
            return Ok(Vec::new());
        };
        let mut spans = pending
            .iter()
            .map(|p| {
                Ok(Span {
                    start_ms: p.start.elapsed_ms(&first.start)?,
                    end_ms: p.end.elapsed_ms(&first.start)?,
                    ..p.span.clone()
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // Another stream may have started before the first recorded operation.
        let origin = spans.iter().map(|s| s.start_ms).fold(0.0, f64::min);
        for s in &mut spans {
            s.start_ms -= origin;
            s.end_ms -= origin;
        }
        Ok(spans)
    }
}

/// Draws one row per stream (per device, where there are several), `width` characters
/// wide, in order of first appearance.
pub fn render(spans: &[Span], width: usize) -> String {
    let end = spans.iter().map(|s| s.end_ms).fold(0.0, f64::max);
    if spans.is_empty() || end <= 0.0 || width == 0 {
        return String::new();
    }
    let rows = rows(spans);
    let devices = rows.iter().any(|(d, _)| *d != rows[0].0);
    let row_name = |(d, s): &(u32, String)| {
        if devices {
            format!("GPU{d} {s}")
        } else {
            s.clone()
        }
    };
    let name_width = rows.iter().map(|r| row_name(r).len()).max().unwrap_or(0);
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
    out.push_str(&format!("{:>name_width$}  {}\n", "", t!("timeline.legend").en()));
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
        assert_eq!(rows[0], "GPU0 s0 |KK  |");
        assert_eq!(rows[1], "GPU1 s0 |PPPP|");
    }

    #[test]
    fn empty_timeline_renders_nothing() {
        assert_eq!(render(&[], 40), "");
    }
}
