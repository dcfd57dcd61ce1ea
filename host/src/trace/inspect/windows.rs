//! The report's windows, and the GPU work each one holds. Per process and device:
//! - the whole run, from its first GPU work to its last;
//! - where the program marked NVTX ranges, the run split in two: its start-up (the work
//!   launched before the first range began) and the rest;
//! - each NVTX range name the program marked at the top level (at most [`MAX_RANGE_NAMES`]
//!   names), every occurrence of it folded into one window ("step", marked 100 times, is one
//!   window of 100 occurrences).
//!
//! A range's window holds its work two ways: *launched in* (the work its code launched,
//! through the [`projection`](super::projection), each occurrence from that work's first
//! start to its last end) and *ran during* (the work that ran while it was open, clipped to
//! its occurrences). The first is what the findings read; the two differ when the CPU runs
//! ahead. One pass over each device's records fills every window of the process.
use serde::{Deserialize, Serialize};

use crate::trace::inspect::projection::{Projection, NONE};
use crate::trace::inspect::union::Union;
use crate::trace::read::model::{Ns, Process};

/// The most range names that get a window of their own, per process (in the order they were
/// first marked); a program that names every step differently would otherwise flood the
/// report. The report says how many were left out.
pub const MAX_RANGE_NAMES: usize = 20;

/// Which part of a process's run a window is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// Every GPU work of the process on the device.
    Whole,
    /// The work launched before the program's first NVTX range began.
    StartUp,
    /// The work launched from then on.
    Rest,
    /// An NVTX range name's occurrences.
    Range,
}

/// Which work a window covers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Window {
    pub process: u32,
    pub device: u32,
    pub part: Part,
    /// The NVTX range's name (for [`Part::Range`]; null in JSON for the other parts).
    pub range: Option<String>,
    /// How many times the range was marked (1 for the other parts).
    pub occurrences: usize,
}

/// A record of GPU work as a window holds it: its index in the process's columns, and its
/// times, clipped to the window where it ran partly outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub index: u32,
    pub start: Ns,
    pub end: Ns,
}

/// A window's records, by start, and the times it covers (sorted, disjoint): a gap between
/// two of them is not the window's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Held {
    pub pieces: Vec<Piece>,
    pub intervals: Vec<(Ns, Ns)>,
}

impl Held {
    /// The time the window covers.
    pub fn length(&self) -> Ns {
        self.intervals.iter().map(|(s, e)| e - s).sum()
    }
}

/// One occurrence of a range, as the CPU-ahead finding reads it: the host's interval, and
/// the first start and last end of the work launched in it (`None` without any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Occurrence {
    pub start: Ns,
    pub end: Ns,
    pub work: Option<(Ns, Ns)>,
}

/// A window and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowRecords {
    pub window: Window,
    /// The work launched in it (for the whole run and its parts: the work itself).
    pub launched: Held,
    /// The work that ran while its range was open (range windows only).
    pub ran_during: Option<Held>,
    /// Its occurrences, by start (range windows only).
    pub occurrences: Vec<Occurrence>,
}

/// The program's top-level range names of `p` (by first start, at most
/// [`MAX_RANGE_NAMES`]), each with its ranges' indices, and the number of names left out.
fn range_names(p: &Process, chosen: &[String]) -> (Vec<(u32, Vec<u32>)>, usize) {
    let mut names: Vec<(u32, Vec<u32>)> = Vec::new();
    let mut group_of_name: std::collections::HashMap<u32, usize> = Default::default();
    for (index, r) in p.ranges.iter().enumerate() {
        if r.depth != 0 || r.library {
            continue;
        }
        if !chosen.is_empty() && !chosen.iter().any(|c| c == p.names.get(r.name)) {
            continue;
        }
        let group = *group_of_name.entry(r.name).or_insert_with(|| {
            names.push((r.name, Vec::new()));
            names.len() - 1
        });
        names[group].1.push(index as u32);
    }
    let left_out = names.len().saturating_sub(MAX_RANGE_NAMES);
    names.truncate(MAX_RANGE_NAMES);
    (names, left_out)
}

/// The extent of `pieces`: one interval from the first start to the last end (none when
/// empty).
fn extent(pieces: &[Piece]) -> Vec<(Ns, Ns)> {
    let start = pieces.iter().map(|p| p.start).min();
    let end = pieces.iter().map(|p| p.end).max();
    match (start, end) {
        (Some(start), Some(end)) => vec![(start, end)],
        _ => Vec::new(),
    }
}

