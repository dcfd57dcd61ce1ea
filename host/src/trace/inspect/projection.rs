//! NVTX projected onto the GPU: each kernel, copy or memset belongs to the top-level NVTX
//! range that was open on the thread that launched it, when its call was made (its
//! correlation id names the call; the call names the thread and the time). This is what
//! Nsight Systems calls NVTX projection; it charges work to the code that launched it even
//! when the CPU runs steps ahead of the GPU, as PyTorch always does.
//!
//! Where the launching thread had no range open (PyTorch's backward runs on the autograd
//! engine's own thread while the main thread sits inside "step"), the work belongs to the
//! range the process had open at that time (the one started last, on any thread). Work
//! whose call was not recorded falls back to the time it started on the GPU. Each way is
//! counted, so the report can say how the charging was done.
use serde::Serialize;

use crate::trace::read::model::{Ns, Process};

/// No range.
pub const NONE: u32 = u32::MAX;

/// How a record was charged to its range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// A range open on the thread that launched it.
    Thread,
    /// No range on that thread: the range the process had open then.
    Process,
    /// Its call was not recorded: the range open when it started on the GPU.
    StartTime,
}

/// Each GPU record's launch: when its call began (`None` where it was not recorded), the
/// top-level range it belongs to (an index into `Process::ranges`, or [`NONE`]) and how.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Projection {
    pub launched_at: Vec<Option<Ns>>,
    /// The call that launched it: an index into `Process::calls`, or [`NONE`].
    pub call: Vec<u32>,
    pub range: Vec<u32>,
    pub how: Vec<How>,
}

/// How many records were charged each way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub by_thread: u64,
    pub by_process: u64,
    pub by_start_time: u64,
}

impl Projection {
    /// How the records `indices` were charged.
    pub fn counts(&self, indices: impl Iterator<Item = u32>) -> Counts {
        let mut counts = Counts::default();
        for i in indices {
            match self.how[i as usize] {
                How::Thread => counts.by_thread += 1,
                How::Process => counts.by_process += 1,
                How::StartTime => counts.by_start_time += 1,
            }
        }
        counts
    }
}

/// The top-level ranges of the program's own domains that are open at each instant, as
/// disjoint pieces naming the one started last: a lookup by binary search.
struct OpenRanges {
    /// (from, to, range index), sorted, disjoint.
    pieces: Vec<(Ns, Ns, u32)>,
}

impl OpenRanges {
    /// `ranges`: (start, end, index), sorted by start.
    fn of(ranges: &[(Ns, Ns, u32)]) -> OpenRanges {
        // A sweep over the starts and ends; the open ranges in a heap by their start.
        let mut events: Vec<(Ns, bool, usize)> = Vec::with_capacity(ranges.len() * 2);
        for (at, &(start, end, _)) in ranges.iter().enumerate() {
            if end > start {
                events.push((start, true, at));
                events.push((end, false, at));
            }
        }
        // Ends before starts at one instant: `[start, end)`.
        events.sort_unstable_by_key(|&(t, is_start, _)| (t, is_start));
        let mut open: std::collections::BTreeSet<(Ns, usize)> = std::collections::BTreeSet::new();
        let mut pieces: Vec<(Ns, Ns, u32)> = Vec::new();
        let mut since = 0;
        for (t, is_start, at) in events {
            if let Some(&(_, latest)) = open.last() {
                if t > since {
                    pieces.push((since, t, ranges[latest].2));
                }
            }
            if is_start {
                open.insert((ranges[at].0, at));
            } else {
                open.remove(&(ranges[at].0, at));
            }
            since = t;
        }
        OpenRanges { pieces }
    }

    fn at(&self, t: Ns) -> u32 {
        let n = self.pieces.partition_point(|p| p.0 <= t);
        match n.checked_sub(1).map(|i| self.pieces[i]) {
            Some((_, to, range)) if t < to => range,
            _ => NONE,
        }
    }
}

/// The projection of every GPU record of `p`.
pub fn project(p: &Process) -> Projection {
    // The program's top-level ranges, per thread and for the whole process.
    let mut per_thread: Vec<Vec<(Ns, Ns, u32)>> = vec![Vec::new(); p.threads.len()];
    let mut all: Vec<(Ns, Ns, u32)> = Vec::new();
    for (index, r) in p.ranges.iter().enumerate() {
        if r.depth == 0 && !r.library {
            per_thread[r.thread as usize].push((r.start, r.end, index as u32));
            all.push((r.start, r.end, index as u32));
        }
    }
    let process_wide = OpenRanges::of(&all);
    let on_thread = |thread: u32, t: Ns| -> u32 {
        // A thread's top-level ranges do not overlap: the last one started by t, if open.
        let list = &per_thread[thread as usize];
        let n = list.partition_point(|r| r.0 <= t);
        match n.checked_sub(1).map(|i| list[i]) {
            Some((_, end, range)) if t < end => range,
            _ => NONE,
        }
    };
    // Calls by correlation id.
    let mut by_correlation: Vec<(u32, u32)> =
        p.calls.correlation.iter().enumerate().map(|(i, c)| (*c, i as u32)).collect();
    by_correlation.sort_unstable();
    let call_of = |correlation: u32| -> Option<usize> {
        let at = by_correlation.partition_point(|(c, _)| *c < correlation);
        by_correlation.get(at).filter(|(c, _)| *c == correlation).map(|(_, i)| *i as usize)
    };
    let n = p.gpu.len();
    let mut out = Projection {
        launched_at: Vec::with_capacity(n),
        call: Vec::with_capacity(n),
        range: Vec::with_capacity(n),
        how: Vec::with_capacity(n),
    };
    for i in 0..n {
        let call = call_of(p.gpu.correlation[i]);
        let (at, range, how) = match call {
            Some(call) => {
                let (thread, start) = (p.calls.thread[call], p.calls.start[call]);
                match on_thread(thread, start) {
                    NONE => (Some(start), process_wide.at(start), How::Process),
                    range => (Some(start), range, How::Thread),
                }
            }
            None => (None, process_wide.at(p.gpu.start[i]), How::StartTime),
        };
        out.launched_at.push(at);
        out.call.push(call.map_or(NONE, |c| c as u32));
        out.range.push(range);
        out.how.push(how);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_open_at_an_instant_is_the_one_started_last() {
        // 0: [0, 100) on one thread; 1: [10, 20) and 2: [50, 150) on others.
        let open = OpenRanges::of(&[(0, 100, 0), (10, 20, 1), (50, 150, 2)]);
        let at: Vec<u32> =
            [0, 9, 10, 19, 20, 49, 50, 99, 100, 149, 150].map(|t| open.at(t)).to_vec();
        assert_eq!(at, [0, 0, 1, 1, 0, 0, 2, 2, 2, 2, NONE]);
        assert_eq!(OpenRanges::of(&[]).at(5), NONE);
    }
}
