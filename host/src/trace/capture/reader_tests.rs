//! The reader against hand-written trace folders (`testdata/`): one process with every kind
//! of line, two processes on one clock, a process killed mid-write, one that never reached
//! its exit handlers.
use std::path::{Path, PathBuf};

use crate::lab::record::span::{HostWork, Work};
use crate::runtime::cupti::trace_file::{Line, MarkerPhase};
use crate::trace::capture::model::{Capture, Ending, Process};
use crate::trace::capture::reader::{capture, read_dir, read_file, File};
use crate::trace::inspect::host::{CallKind, WaitKind};

pub(crate) fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/trace/capture/testdata").join(name)
}

pub(crate) fn read(name: &str) -> Capture {
    read_dir(&testdata(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn only(capture: &Capture) -> &Process {
    assert_eq!(capture.processes.len(), 1, "{capture:?}");
    &capture.processes[0]
}

/// Equal to within a nanosecond (ms from ns are not exact in binary).
fn near(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn one_process_with_every_kind_of_line() {
    let capture = read("one-process");
    let p = only(&capture);
    assert_eq!((p.pid, p.ppid), (4242, 4000));
    assert_eq!(p.label(), "pid 4242 · python3 train.py --epochs 1");
    assert_eq!((p.cupti_version, p.flush_ms, p.max_records), (130001, 200, 250_000));
    assert_eq!(p.devices.len(), 1);
    assert_eq!(p.device_names(), ["NVIDIA H200"]);
    // The earliest record is the "epoch" marker: time 0.
    assert_eq!(capture.origin_ns, 1_000_100_000);
    let kinds: Vec<(Work, &str, &str)> =
        p.spans.iter().map(|s| (s.kind, s.stream.as_str(), s.memory.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (Work::CopyToDevice, "legacy default stream", "pageable"),
            (Work::Kernel, "stream 14", ""),
            (Work::CopyToHost, "copy stream", "pinned"),
            (Work::CopyPeer, "copy stream", ""),
            (Work::Memset, "stream 14", ""),
            (Work::Collective, "stream 15", ""),
        ]
    );
    assert_eq!(p.legacy_rows, ["legacy default stream"]);
    let copy = &p.spans[0];
    assert!(near(copy.start_ms, 0.3) && near(copy.end_ms, 1.3), "{copy:?}");
    assert_eq!((copy.bytes, copy.label.as_str()), (4 << 20, "memcpy HtoD"));
    assert_eq!(p.spans[1].grid, Some([4096, 1, 1]));
    assert_eq!(p.spans[3].label, "memcpy peer GPU0 to GPU1");
    // Calls, by kind and without CUPTI's version suffix; the wait on its thread, the
    // stream-wait-event left out of the waits.
    let calls: Vec<(&str, CallKind)> = p.calls.iter().map(|c| (c.name.as_str(), c.kind)).collect();
    assert_eq!(calls, [("cuMemAlloc", CallKind::Alloc), ("cudaStreamSynchronize", CallKind::Sync)]);
    // Stream 14 was created blocking; 13 non-blocking, and 15 has no stream record: only
    // what the records show is claimed.
    assert_eq!(p.blocking_rows, ["stream 14"]);
    assert_eq!(p.waits.len(), 1);
    let wait = &p.waits[0];
    assert_eq!(
        (wait.kind, wait.device, wait.stream.as_deref()),
        (WaitKind::Stream, 0, Some("stream 14"))
    );
    let host: Vec<(&str, HostWork, &str)> =
        p.host.iter().map(|h| (h.thread.as_str(), h.kind, h.name.as_str())).collect();
    assert!(host.contains(&("main", HostWork::Wait, "stream synchronize (stream 14)")), "{host:?}");
    assert!(host.contains(&("main", HostWork::Issue, "cuMemAlloc")), "{host:?}");
    // The synchronize call is drawn once, as the wait.
    assert!(!host.iter().any(|h| h.2 == "cudaStreamSynchronize"), "{host:?}");
    assert!(host.contains(&("main", HostWork::Range, "checkpoint")), "{host:?}");
    // NVTX: "step" inside "epoch"; "eval" never ended and closes at the last record (exit).
    let ranges: Vec<(&str, u32)> = p.ranges.iter().map(|r| (r.name.as_str(), r.depth)).collect();
    assert_eq!(ranges, [("epoch", 0), ("step", 1), ("eval", 0)]);
    assert_eq!(p.unclosed, ["eval"]);
    // A library's ranges (NCCL's own NVTX domain) are drawn but make no window, and one left
    // open is not the program's to report.
    assert!(host.contains(&("main", HostWork::Range, "ncclAllReduce")), "{host:?}");
    assert!(near(p.ranges[2].end_ms, 5.9), "{:?}", p.ranges[2]);
    assert!(near(p.ranges[1].start_ms, 1.4) && near(p.ranges[1].end_ms, 3.9));
    // Records: 6 device spans, 2 calls, 2 syncs, 9 markers (3 of them NCCL's).
    assert_eq!(p.records, 19);
    assert_eq!(p.dropped_count(), 8);
    assert_eq!(p.dropped.len(), 2, "the same reason is counted once: {:?}", p.dropped);
    assert_eq!(p.notes.len(), 2, "{:?}", p.notes);
    assert!(p.notes[0].starts_with("another CUPTI library is loaded in the process: /opt/torch/"));
    assert!(p.missing[0].starts_with("NVTX ranges and markers: NVTX_INJECTION64_PATH is not set"));
    assert_eq!(p.skipped, 0);
    assert!(matches!(p.ending, Ending::Exit { at_ms } if near(at_ms, 5.9)), "{:?}", p.ending);
    assert!(near(p.first_ms, 0.0) && near(p.last_ms, 5.9));
}

#[test]
fn two_processes_share_one_clock_in_the_order_they_started() {
    let capture = read("two-processes");
    let pids: Vec<u32> = capture.processes.iter().map(|p| p.pid).collect();
    // 100 started first; 200's kernel is the earliest record, so it is time 0.
    assert_eq!(pids, [100, 200]);
    assert_eq!(capture.origin_ns, 5_001_000_000);
    let (a, b) = (&capture.processes[0].spans[0], &capture.processes[1].spans[0]);
    assert!(near(b.start_ms, 0.0) && near(a.start_ms, 1.0), "{a:?} {b:?}");
    assert_eq!((a.device, b.device), (0, 1));
    // Their work ran on named streams, not on a legacy default stream.
    assert!(capture.processes.iter().all(|p| p.legacy_rows.is_empty()));
    assert_eq!(capture.records(), 2);
    assert!(capture.processes.iter().all(|p| matches!(p.ending, Ending::Exit { .. })));
}

#[test]
fn a_file_cut_mid_line_keeps_every_line_before_the_cut() {
    let file = read_file(&testdata("killed/777.jsonl")).unwrap();
    assert_eq!((file.lines.len(), file.skipped), (7, 1));
    let capture = read("killed");
    let p = only(&capture);
    assert_eq!(p.spans.len(), 2, "the cut kernel is not read");
    assert_eq!(p.skipped, 1);
    assert!(matches!(p.ending, Ending::LastFlush { at_ms } if near(at_ms, 0.5)), "{:?}", p.ending);
}

#[test]
fn a_file_without_an_exit_line_ends_at_its_last_flush() {
    let capture = read("no-exit");
    let p = only(&capture);
    // The kernel without a time and the line of an unknown kind are skipped, and counted.
    assert_eq!((p.spans.len(), p.skipped), (1, 2));
    assert_eq!(p.spans[0].stream, "legacy default stream");
    assert_eq!(p.legacy_rows, ["legacy default stream"]);
    assert!(matches!(p.ending, Ending::LastFlush { at_ms } if near(at_ms, 0.4)), "{:?}", p.ending);
    // The range open when the process died closes at the last record: the last flush.
    assert_eq!(p.unclosed, ["halfway"]);
    assert!(near(p.ranges[0].end_ms, 0.4), "{:?}", p.ranges);
    assert_eq!(p.host.iter().filter(|h| h.thread == "thread 5").count(), 1);
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
    let e = read_dir(&dir).unwrap_err();
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
    let lines = vec![
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
    let file = File { path: "42.jsonl".into(), lines, skipped: 0 };
    let capture = capture(vec![file]);
    let p = only(&capture);
    let ranges: Vec<&str> = p.ranges.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(ranges, ["forward", "backward"]);
    assert_eq!(p.unclosed, ["backward"]);
    let drawn: Vec<&str> = p.host.iter().map(|h| h.name.as_str()).collect();
    for name in ["forward", "ncclAllReduce", "cudf::join", "backward"] {
        assert!(drawn.contains(&name), "{name}: {drawn:?}");
    }
}
