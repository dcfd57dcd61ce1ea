//! The reader against hand-written trace folders (`testdata/`): one process with every kind
//! of line, two processes on one clock, a process killed mid-write, one that never reached
//! its exit handlers; and against folders written here (segments, an unknown file name).
use std::path::{Path, PathBuf};

use crate::lab::record::span::Work;
use crate::runtime::cupti::trace_file::{Line, MarkerPhase};
use crate::trace::read::builder::ProcessBuilder;
use crate::trace::read::flat_line::FlatLine;
use crate::trace::read::model::{CallKind, Capture, Ending, HostMemory, Process, WaitKind};
use crate::trace::read::reader::{capture, read_dir, trace_files};

pub(crate) fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/trace/read/testdata").join(name)
}

pub(crate) fn read(name: &str) -> Capture {
    read_dir(&testdata(name)).unwrap_or_else(|e| panic!("{name}: {}", e.en()))
}

fn only(capture: &Capture) -> &Process {
    assert_eq!(capture.processes.len(), 1, "{capture:?}");
    &capture.processes[0]
}

/// A process built from `lines` as if read from `<pid>.jsonl`.
pub(crate) fn process_of(pid: u32, lines: &[Line]) -> Process {
    let mut builder = ProcessBuilder::new(pid, vec![format!("{pid}.jsonl").into()]);
    for line in lines {
        let text = line.to_json_line();
        builder.line(&FlatLine::parse(text.trim_end().as_bytes()).unwrap());
    }
    builder.finish()
}

/// Each GPU record's kind, row name and host memory.
fn work(p: &Process) -> Vec<(Work, &str, HostMemory)> {
    (0..p.gpu.len())
        .map(|i| (p.gpu.kind[i], p.rows[p.gpu.row[i] as usize].name.as_str(), p.gpu.memory[i]))
        .collect()
}

#[test]
fn one_process_with_every_kind_of_line() {
    let capture = read("one-process");
    let p = only(&capture);
    assert_eq!((p.pid, p.ppid), (4242, 4000));
    assert_eq!(p.label(), "pid 4242 · python3 train.py --epochs 1");
    assert_eq!((p.cupti_version, p.flush_ms, p.max_records), (130001, 200, 250_000));
    assert_eq!(p.device_names(), ["NVIDIA H200"]);
    // The earliest record is the "epoch" marker: time 0.
    assert_eq!(capture.origin_ns, 1_000_100_000);
    assert_eq!(
        work(p),
        [
            (Work::CopyToDevice, "legacy default stream", HostMemory::Pageable),
            (Work::Kernel, "stream 14", HostMemory::None),
            (Work::CopyToHost, "copy stream", HostMemory::Pinned),
            (Work::CopyPeer, "copy stream", HostMemory::None),
            (Work::Memset, "stream 14", HostMemory::None),
            (Work::Collective, "stream 15", HostMemory::None),
        ]
    );
    let legacy: Vec<&str> = p.rows.iter().filter(|r| r.legacy).map(|r| r.name.as_str()).collect();
    assert_eq!(legacy, ["legacy default stream"]);
    assert_eq!((capture.ms(p.gpu.start[0]), capture.ms(p.gpu.end[0])), (0.3, 1.3));
    assert_eq!((p.gpu.bytes[0], p.names.get(p.gpu.label[0])), (4 << 20, "memcpy HtoD"));
    assert_eq!(p.launches[p.gpu.launch[1] as usize].0, [4096, 1, 1]);
    assert_eq!(p.names.get(p.gpu.label[3]), "memcpy peer GPU0 to GPU1");
    // Calls, by kind and without CUPTI's version suffix; the synchronize marked as waited.
    let calls: Vec<(&str, CallKind, bool)> = (0..p.calls.len())
        .map(|i| (p.names.get(p.calls.name[i]), p.calls.kind[i], p.calls.waited[i]))
        .collect();
    assert_eq!(
        calls,
        [("cuMemAlloc", CallKind::Alloc, false), ("cudaStreamSynchronize", CallKind::Sync, true)]
    );
    assert_eq!(p.thread_name(p.calls.thread[0]), "main");
    // Stream 14 was created blocking; 13 non-blocking, and 15 has no stream record: only
    // what the records show is claimed.
    let blocking: Vec<&str> =
        p.rows.iter().filter(|r| r.blocking).map(|r| r.name.as_str()).collect();
    assert_eq!(blocking, ["stream 14"]);
    // The stream-wait-event is not a wait of the host's.
    assert_eq!(p.waits.len(), 1);
    let wait = &p.waits[0];
    assert_eq!(
        (wait.kind, wait.device, wait.stream.as_deref()),
        (WaitKind::Stream, 0, Some("stream 14"))
    );
    assert_eq!(wait.thread.map(|t| p.thread_name(t)), Some("main"));
    // NVTX: "step" inside "epoch"; "eval" never ended and closes at the last record (exit);
    // NCCL's ranges are the library's.
    let ranges: Vec<(&str, u32, bool, bool)> =
        p.ranges.iter().map(|r| (p.names.get(r.name), r.depth, r.library, r.unclosed)).collect();
    assert_eq!(
        ranges,
        [
            ("epoch", 0, false, false),
            ("ncclAllReduce", 0, true, false),
            ("ncclCommInitRank", 0, true, true),
            ("step", 1, false, false),
            ("eval", 0, false, true),
        ]
    );
    assert_eq!(p.unclosed, ["eval"]);
    let eval = &p.ranges[4];
    assert_eq!((capture.ms(eval.start), capture.ms(eval.end)), (4.7, 5.9));
    assert_eq!(p.marks.len(), 1);
    assert_eq!(p.names.get(p.marks[0].name), "checkpoint");
    // Records: 6 device spans, 2 calls, 2 syncs, 9 markers (3 of them NCCL's).
    assert_eq!(p.records, 19);
    assert_eq!(p.dropped_count(), 8);
    assert_eq!(p.dropped.len(), 2, "the same reason is counted once: {:?}", p.dropped);
    // The limit was reached with the first records kept: the record is whole up to the last
    // flush before the first such drop (none here: from the recorder's start).
    assert_eq!(p.full_after, Some(1_000_000_000));
    assert_eq!(p.notes.len(), 2, "{:?}", p.notes);
    assert!(p.notes[0].starts_with("another CUPTI library is loaded in the process: /opt/torch/"));
    assert!(p.missing[0].starts_with("NVTX ranges and markers: NVTX_INJECTION64_PATH is not set"));
    assert_eq!(p.skipped, 0);
    assert_eq!(p.ending, Ending::Exit { at: 1_006_000_000 });
    assert_eq!((capture.ms(p.first_ns), capture.ms(p.last_ns)), (0.0, 5.9));
}

