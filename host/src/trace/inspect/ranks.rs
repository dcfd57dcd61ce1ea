//! Across windows: collectives that waited for a late rank ([`Rule::LateRank`]), and which
//! participant was late ([`Straggler`]). A participant is one process on one device; the
//! i-th collective of each is taken to be the same collective (NCCL runs a communicator's
//! collectives in the order they were issued, on every rank). NCCL's own numbering of its
//! collectives (in its NVTX payloads) is not recorded, so the matching is by order, and the
//! report says so.
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

/// One participant's collectives, by start.
struct Participant<'a> {
    process: &'a Process,
    device: u32,
    collectives: Vec<u32>,
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
            let collectives: Vec<u32> = (0..p.gpu.len() as u32)
                .filter(|&i| {
                    let i = i as usize;
                    p.gpu.kind[i] == Work::Collective
                        && p.rows[p.gpu.row[i] as usize].device == device
                })
                .collect();
            if !collectives.is_empty() {
                out.push(Participant { process: p, device, collectives });
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
    let matched = participants.iter().map(|p| p.collectives.len()).min().unwrap_or(0);
    let start = |who: &Participant, i: usize| who.process.gpu.start[who.collectives[i] as usize];
    let (mut count, mut cost): (usize, Ns) = (0, 0);
    let mut example: Option<(usize, usize)> = None;
    // Per participant: the collectives it was late in (by how much), and the waiting caused.
    let mut late_by: Vec<Vec<Ns>> = vec![Vec::new(); participants.len()];
    let mut waited: Vec<Ns> = vec![0; participants.len()];
    for i in 0..matched {
        let starts: Vec<Ns> = participants.iter().map(|who| start(who, i)).collect();
        let first = starts.iter().copied().min().unwrap_or(0);
        // The last one (on a tie, the participant listed last).
        let last = (0..starts.len()).max_by_key(|&k| starts[k]).unwrap_or(0);
        let spread = starts[last] - first;
        if spread <= limits.late_rank {
            continue;
        }
        count += 1;
        cost += spread;
        example = example.or(Some((last, i)));
        let others = (0..starts.len()).filter(|&k| k != last);
        let next_latest = others.clone().map(|k| starts[k]).max().unwrap_or(first);
        late_by[last].push(starts[last] - next_latest);
        waited[last] += others.map(|k| starts[last] - starts[k]).sum::<Ns>();
    }
    let Some((late, i)) = example else {
        return LateRanks::default();
    };
    let who = &participants[late];
    let index = who.collectives[i];
    let piece = Piece { index, start: start(who, i), end: who.process.gpu.end[index as usize] };
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
