//! The rule across windows: collectives that waited for a late rank ([`Rule::LateRank`]). A
//! participant is one process on one device; the i-th collective span of each is taken to be
//! the same collective (NCCL runs a communicator's collectives in the order they were
//! issued, on every rank).
use std::collections::BTreeMap;

use crate::lab::record::span::{Span, Work};
use crate::trace::inspect::findings::{Example, Finding, Rule, Thresholds};

/// The late-rank finding over every participant's collectives; `None` with fewer than two
/// participants or no collective started more than `late_rank_ms` apart.
pub fn late_rank(spans: &[Span], t: &Thresholds) -> Option<Finding> {
    let mut participants: BTreeMap<(u32, u32), Vec<&Span>> = BTreeMap::new();
    for s in spans.iter().filter(|s| s.kind == Work::Collective) {
        participants.entry((s.process, s.device)).or_default().push(s);
    }
    if participants.len() < 2 {
        return None;
    }
    for list in participants.values_mut() {
        list.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
    }
    let matched = participants.values().map(Vec::len).min().unwrap_or(0);
    let mut count = 0;
    let mut cost = 0.0;
    let mut example: Option<&Span> = None;
    for i in 0..matched {
        let copies: Vec<&Span> = participants.values().map(|list| list[i]).collect();
        let first = copies.iter().map(|s| s.start_ms).fold(f64::INFINITY, f64::min);
        let last = copies.iter().copied().max_by(|a, b| a.start_ms.total_cmp(&b.start_ms))?;
        let spread = last.start_ms - first;
        if spread > t.late_rank_ms {
            count += 1;
            cost += spread;
            example = example.or(Some(last));
        }
    }
    let late = example?;
    // Which participant was late is the point: the row says its process and device.
    let mut shown = Example::of(late);
    shown.stream = format!("{} (process {}, GPU {})", late.stream, late.process, late.device);
    Some(Finding::new(Rule::LateRank, count, cost, shown))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collective(process: u32, start_ms: f64) -> Span {
        let mut s = Span::new(
            "comm",
            Work::Collective,
            "ncclDevKernel_AllReduce",
            start_ms,
            start_ms + 1.0,
        );
        s.process = process;
        s.stream = format!("pid {process} · comm");
        s
    }

    #[test]
    fn a_rank_that_starts_late_is_found_and_ranks_in_step_are_not() {
        let t = Thresholds::DEFAULT;
        // Rank 2 starts the second all-reduce 0.4 ms after rank 1.
        let spans =
            [collective(1, 0.0), collective(2, 0.01), collective(1, 2.0), collective(2, 2.4)];
        let f = late_rank(&spans, &t).unwrap();
        assert_eq!((f.count, f.lesson), (1, "run allreduce-overlap"));
        assert!((f.cost_ms - 0.4).abs() < 1e-9, "{}", f.cost_ms);
        assert_eq!(
            (f.example.stream.as_str(), f.example.start_ms),
            ("pid 2 · comm (process 2, GPU 0)", 2.4)
        );
        // In step (10 µs apart), or one participant alone: nothing.
        let in_step = [collective(1, 0.0), collective(2, 0.01)];
        assert_eq!(late_rank(&in_step, &t), None);
        assert_eq!(late_rank(&[collective(1, 0.0), collective(1, 5.0)], &t), None);
    }
}
