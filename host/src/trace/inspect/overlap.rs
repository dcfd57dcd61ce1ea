//! The overlap report of a capture: per window, each engine class's busy time, the copy time
//! that ran under compute, the window's length against a bound, and the findings, ranked by
//! cost; across windows, the collectives that waited for a late rank; and which occurrences
//! of each range were recorded whole. A pure function of the capture and the
//! [`Thresholds`]; `overlap_text` renders it in the catalogs' words.
use serde::Serialize;

use crate::trace::inspect::ahead::cpu_ahead;
use crate::trace::inspect::findings::{rank, Finding, Folded, Thresholds};
use crate::trace::inspect::host_index::HostIndex;
use crate::trace::inspect::measure::{comm, figures, Comm, Figures};
use crate::trace::inspect::projection::{project, Counts, Projection};
use crate::trace::inspect::ranks::{late_ranks, Straggler};
use crate::trace::inspect::rules::find;
use crate::trace::inspect::scope::Scope;
use crate::trace::inspect::tables::{tables, Tables};
use crate::trace::inspect::wholeness::{ranges_whole, RangeWhole};
use crate::trace::inspect::windows::{windows, Part, Window, WindowRecords};
use crate::trace::read::model::{ms_since, Capture, Process};

/// The work that ran while a range was open, beside the work it launched.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RanDuring {
    #[serde(flatten)]
    pub figures: Figures,
}

/// The report of one window. Its figures (flattened into it) are of the work the window
/// launched: for a range, the work its code launched, each occurrence from the first start
/// of that work to its last end; for the whole run and its parts, all of their work.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowReport {
    pub window: Window,
    /// The window's first and last instant, in ms from the trace's origin.
    pub start_ms: f64,
    pub end_ms: f64,
    #[serde(flatten)]
    pub figures: Figures,
    /// A range's: the work that ran while it was open, clipped to its occurrences.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ran_during: Option<RanDuring>,
    /// Where the window held collectives: how much of their time ran under compute.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm: Option<Comm>,
    /// Its top kernels, its copies by direction and host memory, its memsets.
    pub tables: Tables,
    /// A range's: how its work was charged to it (see `projection`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projection: Option<Counts>,
    /// Ranked by cost, the costliest first; the facts after them.
    pub findings: Vec<Finding>,
    /// The findings under 1% of the window's time, folded into one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folded: Option<Folded>,
}

/// The report of a capture.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverlapReport {
    pub thresholds: Thresholds,
    pub windows: Vec<WindowReport>,
    /// Found across windows (collectives that waited for a late rank).
    pub across_windows: Vec<Finding>,
    /// The participants that made the others wait, the most waiting first.
    pub stragglers: Vec<Straggler>,
    /// NVTX range names left without a window of their own (past the cap per process).
    pub range_names_left_out: usize,
    /// Whether host calls were recorded (the launch-gap rule and the projection read them).
    pub host_calls_recorded: bool,
    /// Per process and range name, which occurrences were recorded whole.
    pub ranges_whole: Vec<RangeWhole>,
    /// The range names asked for (`--range`) that no process marked at the top level.
    pub ranges_not_found: Vec<String>,
}

/// The report of `capture`: every process's windows, then what was found across them.
pub fn overlap_report(capture: &Capture, thresholds: &Thresholds) -> OverlapReport {
    overlap_report_of(capture, thresholds, &[])
}

/// [`overlap_report`] with windows for the range names `chosen` only (every top-level name,
/// up to the cap, where it is empty).
pub fn overlap_report_of(
    capture: &Capture,
    thresholds: &Thresholds,
    chosen: &[String],
) -> OverlapReport {
    let limits = thresholds.ns();
    let mut reports = Vec::new();
    let mut left_out = 0;
    let mut ranges = Vec::new();
    for p in &capture.processes {
        let projection = project(p);
        let host = HostIndex::of(p);
        let (list, dropped) = windows(p, &projection, chosen);
        left_out += dropped;
        for records in list {
            let scope = Scope {
                p,
                device: records.window.device,
                held: &records.launched,
                host: &host,
                projection: &projection,
                limits,
                origin: capture.origin_ns,
            };
            reports.push(window_report(capture, p, &scope, &records, &projection));
        }
        ranges.extend(ranges_whole(p));
    }
    let late = late_ranks(capture, &limits);
    let host_calls_recorded = capture.processes.iter().any(|p| !p.calls.is_empty());
    let marked = |name: &String| ranges.iter().any(|r: &RangeWhole| r.range == *name);
    let ranges_not_found = chosen.iter().filter(|c| !marked(c)).cloned().collect();
    OverlapReport {
        thresholds: *thresholds,
        windows: reports,
        across_windows: late.finding.into_iter().collect(),
        stragglers: late.stragglers,
        range_names_left_out: left_out,
        host_calls_recorded,
        ranges_whole: ranges,
        ranges_not_found,
    }
}

fn window_report(
    capture: &Capture,
    p: &Process,
    scope: &Scope,
    records: &WindowRecords,
    projection: &Projection,
) -> WindowReport {
    let launched_figures = figures(p, &records.launched);
    let mut found = find(scope);
    let is_range = records.window.part == Part::Range;
    if is_range {
        found.extend(cpu_ahead(scope, &records.occurrences));
    }
    let (findings, folded) = rank(found, launched_figures.span_ms);
    let compute_ms = launched_figures.busy.compute_ms;
    let window_tables = tables(p, &records.launched, compute_ms, records.window.device);
    // The window's first and last instant: of the work it launched, or else of its range.
    let launched = &records.launched.intervals;
    let during = records.ran_during.as_ref().map(|held| &held.intervals);
    let bounds = match (launched.first(), launched.last()) {
        (Some(first), Some(last)) => Some((first.0, last.1)),
        _ => during.and_then(|d| Some((d.first()?.0, d.last()?.1))),
    };
    let (start, end) = bounds.unwrap_or((0, 0));
    WindowReport {
        window: records.window.clone(),
        start_ms: ms_since(capture.origin_ns, start),
        end_ms: ms_since(capture.origin_ns, end),
        figures: launched_figures,
        comm: comm(p, &records.launched),
        tables: window_tables,
        ran_during: records.ran_during.as_ref().map(|held| RanDuring { figures: figures(p, held) }),
        projection: is_range
            .then(|| projection.counts(records.launched.pieces.iter().map(|piece| piece.index))),
        findings,
        folded,
    }
}
