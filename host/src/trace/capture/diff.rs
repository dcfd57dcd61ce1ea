//! `streamlab diff`'s comparison of two JSON reports (`streamlab trace --json FILE`, `streamlab
//! report DIR --json FILE`): each report read for exactly the figures compared ([`ReportFile`]),
//! their windows matched, and every figure side by side with B − A and, for times, B/A. A
//! pure function of the two parsed reports; `diff_command` reads the files and shows it.
//!
//! A window is matched by its process, device and part (or NVTX range). The process is known
//! by the GPUs its windows are on and its position among the report's processes on those GPUs
//! (the reader lists them in the order they started), not by its pid: pids change from one run
//! to the next, and the ranks of a `torchrun` job start in any order, each on its own GPU.
use serde::{Deserialize, Serialize};

use crate::trace::inspect::engines::Engine;
use crate::trace::inspect::measure::Busy;
use crate::trace::inspect::windows::Part;

/// What diff reads of a report: its processes' pids and its overlap report's windows.
#[derive(Debug, Clone, Deserialize)]
pub struct ReportFile {
    pub processes: Vec<ProcessEntry>,
    pub overlap: OverlapEntry,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ProcessEntry {
    pub pid: u32,
}

#[derive(Debug, Clone, Deserialize)]
pub struct OverlapEntry {
    /// The thresholds the findings used, compared as they are written.
    #[serde(default)]
    pub thresholds: Option<serde_json::Value>,
    pub windows: Vec<WindowEntry>,
    #[serde(default)]
    pub across_windows: Vec<FindingEntry>,
}

/// Which work a window covers (the report's `window`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct WindowKey {
    pub process: u32,
    pub device: u32,
    pub part: Part,
    #[serde(default)]
    pub range: Option<String>,
    #[serde(default = "one")]
    pub occurrences: u64,
}

fn one() -> u64 {
    1
}

/// A window's figures and findings, as the report writes them.
#[derive(Debug, Clone, Deserialize)]
pub struct WindowEntry {
    pub window: WindowKey,
    pub span_ms: f64,
    pub bound_ms: f64,
    #[serde(default)]
    pub measured_over_bound: Option<f64>,
    pub busy: Busy,
    #[serde(default)]
    pub copy_under_compute: Option<f64>,
    #[serde(default)]
    pub findings: Vec<FindingEntry>,
    #[serde(default)]
    pub folded: Option<FoldedEntry>,
    #[serde(default)]
    pub ran_during: Option<SpanEntry>,
    #[serde(default)]
    pub comm: Option<CommEntry>,
}

/// A finding's rule (its JSON name, kept as text so that a rule of a newer report is still
/// compared), count and cost.
#[derive(Debug, Clone, Deserialize)]
pub struct FindingEntry {
    pub rule: String,
    pub count: u64,
    pub cost_ms: f64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FoldedEntry {
    #[serde(default)]
    pub findings: Vec<FindingEntry>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct SpanEntry {
    pub span_ms: f64,
}

/// A window's collectives under compute (where it held collectives).
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct CommEntry {
    pub hidden_share: f64,
    pub exposed_ms: f64,
}

/// A figure of a window that diff compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    /// How many times a range was marked.
    Occurrences,
    Span,
    Bound,
    MeasuredOverBound,
    Busy(Engine),
    CopyUnderCompute,
    /// The share of the collectives' time that other work hid.
    CollectivesUnderCompute,
    /// The collectives' time that nothing else ran beside.
    CollectivesExposed,
    /// A range's: the time the work that ran while it was open lasted.
    RanDuring,
}

/// What a figure counts, which says how it is shown and whether B/A means something.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Ms,
    /// A ratio of two times ("x").
    Times,
    /// A fraction of a time, shown in percent.
    Share,
    Count,
}

