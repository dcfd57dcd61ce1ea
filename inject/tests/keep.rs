//! What the recorder keeps in a long run, with real child processes: the capture window
//! (`STREAMLAB_TRACE_CAPTURE_RANGE`, `…_COUNT`, `…_DELAY_MS`, `…_DURATION_MS`) and what happens
//! at the limit (`STREAMLAB_TRACE_WHEN_FULL=last|sample`). The stand-in libcupti follows a
//! script (`fake_cupti.c` says its words): each flush's records, and a clock of its own, so
//! every time below is exact. The recorder reads a flush's time (`Flushed`) just before
//! asking for its records; a record from that time on waits for the next flush's decisions.
mod common;
use common::{run_child, Run, ROLE};
use streamlab_cupti::trace_file::{Keep, Line, MarkerPhase, WhenFull};

/// A record as a short label: `S1`/`E1` (a range's start or end, by id), `c7` (a call of
/// correlation 7), `k7@1200000` (a kernel of correlation 7, by its start).
fn label(line: &Line) -> Option<String> {
    Some(match line {
        Line::Marker { phase: MarkerPhase::Start, id, .. } => format!("S{id}"),
        Line::Marker { phase: MarkerPhase::End, id, .. } => format!("E{id}"),
        Line::Api { correlation, .. } => format!("c{correlation}"),
        Line::Kernel { correlation, start, .. } => format!("k{correlation}@{start}"),
        _ => return None,
    })
}

fn labels<'a>(lines: impl IntoIterator<Item = &'a Line>) -> Vec<String> {
    let mut out: Vec<String> = lines.into_iter().filter_map(label).collect();
    out.sort();
    out
}

fn gates(lines: &[Line]) -> Vec<(u64, bool, String)> {
    lines
        .iter()
        .filter_map(|l| match l {
            Line::Gate { time, open, why } => Some((*time, *open, why.clone())),
            _ => None,
        })
        .collect()
}

/// The counts of `Dropped` lines whose reason starts with `why`, added up.
fn dropped(lines: &[Line], why: &str) -> u64 {
    lines
        .iter()
        .map(|l| match l {
            Line::Dropped { count, why: said, .. } if said.starts_with(why) => *count,
            _ => 0,
        })
        .sum()
}

fn keep_said(run: &Run) -> Keep {
    match &run.main()[0] {
        Line::Process { keep, .. } => keep.clone(),
        other => panic!("{other:?}"),
    }
}

fn exited(run: &Run) -> Vec<Line> {
    assert!(run.output.status.success(), "{}", run.stdout());
    let main = run.main();
    assert!(matches!(main.last(), Some(Line::Exit { .. })), "{main:#?}");
    main
}

const CAPTURE_RANGE: &str =
    "a_capture_range_keeps_exactly_its_occurrences_and_the_work_they_launched";

#[test]
fn a_capture_range_keeps_exactly_its_occurrences_and_the_work_they_launched() {
    if std::env::var_os(ROLE).is_some() {
        return common::child();
    }
    // cbid 307: cuLaunchKernel. Flush 1 at 2 ms, 2 at 3 ms, 3 at 4 ms.
    let script = "\
start 1000000
flush 2000000
api 307 1 1100000 1100100 1         # launched before the first range: left out...
marker start 1 1 1200000 step       # occurrence 1 opens the window
api 307 1 1210000 1210100 2
kernel 2 1220000 1230000
kernel 1 1250000 1260000            # ...though it ran inside
marker end 1 1 1300000
kernel 0 1310000 1320000            # its call never recorded: kept by its own start
marker start 2 1 1400000 step
api 307 1 1410000 1410100 3
api 307 1 2050000 2050100 4         # after this flush's time: decided at the next
flush 3000000
kernel 3 1420000 1430000            # a flush after its call
marker end 2 1 2100000              # occurrence 2 ends: the window closes
flush 4000000
kernel 4 2200000 2300000            # launched inside, run after the close: kept
marker start 3 1 2500000 step       # occurrence 3 and its work: left out
api 307 1 2510000 2510100 5
kernel 5 2520000 2530000
marker end 3 1 2600000
marker start 4 2 2700000 step NCCL  # a library's range of that name: never counts
marker end 4 2 2800000
";
    let env = [
        ("STREAMLAB_TRACE_CAPTURE_RANGE", "step"),
        ("STREAMLAB_TRACE_CAPTURE_COUNT", "2"),
        ("STREAMLAB_INJECT_TEST_FLUSHES", "4"),
    ];
    let run = run_child(CAPTURE_RANGE, Some(script), &env);
    let main = exited(&run);
    let keep = Keep { capture_range: Some("step".into()), capture_count: 2, ..Keep::default() };
    assert_eq!(keep_said(&run), keep);
    assert_eq!(
        labels(&main),
        [
            "E1",
            "E2",
            "S1",
            "S2",
            "c2",
            "c3",
            "c4",
            "k0@1310000",
            "k2@1220000",
            "k3@1420000",
            "k4@2200000"
        ]
    );
    assert_eq!(
        gates(&main),
        [
            (1_200_000, true, "capture range \"step\" #1 started".into()),
            (2_100_000, false, "capture range \"step\": 2 ended".into())
        ]
    );
    // c1, k1, S3, E3, c5, k5, S4, E4: counted, not written.
    assert_eq!(dropped(&main, "outside the capture window"), 8, "{main:#?}");
    assert!(run.segments().is_empty());
    // Flushed times are the flushes' own: 2, 3, 4 ms, then 1 ms further each.
    let flushed: Vec<u64> = main
        .iter()
        .filter_map(|l| match l {
            Line::Flushed { time } => Some(*time),
            _ => None,
        })
        .take(4)
        .collect();
    assert_eq!(flushed, [2_000_000, 3_000_000, 4_000_000, 5_000_000]);
    run.done();
}

