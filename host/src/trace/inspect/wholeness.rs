//! Which occurrences of each NVTX range the record holds whole. An occurrence is whole when
//! both its ends were recorded, it began once the recorder kept everything (not before the
//! records it dropped to keep the last ones, nor before its gate opened), and it ended before
//! the record stopped being whole (a closed gate, the limit reached keeping the first
//! records, a process that ended without its exit handlers). A range whose end is missing is
//! said to have never ended only where the record was whole to the process's exit.
use serde::Serialize;

use crate::trace::read::model::{Cut, Ns, Process, Range};

/// How many occurrences of one range name of one process were recorded whole.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RangeWhole {
    pub process: u32,
    pub range: String,
    /// Occurrences recorded (whole or not).
    pub total: usize,
    pub whole: usize,
    /// The first and last whole occurrence, numbered from 1 among those recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last: Option<usize>,
    /// Where the recorder sampled this range: every how many occurrences it kept, and of how
    /// many it saw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled: Option<(u64, u64)>,
}

/// Whether `r` of `p` was recorded whole.
pub fn is_whole(p: &Process, r: &Range) -> bool {
    let from = p.kept_from().unwrap_or(0);
    let cut = p.cut_at();
    !r.unclosed && r.start >= from && cut.is_none_or(|(at, _)| r.end <= at)
}

/// Why the end of an unclosed range was not recorded: where and why the record stopped
/// being whole; `None` when the record is whole to the exit (the range never ended).
pub fn end_missing(p: &Process) -> Option<(Ns, Cut)> {
    p.cut_at()
}

/// Per top-level range name of the program's own domains (in the order first marked): how
/// many occurrences were recorded whole.
pub fn ranges_whole(p: &Process) -> Vec<RangeWhole> {
    let mut out: Vec<RangeWhole> = Vec::new();
    let mut index_of: std::collections::HashMap<u32, usize> = Default::default();
    for r in p.ranges.iter().filter(|r| r.depth == 0 && !r.library) {
        let at = *index_of.entry(r.name).or_insert_with(|| {
            let range = p.names.get(r.name).to_string();
            let sampled = p.sampled.as_ref().filter(|s| s.range == range);
            out.push(RangeWhole {
                process: p.pid,
                sampled: sampled.map(|s| (s.every, s.total)),
                range,
                total: 0,
                whole: 0,
                first: None,
                last: None,
            });
            out.len() - 1
        });
        let entry = &mut out[at];
        entry.total += 1;
        if is_whole(p, r) {
            entry.whole += 1;
            entry.first = entry.first.or(Some(entry.total));
            entry.last = Some(entry.total);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::cupti::trace_file::Line;
    use crate::trace::inspect::test_lines::{at, context, kernel, range};
    use crate::trace::read::reader_tests::process_of;

    /// Ten "step" ranges of 1 ms, every 2 ms, a kernel in each, and `more` lines.
    fn steps(more: &[Line]) -> Process {
        let mut lines = context();
        for i in 0..10u32 {
            let from = 2.0 * f64::from(i);
            lines.extend(range(i + 1, "step", 1, from, from + 1.0));
            lines.push(kernel(13, from, from + 0.5, i + 1));
        }
        lines.extend_from_slice(more);
        process_of(1, &lines)
    }

    fn step(p: &Process) -> RangeWhole {
        ranges_whole(p).into_iter().find(|r| r.range == "step").unwrap()
    }

    #[test]
    fn every_range_of_a_run_recorded_to_its_exit_is_whole() {
        let p = steps(&[Line::Exit { time: at(100.0) }]);
        let r = step(&p);
        assert_eq!((r.total, r.whole, r.first, r.last), (10, 10, Some(1), Some(10)));
        assert_eq!(end_missing(&p), None);
    }

    #[test]
    fn ranges_before_the_records_kept_last_are_not_whole() {
        // The recorder dropped everything completed before 5.5 ms to keep the last records.
        let dropped = Line::Dropped { count: 9, why: "oldest".into(), before: Some(at(5.5)) };
        let p = steps(&[dropped, Line::Exit { time: at(100.0) }]);
        let r = step(&p);
        // Steps 4..10 begin at 6 ms and later.
        assert_eq!((r.total, r.whole, r.first, r.last), (10, 7, Some(4), Some(10)));
    }

    #[test]
    fn a_closed_gate_ends_what_is_whole_and_an_open_end_is_not_called_never_ended() {
        let closed = Line::Gate { time: at(9.5), open: false, why: "capture range".into() };
        let mut lines = vec![Line::Gate { time: at(0.0), open: true, why: "start".into() }, closed];
        lines.extend(range(50, "eval", 1, 12.5, 12.5).into_iter().take(1));
        lines.push(Line::Exit { time: at(100.0) });
        let p = steps(&lines);
        let r = step(&p);
        // Steps 1..5 end by 9 ms.
        assert_eq!((r.whole, r.first, r.last), (5, Some(1), Some(5)));
        assert_eq!(p.unclosed, ["eval"]);
        assert_eq!(end_missing(&p), Some((at(9.5), Cut::Gate)));
    }

    #[test]
    fn a_sampled_range_says_how_it_was_sampled() {
        let sampled =
            Line::Sampled { range: "step".into(), every: 4, total: 40, kept: vec![1, 5, 9] };
        let p = steps(&[sampled, Line::Exit { time: at(100.0) }]);
        assert_eq!(step(&p).sampled, Some((4, 40)));
    }
}
