//! What keeps a window from overlapping, found by rules over its device spans. Each rule is
//! stated exactly in its [`Rule`] variant's doc; a finding is only what the spans show (no
//! host calls are read yet), and its wording says what was seen, not why.
use std::collections::BTreeMap;

use serde::Serialize;

use crate::lab::inspect::engines::{busy, Engine};
use crate::lab::inspect::intervals::{covered, gaps, EPS_MS};
use crate::lab::record::span::{Span, Work};

/// Every threshold a finding uses. The defaults are [`Thresholds::DEFAULT`], declared once;
/// `streamlab trace` will let flags set each one, and the report prints those it used.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Thresholds {
    /// An idle gap is a time longer than this when the device ran nothing.
    pub idle_gap_ms: f64,
    /// A copy and a kernel on one stream are back to back when the second starts within this
    /// of the first's end.
    pub back_to_back_ms: f64,
    /// A kernel this short or shorter is small.
    pub small_kernel_ms: f64,
    /// This many small kernels in a window, or more, are many.
    pub many_small_kernels: usize,
}

impl Thresholds {
    pub const DEFAULT: Thresholds = Thresholds {
        // 100 µs: some twenty launch latencies (a launch costs the host about 5 µs), so the
        // normal cost of issuing work does not count; a host wait or host work does.
        idle_gap_ms: 0.1,
        // 50 µs: a stream starts its next operation a few µs after the last one ends.
        back_to_back_ms: 0.05,
        // 10 µs: about two launches' worth of host time, so the host can barely keep ahead.
        small_kernel_ms: 0.01,
        // 100: enough that the launches' cost adds up to something a graph would save.
        many_small_kernels: 100,
    };
}

impl Default for Thresholds {
    fn default() -> Thresholds {
        Thresholds::DEFAULT
    }
}

/// The rules, each with the lesson that teaches its fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Every copy to or from the host whose host memory is `"pageable"`. Its cost: the copies'
    /// durations, summed (what pinned memory would save is the lesson's measurement, not this).
    PageableCopy,
    /// Two consecutive operations of one stream, a copy to or from the host and a kernel in
    /// either order, back to back (the second starts at most `back_to_back_ms` after the first
    /// ends), while the other engine idled: no compute ran on the device during the copy, and
    /// no copy during the kernel. Its cost: the shorter of the two, summed over the pairs
    /// (what running the pair's work beside each other would hide).
    CopyKernelOneStream,
    /// A time longer than `idle_gap_ms` between two busy times of the device, when no span of
    /// any engine ran (host functions run on no engine). Its cost: the gaps' lengths, summed.
    IdleGap,
    /// At least `many_small_kernels` kernels (not graph launches) of at most `small_kernel_ms`
    /// in the window. Its cost: the time the device ran nothing between two small kernels that
    /// follow each other on one stream, summed.
    ManySmallKernels,
}

impl Rule {
    /// The lesson that teaches the fix, as the command that runs it.
    pub fn lesson(self) -> &'static str {
        match self {
            Rule::PageableCopy => "run pinned-vs-pageable",
            Rule::CopyKernelOneStream => "run overlap",
            // A gap in the device's spans is what a host wait leaves (the issue's "host
            // synchronizations that leave the GPU idle"): sync-methods teaches waiting on the
            // narrowest thing. `events` teaches replacing a host wait by a stream's wait, but a
            // gap does not show a dependency between streams, so it is not the first lesson.
            Rule::IdleGap => "run sync-methods",
            Rule::ManySmallKernels => "run graph",
        }
    }

    /// What was seen, in English (the catalogs come with `streamlab trace`).
    pub fn seen(self) -> &'static str {
        match self {
            Rule::PageableCopy => "copies from or to pageable host memory",
            Rule::CopyKernelOneStream => {
                "a copy and a kernel back to back on one stream, the other engine idle"
            }
            Rule::IdleGap => "gaps when the device ran nothing (the spans do not say why)",
            Rule::ManySmallKernels => "many small kernels",
        }
    }

    /// What the cost is, in English.
    pub fn cost_is(self) -> &'static str {
        match self {
            Rule::PageableCopy => "the copies' time",
            Rule::CopyKernelOneStream => "the shorter of each pair",
            Rule::IdleGap => "the gaps' length",
            Rule::ManySmallKernels => "device idle between them on a stream",
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
    fn of(span: &Span) -> Example {
        Example {
            stream: span.stream.clone(),
            label: span.title().to_string(),
            start_ms: span.start_ms,
        }
    }
}

