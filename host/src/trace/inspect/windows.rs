//! The report's windows, and what each one holds. Every process's work on each device is a
//! window (the whole run); each NVTX range a process marked at the top level is one more,
//! per device, with every occurrence of the same name folded into it ("step", marked 100
//! times, is one window of 100 occurrences). A window's spans are its process's spans on its
//! device, clipped to its occurrences; its host calls and waits are those that overlap them.
use serde::Serialize;

use crate::lab::record::intervals::{length, union, Interval, EPS_MS};
use crate::lab::record::span::Span;
use crate::trace::inspect::host::{HostCall, HostWait, Range};

/// The most range names that get a window of their own, per process (in the order they were
/// first marked); a program that names every step differently would otherwise flood the
/// report. The report says how many were left out.
pub const MAX_RANGE_NAMES: usize = 20;

/// What the report reads: a recording's device spans and, where a traced program's records
/// hold them, its host calls, its host waits, its NVTX ranges and which rows are legacy
/// default streams. A lesson's own recording has spans only.
#[derive(Debug, Clone, Copy, Default)]
pub struct Records<'a> {
    pub spans: &'a [Span],
    pub calls: &'a [HostCall],
    pub waits: &'a [HostWait],
    pub ranges: &'a [Range],
    /// The rows (`Span::stream`) that are a context's legacy default (NULL) stream, with their
    /// process.
    pub legacy_rows: &'a [(u32, String)],
    /// The rows of streams the records show were created blocking (they wait for, and are
    /// waited on by, the legacy default stream), with their process.
    pub blocking_rows: &'a [(u32, String)],
    /// Whether host calls were recorded at all: the launch-gap rule needs them to say the host
    /// was issuing calls during a gap, and says so where they were not.
    pub host_calls_recorded: bool,
}

/// Which work a window covers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Window {
    pub process: u32,
    pub device: u32,
    /// The NVTX range's name; `None` for the whole run of the process on the device.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
    /// How many times the range was marked (1 for a whole-run window).
    pub occurrences: usize,
    /// The times the window covers, in ms (for a whole run: its first span's start to its
    /// last span's end).
    #[serde(skip)]
    pub intervals: Vec<Interval>,
}

impl Window {
    /// How long the window lasted: the sum of its intervals.
    pub fn length_ms(&self) -> f64 {
        length(&self.intervals)
    }
}

/// A window's share of the records.
#[derive(Debug, Clone, Default)]
pub struct WindowRecords<'a> {
    /// Device spans clipped to the window.
    pub spans: Vec<Span>,
    pub calls: Vec<&'a HostCall>,
    pub waits: Vec<&'a HostWait>,
    /// The window's process's legacy default stream rows, and its blocking streams' rows.
    pub legacy_rows: Vec<String>,
    pub blocking_rows: Vec<String>,
    pub host_calls_recorded: bool,
    /// The window's times ([`Window::intervals`]): a gap between two of them is not the
    /// window's.
    pub intervals: Vec<Interval>,
}

impl WindowRecords<'_> {
    pub fn span_refs(&self) -> Vec<&Span> {
        self.spans.iter().collect()
    }

    pub fn is_legacy(&self, row: &str) -> bool {
        self.legacy_rows.iter().any(|r| r == row)
    }

    pub fn is_blocking(&self, row: &str) -> bool {
        self.blocking_rows.iter().any(|r| r == row)
    }
}