const DELAY: &str = "a_delay_and_a_duration_gate_by_time";

#[test]
fn a_delay_and_a_duration_gate_by_time() {
    if std::env::var_os(ROLE).is_some() {
        return common::child();
    }
    // The recorder starts at 1 ms: the window is [2 ms, 4 ms).
    let script = "\
start 1000000
flush 5000000
api 307 1 1500000 1500100 1     # before the window
kernel 1 2100000 2200000        # launched before it, run inside: left out
api 307 1 2500000 2500100 2
kernel 2 2600000 2700000
api 307 1 3900000 3900100 3
flush 6000000
kernel 3 4500000 4600000        # launched inside, run after: kept
api 307 1 4100000 4100100 4     # after the window
kernel 4 4200000 4300000
";
    let env = [
        ("STREAMLAB_TRACE_DELAY_MS", "1"),
        ("STREAMLAB_TRACE_DURATION_MS", "2"),
        ("STREAMLAB_INJECT_TEST_FLUSHES", "3"),
    ];
    let run = run_child(DELAY, Some(script), &env);
    let main = exited(&run);
    let keep = Keep { delay_ms: 1, duration_ms: Some(2), ..Keep::default() };
    assert_eq!(keep_said(&run), keep);
    assert_eq!(labels(&main), ["c2", "c3", "k2@2600000", "k3@4500000"]);
    assert_eq!(
        gates(&main),
        [
            (2_000_000, true, "delay of 1 ms passed".into()),
            (4_000_000, false, "duration of 2 ms passed".into())
        ]
    );
    assert_eq!(dropped(&main, "outside the capture window"), 4);
    run.done();
}

const LAST: &str = "last_deletes_the_oldest_segments_and_says_up_to_when";

#[test]
fn last_deletes_the_oldest_segments_and_says_up_to_when() {
    if std::env::var_os(ROLE).is_some() {
        return common::child();
    }
    // Five flushes (at 2..6 ms) of three kernels each, at most 8 records: segments of one
    // record or more, one per flush.
    let mut script = String::from("start 1000000\n");
    for flush in 1..=5u64 {
        script += &format!("flush {}\n", (flush + 1) * 1_000_000);
        for k in 0..3 {
            let start = flush * 1_000_000 + k * 100_000;
            script += &format!("kernel 0 {start} {}\n", start + 50_000);
        }
    }
    let env = [
        ("STREAMLAB_TRACE_WHEN_FULL", "last"),
        ("STREAMLAB_TRACE_MAX_RECORDS", "8"),
        ("STREAMLAB_INJECT_TEST_FLUSHES", "6"),
    ];
    let run = run_child(LAST, Some(&script), &env);
    let main = exited(&run);
    assert_eq!(keep_said(&run).when_full, WhenFull::Last);
    // The main file holds no record. Each record fills a segment of its own (an eighth of
    // 8): flush f's kernel k is segment 3(f-1)+k. Segments 0 to 6 were deleted, the 8 last
    // records kept.
    assert!(labels(&main).is_empty(), "{main:#?}");
    let segments = run.segments();
    assert_eq!(segments.keys().copied().collect::<Vec<_>>(), (7..=14).collect::<Vec<u64>>());
    let kept = labels(segments.values().flatten());
    let mut want = vec!["k0@3100000".to_string(), "k0@3200000".to_string()];
    for flush in 4..=5u64 {
        want.extend((0..3).map(|k| format!("k0@{}", flush * 1_000_000 + k * 100_000)));
    }
    want.sort();
    assert_eq!(kept, want);
    // Each deletion: how many, before the clock read at the end of the flush that closed
    // the last of them (the next flush's time, on the script's clock): flush 1's at 3 ms,
    // flush 2's at 4 ms, flush 3's at 5 ms.
    let befores: Vec<(u64, Option<u64>)> = main
        .iter()
        .filter_map(|l| match l {
            Line::Dropped { count, why, before } if why.contains("the oldest records") => {
                Some((*count, *before))
            }
            _ => None,
        })
        .collect();
    assert_eq!(befores, [(1, Some(3_000_000)), (3, Some(4_000_000)), (3, Some(5_000_000))]);
    let said = main.iter().find_map(|l| match l {
        Line::Dropped { why, .. } if why.contains("the oldest") => Some(why.clone()),
        _ => None,
    });
    assert_eq!(said.as_deref(), Some("the oldest records were dropped to keep the last 8"));
    // What `before` promises: every record that ended after it is kept.
    let last_before = 5_000_000;
    for flush in 1..=5u64 {
        for k in 0..3 {
            let start = flush * 1_000_000 + k * 100_000;
            let name = format!("k0@{start}");
            if start + 50_000 > last_before {
                assert!(kept.contains(&name), "{name} ended after {last_before}: {kept:?}");
            }
        }
    }
    run.done();
}