/// A rule that matched, how often, what it cost (each rule's doc defines it), the earliest
/// span it matched and the lesson.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub rule: Rule,
    pub count: usize,
    pub cost_ms: f64,
    pub example: Example,
    pub lesson: &'static str,
}

impl Finding {
    fn new(rule: Rule, count: usize, cost_ms: f64, example: &Span) -> Finding {
        Finding { rule, count, cost_ms, example: Example::of(example), lesson: rule.lesson() }
    }
}

/// The findings of one window's spans (one device's), in [`Rule`]'s order.
pub fn find(spans: &[&Span], t: &Thresholds) -> Vec<Finding> {
    [pageable_copies(spans), copy_kernel_one_stream(spans, t), idle_gaps(spans, t)]
        .into_iter()
        .chain([many_small_kernels(spans, t)])
        .flatten()
        .collect()
}

fn is_host_copy(kind: Work) -> bool {
    matches!(kind, Work::CopyToDevice | Work::CopyToHost)
}

/// Each stream's spans in the order they ran.
fn by_stream<'a>(spans: &[&'a Span]) -> BTreeMap<&'a str, Vec<&'a Span>> {
    let mut streams: BTreeMap<&str, Vec<&Span>> = BTreeMap::new();
    for s in spans {
        streams.entry(s.stream.as_str()).or_default().push(s);
    }
    for list in streams.values_mut() {
        list.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms).then(a.end_ms.total_cmp(&b.end_ms)));
    }
    streams
}

fn earliest<'a>(spans: impl IntoIterator<Item = &'a Span>) -> Option<&'a Span> {
    spans.into_iter().min_by(|a, b| a.start_ms.total_cmp(&b.start_ms))
}

fn pageable_copies(spans: &[&Span]) -> Option<Finding> {
    let pageable: Vec<&Span> =
        spans.iter().copied().filter(|s| is_host_copy(s.kind) && s.memory == "pageable").collect();
    let cost: f64 = pageable.iter().map(|s| s.ms()).sum();
    let example = earliest(pageable.iter().copied())?;
    Some(Finding::new(Rule::PageableCopy, pageable.len(), cost, example))
}

fn copy_kernel_one_stream(spans: &[&Span], t: &Thresholds) -> Option<Finding> {
    let compute = busy(spans, |e| e == Engine::Compute);
    let copies = busy(spans, Engine::is_copy);
    let mut pairs: Vec<(&Span, f64)> = Vec::new();
    for list in by_stream(spans).values() {
        for pair in list.windows(2) {
            let (first, second) = (pair[0], pair[1]);
            let (copy, kernel) = match (first.kind, second.kind) {
                (c, Work::Kernel) if is_host_copy(c) => (first, second),
                (Work::Kernel, c) if is_host_copy(c) => (second, first),
                _ => continue,
            };
            let back_to_back = second.start_ms - first.end_ms <= t.back_to_back_ms + EPS_MS;
            let copy_alone = covered(&compute, copy.start_ms, copy.end_ms) <= EPS_MS;
            let kernel_alone = covered(&copies, kernel.start_ms, kernel.end_ms) <= EPS_MS;
            if back_to_back && copy_alone && kernel_alone {
                pairs.push((first, copy.ms().min(kernel.ms())));
            }
        }
    }
    let cost = pairs.iter().map(|(_, ms)| ms).sum();
    let example = earliest(pairs.iter().map(|(s, _)| *s))?;
    Some(Finding::new(Rule::CopyKernelOneStream, pairs.len(), cost, example))
}