/// The windows of `records`, process by process and device by device: each whole run, then
/// its ranges. The second value counts the range names left out past [`MAX_RANGE_NAMES`].
pub fn windows(records: &Records) -> (Vec<Window>, usize) {
    let mut out = Vec::new();
    let mut left_out = 0;
    let mut processes: Vec<u32> = records.spans.iter().map(|s| s.process).collect();
    processes.sort_unstable();
    processes.dedup();
    for process in processes {
        let of_process: Vec<&Span> =
            records.spans.iter().filter(|s| s.process == process).collect();
        let mut devices: Vec<u32> = of_process.iter().map(|s| s.device).collect();
        devices.sort_unstable();
        devices.dedup();
        for &device in &devices {
            let on_device = of_process.iter().filter(|s| s.device == device);
            let start = on_device.clone().map(|s| s.start_ms).fold(f64::INFINITY, f64::min);
            let end = on_device.map(|s| s.end_ms).fold(f64::NEG_INFINITY, f64::max);
            out.push(Window {
                process,
                device,
                range: None,
                occurrences: 1,
                intervals: vec![(start, end)],
            });
        }
        let (named, dropped) = top_level_ranges(records.ranges, process);
        left_out += dropped;
        for (name, occurrences) in named {
            let intervals = union(occurrences.clone());
            for &device in &devices {
                let touches = of_process
                    .iter()
                    .any(|s| s.device == device && clipped(s, &intervals).next().is_some());
                if touches {
                    out.push(Window {
                        process,
                        device,
                        range: Some(name.clone()),
                        occurrences: occurrences.len(),
                        intervals: intervals.clone(),
                    });
                }
            }
        }
    }
    (out, left_out)
}

/// A process's top-level ranges grouped by name, in the order each name first appears, at
/// most [`MAX_RANGE_NAMES`] of them; and how many names were left out.
fn top_level_ranges(ranges: &[Range], process: u32) -> (Vec<(String, Vec<Interval>)>, usize) {
    let mut top: Vec<&Range> =
        ranges.iter().filter(|r| r.process == process && r.depth == 0).collect();
    top.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
    let mut named: Vec<(String, Vec<Interval>)> = Vec::new();
    for r in top {
        match named.iter_mut().find(|(name, _)| *name == r.name) {
            Some((_, occurrences)) => occurrences.push((r.start_ms, r.end_ms)),
            None => named.push((r.name.clone(), vec![(r.start_ms, r.end_ms)])),
        }
    }
    let left_out = named.len().saturating_sub(MAX_RANGE_NAMES);
    named.truncate(MAX_RANGE_NAMES);
    (named, left_out)
}

/// The parts of `span` inside `intervals` (none when it ran outside them all).
fn clipped<'s>(span: &'s Span, intervals: &'s [Interval]) -> impl Iterator<Item = Span> + 's {
    intervals.iter().filter_map(move |&(start, end)| {
        let from = span.start_ms.max(start);
        let to = span.end_ms.min(end);
        // A span of no length at a window's edge belongs to the window it starts in.
        let inside = to > from + EPS_MS || (span.ms() <= EPS_MS && from >= start && from < end);
        inside.then(|| Span { start_ms: from, end_ms: to, ..span.clone() })
    })
}

fn overlaps(start: f64, end: f64, intervals: &[Interval]) -> bool {
    intervals.iter().any(|&(from, to)| start < to && end > from)
}

fn of_process(rows: &[(u32, String)], process: u32) -> Vec<String> {
    rows.iter().filter(|(p, _)| *p == process).map(|(_, row)| row.clone()).collect()
}

