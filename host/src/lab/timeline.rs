//! Per-stream timelines: when each copy and launch started and ended on the GPU.
//!
//! [`Timeline::record`] observes streams while a version runs (no lesson code changes),
//! and [`render`] draws one row per stream, which is how overlap becomes visible:
//!
//! ```text
//! overlap-0 |HHHHCCCCCCDDDD                |
//! overlap-1 |    HHHHCCCCCCDDDD            |
//! ```
use std::cell::RefCell;
use std::rc::Rc;

use serde::Serialize;

use crate::runtime::{Event, Observer, Op, OpKind, Result, Stream};

/// The character a timeline row draws for this kind of work.
pub fn glyph(kind: OpKind) -> char {
    match kind {
        OpKind::CopyToDevice => 'H',
        OpKind::Kernel => 'K',
        OpKind::CopyToHost => 'D',
        OpKind::CopyOnDevice => 'd',
        OpKind::HostFn => 'f',
        OpKind::Graph => 'G',
    }
}

struct Pending {
    stream: String,
    kind: OpKind,
    label: String,
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

/// One resolved operation, in milliseconds since the first recorded start.
#[derive(Debug, Clone, Serialize)]
pub struct Span {
    pub stream: String,
    pub kind: OpKind,
    pub label: String,
    pub start_ms: f64,
    pub end_ms: f64,
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
        self.pending.borrow_mut().push(Pending {
            stream: stream.name().to_owned(),
            kind: op.kind,
            label: op.label.to_owned(),
            start,
            end,
        });
        Ok(())
    }
}

impl Timeline {
    /// Observes `streams` while `run` runs, then resolves what it recorded. `run` must have
    /// completed its work (synchronized) when it returns.
    pub fn record(streams: &[&Stream], run: impl FnOnce() -> Result<()>) -> Result<Vec<Span>> {
        let timeline = Rc::new(Timeline::default());
        for s in streams {
            s.observe(Rc::clone(&timeline) as Rc<dyn Observer>);
        }
        let outcome = run();
        for s in streams {
            s.unobserve();
        }
        outcome?;
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
                    stream: p.stream.clone(),
                    kind: p.kind,
                    label: p.label.clone(),
                    start_ms: p.start.elapsed_ms(&first.start)?,
                    end_ms: p.end.elapsed_ms(&first.start)?,
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

/// Draws one row per stream, `width` characters wide, in order of first appearance.
pub fn render(spans: &[Span], width: usize) -> String {
    let end = spans.iter().map(|s| s.end_ms).fold(0.0, f64::max);
    if spans.is_empty() || end <= 0.0 || width == 0 {
        return String::new();
    }
    let mut streams: Vec<&str> = Vec::new();
    for s in spans {
        if !streams.contains(&s.stream.as_str()) {
            streams.push(&s.stream);
        }
    }
    let name_width = streams.iter().map(|s| s.len()).max().unwrap_or(0);
    let scale = width as f64 / end;
    let mut out = String::new();
    for name in streams {
        let mut row = vec![' '; width];
        for s in spans.iter().filter(|s| s.stream == name) {
            let a = ((s.start_ms * scale) as usize).min(width - 1);
            let b = ((s.end_ms * scale).ceil() as usize).clamp(a + 1, width);
            row[a..b].iter_mut().for_each(|c| *c = glyph(s.kind));
        }
        out.push_str(&format!(
            "{name:>name_width$} |{}|\n",
            row.into_iter().collect::<String>()
        ));
    }
    out.push_str(&format!(
        "{:>name_width$}  0 ms{:>w$}\n",
        "",
        format!("{end:.3} ms"),
        w = width.saturating_sub(3)
    ));
    out.push_str(&format!(
        "{:>name_width$}  H copy to device, K kernel, D copy to host, d copy on device, f host function, G graph\n",
        ""
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(stream: &str, kind: OpKind, a: f64, b: f64) -> Span {
        Span {
            stream: stream.into(),
            kind,
            label: String::new(),
            start_ms: a,
            end_ms: b,
        }
    }

    #[test]
    fn rows_show_overlap_in_time_order() {
        let spans = [
            span("s0", OpKind::CopyToDevice, 0.0, 1.0),
            span("s0", OpKind::Kernel, 1.0, 2.0),
            span("s1", OpKind::CopyToDevice, 1.0, 2.0),
            span("s1", OpKind::CopyToHost, 2.0, 4.0),
        ];
        let text = render(&spans, 8);
        let rows: Vec<&str> = text.lines().collect();
        assert_eq!(rows[0], "s0 |HHKK    |");
        assert_eq!(rows[1], "s1 |  HHDDDD|");
    }

    #[test]
    fn empty_timeline_renders_nothing() {
        assert_eq!(render(&[], 40), "");
    }
}
