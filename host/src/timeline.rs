//! Per-stream timelines: when each copy and launch started and ended on the GPU.
//!
//! Attach a [`Timeline`] to streams ([`Timeline::attach`]) and every operation they enqueue
//! is bracketed by two events; no demo code changes. [`Timeline::finish`] draws the run. After the work is
//! synchronized, [`Timeline::resolve`] turns the events into milliseconds and
//! [`render`] draws one row per stream, which is how overlap becomes visible:
//!
//! ```text
//! overlap-0 |HHHHCCCCCCDDDD                |
//! overlap-1 |    HHHHCCCCCCDDDD            |
//! ```
use std::cell::RefCell;
use std::rc::Rc;

use serde::Serialize;

use crate::error::Result;
use crate::stream::{Event, Stream};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    CopyToDevice,
    Kernel,
    CopyToHost,
    CopyOnDevice,
    HostFn,
}

impl OpKind {
    /// The character a timeline row draws for this kind of work.
    pub fn glyph(self) -> char {
        match self {
            OpKind::CopyToDevice => 'H',
            OpKind::Kernel => 'K',
            OpKind::CopyToHost => 'D',
            OpKind::CopyOnDevice => 'd',
            OpKind::HostFn => 'f',
        }
    }
}

struct Pending {
    stream: String,
    kind: OpKind,
    label: String,
    start: Event,
    end: Event,
}

/// A recorder shared by the streams it is attached to.
#[derive(Default)]
pub struct Timeline {
    pending: RefCell<Vec<Pending>>,
}

/// One resolved operation, in milliseconds since the origin event.
#[derive(Debug, Clone, Serialize)]
pub struct Span {
    pub stream: String,
    pub kind: OpKind,
    pub label: String,
    pub start_ms: f64,
    pub end_ms: f64,
}

impl Timeline {
    pub fn new() -> Timeline {
        Timeline::default()
    }

    /// A fresh timeline, attached to every stream in `streams`: the start of a recorded run.
    pub fn attach(streams: &[&Stream]) -> Rc<Timeline> {
        let timeline = Rc::new(Timeline::new());
        for s in streams {
            s.attach_timeline(&timeline);
        }
        timeline
    }

    /// The end of a recorded run: detaches from `streams` whatever the run returned, then
    /// draws what it recorded against `origin`, an event the run recorded before its first
    /// operation. All recorded work must have completed.
    pub fn finish(&self, streams: &[&Stream], run: Result<()>, origin: &Event) -> Result<String> {
        for s in streams {
            s.detach_timeline();
        }
        run?;
        Ok(render(&self.resolve(origin)?, 72))
    }

    pub(crate) fn push(&self, stream: &str, kind: OpKind, label: &str, start: Event, end: Event) {
        self.pending.borrow_mut().push(Pending {
            stream: stream.to_owned(),
            kind,
            label: label.to_owned(),
            start,
            end,
        });
    }

    /// Resolves every recorded operation against `origin`, an event recorded before them.
    /// All recorded work must have completed (synchronize first).
    pub fn resolve(&self, origin: &Event) -> Result<Vec<Span>> {
        self.pending
            .borrow()
            .iter()
            .map(|p| {
                Ok(Span {
                    stream: p.stream.clone(),
                    kind: p.kind,
                    label: p.label.clone(),
                    start_ms: p.start.elapsed_ms(origin)?,
                    end_ms: p.end.elapsed_ms(origin)?,
                })
            })
            .collect()
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
            row[a..b].iter_mut().for_each(|c| *c = s.kind.glyph());
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
        "{:>name_width$}  H copy to device, K kernel, D copy to host, d copy on device, f host function\n",
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
