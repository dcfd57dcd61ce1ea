//! The store's files and lines, written into a folder of the test's.
use super::*;
use streamlab_cupti::trace_file::Keep;

fn folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir()
        .join(format!("streamlab-inject-segments-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn main_writer(dir: &std::path::Path) -> Writer {
    let mut w = Writer::create(dir, std::process::id()).unwrap();
    w.start(&Line::Process {
        format: trace_file::FORMAT,
        pid: std::process::id(),
        ppid: 1,
        args: vec![],
        cupti: String::new(),
        cupti_version: 1,
        flush_ms: 200,
        max_records: 0,
        start_ns: 0,
        keep: Keep::default(),
        missing: vec![],
    });
    w
}

fn instant(id: u32) -> Line {
    Line::Marker {
        phase: streamlab_cupti::trace_file::MarkerPhase::Instant,
        id,
        thread: 1,
        time: u64::from(id),
        name: "m".into(),
        domain: String::new(),
    }
}

/// The marker ids in a file, in order (none where the file is missing).
fn ids(path: PathBuf) -> Vec<u32> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| match Line::parse(l) {
            Some(Line::Marker { id, .. }) => Some(id),
            _ => None,
        })
        .collect()
}

fn parse(text: &str) -> Vec<Line> {
    text.lines().map(|l| Line::parse(l).unwrap()).collect()
}

fn segments(dir: &std::path::Path) -> Vec<u64> {
    let mut seqs: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| trace_file::file_name(e.ok()?.file_name().to_str()?)?.1)
        .collect();
    seqs.sort();
    seqs
}

#[test]
fn first_keeps_the_first_records_in_the_main_file() {
    let dir = folder("first");
    let mut main = main_writer(&dir);
    let mut store = Store::new(WhenFull::First, 2, dir.clone(), std::process::id());
    store.write((1..=3).map(|id| (instant(id), 0)).collect(), &mut main);
    store.unfinished();
    let lines = parse(&store.end_cycle(100, false));
    let whys: Vec<(u64, &str)> = lines
        .iter()
        .map(|l| match l {
            Line::Dropped { count, why, before: None } => (*count, why.as_str()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        whys,
        [
            (1, "over the limit of 2 records (STREAMLAB_TRACE_MAX_RECORDS)"),
            (1, "work still running at exit: its records had no end")
        ]
    );
    assert_eq!(ids(trace_file::main_path(&dir, std::process::id())), [1, 2]);
    assert!(segments(&dir).is_empty());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn last_deletes_the_oldest_segments_and_says_before_when() {
    let dir = folder("last");
    let mut main = main_writer(&dir);
    // 16 records at most: segments of 2, closed as they fill, within a cycle too.
    let mut store = Store::new(WhenFull::Last, 16, dir.clone(), std::process::id());
    let mut said = Vec::new();
    for cycle in 0..7u32 {
        let records = (0..3).map(|i| (instant(cycle * 3 + i), 0)).collect();
        store.write(records, &mut main);
        said.extend(parse(&store.end_cycle(100 * u64::from(cycle + 1), false)));
    }
    // Six cycles kept 18: segment 0 (records 0 and 1, closed in the cycle that ended at
    // 100) went. The seventh: segments 1 and 2 (records 2 to 5, closed in the cycle that
    // ended at 200).
    let why = "the oldest records were dropped to keep the last 16".to_string();
    assert_eq!(
        said,
        [
            Line::Dropped { count: 2, why: why.clone(), before: Some(100) },
            Line::Dropped { count: 4, why, before: Some(200) }
        ]
    );
    assert_eq!(segments(&dir), (3..=10).collect::<Vec<u64>>());
    let pid = std::process::id();
    assert_eq!(ids(trace_file::segment_path(&dir, pid, 3)), [6, 7]);
    // The open segment, under the bound, holds the last record.
    assert_eq!(ids(trace_file::segment_path(&dir, pid, 10)), [20]);
    // The main file holds no record.
    assert!(ids(trace_file::main_path(&dir, pid)).is_empty());
    // One cycle that brings more than the limit keeps the last of it, within the limit: 15,
    // whole segments of 2 and the open one.
    let records = (100..140).map(|id| (instant(id), 0)).collect();
    store.write(records, &mut main);
    let lines = parse(&store.end_cycle(900, false));
    assert!(
        matches!(&lines[..], [Line::Dropped { count: 40, before: Some(900), .. }]),
        "{lines:?}"
    );
    let kept: Vec<u32> = segments(&dir)
        .into_iter()
        .flat_map(|seq| ids(trace_file::segment_path(&dir, pid, seq)))
        .collect();
    assert_eq!(kept, (125..140).collect::<Vec<u32>>());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn sample_thins_whole_occurrences_evenly_and_says_which() {
    let dir = folder("sample");
    let mut main = main_writer(&dir);
    let pid = std::process::id();
    let mut store = Store::new(WhenFull::Sample, 10, dir.clone(), pid);
    // Start-up: 2 records; then five occurrences of 3 records each.
    store.write(vec![(instant(1), 0), (instant(2), 0)], &mut main);
    let mut said = Vec::new();
    for number in 1..=5u64 {
        store.occurrence(number, "step");
        let records = (0..3).map(|i| (instant(number as u32 * 10 + i), number)).collect();
        store.write(records, &mut main);
        said.extend(parse(&store.end_cycle(number * SAMPLED_EVERY_NS, false)));
    }
    said.extend(parse(&store.end_cycle(6 * SAMPLED_EVERY_NS, true)));
    // Occurrence 3 filled the limit: every 2nd kept (2 deleted); 4 was not kept (the set did
    // not change: no line); 5 filled it again: every 4th (3 deleted). The end says it again.
    assert_eq!(segments(&dir), [0, 1, 5]);
    assert_eq!(ids(trace_file::segment_path(&dir, pid, 5)), [50, 51, 52]);
    let sampled: Vec<(u64, u64, Vec<u64>)> = said
        .iter()
        .filter_map(|l| match l {
            Line::Sampled { range, every, total, kept } if range == "step" => {
                Some((*every, *total, kept.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        sampled,
        [
            (1, 1, vec![1]),
            (1, 2, vec![1, 2]),
            (2, 3, vec![1, 3]),
            (4, 5, vec![1, 5]),
            (4, 5, vec![1, 5])
        ]
    );
    let dropped: Vec<(u64, String)> = said
        .iter()
        .filter_map(|l| match l {
            Line::Dropped { count, why, .. } => Some((*count, why.clone())),
            _ => None,
        })
        .collect();
    let why = |every| format!("not in the sample of \"step\": one occurrence in {every} is kept");
    assert_eq!(dropped, [(3, why(2)), (3, why(2)), (3, why(4))]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_sample_whose_first_occurrence_fills_the_limit_counts_the_rest_as_over() {
    let dir = folder("sample-over");
    let mut main = main_writer(&dir);
    let mut store = Store::new(WhenFull::Sample, 3, dir.clone(), std::process::id());
    store.occurrence(1, "step");
    store.write((1..=5).map(|id| (instant(id), 1)).collect(), &mut main);
    let lines = parse(&store.end_cycle(1, false));
    assert!(lines.contains(&Line::Dropped {
        count: 2,
        why: "over the limit of 3 records (STREAMLAB_TRACE_MAX_RECORDS)".into(),
        before: None
    }));
    assert_eq!(ids(trace_file::segment_path(&dir, std::process::id(), 1)), [1, 2, 3]);
    std::fs::remove_dir_all(dir).unwrap();
}
