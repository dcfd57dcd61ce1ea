//! The rule across windows: collectives that waited for a late rank ([`Rule::LateRank`]). A
//! participant is one process on one device; the i-th collective of each is taken to be the
//! same collective (NCCL runs a communicator's collectives in the order they were issued, on
//! every rank).
use crate::lab::record::span::Work;
use crate::trace::inspect::findings::{Example, Finding, Limits, Rule};
use crate::trace::inspect::windows::Piece;
use crate::trace::read::model::{Capture, Ns, Process};

/// One participant's collectives, by start.
struct Participant<'a> {
    process: &'a Process,
    device: u32,
    collectives: Vec<u32>,
}

/// The late-rank finding over every participant's collectives; `None` with fewer than two
/// participants or no collective started more than `late_rank` apart.
pub fn late_rank(capture: &Capture, limits: &Limits) -> Option<Finding> {
    let mut participants: Vec<Participant> = Vec::new();
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
                participants.push(Participant { process: p, device, collectives });
            }
        }
    }
    if participants.len() < 2 {
        return None;
    }
    let matched = participants.iter().map(|p| p.collectives.len()).min().unwrap_or(0);
    let start = |who: &Participant, i: usize| who.process.gpu.start[who.collectives[i] as usize];
    let (mut count, mut cost): (usize, Ns) = (0, 0);
    let mut example: Option<(&Participant, usize)> = None;
    for i in 0..matched {
        let first = participants.iter().map(|who| start(who, i)).min().unwrap_or(0);
        let last = participants.iter().max_by_key(|who| start(who, i))?;
        let spread = start(last, i) - first;
        if spread > limits.late_rank {
            count += 1;
            cost += spread;
            example = example.or(Some((last, i)));
        }
    }
    let (late, i) = example?;
    let index = late.collectives[i];
    let piece = Piece { index, start: start(late, i), end: late.process.gpu.end[index as usize] };
    // Which participant was late is the point: the row says its process and device.
    let mut shown = Example::of(late.process, &piece, capture.origin_ns);
    shown.stream = format!("{} (process {}, GPU {})", shown.stream, late.process.pid, late.device);
    Some(Finding::new(Rule::LateRank, count, cost as f64 / 1e6, shown))
}