#[test]
fn two_processes_share_one_clock_in_the_order_they_started() {
    let capture = read("two-processes");
    let pids: Vec<u32> = capture.processes.iter().map(|p| p.pid).collect();
    // 100 started first; 200's kernel is the earliest record, so it is time 0.
    assert_eq!(pids, [100, 200]);
    assert_eq!(capture.origin_ns, 5_001_000_000);
    let (a, b) = (&capture.processes[0], &capture.processes[1]);
    assert_eq!((capture.ms(a.gpu.start[0]), capture.ms(b.gpu.start[0])), (1.0, 0.0));
    assert_eq!((a.work_devices(), b.work_devices()), (vec![0], vec![1]));
    // Their work ran on named streams, not on a legacy default stream.
    assert!(capture.processes.iter().all(|p| p.rows.iter().all(|r| !r.legacy)));
    assert_eq!(capture.records(), 2);
    assert!(capture.processes.iter().all(|p| matches!(p.ending, Ending::Exit { .. })));
}

#[test]
fn a_file_cut_mid_line_keeps_every_line_before_the_cut() {
    let capture = read("killed");
    let p = only(&capture);
    assert_eq!(p.gpu.len(), 2, "the cut kernel is not read");
    assert_eq!(p.skipped, 1);
    assert_eq!(p.ending, Ending::LastFlush { at: 2_000_600_000 });
    assert_eq!(capture.ms(2_000_600_000), 0.5);
}

#[test]
fn a_file_without_an_exit_line_ends_at_its_last_flush() {
    let capture = read("no-exit");
    let p = only(&capture);
    // The kernel without a time and the line of an unknown kind are skipped, and counted.
    assert_eq!((p.gpu.len(), p.skipped), (1, 2));
    assert_eq!(work(p)[0].1, "legacy default stream");
    assert_eq!(p.ending, Ending::LastFlush { at: 3_000_500_000 });
    // The range open when the process died closes at the last record: the last flush.
    assert_eq!(p.unclosed, ["halfway"]);
    assert_eq!(capture.ms(p.ranges[0].end), 0.4);
    assert_eq!(p.thread_name(p.ranges[0].thread), "thread 5");
}

