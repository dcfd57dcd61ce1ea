//! What a finding is: the rules (each stated exactly in its [`Rule`] variant's doc), their
//! thresholds, and a match's count, cost and example. A finding is only what the records
//! show, and its wording (the catalogs' `inspect.seen.*`) says what was seen, not why. The
//! rules themselves live in `rules` (over one window's records and calls), `gap_rules` (over
//! the device's idle gaps), `ahead` (the CPU ahead of the GPU) and `ranks` (across windows).
use serde::Serialize;

use crate::trace::inspect::windows::Piece;
use crate::trace::read::model::{ms_since, Ns, Process};

/// Every threshold a finding uses. The defaults are [`Thresholds::DEFAULT`], declared once;
/// `streamlab trace` has a flag for each, and the report prints those it used.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Thresholds {
    /// An idle gap is a time longer than this when the device ran nothing.
    pub idle_gap_ms: f64,
    /// Between two small kernels of one stream, the device idle longer than this (and not
    /// longer than `idle_gap_ms`) is a launch gap.
    pub launch_gap_ms: f64,
    /// A copy and a kernel on one stream are back to back when the second starts within this
    /// of the first's end.
    pub back_to_back_ms: f64,
    /// A kernel this short or shorter is small.
    pub small_kernel_ms: f64,
    /// This many small kernels in a window, or more, are many.
    pub many_small_kernels: usize,
    /// A collective whose ranks started it further apart than this waited for a late rank.
    pub late_rank_ms: f64,
    /// The work a range launched ending this much after the range, at the median over its
    /// occurrences, is the CPU running ahead of the GPU.
    pub cpu_ahead_ms: f64,
}

impl Thresholds {
    pub const DEFAULT: Thresholds = Thresholds {
        // 100 µs: some twenty launch latencies (a launch costs the host about 5 µs), so the
        // normal cost of issuing work does not count; a host wait or host work does.
        idle_gap_ms: 0.1,
        // 2 µs: about what separates two kernels of one stream when the host is far ahead
        // (the GPU's own switch from one kernel to the next), so only the host's lag counts.
        launch_gap_ms: 0.002,
        // 50 µs: a stream starts its next operation a few µs after the last one ends.
        back_to_back_ms: 0.05,
        // 10 µs: about two launches' worth of host time, so the host can barely keep ahead.
        small_kernel_ms: 0.01,
        // 100: enough that the launches' cost adds up to something a graph would save.
        many_small_kernels: 100,
        // 50 µs: ranks that issue the same step drift by a few µs; more is a rank behind.
        late_rank_ms: 0.05,
        // 1 ms: a launch's work normally ends some µs after its call returns; a millisecond
        // later is work queued behind the GPU.
        cpu_ahead_ms: 1.0,
    };

    /// The thresholds in ns, as the rules compare them.
    pub fn ns(&self) -> Limits {
        let ns = |ms: f64| (ms * 1e6).round() as Ns;
        Limits {
            idle_gap: ns(self.idle_gap_ms),
            launch_gap: ns(self.launch_gap_ms),
            back_to_back: ns(self.back_to_back_ms),
            small_kernel: ns(self.small_kernel_ms),
            many_small_kernels: self.many_small_kernels,
            late_rank: ns(self.late_rank_ms),
            cpu_ahead: ns(self.cpu_ahead_ms),
        }
    }
}

/// [`Thresholds`] in ns (CUPTI's unit): what the rules compare, exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub idle_gap: Ns,
    pub launch_gap: Ns,
    pub back_to_back: Ns,
    pub small_kernel: Ns,
    pub many_small_kernels: usize,
    pub late_rank: Ns,
    pub cpu_ahead: Ns,
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds::DEFAULT
    }
}