fn idle_gaps(spans: &[&Span], t: &Thresholds) -> Option<Finding> {
    let device = busy(spans, |_| true);
    let idle: Vec<(f64, f64)> = gaps(&device)
        .into_iter()
        .filter(|(start, end)| end - start > t.idle_gap_ms + EPS_MS)
        .collect();
    let cost = idle.iter().map(|(start, end)| end - start).sum();
    // The example is the work that ended the first gap.
    let first_end = idle.first()?.1;
    let after = spans
        .iter()
        .copied()
        .filter(|s| Engine::of(s.kind).is_some() && (s.start_ms - first_end).abs() <= EPS_MS);
    let example = earliest(after)?;
    Some(Finding::new(Rule::IdleGap, idle.len(), cost, example))
}

fn many_small_kernels(spans: &[&Span], t: &Thresholds) -> Option<Finding> {
    let is_small = |s: &Span| s.kind == Work::Kernel && s.ms() <= t.small_kernel_ms + EPS_MS;
    let small: Vec<&Span> = spans.iter().copied().filter(|s| is_small(s)).collect();
    if small.is_empty() || small.len() < t.many_small_kernels {
        return None;
    }
    let device = busy(spans, |_| true);
    let mut idle_between = 0.0;
    for list in by_stream(spans).values() {
        for pair in list.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if is_small(a) && is_small(b) && b.start_ms > a.end_ms {
                idle_between += (b.start_ms - a.end_ms) - covered(&device, a.end_ms, b.start_ms);
            }
        }
    }
    let example = earliest(small.iter().copied())?;
    Some(Finding::new(Rule::ManySmallKernels, small.len(), idle_between, example))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(stream: &str, kind: Work, start_ms: f64, end_ms: f64) -> Span {
        Span::new(stream, kind, kind.role(), start_ms, end_ms)
    }

    fn found(spans: &[Span], t: &Thresholds, rule: Rule) -> Option<Finding> {
        let spans: Vec<&Span> = spans.iter().collect();
        find(&spans, t).into_iter().find(|f| f.rule == rule)
    }

    fn assert_ms(actual: f64, expected: f64) {
        assert!((actual - expected).abs() < 1e-9, "{actual} ms, expected {expected} ms");
    }

    #[test]
    fn pageable_copies_are_found_with_their_time() {
        let mut spans = vec![
            span("s", Work::CopyToDevice, 2.0, 3.0),
            span("s", Work::CopyToDevice, 0.5, 2.0),
            span("s", Work::Kernel, 3.0, 4.0),
            span("t", Work::CopyToHost, 4.0, 4.25),
        ];
        spans[0].memory = "pinned".into();
        spans[1].memory = "pageable".into();
        spans[3].memory = "pageable".into();
        let f = found(&spans, &Thresholds::DEFAULT, Rule::PageableCopy).unwrap();
        assert_eq!((f.count, f.lesson), (2, "run pinned-vs-pageable"));
        assert_ms(f.cost_ms, 1.75);
        assert_eq!(
            f.example,
            Example { stream: "s".into(), label: "copy-in".into(), start_ms: 0.5 }
        );
        // Pinned only: nothing found.
        spans[1].memory = "pinned".into();
        spans[3].memory = String::new();
        assert_eq!(found(&spans, &Thresholds::DEFAULT, Rule::PageableCopy), None);
    }

    #[test]
    fn copy_kernel_copy_on_one_stream_is_flagged_and_the_same_work_on_two_streams_is_not() {
        let chunk = |stream: &str, at: f64| {
            vec![
                span(stream, Work::CopyToDevice, at, at + 1.0),
                span(stream, Work::Kernel, at + 1.0, at + 2.0),
                span(stream, Work::CopyToHost, at + 2.0, at + 3.0),
            ]
        };
        // Two chunks, one after the other on one stream: four copy-kernel pairs, each alone.
        let one_stream = [chunk("s", 0.0), chunk("s", 3.0)].concat();
        let f = found(&one_stream, &Thresholds::DEFAULT, Rule::CopyKernelOneStream).unwrap();
        assert_eq!((f.count, f.lesson), (4, "run overlap"));
        assert_ms(f.cost_ms, 4.0);
        assert_eq!((f.example.stream.as_str(), f.example.start_ms), ("s", 0.0));
        // The same chunks on two streams, the second a step behind: each copy but the first
        // and the last runs under a kernel, so no pair ran with the other engine idle.
        let two_streams = [chunk("a", 0.0), chunk("b", 1.0)].concat();
        assert_eq!(found(&two_streams, &Thresholds::DEFAULT, Rule::CopyKernelOneStream), None);
        // Not back to back: a kernel 0.5 ms after its copy is not a pair (over 0.05 ms).
        let apart = [span("s", Work::CopyToDevice, 0.0, 1.0), span("s", Work::Kernel, 1.5, 2.5)];
        assert_eq!(found(&apart, &Thresholds::DEFAULT, Rule::CopyKernelOneStream), None);
    }

    #[test]
    fn an_idle_gap_at_the_threshold_is_not_found_and_one_just_over_it_is() {
        let t = Thresholds::DEFAULT;
        assert_eq!(t.idle_gap_ms, 0.1);
        // 2.1 - 2.0 is 0.10000000000000009 in f64: still at the threshold.
        let at = [span("s", Work::Kernel, 0.0, 2.0), span("t", Work::Kernel, 2.1, 3.0)];
        assert_eq!(found(&at, &t, Rule::IdleGap), None);
        // 1 µs over, with a host function in the gap (it runs on no engine of the GPU).
        let over = [
            span("s", Work::Kernel, 0.0, 2.0),
            span("s", Work::HostFn, 2.0, 2.101),
            span("t", Work::CopyToHost, 2.101, 3.0),
            span("t", Work::Kernel, 3.5, 4.0),
        ];
        let f = found(&over, &t, Rule::IdleGap).unwrap();
        assert_eq!((f.count, f.lesson), (2, "run sync-methods"));
        assert_ms(f.cost_ms, 0.601);
        assert_eq!(
            f.example,
            Example { stream: "t".into(), label: "copy-out".into(), start_ms: 2.101 }
        );
    }

    #[test]
    fn many_small_kernels_are_found_with_the_idle_time_between_them() {
        let t = Thresholds::DEFAULT;
        // Kernels of 5 µs every 20 µs on one stream: 15 µs idle between each two.
        let kernels = |n: usize, ms: f64| -> Vec<Span> {
            (0..n).map(|i| span("s", Work::Kernel, i as f64 * 0.02, i as f64 * 0.02 + ms)).collect()
        };
        let f = found(&kernels(100, 0.005), &t, Rule::ManySmallKernels).unwrap();
        assert_eq!((f.count, f.lesson), (100, "run graph"));
        assert_ms(f.cost_ms, 99.0 * 0.015);
        assert_eq!(f.example.start_ms, 0.0);
        // A kernel on another stream fills 10 µs of the first gap: 10 µs less idle.
        let mut filled = kernels(100, 0.005);
        filled.push(span("u", Work::Kernel, 0.005, 0.015));
        let f = found(&filled, &t, Rule::ManySmallKernels).unwrap();
        assert_eq!(f.count, 101);
        assert_ms(f.cost_ms, 99.0 * 0.015 - 0.01);
        // One fewer than many, or kernels longer than small: nothing.
        assert_eq!(found(&kernels(99, 0.005), &t, Rule::ManySmallKernels), None);
        assert_eq!(found(&kernels(100, 0.015), &t, Rule::ManySmallKernels), None);
    }

    #[test]
    fn no_spans_no_findings() {
        assert!(find(&[], &Thresholds::DEFAULT).is_empty());
    }
}