#[test]
fn an_empty_folder_has_no_processes_and_a_missing_one_is_an_error() {
    let dir = std::env::temp_dir().join(format!("streamlab-capture-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "not a trace file").unwrap();
    let capture = read_dir(&dir).unwrap();
    assert!(capture.processes.is_empty());
    assert_eq!((capture.origin_ns, capture.records()), (0, 0));
    std::fs::remove_dir_all(&dir).unwrap();
    let e = read_dir(&dir).unwrap_err().en();
    assert!(e.starts_with("reading ") && e.contains("streamlab-capture-empty"), "{e}");
}

/// A program that marks its phases in an NVTX domain of its own (nvtx3's
/// `scoped_range_in<my_domain>`) gets a window for each, as for the default domain; NCCL's
/// and the other libraries' domains are drawn only.
#[test]
fn a_programs_own_nvtx_domain_makes_windows_and_a_librarys_does_not() {
    let marker = |phase, id, time, name: &str, domain: &str| Line::Marker {
        phase,
        id,
        thread: 11,
        time,
        name: name.into(),
        domain: domain.into(),
    };
    let lines = [
        marker(MarkerPhase::Start, 1, 1_000, "forward", "my_app"),
        marker(MarkerPhase::End, 1, 5_000, "", "my_app"),
        marker(MarkerPhase::Start, 2, 2_000, "ncclAllReduce", "NCCL"),
        marker(MarkerPhase::End, 2, 3_000, "", "NCCL"),
        marker(MarkerPhase::Start, 3, 3_000, "cudf::join", "libcudf"),
        marker(MarkerPhase::End, 3, 4_000, "", "libcudf"),
        // Left open: the program's is reported as unclosed, the library's is not.
        marker(MarkerPhase::Start, 4, 6_000, "backward", "my_app"),
        marker(MarkerPhase::Start, 5, 6_500, "nvshmem_barrier", "NVSHMEM"),
    ];
    let p = process_of(42, &lines);
    let own: Vec<&str> =
        p.ranges.iter().filter(|r| !r.library).map(|r| p.names.get(r.name)).collect();
    assert_eq!(own, ["forward", "backward"]);
    assert_eq!(p.unclosed, ["backward"]);
    let all: Vec<&str> = p.ranges.iter().map(|r| p.names.get(r.name)).collect();
    for name in ["forward", "ncclAllReduce", "cudf::join", "backward", "nvshmem_barrier"] {
        assert!(all.contains(&name), "{name}: {all:?}");
    }
}

/// A process of segment files reads as one, its main file first, its segments in order (not
/// in the order of their names as text: 10 after 9); other `*.jsonl` names are processes of
/// their own.
#[test]
fn segments_read_as_one_process_in_order() {
    let dir = std::env::temp_dir().join(format!("streamlab-segments-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let kernel = |start: u64, correlation: u32| Line::Kernel {
        device: 0,
        context: 1,
        stream: 13,
        start,
        end: start + 10,
        correlation,
        name: "k".into(),
        grid: [1, 1, 1],
        block: [1, 1, 1],
    };
    let write = |name: &str, lines: &[Line]| {
        let text: String = lines.iter().map(Line::to_json_line).collect();
        std::fs::write(dir.join(name), text).unwrap();
    };
    write("7.jsonl", &[Line::Flushed { time: 5 }, Line::Exit { time: 1_000 }]);
    write("7.10.jsonl", &[kernel(300, 3)]);
    write("7.9.jsonl", &[kernel(200, 2)]);
    write("7.0.jsonl", &[kernel(100, 1)]);
    write("stray.jsonl", &[kernel(50, 1)]);
    let files = trace_files(&dir).unwrap();
    let seven = &files["7"];
    let seqs: Vec<u64> = seven.segments.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(seqs, [0, 9, 10]);
    let capture = read_dir(&dir).unwrap();
    assert_eq!(capture.processes.len(), 2);
    let p = capture.processes.iter().find(|p| p.pid == 7).unwrap();
    assert_eq!(p.gpu.correlation, [1, 2, 3]);
    assert_eq!(p.files.len(), 4);
    assert_eq!(p.ending, Ending::Exit { at: 1_000 });
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A process that recorded nothing still has its times said from the trace's origin, never
/// as CUPTI's raw clock.
#[test]
fn without_records_the_origin_is_the_earliest_time_named() {
    let started = Line::Process {
        format: 2,
        pid: 9,
        ppid: 1,
        args: vec!["x".into()],
        cupti: "c".into(),
        cupti_version: 1,
        flush_ms: 200,
        max_records: 10,
        start_ns: 1_795_778_214_000_000_000,
        keep: Default::default(),
        missing: Vec::new(),
    };
    let p = process_of(9, &[started, Line::Flushed { time: 1_795_778_214_909_342_000 }]);
    let capture = capture(vec![p]);
    assert_eq!(capture.origin_ns, 1_795_778_214_000_000_000);
    let Ending::LastFlush { at } = capture.processes[0].ending else { panic!() };
    assert_eq!(capture.ms(at), 909.342);
}
