//! Across windows: collectives that waited for a late rank ([`Rule::LateRank`]), and which
//! participant was late ([`Straggler`]). A participant is one process on one device. Each of
//! its streams that ran collectives is one communicator's (a program with two communicators
//! runs them on two streams), its streams taken in the order their first collective started;
//! the i-th collective of each participant's n-th such stream is taken to be the same
//! collective (NCCL runs a communicator's collectives in the order they were issued, on every
//! rank). NCCL's own numbering of its collectives (in its NVTX payloads) is not recorded, so
//! the matching is by order, and the report says so.
use serde::Serialize;

use crate::lab::record::span::Work;
use crate::trace::inspect::findings::{Example, Finding, Limits, Rule};
use crate::trace::inspect::windows::Piece;
use crate::trace::read::model::{Capture, Ns, Process};

/// A participant is named a straggler when the waiting it caused is at least this share of
/// all the waiting: ranks that are last now and then by chance are not.
pub const STRAGGLER_SHARE: f64 = 0.1;

/// A straggler's lateness is told over the collectives that make up this share of the
/// waiting it caused, the latest first: in a DDP step a rank that starts late makes the
/// others wait in its first all-reduce, and is then last by a little in the step's later
/// ones; the little ones would pull the median down to nothing.
pub const LATE_SHARE: f64 = 0.9;

/// One participant's collectives: per stream (streams by their first collective), by start.
struct Participant<'a> {
    process: &'a Process,
    device: u32,
    streams: Vec<Vec<u32>>,
}

/// A participant that started collectives last.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Straggler {
    pub pid: u32,
    pub device: u32,
    /// In how many of the matched collectives it was late: the fewest, latest first, that
    /// make up [`LATE_SHARE`] of the waiting it caused.
    pub late_in: usize,
    /// In how many more it started last, further than the late-rank time after the first,
    /// but by less.
    pub also_last_in: usize,
    /// How many collectives were matched across the participants.
    pub of: usize,
    /// How much later than the next latest participant it started, at the median of the
    /// `late_in` collectives.
    pub median_late_ms: f64,
    /// The time the others' copies of those collectives waited for it, summed.
    pub others_waited_ms: f64,
    /// How the collectives were matched: "order" (the i-th of each participant).
    pub matched_by: &'static str,
}

/// What the matched collectives say: the late-rank finding and the stragglers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LateRanks {
    pub finding: Option<Finding>,
    pub stragglers: Vec<Straggler>,
}

/// The participants of `capture`: every process and device that ran collectives.
fn participants(capture: &Capture) -> Vec<Participant<'_>> {
    let mut out = Vec::new();
    for p in &capture.processes {
        for device in p.work_devices() {
            // GPU work is by start: each stream's list is by start, and the streams come in
            // the order of their first collective.
            let mut streams: Vec<(u32, Vec<u32>)> = Vec::new();
            for i in 0..p.gpu.len() {
                let row = p.gpu.row[i];
                if p.gpu.kind[i] != Work::Collective || p.rows[row as usize].device != device {
                    continue;
                }
                match streams.iter_mut().find(|(r, _)| *r == row) {
                    Some((_, list)) => list.push(i as u32),
                    None => streams.push((row, vec![i as u32])),
                }
            }
            if !streams.is_empty() {
                let streams = streams.into_iter().map(|(_, list)| list).collect();
                out.push(Participant { process: p, device, streams });
            }
        }
    }
    out
}

/// The latest of `late_by` that add up to [`LATE_SHARE`] of their sum, with every other one
/// as late as the last of them (ties are kept together).
fn mostly_late(mut late_by: Vec<Ns>) -> Vec<Ns> {
    late_by.sort_unstable_by(|a, b| b.cmp(a));
    let total: Ns = late_by.iter().sum();
    let mut sum: Ns = 0;
    let mut cutoff = 0;
    for &late in &late_by {
        sum += late;
        cutoff = late;
        if sum as f64 >= LATE_SHARE * total as f64 {
            break;
        }
    }
    late_by.retain(|late| *late >= cutoff);
    late_by
}