impl Figure {
    /// The report's field the figure is, as the diff's JSON names it.
    pub fn key(self) -> &'static str {
        match self {
            Figure::Occurrences => "occurrences",
            Figure::Span => "span_ms",
            Figure::Bound => "bound_ms",
            Figure::MeasuredOverBound => "measured_over_bound",
            Figure::Busy(Engine::Compute) => "busy.compute_ms",
            Figure::Busy(Engine::CopyIn) => "busy.copy_in_ms",
            Figure::Busy(Engine::CopyOut) => "busy.copy_out_ms",
            Figure::Busy(Engine::DeviceCopy) => "busy.device_copy_ms",
            Figure::Busy(Engine::Collective) => "busy.collective_ms",
            Figure::CopyUnderCompute => "copy_under_compute",
            Figure::CollectivesUnderCompute => "comm.hidden_share",
            Figure::CollectivesExposed => "comm.exposed_ms",
            Figure::RanDuring => "ran_during.span_ms",
        }
    }

    pub fn unit(self) -> Unit {
        match self {
            Figure::Occurrences => Unit::Count,
            Figure::MeasuredOverBound => Unit::Times,
            Figure::CopyUnderCompute | Figure::CollectivesUnderCompute => Unit::Share,
            Figure::Span
            | Figure::Bound
            | Figure::Busy(_)
            | Figure::CollectivesExposed
            | Figure::RanDuring => Unit::Ms,
        }
    }

    /// The figure in window `w` (None where the report has none: no copies, no bound).
    fn of(self, w: &WindowEntry) -> Option<f64> {
        match self {
            Figure::Occurrences => Some(w.window.occurrences as f64),
            Figure::Span => Some(w.span_ms),
            Figure::Bound => Some(w.bound_ms),
            Figure::MeasuredOverBound => w.measured_over_bound,
            Figure::Busy(engine) => Some(w.busy.of(engine)),
            Figure::CopyUnderCompute => w.copy_under_compute,
            Figure::CollectivesUnderCompute => w.comm.map(|c| c.hidden_share),
            Figure::CollectivesExposed => w.comm.map(|c| c.exposed_ms),
            Figure::RanDuring => w.ran_during.map(|d| d.span_ms),
        }
    }
}

/// One figure in A and in B, B − A where both have it, and B/A for a time A has.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FigureDiff {
    #[serde(skip)]
    pub figure: Figure,
    #[serde(rename = "figure")]
    pub key: &'static str,
    pub unit: Unit,
    pub a: Option<f64>,
    pub b: Option<f64>,
    pub delta: Option<f64>,
    pub ratio: Option<f64>,
}

impl FigureDiff {
    fn new(figure: Figure, a: Option<f64>, b: Option<f64>) -> FigureDiff {
        let both = a.zip(b);
        let ratio = both.filter(|(a, _)| figure.unit() == Unit::Ms && *a > 0.0).map(|(a, b)| b / a);
        FigureDiff {
            figure,
            key: figure.key(),
            unit: figure.unit(),
            a,
            b,
            delta: both.map(|(a, b)| b - a),
            ratio,
        }
    }
}

/// A rule's matches in one report's window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FindingSide {
    pub count: u64,
    pub cost_ms: f64,
    /// Folded into the report's "more findings" line (under 1% of the window's time).
    pub folded: bool,
}

/// One rule in A and in B. Where both windows exist, a rule one of them lacks counts as 0 in
/// the deltas (a finding gone is -count); B/A only where both found it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingDiff {
    pub rule: String,
    pub a: Option<FindingSide>,
    pub b: Option<FindingSide>,
    pub count_delta: Option<i64>,
    pub cost_delta_ms: Option<f64>,
    pub cost_ratio: Option<f64>,
}

/// Where a window was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Found {
    Both,
    OnlyA,
    OnlyB,
}

/// A window of A, of B, or of both.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowDiff {
    /// The position of the process pair (`ProcessMatch::position`), from 1.
    pub process: usize,
    pub device: u32,
    pub part: Part,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<String>,
    pub found: Found,
    pub a_pid: Option<u32>,
    pub b_pid: Option<u32>,
    pub figures: Vec<FigureDiff>,
    pub findings: Vec<FindingDiff>,
}

/// A process of A and its match in B (by their GPUs, then the order they started), or one
/// left without a match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ProcessMatch {
    /// From 1.
    pub position: usize,
    pub a_pid: Option<u32>,
    pub b_pid: Option<u32>,
}

/// Two reports compared: the processes matched, the windows of A in A's order (each with
/// its match in B), then those only in B, then the findings across windows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    /// Whether both reports' findings used the same thresholds.
    pub same_thresholds: bool,
    pub processes: Vec<ProcessMatch>,
    pub windows: Vec<WindowDiff>,
    pub across_windows: Vec<FindingDiff>,
}