/// Every window of `p`, device by device, and how many range names were left out. Where
/// `chosen` names ranges, only those get windows (the whole run and its parts always do).
pub fn windows(
    p: &Process,
    projection: &Projection,
    chosen: &[String],
) -> (Vec<WindowRecords>, usize) {
    let (names, left_out) = range_names(p, chosen);
    // Which name group each range belongs to.
    let mut group_of_range = vec![NONE; p.ranges.len()];
    for (group, (_, ranges)) in names.iter().enumerate() {
        for &r in ranges {
            group_of_range[r as usize] = group as u32;
        }
    }
    let first_range =
        names.iter().flat_map(|(_, rs)| rs.iter().map(|&r| p.ranges[r as usize].start)).min();
    let host_unions: Vec<Union> = names
        .iter()
        .map(|(_, rs)| {
            Union::of(rs.iter().map(|&r| (p.ranges[r as usize].start, p.ranges[r as usize].end)))
        })
        .collect();
    let mut parts = Vec::new();
    let mut ranges = Vec::new();
    for device in p.work_devices() {
        let on_device: Vec<u32> = (0..p.gpu.len() as u32)
            .filter(|&i| p.rows[p.gpu.row[i as usize] as usize].device == device)
            .collect();
        if on_device.is_empty() {
            continue;
        }
        let piece =
            |i: u32| Piece { index: i, start: p.gpu.start[i as usize], end: p.gpu.end[i as usize] };
        let window = |part: Part, range: Option<String>, occurrences: usize| Window {
            process: p.pid,
            device,
            part,
            range,
            occurrences,
        };
        let all: Vec<Piece> = on_device.iter().map(|&i| piece(i)).collect();
        let whole = Held { intervals: extent(&all), pieces: all };
        parts.push(WindowRecords {
            window: window(Part::Whole, None, 1),
            launched: whole,
            ran_during: None,
            occurrences: Vec::new(),
        });
        if let Some(first) = first_range {
            let launched =
                |i: &u32| projection.launched_at[*i as usize].unwrap_or(p.gpu.start[*i as usize]);
            let (start_up, rest): (Vec<u32>, Vec<u32>) =
                on_device.iter().partition(|i| launched(i) < first);
            // Split only where both parts hold work: otherwise one of them is the whole run.
            let split = !start_up.is_empty() && !rest.is_empty();
            for (part, list) in [(Part::StartUp, start_up), (Part::Rest, rest)] {
                if !split {
                    break;
                }
                let pieces: Vec<Piece> = list.into_iter().map(piece).collect();
                let held = Held { intervals: extent(&pieces), pieces };
                parts.push(WindowRecords {
                    window: window(part, None, 1),
                    launched: held,
                    ran_during: None,
                    occurrences: Vec::new(),
                });
            }
        }
        // Each name group's work, launched in and ran during, in one pass.
        let mut launched: Vec<Vec<Piece>> = vec![Vec::new(); names.len()];
        let mut ran: Vec<Vec<Piece>> = vec![Vec::new(); names.len()];
        let mut work_of_range: std::collections::HashMap<u32, (Ns, Ns)> = Default::default();
        for &i in &on_device {
            let (start, end) = (p.gpu.start[i as usize], p.gpu.end[i as usize]);
            let range = projection.range[i as usize];
            if range != NONE && group_of_range[range as usize] != NONE {
                launched[group_of_range[range as usize] as usize].push(piece(i));
                let e = work_of_range.entry(range).or_insert((start, end));
                *e = (e.0.min(start), e.1.max(end));
            }
            for (group, union) in host_unions.iter().enumerate() {
                clip(union, i, start, end, &mut ran[group]);
            }
        }
        for (group, (name, members)) in names.iter().enumerate() {
            let (mine, during) =
                (std::mem::take(&mut launched[group]), std::mem::take(&mut ran[group]));
            if mine.is_empty() && during.is_empty() {
                continue;
            }
            let occurrences: Vec<Occurrence> = members
                .iter()
                .map(|&r| {
                    let range = &p.ranges[r as usize];
                    Occurrence {
                        start: range.start,
                        end: range.end,
                        work: work_of_range.get(&r).copied(),
                    }
                })
                .collect();
            let intervals = Union::of(occurrences.iter().filter_map(|o| o.work)).spans().to_vec();
            let mut during = during;
            during.sort_unstable_by_key(|p| (p.start, p.end));
            ranges.push(WindowRecords {
                window: window(Part::Range, Some(p.names.get(*name).to_string()), members.len()),
                launched: Held { pieces: mine, intervals },
                ran_during: Some(Held {
                    pieces: during,
                    intervals: host_unions[group].spans().to_vec(),
                }),
                occurrences,
            });
        }
    }
    parts.extend(ranges);
    (parts, left_out)
}

/// The parts of record `index` (`[start, end)`) inside `union`, pushed onto `out`. A record
/// of no length belongs to the interval it starts in.
fn clip(union: &Union, index: u32, start: Ns, end: Ns, out: &mut Vec<Piece>) {
    let spans = union.spans();
    // The intervals that start before the record ends; walk back while they reach into it.
    let mut at = spans.partition_point(|(s, _)| *s < end.max(start + 1));
    while at > 0 {
        at -= 1;
        let (s, e) = spans[at];
        if e <= start && !(start == end && s <= start && start < e) {
            break;
        }
        let (from, to) = (start.max(s), end.min(e));
        if to > from || (start == end && s <= start && start < e) {
            out.push(Piece { index, start: from, end: to });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_clipped_to_each_interval_it_crosses() {
        let union = Union::of([(10, 20), (30, 40)]);
        let mut out = Vec::new();
        clip(&union, 1, 15, 35, &mut out);
        let mut got: Vec<(Ns, Ns)> = out.iter().map(|p| (p.start, p.end)).collect();
        got.sort_unstable();
        assert_eq!(got, [(15, 20), (30, 35)]);
        out.clear();
        clip(&union, 2, 20, 30, &mut out);
        assert!(out.is_empty(), "{out:?}");
        // No length: in the interval it starts in, not in the one it ends at.
        clip(&union, 3, 12, 12, &mut out);
        clip(&union, 4, 20, 20, &mut out);
        clip(&union, 5, 30, 30, &mut out);
        let got: Vec<u32> = out.iter().map(|p| p.index).collect();
        assert_eq!(got, [3, 5]);
    }
}