fn median(mut values: Vec<Ns>) -> Ns {
    values.sort_unstable();
    values.get(values.len().saturating_sub(1) / 2).copied().unwrap_or(0)
}

/// The late-rank finding and the stragglers over every participant's collectives; nothing
/// with fewer than two participants or no collective started more than `late_rank` apart.
pub fn late_ranks(capture: &Capture, limits: &Limits) -> LateRanks {
    let participants = participants(capture);
    if participants.len() < 2 {
        return LateRanks::default();
    }
    let start = |who: &Participant, slot: usize, i: usize| {
        who.process.gpu.start[who.streams[slot][i] as usize]
    };
    let (mut count, mut cost, mut matched): (usize, Ns, usize) = (0, 0, 0);
    let mut example: Option<(usize, usize, usize)> = None;
    // Per participant: the collectives it was late in (by how much), and the waiting caused.
    let mut late_by: Vec<Vec<Ns>> = vec![Vec::new(); participants.len()];
    let mut waited: Vec<Ns> = vec![0; participants.len()];
    let slots = participants.iter().map(|p| p.streams.len()).max().unwrap_or(0);
    for slot in 0..slots {
        let members: Vec<usize> =
            (0..participants.len()).filter(|&k| participants[k].streams.len() > slot).collect();
        if members.len() < 2 {
            continue;
        }
        let in_slot = members.iter().map(|&k| participants[k].streams[slot].len()).min();
        let in_slot = in_slot.unwrap_or(0);
        matched += in_slot;
        for i in 0..in_slot {
            let starts: Vec<(usize, Ns)> =
                members.iter().map(|&k| (k, start(&participants[k], slot, i))).collect();
            let first = starts.iter().map(|s| s.1).min().unwrap_or(0);
            // The last one (on a tie, the participant listed last).
            let &(last, last_start) = starts.iter().max_by_key(|s| s.1).unwrap_or(&starts[0]);
            let spread = last_start - first;
            if spread <= limits.late_rank {
                continue;
            }
            count += 1;
            cost += spread;
            example = example.or(Some((last, slot, i)));
            let others = starts.iter().filter(|s| s.0 != last);
            let next_latest = others.clone().map(|s| s.1).max().unwrap_or(first);
            late_by[last].push(last_start - next_latest);
            waited[last] += others.map(|s| last_start - s.1).sum::<Ns>();
        }
    }
    let Some((late, slot, i)) = example else {
        return LateRanks::default();
    };
    let who = &participants[late];
    let index = who.streams[slot][i];
    let piece =
        Piece { index, start: start(who, slot, i), end: who.process.gpu.end[index as usize] };
    // Which participant was late is the point: the row says its process and device.
    let mut shown = Example::of(who.process, &piece, capture.origin_ns);
    shown.stream = format!("{} (process {}, GPU {})", shown.stream, who.process.pid, who.device);
    let finding = Finding::new(Rule::LateRank, count, cost as f64 / 1e6, shown);
    let total: Ns = waited.iter().sum();
    let mut stragglers: Vec<Straggler> = (0..participants.len())
        .filter(|&k| !late_by[k].is_empty() && waited[k] as f64 >= STRAGGLER_SHARE * total as f64)
        .map(|k| {
            let mostly = mostly_late(late_by[k].clone());
            Straggler {
                pid: participants[k].process.pid,
                device: participants[k].device,
                late_in: mostly.len(),
                also_last_in: late_by[k].len() - mostly.len(),
                of: matched,
                median_late_ms: median(mostly) as f64 / 1e6,
                others_waited_ms: waited[k] as f64 / 1e6,
                matched_by: "order",
            }
        })
        .collect();
    stragglers.sort_by(|a, b| b.others_waited_ms.total_cmp(&a.others_waited_ms));
    LateRanks { finding: Some(finding), stragglers }
}