/// The rules, each with the lesson that teaches its fix, in the order the report lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Every copy to or from the host whose host memory is `"pageable"`. Its cost: the copies'
    /// durations, summed (what pinned memory would save is the lesson's measurement, not this).
    PageableCopy,
    /// Spans on a legacy default stream in a window where other streams of the device ran
    /// work too. Its cost: the time the legacy stream's work ran while no other stream's did.
    LegacyDefaultStream,
    /// An idle gap (longer than `idle_gap_ms`) that began when a host wait of the window
    /// returned, or that a host wait spans: the host blocked until the GPU drained, and the
    /// GPU then ran nothing until the host issued more. Its cost: the gaps' lengths, summed.
    HostSyncIdle,
    /// With at least `many_small_kernels` small kernels in the window: the times between two
    /// small kernels that follow each other on one stream when the device ran nothing for
    /// longer than `launch_gap_ms` (and at most `idle_gap_ms`), and, where host calls were
    /// recorded, the host was inside a call. Its cost: that idle time, summed.
    LaunchGaps,
    /// Two consecutive operations of one stream, a copy to or from the host and a kernel in
    /// either order, back to back (the second starts at most `back_to_back_ms` after the first
    /// ends), while the other engine idled: no compute ran on the device during the copy, and
    /// no copy during the kernel. Its cost: the shorter of the two, summed over the pairs
    /// (what running the pair's work beside each other would hide).
    CopyKernelOneStream,
    /// A non-stream-ordered allocation or free (`cuMemAlloc`, `cudaFree`, …) called while the
    /// device had work of the window both before the call began and after it ended. Its cost:
    /// the calls' host time, summed.
    AllocBetweenWork,
    /// A collective (NCCL kernel) whose participants (processes or devices) started their
    /// copies of it more than `late_rank_ms` apart: the early ones' kernels waited on their
    /// SMs. Matched by order: each participant's i-th collective. Its cost: for each, the
    /// latest start minus the earliest, summed. Found across windows, not in one.
    LateRank,
    /// A copy or memset whose launching call held the host until the work was done: a call
    /// without `Async` (`cudaMemcpy`, `cuMemcpyHtoD`, `cudaMemset`), or an `…Async` copy of
    /// pageable memory that returned only once the copy had ended (the driver staged it). Its
    /// cost: those calls' host time, each call once.
    SyncCopy,
    /// An idle gap longer than `idle_gap_ms` during an allocation or free that synchronizes the
    /// device (`cudaMalloc`, `cudaFree`, `cudaHostAlloc`, ..., not the stream-ordered ones),
    /// called while the device still had work: the call waited for the device to drain, and
    /// the device then ran nothing until it returned. Its cost: the gaps' lengths, summed.
    ImplicitSync,
    /// An idle gap longer than `idle_gap_ms` that no other rule explains. Its cost: the gaps'
    /// lengths, summed.
    IdleGap,
    /// In a range's window: the work each occurrence launched ended, at the median, more than
    /// `cpu_ahead_ms` after the occurrence itself ended: the CPU ran ahead of the GPU. Not a
    /// cost but a fact (normal, and good, unless the launch queue is full): its "cost" is that
    /// median lead, and it is listed after the costs, never folded.
    CpuAhead,
}

impl Rule {
    /// The lesson that teaches the fix, as the command that runs it.
    pub fn lesson(self) -> &'static str {
        match self {
            Rule::PageableCopy => "run pinned-vs-pageable",
            Rule::LegacyDefaultStream => "run default-stream",
            Rule::HostSyncIdle => "run sync-methods",
            Rule::LaunchGaps => "run graph",
            Rule::CopyKernelOneStream => "run overlap",
            Rule::AllocBetweenWork => "run stream-ordered-alloc",
            Rule::LateRank => "run allreduce-overlap",
            // Blocking copies against asynchronous ones, with the host's time in each call.
            Rule::SyncCopy => "run basics",
            Rule::ImplicitSync => "run stream-ordered-alloc",
            // A gap the records do not explain: the events lesson teaches making a stream,
            // not the host, wait for another's work, the usual way to keep the device fed.
            Rule::IdleGap => "run events",
            // Running ahead is what streams are for: the lesson that shows the host issuing
            // while the GPU works.
            Rule::CpuAhead => "run sync-methods",
        }
    }

    /// Whether its figure is a cost (ranked and folded) rather than a fact.
    pub fn is_cost(self) -> bool {
        self != Rule::CpuAhead
    }

    /// The rule's name in the catalogs' keys (`inspect.seen.<key>`, `inspect.cost.<key>`) and
    /// in JSON.
    pub fn key(self) -> &'static str {
        match self {
            Rule::PageableCopy => "pageable_copy",
            Rule::LegacyDefaultStream => "legacy_default_stream",
            Rule::HostSyncIdle => "host_sync_idle",
            Rule::LaunchGaps => "launch_gaps",
            Rule::CopyKernelOneStream => "copy_kernel_one_stream",
            Rule::AllocBetweenWork => "alloc_between_work",
            Rule::LateRank => "late_rank",
            Rule::SyncCopy => "sync_copy",
            Rule::ImplicitSync => "implicit_sync",
            Rule::IdleGap => "idle_gap",
            Rule::CpuAhead => "cpu_ahead",
        }
    }
}

/// One record a finding points at.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Example {
    pub stream: String,
    pub label: String,
    pub start_ms: f64,
}

impl Example {
    /// The record `piece` of `p` (its clipped start), its time from `origin`.
    pub fn of(p: &Process, piece: &Piece, origin: Ns) -> Example {
        let i = piece.index as usize;
        Example {
            stream: p.rows[p.gpu.row[i] as usize].name.clone(),
            label: p.names.get(p.gpu.label[i]).to_string(),
            start_ms: ms_since(origin, piece.start),
        }
    }
}

