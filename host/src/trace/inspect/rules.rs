//! The rules over one window's spans and host calls, and [`find`], which runs every rule of a
//! window (the gap rules included) in [`Rule`]'s order.
use crate::lab::record::intervals::{covered, length, overlap, union, EPS_MS};
use crate::lab::record::span::{Span, Work};
use crate::trace::inspect::engines::{busy, Engine};
use crate::trace::inspect::findings::{by_stream, earliest, Example, Finding, Rule, Thresholds};
use crate::trace::inspect::gap_rules;
use crate::trace::inspect::host::CallKind;
use crate::trace::inspect::windows::WindowRecords;

/// The findings of one window, in [`Rule`]'s order (all but [`Rule::LateRank`]).
pub fn find(w: &WindowRecords, t: &Thresholds) -> Vec<Finding> {
    let spans = w.span_refs();
    let gaps = gap_rules::find(w, &spans, t);
    [
        pageable_copies(&spans),
        legacy_default_stream(w, &spans),
        gaps.host_sync_idle,
        gaps.launch_gaps,
        copy_kernel_one_stream(&spans, t),
        alloc_between_work(w, &spans),
        gaps.idle_gap,
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn is_host_copy(kind: Work) -> bool {
    matches!(kind, Work::CopyToDevice | Work::CopyToHost)
}

fn pageable_copies(spans: &[&Span]) -> Option<Finding> {
    let pageable: Vec<&Span> =
        spans.iter().copied().filter(|s| is_host_copy(s.kind) && s.memory == "pageable").collect();
    let cost: f64 = pageable.iter().map(|s| s.ms()).sum();
    let example = earliest(pageable.iter().copied())?;
    Some(Finding::new(Rule::PageableCopy, pageable.len(), cost, Example::of(example)))
}

fn legacy_default_stream(w: &WindowRecords, spans: &[&Span]) -> Option<Finding> {
    // Only blocking streams wait for the legacy one (and it for them); a stream created
    // non-blocking, or one whose flags the records do not give, is not claimed.
    let on_engine: Vec<&Span> =
        spans.iter().copied().filter(|s| Engine::of(s.kind).is_some()).collect();
    let legacy: Vec<&Span> = on_engine.iter().copied().filter(|s| w.is_legacy(&s.stream)).collect();
    let blocking: Vec<&Span> = on_engine
        .iter()
        .copied()
        .filter(|s| !w.is_legacy(&s.stream) && w.is_blocking(&s.stream))
        .collect();
    if legacy.is_empty() || blocking.is_empty() {
        return None;
    }
    let legacy_busy = union(legacy.iter().map(|s| (s.start_ms, s.end_ms)).collect());
    let others_busy = union(blocking.iter().map(|s| (s.start_ms, s.end_ms)).collect());
    let alone = length(&legacy_busy) - overlap(&legacy_busy, &others_busy);
    let example = earliest(legacy.iter().copied())?;
    Some(Finding::new(Rule::LegacyDefaultStream, legacy.len(), alone, Example::of(example)))
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
    Some(Finding::new(Rule::CopyKernelOneStream, pairs.len(), cost, Example::of(example)))
}

fn alloc_between_work(w: &WindowRecords, spans: &[&Span]) -> Option<Finding> {
    let on_engine: Vec<&Span> =
        spans.iter().copied().filter(|s| Engine::of(s.kind).is_some()).collect();
    let between: Vec<_> = w
        .calls
        .iter()
        .filter(|c| matches!(c.kind, CallKind::Alloc | CallKind::Free))
        .filter(|c| {
            let before = on_engine.iter().any(|s| s.end_ms <= c.start_ms + EPS_MS);
            let after = on_engine.iter().any(|s| s.start_ms >= c.end_ms - EPS_MS);
            before && after
        })
        .collect();
    let first = between.iter().min_by(|a, b| a.start_ms.total_cmp(&b.start_ms))?;
    let cost = between.iter().map(|c| c.end_ms - c.start_ms).sum();
    let example = Example {
        stream: format!("host thread {}", first.thread),
        label: first.name.clone(),
        start_ms: first.start_ms,
    };
    Some(Finding::new(Rule::AllocBetweenWork, between.len(), cost, example))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::inspect::host::HostCall;

    fn span(stream: &str, kind: Work, start_ms: f64, end_ms: f64) -> Span {
        Span::new(stream, kind, kind.role(), start_ms, end_ms)
    }

    fn window<'a>(spans: &[Span], calls: &[&'a HostCall], legacy: &[&str]) -> WindowRecords<'a> {
        WindowRecords {
            spans: spans.to_vec(),
            calls: calls.to_vec(),
            waits: Vec::new(),
            legacy_rows: legacy.iter().map(|r| r.to_string()).collect(),
            // Every other row blocking, as streams created without flags are.
            blocking_rows: spans.iter().map(|s| s.stream.clone()).collect(),
            host_calls_recorded: !calls.is_empty(),
            intervals: Vec::new(),
        }
    }

    fn found(spans: &[Span], t: &Thresholds, rule: Rule) -> Option<Finding> {
        find(&window(spans, &[], &[]), t).into_iter().find(|f| f.rule == rule)
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
    fn the_legacy_stream_beside_others_is_found_with_the_time_it_ran_alone() {
        let legacy = ["legacy default stream"];
        let spans = [
            span("legacy default stream", Work::Kernel, 0.0, 2.0),
            span("stream 13", Work::Kernel, 1.5, 3.0),
            span("stream 14", Work::CopyToDevice, 3.0, 4.0),
        ];
        let all = find(&window(&spans, &[], &legacy), &Thresholds::DEFAULT);
        let f = all.iter().find(|f| f.rule == Rule::LegacyDefaultStream).unwrap();
        assert_eq!((f.count, f.lesson), (1, "run default-stream"));
        assert_ms(f.cost_ms, 1.5);
        // Only the legacy stream, or no legacy stream among the rows: nothing.
        let alone = find(&window(&spans[..1], &[], &legacy), &Thresholds::DEFAULT);
        assert!(alone.iter().all(|f| f.rule != Rule::LegacyDefaultStream));
        let none = find(&window(&spans, &[], &[]), &Thresholds::DEFAULT);
        assert!(none.iter().all(|f| f.rule != Rule::LegacyDefaultStream));
        // The other streams created non-blocking (PyTorch's side streams are): they do not
        // wait for the legacy stream, so nothing is claimed.
        let mut non_blocking = window(&spans, &[], &legacy);
        non_blocking.blocking_rows.clear();
        let found = find(&non_blocking, &Thresholds::DEFAULT);
        assert!(found.iter().all(|f| f.rule != Rule::LegacyDefaultStream));
    }

    #[test]
    fn an_allocation_between_work_is_found_and_one_before_all_work_is_not() {
        let call = |name: &str, kind: CallKind, start_ms: f64| HostCall {
            process: 0,
            thread: 3,
            name: name.into(),
            kind,
            start_ms,
            end_ms: start_ms + 0.25,
        };
        let spans = [span("s", Work::Kernel, 1.0, 2.0), span("s", Work::Kernel, 3.0, 4.0)];
        let before = call("cuMemAlloc_v2", CallKind::Alloc, 0.0);
        let between = call("cudaFree", CallKind::Free, 2.2);
        let launch = call("cuLaunchKernel", CallKind::Launch, 2.6);
        let all = find(&window(&spans, &[&before, &between, &launch], &[]), &Thresholds::DEFAULT);
        let f = all.iter().find(|f| f.rule == Rule::AllocBetweenWork).unwrap();
        assert_eq!((f.count, f.lesson), (1, "run stream-ordered-alloc"));
        assert_ms(f.cost_ms, 0.25);
        assert_eq!(
            f.example,
            Example { stream: "host thread 3".into(), label: "cudaFree".into(), start_ms: 2.2 }
        );
        let all = find(&window(&spans, &[&before, &launch], &[]), &Thresholds::DEFAULT);
        assert!(all.iter().all(|f| f.rule != Rule::AllocBetweenWork));
    }

    #[test]
    fn no_spans_no_findings() {
        assert!(find(&window(&[], &[], &[]), &Thresholds::DEFAULT).is_empty());
    }
}
