//! The gate's decisions, without processes: records in, kept (with slices) and `Gate`
//! lines out.
use super::*;
use streamlab_cupti::trace_file::{ApiDomain, WhenFull};

fn marker(phase: MarkerPhase, id: u32, thread: u64, time: u64, name: &str, domain: &str) -> Line {
    Line::Marker { phase, id, thread, time, name: name.into(), domain: domain.into() }
}
fn start(id: u32, thread: u64, time: u64, name: &str) -> Line {
    marker(MarkerPhase::Start, id, thread, time, name, "")
}
fn end(id: u32, thread: u64, time: u64) -> Line {
    marker(MarkerPhase::End, id, thread, time, "", "")
}
fn api(correlation: u32, start: u64) -> Line {
    Line::Api {
        domain: ApiDomain::Runtime,
        name: "cudaLaunchKernel".into(),
        thread: 1,
        start,
        end: start + 5,
        correlation,
        status: 0,
    }
}
fn kernel(correlation: u32, start: u64) -> Line {
    Line::Kernel {
        device: 0,
        context: 1,
        stream: 7,
        start,
        end: start + 10,
        correlation,
        name: format!("k{correlation}"),
        grid: [1, 1, 1],
        block: [1, 1, 1],
    }
}

/// A record as a short label: `S1`/`E1` (a range's start or end by id), `c7` (a call),
/// `k7` (a kernel of correlation 7), each with its slice.
fn labels(kept: &[(Line, u64)]) -> Vec<String> {
    let mut out: Vec<String> = kept
        .iter()
        .map(|(line, slice)| {
            let label = match line {
                Line::Marker { phase: MarkerPhase::Start, id, .. } => format!("S{id}"),
                Line::Marker { phase: MarkerPhase::End, id, .. } => format!("E{id}"),
                Line::Marker { id, .. } => format!("I{id}"),
                Line::Api { correlation, .. } => format!("c{correlation}"),
                Line::Kernel { correlation, .. } => format!("k{correlation}"),
                other => format!("{other:?}"),
            };
            format!("{label}/{slice}")
        })
        .collect();
    out.sort();
    out
}

fn gates(lines: &[Line]) -> Vec<(u64, bool, String)> {
    lines
        .iter()
        .map(|l| match l {
            Line::Gate { time, open, why } => (*time, *open, why.clone()),
            other => panic!("{other:?}"),
        })
        .collect()
}

fn keep(range: Option<&str>, count: u64, delay_ms: u64, duration_ms: Option<u64>) -> Keep {
    Keep {
        when_full: WhenFull::First,
        capture_range: range.map(str::to_string),
        capture_count: count,
        delay_ms,
        duration_ms,
    }
}

#[test]
fn a_capture_range_keeps_occurrences_1_to_n_and_the_work_they_launched() {
    let mut gate = Gate::new(Plan::new(&keep(Some("step"), 2, 0, None), 0, false));
    assert!(!gate.passes_all());
    // The first flush, read at 305: a call before the window whose kernel runs inside it,
    // a library's range of the same name, occurrence 1 and the start of occurrence 2.
    gate.receive([
        api(1, 10),
        marker(MarkerPhase::Start, 50, 1, 90, "step", "NCCL"),
        start(1, 1, 100, "step"),
        api(2, 110),
        kernel(2, 120),
        kernel(1, 150),
        end(1, 1, 200),
        kernel(0, 250), // a kernel whose call was never recorded: by its own start
        start(2, 1, 300, "step"),
        api(3, 310), // from `until` on: waits
        end(50, 1, 320),
    ]);
    let first = gate.settle(305, false);
    assert_eq!(labels(&first.kept), ["E1/0", "S1/0", "S2/0", "c2/0", "k0/0", "k2/0"]);
    // The library's range (start and end), the early call and its kernel.
    assert_eq!(first.outside, 3);
    assert_eq!(gates(&first.gates), [(100, true, "capture range \"step\" #1 started".into())]);
    // The second flush: occurrence 2 ends (the window closes), its kernel runs after; a
    // range inside ends after the close; occurrence 3 and its work are left out.
    gate.receive([
        start(10, 2, 350, "inner"),
        end(2, 1, 400),
        kernel(3, 450),
        end(10, 2, 450),
        start(3, 1, 500, "step"),
        api(4, 510),
        kernel(4, 520),
        end(3, 1, 600),
        kernel(99, 700),
    ]);
    let second = gate.settle(1_000, false);
    assert_eq!(labels(&second.kept), ["E10/0", "E2/0", "S10/0", "c3/0", "k3/0"]);
    // The library range's end, occurrence 3's start, end, call and kernel, the late kernel.
    assert_eq!(second.outside, 6);
    assert_eq!(gates(&second.gates), [(400, false, "capture range \"step\": 2 ended".into())]);
    assert!(!gate.never_opened());
    assert!(gate.settle(2_000, true).kept.is_empty());
}

#[test]
fn work_and_markers_from_the_flush_time_on_wait_for_the_next_flush() {
    let mut gate = Gate::new(Plan::new(&keep(Some("step"), 0, 0, None), 0, false));
    // A range starting after the flush's time may be preceded by a marker still to come.
    gate.receive([api(1, 90), start(1, 1, 120, "step"), api(2, 130), kernel(2, 140)]);
    let first = gate.settle(100, false);
    assert!(first.kept.is_empty() && first.gates.is_empty());
    assert_eq!(first.outside, 1); // the call at 90, before any range
    gate.receive([kernel(1, 150)]);
    let second = gate.settle(200, false);
    assert_eq!(labels(&second.kept), ["S1/0", "c2/0", "k2/0"]);
    assert_eq!(second.outside, 1); // the kernel of the call at 90
                                   // A count of 0: the window stays open to the end.
    gate.receive([start(2, 1, 5_000, "late"), api(3, 6_000)]);
    assert_eq!(labels(&gate.settle(5_500, true).kept), ["S2/0", "c3/0"]);
}

