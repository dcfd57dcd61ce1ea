//! A process that dies by a fatal signal keeps its records: the recorder's handler flushes
//! them and writes `Crashed`, then the process dies by the same signal (status signal N, so
//! 128+N to a shell), and a handler the program installed before (as Python's faulthandler
//! does) still runs. The flushes are 60 s apart here: the crash comes before the first, so
//! every record in the file came through the handler's forced flush, as in the run that
//! crashed ~100 ms after its first CUDA work and left nothing.
use std::os::unix::process::ExitStatusExt;

mod common;
use common::{run_child, Run, PREVIOUS_SAID, ROLE};
use streamlab_cupti::trace_file::Line;

/// The records and the lines that end the run, from the main file and the segments.
fn records(run: &Run) -> (Vec<Line>, Vec<Line>) {
    let main = run.main();
    let mut all = main.clone();
    all.extend(run.segments().into_values().flatten());
    let records = all
        .into_iter()
        .filter(|l| matches!(l, Line::Kernel { .. } | Line::Copy { .. } | Line::Api { .. }))
        .collect();
    (records, main)
}

fn crashed_by(main: &[Line]) -> Option<i32> {
    match main.last() {
        Some(Line::Crashed { signal, time }) if *time > 0 => Some(*signal),
        _ => None,
    }
}

const SEGV: &str = "a_segfault_leaves_the_records_and_dies_by_sigsegv";

#[test]
fn a_segfault_leaves_the_records_and_dies_by_sigsegv() {
    if std::env::var_os(ROLE).is_some() {
        return common::child();
    }
    let env = [
        ("STREAMLAB_TRACE_FLUSH_MS", "60000"),
        ("STREAMLAB_INJECT_TEST_FLUSHES", "0"),
        ("STREAMLAB_INJECT_TEST_END", "segv"),
        ("STREAMLAB_INJECT_TEST_PREVIOUS", "1"),
    ];
    let run = run_child(SEGV, None, &env);
    assert_eq!(run.output.status.signal(), Some(libc::SIGSEGV), "{}", run.stderr());
    // The program's own handler ran after the recorder's.
    assert!(run.stderr().contains(PREVIOUS_SAID), "{}", run.stderr());
    let (records, main) = records(&run);
    // The forced flush's buffer: a kernel, a copy and a kept call (the stand-in's records).
    assert_eq!(records.len(), 3, "{main:#?}");
    assert_eq!(crashed_by(&main), Some(libc::SIGSEGV), "{main:#?}");
    assert!(!main.iter().any(|l| matches!(l, Line::Exit { .. } | Line::Flushed { .. })));
    // The kernel still running at the crash is counted, as at exit.
    assert!(main.iter().any(
        |l| matches!(l, Line::Dropped { count: 1, why, .. } if why.contains("still running"))
    ));
    run.done();
}

const ABORT: &str = "an_abort_leaves_the_records_in_their_segments_and_dies_by_sigabrt";

#[test]
fn an_abort_leaves_the_records_in_their_segments_and_dies_by_sigabrt() {
    if std::env::var_os(ROLE).is_some() {
        return common::child();
    }
    let env = [
        ("STREAMLAB_TRACE_FLUSH_MS", "60000"),
        ("STREAMLAB_TRACE_WHEN_FULL", "last"),
        ("STREAMLAB_INJECT_TEST_FLUSHES", "0"),
        ("STREAMLAB_INJECT_TEST_END", "abort"),
    ];
    let run = run_child(ABORT, None, &env);
    assert_eq!(run.output.status.signal(), Some(libc::SIGABRT), "{}", run.stderr());
    let (records, main) = records(&run);
    assert_eq!(records.len(), 3, "{main:#?}");
    assert_eq!(run.segments().keys().copied().collect::<Vec<_>>(), [0]);
    assert_eq!(crashed_by(&main), Some(libc::SIGABRT), "{main:#?}");
    // The lines that describe stay in the main file.
    assert!(main.iter().any(|l| matches!(l, Line::Device { .. })), "{main:#?}");
    run.done();
}