/// What `window` holds of `records`.
pub fn window_records<'a>(records: &Records<'a>, window: &Window) -> WindowRecords<'a> {
    let spans = records
        .spans
        .iter()
        .filter(|s| s.process == window.process && s.device == window.device)
        .flat_map(|s| clipped(s, &window.intervals).collect::<Vec<_>>())
        .collect();
    let calls = records
        .calls
        .iter()
        .filter(|c| c.process == window.process)
        .filter(|c| overlaps(c.start_ms, c.end_ms, &window.intervals))
        .collect();
    let waits = records
        .waits
        .iter()
        .filter(|w| w.process == window.process && w.device == window.device)
        .filter(|w| overlaps(w.start_ms, w.end_ms, &window.intervals))
        .collect();
    WindowRecords {
        spans,
        calls,
        waits,
        legacy_rows: of_process(records.legacy_rows, window.process),
        blocking_rows: of_process(records.blocking_rows, window.process),
        host_calls_recorded: records.host_calls_recorded,
        intervals: window.intervals.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::record::span::Work;

    fn span(process: u32, device: u32, start_ms: f64, end_ms: f64) -> Span {
        let mut s = Span::new("s", Work::Kernel, "k", start_ms, end_ms);
        (s.process, s.device) = (process, device);
        s
    }

    fn range(process: u32, name: &str, start_ms: f64, end_ms: f64, depth: u32) -> Range {
        Range { process, thread: 1, name: name.into(), start_ms, end_ms, depth }
    }

    #[test]
    fn one_whole_run_window_per_process_and_device() {
        let spans = [span(7, 0, 1.0, 2.0), span(7, 1, 0.5, 3.0), span(9, 0, 4.0, 5.0)];
        let (w, left_out) = windows(&Records { spans: &spans, ..Default::default() });
        let keys: Vec<(u32, u32, Vec<Interval>)> =
            w.iter().map(|w| (w.process, w.device, w.intervals.clone())).collect();
        assert_eq!(
            keys,
            [(7, 0, vec![(1.0, 2.0)]), (7, 1, vec![(0.5, 3.0)]), (9, 0, vec![(4.0, 5.0)])]
        );
        assert_eq!(left_out, 0);
    }

    #[test]
    fn ranges_of_one_name_fold_into_one_window_and_spans_are_clipped_to_them() {
        let spans = [span(1, 0, 0.0, 10.0)];
        let ranges = [
            range(1, "step", 1.0, 2.0, 0),
            range(1, "inner", 1.2, 1.5, 1),
            range(1, "step", 5.0, 6.5, 0),
            // Another process's range does not make a window here.
            range(2, "other", 0.0, 10.0, 0),
        ];
        let records = Records { spans: &spans, ranges: &ranges, ..Default::default() };
        let (w, _) = windows(&records);
        assert_eq!(w.len(), 2, "{w:?}");
        let step = &w[1];
        assert_eq!((step.range.as_deref(), step.occurrences), (Some("step"), 2));
        assert_eq!(step.length_ms(), 2.5);
        let held = window_records(&records, step);
        let clipped: Vec<(f64, f64)> = held.spans.iter().map(|s| (s.start_ms, s.end_ms)).collect();
        assert_eq!(clipped, [(1.0, 2.0), (5.0, 6.5)]);
    }

    #[test]
    fn past_the_cap_range_names_are_counted_not_shown() {
        let spans = [span(1, 0, 0.0, 100.0)];
        let ranges: Vec<Range> = (0..MAX_RANGE_NAMES + 3)
            .map(|i| range(1, &format!("r{i}"), i as f64, i as f64 + 0.5, 0))
            .collect();
        let (w, left_out) =
            windows(&Records { spans: &spans, ranges: &ranges, ..Default::default() });
        assert_eq!((w.len(), left_out), (1 + MAX_RANGE_NAMES, 3));
    }

    #[test]
    fn a_window_holds_only_its_process_calls_and_its_device_waits() {
        use crate::trace::inspect::host::{CallKind, WaitKind};
        let spans = [span(1, 0, 0.0, 4.0)];
        let call = |process: u32, start_ms: f64| HostCall {
            process,
            thread: 1,
            name: "cuMemAlloc_v2".into(),
            kind: CallKind::Alloc,
            start_ms,
            end_ms: start_ms + 0.1,
        };
        let wait = |device: u32| HostWait {
            process: 1,
            kind: WaitKind::Context,
            device,
            stream: None,
            start_ms: 1.0,
            end_ms: 2.0,
        };
        let calls = [call(1, 1.0), call(2, 1.0), call(1, 9.0)];
        let waits = [wait(0), wait(1)];
        let records = Records { spans: &spans, calls: &calls, waits: &waits, ..Default::default() };
        let (w, _) = windows(&records);
        let held = window_records(&records, &w[0]);
        assert_eq!(held.calls, [&calls[0]]);
        assert_eq!(held.waits, [&waits[0]]);
    }
}