const SAMPLE: &str = "sample_keeps_whole_occurrences_spread_over_the_run";

#[test]
fn sample_keeps_whole_occurrences_spread_over_the_run() {
    if std::env::var_os(ROLE).is_some() {
        return common::child();
    }
    // Flush n (at n+1 ms) holds occurrence n of `step` (a top-level range with one nested
    // range and a launch: 5 records), and the kernel of occurrence n-1, run during
    // occurrence n (its 6th record). Flush 1 also holds start-up records: a library's range,
    // a launch and its kernel (segment 0).
    let mut script = String::from("start 1000000\nflush 2000000\n");
    script += "marker start 90 1 1010000 ncclAllReduce NCCL\nmarker end 90 1 1020000\n";
    script += "api 307 1 1030000 1030100 1\nkernel 1 1040000 1050000\n";
    for n in 1..=10u64 {
        let at = n * 1_000_000;
        if n > 1 {
            script += &format!("flush {}\n", at + 1_000_000);
            let previous = 100 + n - 1;
            script += &format!("kernel {previous} {} {}\n", at + 500_000, at + 510_000);
        }
        if n == 10 {
            break;
        }
        let id = n * 10;
        script += &format!("marker start {id} 1 {} step\n", at + 100_000);
        script += &format!("marker start {} 1 {} forward\n", id + 1, at + 200_000);
        script += &format!("marker end {} 1 {}\n", id + 1, at + 300_000);
        script += &format!("api 307 1 {} {} {}\n", at + 400_000, at + 400_100, 100 + n);
        script += &format!("marker end {id} 1 {}\n", at + 800_000);
    }
    let env = [
        ("STREAMLAB_TRACE_WHEN_FULL", "sample"),
        ("STREAMLAB_TRACE_MAX_RECORDS", "24"),
        ("STREAMLAB_INJECT_TEST_FLUSHES", "11"),
    ];
    let run = run_child(SAMPLE, Some(&script), &env);
    let main = exited(&run);
    assert_eq!(keep_said(&run).when_full, WhenFull::Sample);
    // Occurrence 4 filled the limit: every 2nd kept; 7 filled it again: every 4th.
    let sampled: Vec<(String, u64, u64, Vec<u64>)> = main
        .iter()
        .filter_map(|l| match l {
            Line::Sampled { range, every, total, kept } => {
                Some((range.clone(), *every, *total, kept.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(sampled.last(), Some(&("step".to_string(), 4, 9, vec![1, 5, 9])), "{sampled:?}");
    assert!(sampled.contains(&("step".to_string(), 2, 4, vec![1, 3])), "{sampled:?}");
    let segments = run.segments();
    assert_eq!(segments.keys().copied().collect::<Vec<_>>(), [0, 1, 5, 9]);
    assert_eq!(labels(&segments[&0]), ["E90", "S90", "c1", "k1@1040000"]);
    // Each kept occurrence whole, its kernel with it though it ran in the next one.
    for n in [1u64, 5, 9] {
        let id = n * 10;
        let kernel = format!("k{}@{}", 100 + n, (n + 1) * 1_000_000 + 500_000);
        let mut want = vec![
            format!("E{id}"),
            format!("E{}", id + 1),
            format!("S{id}"),
            format!("S{}", id + 1),
        ];
        want.extend([format!("c{}", 100 + n), kernel]);
        want.sort();
        assert_eq!(labels(&segments[&n]), want, "occurrence {n}");
    }
    // The other six occurrences' records: deleted or never written, and counted.
    assert_eq!(dropped(&main, "not in the sample of \"step\""), 36, "{main:#?}");
    assert!(labels(&main).is_empty());
    run.done();
}
