//! The whole recording path on a CPU: the built recorder, loaded as the driver loads it, with
//! a stand-in libcupti (`fake_cupti.c`) that hands over the same made-up records at every
//! flush. The test runs itself again as a child process (`common::child`), which initializes
//! the recorder, lets three periodic flushes pass and exits (its exit handler is part of what
//! is tested); the parent reads the child's `<pid>.jsonl`.
mod common;
use common::{run_child, ROLE};
use streamlab_cupti::trace_file::{Direction, Keep, Line, MarkerPhase, Memory};

const THIS_TEST: &str = "a_process_recorded_through_a_stand_in_cupti";

#[test]
fn a_process_recorded_through_a_stand_in_cupti() {
    if std::env::var_os(ROLE).is_some() {
        return common::child();
    }
    let run = run_child(THIS_TEST, None, &[("STREAMLAB_TRACE_MAX_RECORDS", "5")]);
    assert!(run.output.status.success(), "{}", run.stdout());
    let lines = run.main();
    let text = format!("{lines:#?}");
    // Without STREAMLAB_TRACE_WHEN_FULL, the first records, all in the main file.
    assert!(run.segments().is_empty());
    let cupti = run.trace.parent().unwrap().join("libcupti.so.99");

    // First the process: the stand-in's file and version; what it would not turn on.
    let Line::Process { cupti: path, cupti_version, flush_ms, max_records, missing, keep, .. } =
        &lines[0]
    else {
        panic!("{text}")
    };
    assert_eq!(keep, &Keep::default());
    assert_eq!((path.as_str(), *cupti_version), (cupti.to_str().unwrap(), 130001));
    assert_eq!((*flush_ms, *max_records), (20, 5));
    assert_eq!(missing, &["synchronizations: cuptiActivityEnable: CUPTI_ERROR_FAKE"]);
    // Last the exit, after the forced flush.
    assert!(matches!(lines.last(), Some(Line::Exit { time }) if *time > 0), "{text}");

    // The first flush's records, decoded: five kept, the limit.
    let of = |f: fn(&Line) -> bool| lines.iter().filter(|l| f(l)).cloned().collect::<Vec<_>>();
    let device = Line::Device {
        id: 0,
        name: "Fake GPU".into(),
        compute_capability: [9, 0],
        multiprocessors: 132,
        copy_engines: 3,
    };
    assert_eq!(of(|l| matches!(l, Line::Device { .. })), [device]);
    assert_eq!(
        of(|l| matches!(l, Line::Context { .. } | Line::Stream { .. })),
        [
            Line::Context { context: 1, device: 0, null_stream: 7 },
            Line::Stream { context: 1, stream: 13, priority: -5, non_blocking: true }
        ]
    );
    let kernels = of(|l| matches!(l, Line::Kernel { .. }));
    assert!(
        matches!(&kernels[..], [Line::Kernel { name, stream: 7, .. }] if name == "fake_kernel")
    );
    let copies = of(|l| matches!(l, Line::Copy { .. }));
    let [Line::Copy { direction, src, dst, bytes, .. }] = &copies[..] else { panic!("{copies:?}") };
    assert_eq!(
        (*direction, *src, *dst, *bytes),
        (Direction::HostToDevice, Memory::Pageable, Memory::Device, 4 << 20)
    );
    // cuDeviceGet is not kept; cuMemAlloc is.
    let calls = of(|l| matches!(l, Line::Api { .. }));
    assert!(
        matches!(&calls[..], [Line::Api { name, thread: 99, .. }] if name == "cuMemAlloc_v2"),
        "{calls:?}"
    );
    let markers: Vec<(MarkerPhase, String)> = lines
        .iter()
        .filter_map(|l| match l {
            Line::Marker { phase, name, id: 5, thread: 99, .. } => Some((*phase, name.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(markers, [(MarkerPhase::Start, "phase".into()), (MarkerPhase::End, String::new())]);

    // Every later flush brought five more: over the limit, counted; CUPTI's own two; the
    // kernel still running at exit.
    let flushed = of(|l| matches!(l, Line::Flushed { .. })).len() as u64;
    assert!(flushed >= 3, "{text}");
    let dropped = |word: &str| -> u64 {
        lines
            .iter()
            .map(|l| match l {
                Line::Dropped { count, why, .. } if why.contains(word) => *count,
                _ => 0,
            })
            .sum()
    };
    assert_eq!(dropped("limit of 5"), 5 * flushed, "{text}");
    assert_eq!(dropped("CUPTI"), 2, "{text}");
    assert_eq!(dropped("still running"), 1, "{text}");
    assert!(of(|l| matches!(l, Line::Note { .. })).is_empty(), "{text}");
    run.done();
}
