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
