//! What the rules ask of a process's host records, answered by binary search: was the host
//! inside a call (other than a synchronization) at some time in `[from, to)`; did a wait on
//! a device overlap `[from, to]`. Each is a list sorted by start with the latest end so far
//! beside it, built once per process.
use crate::trace::read::model::{CallKind, Ns, Process};

/// Starts sorted, and the latest end among the intervals up to each.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reach {
    starts: Vec<Ns>,
    latest_end: Vec<Ns>,
}

impl Reach {
    /// `intervals` sorted by start.
    fn of(intervals: impl Iterator<Item = (Ns, Ns)>) -> Reach {
        let mut reach = Reach::default();
        let mut latest = 0;
        for (start, end) in intervals {
            latest = latest.max(end);
            reach.starts.push(start);
            reach.latest_end.push(latest);
        }
        reach
    }

    /// The latest end among the intervals that start before `t` (0 when none does).
    fn latest_end_before(&self, t: Ns) -> Ns {
        let n = self.starts.partition_point(|s| *s < t);
        n.checked_sub(1).map_or(0, |i| self.latest_end[i])
    }

    /// The latest end among the intervals that start at or before `t`.
    fn latest_end_by(&self, t: Ns) -> Option<Ns> {
        let n = self.starts.partition_point(|s| *s <= t);
        n.checked_sub(1).map(|i| self.latest_end[i])
    }
}

/// A process's host records, indexed for the rules.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostIndex {
    /// Calls that issue work or do anything but synchronize.
    issuing: Reach,
    /// Allocations and frees that synchronize the device.
    allocating: Reach,
    /// Waits, per device: (device, their reach).
    waits: Vec<(u32, Reach)>,
    /// Whether the process's calls were recorded at all.
    pub calls_recorded: bool,
}

impl HostIndex {
    pub fn of(p: &Process) -> HostIndex {
        let calls = &p.calls;
        let issuing = (0..calls.len())
            .filter(|&i| calls.kind[i] != CallKind::Sync)
            .map(|i| (calls.start[i], calls.end[i]));
        let mut devices: Vec<u32> = p.waits.iter().map(|w| w.device).collect();
        devices.sort_unstable();
        devices.dedup();
        let waits = devices
            .into_iter()
            .map(|d| {
                let on = p.waits.iter().filter(|w| w.device == d).map(|w| (w.start, w.end));
                (d, Reach::of(on))
            })
            .collect();
        let allocating = (0..calls.len())
            .filter(|&i| matches!(calls.kind[i], CallKind::Alloc | CallKind::Free))
            .map(|i| (calls.start[i], calls.end[i]));
        HostIndex {
            issuing: Reach::of(issuing),
            allocating: Reach::of(allocating),
            waits,
            calls_recorded: !calls.is_empty(),
        }
    }

    /// Whether the host was inside a call (not a synchronization) at some time of
    /// `(from, to)`: a call that started before `to` and ended after `from`.
    pub fn issuing(&self, from: Ns, to: Ns) -> bool {
        self.issuing.latest_end_before(to) > from
    }

    /// Whether an allocation or free that synchronizes the device began before `t` and was
    /// still running at `t`.
    pub fn allocating_at(&self, t: Ns) -> bool {
        self.allocating.latest_end_before(t) > t
    }

    /// Whether a wait on `device` overlaps `[from, to]` (ends touching count).
    pub fn waited(&self, device: u32, from: Ns, to: Ns) -> bool {
        let Some((_, reach)) = self.waits.iter().find(|(d, _)| *d == device) else {
            return false;
        };
        reach.latest_end_by(to).is_some_and(|end| end >= from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_end_so_far_answers_overlap_questions() {
        let reach = Reach::of([(10, 50), (20, 30), (60, 70)].into_iter());
        assert_eq!(reach.latest_end_before(10), 0);
        assert_eq!(reach.latest_end_before(25), 50);
        assert_eq!(reach.latest_end_before(61), 70);
        assert_eq!(reach.latest_end_by(10), Some(50));
        assert_eq!(reach.latest_end_by(9), None);
    }
}