/// The pids of a report in its processes' order, then any pid only its windows name.
fn process_order(r: &ReportFile) -> Vec<u32> {
    let mut pids: Vec<u32> = r.processes.iter().map(|p| p.pid).collect();
    for w in &r.overlap.windows {
        if !pids.contains(&w.window.process) {
            pids.push(w.window.process);
        }
    }
    pids
}

/// The GPUs of `pid`'s windows in `r`, in order (none for a launcher).
fn devices_of(r: &ReportFile, pid: u32) -> Vec<u32> {
    let mut devices: Vec<u32> = r
        .overlap
        .windows
        .iter()
        .filter(|w| w.window.process == pid)
        .map(|w| w.window.device)
        .collect();
    devices.sort_unstable();
    devices.dedup();
    devices
}

/// The processes of `a` and `b` matched. First by the GPUs their windows are on: the k-th
/// process of A on a set of GPUs (in the order they started) with the k-th of B on the same
/// set, so that rank 0 meets rank 0 whichever rank started first; then the processes left, in
/// the order they started. Positions from 1: A's processes in their order, then B's left over.
fn match_processes(a: &ReportFile, b: &ReportFile) -> Vec<ProcessMatch> {
    let (a_pids, b_pids) = (process_order(a), process_order(b));
    let b_devices: Vec<Vec<u32>> = b_pids.iter().map(|&pid| devices_of(b, pid)).collect();
    let mut taken = vec![false; b_pids.len()];
    let mut partner: Vec<Option<usize>> = Vec::new();
    for &pid in &a_pids {
        let devices = devices_of(a, pid);
        let same = (0..b_pids.len()).find(|&j| !taken[j] && b_devices[j] == devices);
        if let Some(j) = same {
            taken[j] = true;
        }
        partner.push(same);
    }
    let left: Vec<usize> = (0..b_pids.len()).filter(|&j| !taken[j]).collect();
    let unmatched = partner.iter_mut().filter(|p| p.is_none());
    for (p, &j) in unmatched.zip(&left) {
        *p = Some(j);
        taken[j] = true;
    }
    a_pids
        .iter()
        .zip(&partner)
        .map(|(&pid, j)| (Some(pid), j.map(|j| b_pids[j])))
        .chain((0..b_pids.len()).filter(|&j| !taken[j]).map(|j| (None, Some(b_pids[j]))))
        .enumerate()
        .map(|(i, (a_pid, b_pid))| ProcessMatch { position: i + 1, a_pid, b_pid })
        .collect()
}

/// A window's key in a report whose processes are matched in `matches` (`in_a`: the report is
/// A): (position from 1, device, part, range).
type Key<'a> = (usize, u32, Part, Option<&'a str>);

fn key<'a>(w: &'a WindowEntry, matches: &[ProcessMatch], in_a: bool) -> Key<'a> {
    let pid = Some(w.window.process);
    let position = matches
        .iter()
        .find(|m| if in_a { m.a_pid == pid } else { m.b_pid == pid })
        .map_or(0, |m| m.position);
    (position, w.window.device, w.window.part, w.window.range.as_deref())
}

/// The figures compared for a window whose part is `part` (occurrences only for a range; the
/// collectives under compute and the time that ran during it where either side has them).
fn figures_of(part: Part, a: Option<&WindowEntry>, b: Option<&WindowEntry>) -> Vec<FigureDiff> {
    let mut list = Vec::new();
    if part == Part::Range {
        list.push(Figure::Occurrences);
    }
    list.extend([Figure::Span, Figure::Bound, Figure::MeasuredOverBound]);
    list.extend(Engine::ALL.map(Figure::Busy));
    list.push(Figure::CopyUnderCompute);
    if [a, b].iter().flatten().any(|w| w.comm.is_some()) {
        list.extend([Figure::CollectivesUnderCompute, Figure::CollectivesExposed]);
    }
    if [a, b].iter().flatten().any(|w| w.ran_during.is_some()) {
        list.push(Figure::RanDuring);
    }
    let value = |w: Option<&WindowEntry>, f: Figure| w.and_then(|w| f.of(w));
    list.into_iter().map(|f| FigureDiff::new(f, value(a, f), value(b, f))).collect()
}

