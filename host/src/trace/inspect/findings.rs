//! What a finding is: the rules (each stated exactly in its [`Rule`] variant's doc), their
//! thresholds, and a match's count, cost and example. A finding is only what the records
//! show, and its wording (the catalogs' `inspect.seen.*`) says what was seen, not why. The
//! rules themselves live in `rules` (over one window's spans and calls), `gap_rules` (over
//! the device's idle gaps) and `ranks` (across windows).
use std::collections::BTreeMap;

use serde::Serialize;

use crate::lab::record::span::Span;

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
    };
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
    /// An idle gap longer than `idle_gap_ms` that no other rule explains. Its cost: the gaps'
    /// lengths, summed.
    IdleGap,
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
            // A gap the records do not explain: the events lesson teaches making a stream,
            // not the host, wait for another's work, the usual way to keep the device fed.
            Rule::IdleGap => "run events",
        }
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
            Rule::IdleGap => "idle_gap",
        }
    }
}

/// One span a finding points at.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Example {
    pub stream: String,
    pub label: String,
    pub start_ms: f64,
}

impl Example {
    pub(super) fn of(span: &Span) -> Example {
        Example {
            stream: span.stream.clone(),
            label: span.title().to_string(),
            start_ms: span.start_ms,
        }
    }
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
}

impl Finding {
    pub(super) fn new(rule: Rule, count: usize, cost_ms: f64, example: Example) -> Finding {
        Finding { rule, count, cost_ms, example, lesson: rule.lesson() }
    }
}

/// Each stream's spans in the order they ran.
pub(super) fn by_stream<'a>(spans: &[&'a Span]) -> BTreeMap<&'a str, Vec<&'a Span>> {
    let mut streams: BTreeMap<&str, Vec<&Span>> = BTreeMap::new();
    for s in spans {
        streams.entry(s.stream.as_str()).or_default().push(s);
    }
    for list in streams.values_mut() {
        list.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms).then(a.end_ms.total_cmp(&b.end_ms)));
    }
    streams
}

pub(super) fn earliest<'a>(spans: impl IntoIterator<Item = &'a Span>) -> Option<&'a Span> {
    spans.into_iter().min_by(|a, b| a.start_ms.total_cmp(&b.start_ms))
}