#[test]
fn delay_and_duration_gate_by_time_and_a_range_before_the_delay_does_not_count() {
    let started = 1_000_000_000;
    let ms = 1_000_000;
    let mut gate = Gate::new(Plan::new(&keep(None, 0, 1, Some(2)), started, false));
    gate.receive([
        api(1, started + ms / 2),
        api(2, started + 3 * ms / 2),
        kernel(2, started + 2 * ms),
    ]);
    let first = gate.settle(started + 2 * ms, false);
    assert_eq!(labels(&first.kept), ["c2/0", "k2/0"]);
    assert_eq!(first.outside, 1);
    assert_eq!(gates(&first.gates), [(started + ms, true, "delay of 1 ms passed".into())]);
    // A kernel launched inside and run after the duration is kept; a call after is not.
    gate.receive([api(3, started + 29 * ms / 10), kernel(3, started + 4 * ms)]);
    gate.receive([api(4, started + 31 * ms / 10), kernel(4, started + 32 * ms / 10)]);
    let second = gate.settle(started + 5 * ms, false);
    assert_eq!(labels(&second.kept), ["c3/0", "k3/0"]);
    assert_eq!(second.outside, 2);
    assert_eq!(gates(&second.gates), [(started + 3 * ms, false, "duration of 2 ms passed".into())]);

    // With a capture range, the delay passes first: a range that started before it does not
    // open the window.
    let mut gate = Gate::new(Plan::new(&keep(Some("step"), 1, 1, None), started, false));
    gate.receive([start(1, 1, started + ms / 2, "step"), end(1, 1, started + 3 * ms / 2)]);
    gate.receive([start(2, 1, started + 2 * ms, "step"), end(2, 1, started + 3 * ms)]);
    let settled = gate.settle(started + 4 * ms, false);
    assert_eq!(labels(&settled.kept), ["E2/0", "S2/0"]);
    let said: Vec<bool> = gates(&settled.gates).into_iter().map(|g| g.1).collect();
    assert_eq!(said, [true, false]);
    // A window that never opens says so.
    let mut never = Gate::new(Plan::new(&keep(Some("step"), 0, 0, None), 0, false));
    never.receive([start(1, 1, 5, "other"), api(1, 6)]);
    assert_eq!(never.settle(10, true).outside, 2);
    assert!(never.never_opened());
}

#[test]
fn sampling_slices_by_the_first_top_level_range_and_work_goes_with_its_call() {
    let mut gate = Gate::new(Plan::new(&Keep::default(), 0, true));
    assert!(!gate.passes_all());
    gate.receive([
        marker(MarkerPhase::Start, 90, 1, 5, "ncclAllReduce", "NCCL"),
        end(90, 1, 8),
        api(1, 50),
        start(1, 1, 100, "step"),
        start(2, 1, 110, "fwd"), // nested: not top-level
        end(2, 1, 115),
        api(2, 120),
        start(3, 2, 150, "load"), // top-level on another thread, after the name is known
        end(1, 1, 190),
        start(4, 1, 200, "step"),
        kernel(2, 210), // launched in occurrence 1, run in 2
        kernel(0, 250), // its call never recorded: by its own start
        end(4, 1, 290),
        end(3, 2, 295),
        start(5, 1, 300, "step"),
        api(3, 310),
        kernel(3, 320),
    ]);
    let settled = gate.settle(1_000, false);
    assert_eq!(gate.sampled_range(), Some("step"));
    assert_eq!(settled.started, [1, 2, 3]);
    assert_eq!(
        labels(&settled.kept),
        [
            "E1/1", "E2/1", "E3/1", "E4/2", "E90/0", "S1/1", "S2/1", "S3/1", "S4/2", "S5/3",
            "S90/0", "c1/0", "c2/1", "c3/3", "k0/2", "k2/1", "k3/3"
        ]
    );
    assert_eq!(settled.outside, 0);
}

#[test]
fn the_programs_start_is_carried_onto_cuptis_clock() {
    // Started 2 s before CLOCK_MONOTONIC read 10 s, when CUPTI read 50 s: at CUPTI's 48 s.
    assert_eq!(program_start(50_000, 10_000, Some(8_000)), 48_000);
    assert_eq!(program_start(50_000, 10_000, None), 50_000);
    // A start in the future (another clock): the recorder's own.
    assert_eq!(program_start(50_000, 10_000, Some(11_000)), 50_000);
    let plan = Plan::new(&keep(None, 0, 2000, Some(5000)), 48_000, false);
    assert_eq!((plan.opens, plan.closes), (2_000_048_000, Some(7_000_048_000)));
}

#[test]
fn call_spans_find_the_slice_of_a_correlation() {
    let mut spans = CallSpans::default();
    for (slice, correlation) in [(1, 10), (1, 14), (3, 30), (2, 20), (2, 25), (1, 12)] {
        spans.note(slice, correlation);
    }
    assert_eq!(spans.spans, [(10, 14, 1), (20, 25, 2), (30, 30, 3)]);
    let found: Vec<Option<u64>> = [9, 10, 13, 15, 25, 30, 31].map(|c| spans.find(c)).to_vec();
    assert_eq!(found, [None, Some(1), Some(1), None, Some(2), Some(3), None]);
    let mut rejected = Rejected::default();
    for c in 0..(REJECTED_GENERATION as u32 + 1) {
        rejected.insert(c);
    }
    assert!(rejected.contains(0) && rejected.contains(REJECTED_GENERATION as u32));
}