/// A list's findings by rule, in its order; a rule listed twice counts once, summed.
fn by_rule(findings: &[FindingEntry], folded: &[FindingEntry]) -> Vec<(String, FindingSide)> {
    let mut rules: Vec<(String, FindingSide)> = Vec::new();
    let listed = findings.iter().map(|f| (f, false)).chain(folded.iter().map(|f| (f, true)));
    for (f, is_folded) in listed {
        match rules.iter_mut().find(|(rule, _)| *rule == f.rule) {
            Some((_, side)) => {
                side.count += f.count;
                side.cost_ms += f.cost_ms;
                side.folded &= is_folded;
            }
            None => rules.push((
                f.rule.clone(),
                FindingSide { count: f.count, cost_ms: f.cost_ms, folded: is_folded },
            )),
        }
    }
    rules
}

fn window_findings(w: &WindowEntry) -> Vec<(String, FindingSide)> {
    let folded = w.folded.as_ref().map(|f| f.findings.as_slice()).unwrap_or_default();
    by_rule(&w.findings, folded)
}

/// Each rule of `a` (in its order), then each rule only `b` has. `both` says whether the two
/// sides exist (two windows matched): only then are there deltas.
fn findings_diff(
    a: &[(String, FindingSide)],
    b: &[(String, FindingSide)],
    both: bool,
) -> Vec<FindingDiff> {
    let mut rules: Vec<&str> = a.iter().map(|(r, _)| r.as_str()).collect();
    rules.extend(b.iter().map(|(r, _)| r.as_str()).filter(|r| a.iter().all(|(x, _)| x != r)));
    let side = |list: &[(String, FindingSide)], rule: &str| {
        list.iter().find(|(r, _)| r == rule).map(|(_, s)| *s)
    };
    rules
        .into_iter()
        .map(|rule| {
            let (a, b) = (side(a, rule), side(b, rule));
            let count = |s: Option<FindingSide>| s.map_or(0, |s| s.count as i64);
            let cost = |s: Option<FindingSide>| s.map_or(0.0, |s| s.cost_ms);
            let cost_ratio =
                a.zip(b).filter(|(a, _)| a.cost_ms > 0.0).map(|(a, b)| b.cost_ms / a.cost_ms);
            FindingDiff {
                rule: rule.to_string(),
                a,
                b,
                count_delta: both.then(|| count(b) - count(a)),
                cost_delta_ms: both.then(|| cost(b) - cost(a)),
                cost_ratio,
            }
        })
        .collect()
}

fn window_diff(
    key: Key,
    a: Option<&WindowEntry>,
    b: Option<&WindowEntry>,
    found: Found,
) -> WindowDiff {
    let (process, device, part, range) = key;
    let findings = |w: Option<&WindowEntry>| w.map(window_findings).unwrap_or_default();
    WindowDiff {
        process,
        device,
        part,
        range: range.map(str::to_string),
        found,
        a_pid: a.map(|w| w.window.process),
        b_pid: b.map(|w| w.window.process),
        figures: figures_of(part, a, b),
        findings: findings_diff(&findings(a), &findings(b), found == Found::Both),
    }
}

/// `a` and `b` compared.
pub fn compare(a: &ReportFile, b: &ReportFile) -> Diff {
    let processes = match_processes(a, b);
    let b_keys: Vec<Key> = b.overlap.windows.iter().map(|w| key(w, &processes, false)).collect();
    let mut windows = Vec::new();
    let mut matched = vec![false; b.overlap.windows.len()];
    for wa in &a.overlap.windows {
        let k = key(wa, &processes, true);
        match b_keys.iter().position(|kb| *kb == k) {
            Some(i) => {
                matched[i] = true;
                windows.push(window_diff(k, Some(wa), Some(&b.overlap.windows[i]), Found::Both));
            }
            None => windows.push(window_diff(k, Some(wa), None, Found::OnlyA)),
        }
    }
    for ((wb, kb), _) in b.overlap.windows.iter().zip(b_keys).zip(&matched).filter(|(_, m)| !**m) {
        windows.push(window_diff(kb, None, Some(wb), Found::OnlyB));
    }
    let across = |r: &ReportFile| by_rule(&r.overlap.across_windows, &[]);
    Diff {
        same_thresholds: a.overlap.thresholds == b.overlap.thresholds,
        processes,
        windows,
        across_windows: findings_diff(&across(a), &across(b), true),
    }
}
