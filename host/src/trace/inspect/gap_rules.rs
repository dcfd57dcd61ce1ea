//! The rules over the times a device ran nothing: gaps a host wait explains
//! ([`Rule::HostSyncIdle`]), short gaps between small kernels while the host was issuing
//! ([`Rule::LaunchGaps`]), and long gaps nothing recorded explains ([`Rule::IdleGap`]). A long
//! gap is counted by one rule only.
use crate::lab::record::intervals::{covered, gaps, intersection, union, Interval, EPS_MS};
use crate::lab::record::span::{Span, Work};
use crate::trace::inspect::engines::Engine;
use crate::trace::inspect::findings::{by_stream, earliest, Example, Finding, Rule, Thresholds};
use crate::trace::inspect::host::CallKind;
use crate::trace::inspect::windows::WindowRecords;

/// What the gap rules found in one window.
#[derive(Debug, Default)]
pub(super) struct GapFindings {
    pub host_sync_idle: Option<Finding>,
    pub launch_gaps: Option<Finding>,
    pub idle_gap: Option<Finding>,
}

pub(super) fn find(w: &WindowRecords, spans: &[&Span], t: &Thresholds) -> GapFindings {
    let device = union(
        spans
            .iter()
            .filter(|s| Engine::of(s.kind).is_some())
            .map(|s| (s.start_ms, s.end_ms))
            .collect(),
    );
    // Only the parts of a gap inside the window count (a range marked twice has a gap
    // between its occurrences that is not its own).
    let inside = if w.intervals.is_empty() {
        gaps(&device)
    } else {
        intersection(&gaps(&device), &w.intervals)
    };
    let long: Vec<Interval> =
        inside.into_iter().filter(|(s, e)| e - s > t.idle_gap_ms + EPS_MS).collect();
    let after_a_wait = |&(start, end): &Interval| {
        w.waits.iter().any(|wait| wait.start_ms <= end + EPS_MS && wait.end_ms >= start - EPS_MS)
    };
    let (waited, unexplained): (Vec<Interval>, Vec<Interval>) =
        long.into_iter().partition(after_a_wait);
    GapFindings {
        host_sync_idle: gap_finding(Rule::HostSyncIdle, &waited, spans),
        launch_gaps: launch_gaps(w, spans, &device, t),
        idle_gap: gap_finding(Rule::IdleGap, &unexplained, spans),
    }
}

/// A finding of `gaps`: their count, their summed length, and the first work after the first
/// gap (a gap cut at a window's edge has no work starting right at its end: the next work of
/// the window, or the last before the gap where none follows).
fn gap_finding(rule: Rule, gaps: &[Interval], spans: &[&Span]) -> Option<Finding> {
    let (first_start, first_end) = *gaps.first()?;
    let cost = gaps.iter().map(|(start, end)| end - start).sum();
    let on_engine = || spans.iter().copied().filter(|s| Engine::of(s.kind).is_some());
    let after = earliest(on_engine().filter(|s| s.start_ms >= first_end - EPS_MS));
    let before = || {
        on_engine()
            .filter(|s| s.end_ms <= first_start + EPS_MS)
            .max_by(|a, b| a.end_ms.total_cmp(&b.end_ms))
    };
    let example = after.or_else(before)?;
    Some(Finding::new(rule, gaps.len(), cost, Example::of(example)))
}