/// How far the CPU ran ahead ([`Rule::CpuAhead`]): the lead of each occurrence's work over
/// the occurrence's end, at the median and at most, in ms and in occurrences (the median lead
/// over the median time from one occurrence's start to the next's), and how long launch
/// calls took in the window at the median (a full launch queue makes them block).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Ahead {
    pub median_ms: f64,
    pub max_ms: f64,
    pub steps: Option<f64>,
    pub launch_call_us: Option<f64>,
}

/// A rule that matched, how often, what it cost (each rule's doc defines it), the earliest
/// record it matched and the lesson.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub rule: Rule,
    pub count: usize,
    pub cost_ms: f64,
    pub example: Example,
    pub lesson: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ahead: Option<Ahead>,
}

impl Finding {
    pub fn new(rule: Rule, count: usize, cost_ms: f64, example: Example) -> Finding {
        Finding { rule, count, cost_ms, example, lesson: rule.lesson(), ahead: None }
    }
}

/// Findings under this share of their window's time are folded into one line.
pub const FOLD_SHARE: f64 = 0.01;

/// The findings folded into one line of the text (the JSON keeps each), their matches and
/// their cost summed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Folded {
    pub findings: Vec<Finding>,
    pub count: usize,
    pub cost_ms: f64,
}

/// `found` ranked by cost, the costliest first (facts after the costs, in rule order); those
/// whose cost is under [`FOLD_SHARE`] of `window_ms` folded apart.
pub fn rank(mut found: Vec<Finding>, window_ms: f64) -> (Vec<Finding>, Option<Folded>) {
    found.sort_by(|a, b| {
        let fact = |f: &Finding| !f.rule.is_cost();
        fact(a).cmp(&fact(b)).then(b.cost_ms.total_cmp(&a.cost_ms))
    });
    let small = |f: &Finding| f.rule.is_cost() && f.cost_ms < FOLD_SHARE * window_ms;
    let (folded, kept): (Vec<Finding>, Vec<Finding>) = found.into_iter().partition(small);
    let summary = (!folded.is_empty()).then(|| Folded {
        count: folded.iter().map(|f| f.count).sum(),
        cost_ms: folded.iter().map(|f| f.cost_ms).sum(),
        findings: folded,
    });
    (kept, summary)
}

/// Each row's pieces, in the order they ran.
pub fn by_row(p: &Process, pieces: &[Piece]) -> Vec<Vec<Piece>> {
    let mut sorted: Vec<Piece> = pieces.to_vec();
    sorted.sort_unstable_by_key(|piece| (p.gpu.row[piece.index as usize], piece.start, piece.end));
    let mut rows: Vec<Vec<Piece>> = Vec::new();
    let mut current = None;
    for piece in sorted {
        let row = p.gpu.row[piece.index as usize];
        if current != Some(row) {
            current = Some(row);
            rows.push(Vec::new());
        }
        if let Some(last) = rows.last_mut() {
            last.push(piece);
        }
    }
    rows
}

/// The piece that started first.
pub fn earliest<'a>(pieces: impl IntoIterator<Item = &'a Piece>) -> Option<&'a Piece> {
    pieces.into_iter().min_by_key(|p| (p.start, p.end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(rule: Rule, cost_ms: f64) -> Finding {
        let example = Example { stream: "s".into(), label: "k".into(), start_ms: 0.0 };
        Finding::new(rule, 2, cost_ms, example)
    }

    #[test]
    fn findings_are_ranked_by_cost_and_the_small_ones_folded() {
        let found = vec![
            finding(Rule::PageableCopy, 0.5),
            finding(Rule::CpuAhead, 0.001),
            finding(Rule::IdleGap, 600.0),
            finding(Rule::LaunchGaps, 0.007),
            finding(Rule::HostSyncIdle, 3.0),
        ];
        let (kept, folded) = rank(found, 1000.0);
        let rules: Vec<Rule> = kept.iter().map(|f| f.rule).collect();
        // Under 1% of 1000 ms (10 ms): folded; the fact is kept whatever its figure.
        assert_eq!(rules, [Rule::IdleGap, Rule::CpuAhead]);
        let folded = folded.unwrap();
        let folded_rules: Vec<Rule> = folded.findings.iter().map(|f| f.rule).collect();
        assert_eq!(folded_rules, [Rule::HostSyncIdle, Rule::PageableCopy, Rule::LaunchGaps]);
        assert_eq!(folded.count, 6);
        assert!((folded.cost_ms - 3.507).abs() < 1e-9, "{folded:?}");
        let (kept, folded) = rank(vec![finding(Rule::IdleGap, 1.0)], 50.0);
        assert_eq!((kept.len(), folded), (1, None));
    }
}