fn launch_gaps(
    w: &WindowRecords,
    spans: &[&Span],
    device: &[Interval],
    t: &Thresholds,
) -> Option<Finding> {
    let is_small = |s: &Span| s.kind == Work::Kernel && s.ms() <= t.small_kernel_ms + EPS_MS;
    let small = spans.iter().filter(|s| is_small(s)).count();
    if small == 0 || small < t.many_small_kernels {
        return None;
    }
    let host_issuing = |start: f64, end: f64| {
        !w.host_calls_recorded
            || w.calls
                .iter()
                .any(|c| c.kind != CallKind::Sync && c.start_ms < end && c.end_ms > start)
    };
    let mut late: Vec<(&Span, f64)> = Vec::new();
    for list in by_stream(spans).values() {
        for pair in list.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let between = b.start_ms - a.end_ms;
            if !is_small(a) || !is_small(b) || between > t.idle_gap_ms + EPS_MS {
                continue;
            }
            let idle = between - covered(device, a.end_ms, b.start_ms);
            if idle > t.launch_gap_ms + EPS_MS && host_issuing(a.end_ms, b.start_ms) {
                late.push((b, idle));
            }
        }
    }
    let cost = late.iter().map(|(_, idle)| idle).sum();
    let example = earliest(late.iter().map(|(s, _)| *s))?;
    Some(Finding::new(Rule::LaunchGaps, late.len(), cost, Example::of(example)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::inspect::host::{HostCall, HostWait, WaitKind};

    fn span(stream: &str, kind: Work, start_ms: f64, end_ms: f64) -> Span {
        Span::new(stream, kind, kind.role(), start_ms, end_ms)
    }

    fn records<'a>(
        spans: &[Span],
        calls: &[&'a HostCall],
        waits: &[&'a HostWait],
    ) -> WindowRecords<'a> {
        WindowRecords {
            spans: spans.to_vec(),
            calls: calls.to_vec(),
            waits: waits.to_vec(),
            legacy_rows: Vec::new(),
            blocking_rows: Vec::new(),
            host_calls_recorded: !calls.is_empty(),
            intervals: Vec::new(),
        }
    }

    fn found(w: &WindowRecords, t: &Thresholds) -> GapFindings {
        find(w, &w.span_refs(), t)
    }

    fn wait(start_ms: f64, end_ms: f64) -> HostWait {
        HostWait { process: 0, kind: WaitKind::Stream, device: 0, stream: None, start_ms, end_ms }
    }

    fn launch(start_ms: f64, end_ms: f64) -> HostCall {
        HostCall {
            process: 0,
            thread: 1,
            name: "cuLaunchKernel".into(),
            kind: CallKind::Launch,
            start_ms,
            end_ms,
        }
    }

    fn assert_ms(actual: f64, expected: f64) {
        assert!((actual - expected).abs() < 1e-9, "{actual} ms, expected {expected} ms");
    }

    #[test]
    fn a_gap_after_a_host_wait_is_the_waits_and_one_without_is_unexplained() {
        let t = Thresholds::DEFAULT;
        let spans = [
            span("s", Work::Kernel, 0.0, 1.0),
            span("s", Work::Kernel, 1.5, 2.0),
            span("s", Work::CopyToHost, 3.0, 3.5),
        ];
        // The host waited for the first kernel (returned at 1.0), then the device idled
        // 0.5 ms; the second gap (1.0 ms) has no wait near it.
        let w = wait(0.2, 1.0);
        let got = found(&records(&spans, &[], &[&w]), &t);
        let synced = got.host_sync_idle.unwrap();
        assert_eq!((synced.count, synced.lesson), (1, "run sync-methods"));
        assert_ms(synced.cost_ms, 0.5);
        assert_eq!(synced.example.start_ms, 1.5);
        let idle = got.idle_gap.unwrap();
        assert_eq!((idle.count, idle.lesson), (1, "run events"));
        assert_ms(idle.cost_ms, 1.0);
        // Without the wait, both gaps are unexplained.
        let got = found(&records(&spans, &[], &[]), &t);
        assert!(got.host_sync_idle.is_none());
        assert_eq!(got.idle_gap.unwrap().count, 2);
    }

    #[test]
    fn a_gap_at_the_threshold_is_not_found_and_one_just_over_it_is() {
        let t = Thresholds::DEFAULT;
        // 2.1 - 2.0 is 0.10000000000000009 in f64: still at the threshold.
        let at = [span("s", Work::Kernel, 0.0, 2.0), span("t", Work::Kernel, 2.1, 3.0)];
        assert!(found(&records(&at, &[], &[]), &t).idle_gap.is_none());
        // 1 µs over, with a host function in the gap (it runs on no engine of the GPU).
        let over = [
            span("s", Work::Kernel, 0.0, 2.0),
            span("s", Work::HostFn, 2.0, 2.101),
            span("t", Work::CopyToHost, 2.101, 3.0),
            span("t", Work::Kernel, 3.5, 4.0),
        ];
        let f = found(&records(&over, &[], &[]), &t).idle_gap.unwrap();
        assert_eq!(f.count, 2);
        assert_ms(f.cost_ms, 0.601);
        assert_eq!(
            f.example,
            Example { stream: "t".into(), label: "copy-out".into(), start_ms: 2.101 }
        );
    }

    #[test]
    fn a_gap_cut_at_the_windows_edge_keeps_its_finding() {
        // The window covers 0..1.5 and 3..4: the gap after the wait (1.0..1.5 inside the
        // window) ends where no work starts; the example is the next work, at 3.0.
        let spans = [span("s", Work::Kernel, 0.0, 1.0), span("s", Work::Kernel, 3.0, 4.0)];
        let w = wait(0.5, 1.0);
        let mut held = records(&spans, &[], &[&w]);
        held.intervals = vec![(0.0, 1.5), (3.0, 4.0)];
        let f = found(&held, &Thresholds::DEFAULT).host_sync_idle.unwrap();
        assert_eq!(f.count, 1);
        assert_ms(f.cost_ms, 0.5);
        assert_eq!(f.example.start_ms, 3.0);
    }

    /// `n` kernels of `ms` on one stream, one every 20 µs.
    fn kernels(n: usize, ms: f64) -> Vec<Span> {
        (0..n).map(|i| span("s", Work::Kernel, i as f64 * 0.02, i as f64 * 0.02 + ms)).collect()
    }

    #[test]
    fn launch_gaps_between_small_kernels_while_the_host_issues() {
        let t = Thresholds::DEFAULT;
        // 5 µs kernels every 20 µs: 15 µs idle between each two, the host launching all along.
        let host = launch(0.0, 2.0);
        let f = found(&records(&kernels(100, 0.005), &[&host], &[]), &t).launch_gaps.unwrap();
        assert_eq!((f.count, f.lesson), (99, "run graph"));
        assert_ms(f.cost_ms, 99.0 * 0.015);
        assert_eq!(f.example.start_ms, 0.02);
        // A kernel on another stream fills 10 µs of the first gap: 10 µs less idle.
        let mut filled = kernels(100, 0.005);
        filled.push(span("u", Work::Kernel, 0.005, 0.015));
        let f = found(&records(&filled, &[&host], &[]), &t).launch_gaps.unwrap();
        assert_ms(f.cost_ms, 99.0 * 0.015 - 0.01);
        // The host was not inside any call during the gaps (it launched early, then slept):
        // the gaps are not the host's launch latency.
        let early = launch(-1.0, -0.5);
        assert!(found(&records(&kernels(100, 0.005), &[&early], &[]), &t).launch_gaps.is_none());
        // One fewer than many, kernels longer than small, or gaps of 1 µs: nothing.
        assert!(found(&records(&kernels(99, 0.005), &[&host], &[]), &t).launch_gaps.is_none());
        assert!(found(&records(&kernels(100, 0.015), &[&host], &[]), &t).launch_gaps.is_none());
        assert!(found(&records(&kernels(100, 0.019), &[&host], &[]), &t).launch_gaps.is_none());
    }
}
