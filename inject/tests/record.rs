//! The whole recording path on a CPU: the built recorder, loaded as the driver loads it, with
//! a stand-in libcupti (`fake_cupti.c`, built here with the system's C compiler) that hands
//! over made-up records at every flush. The test runs itself again as a child process, which
//! initializes the recorder, lets a few periodic flushes pass and exits (its exit handler is
//! part of what is tested); the parent reads the child's `<pid>.jsonl`.
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::built_library;
use streamlab_cupti::trace_file::{Direction, Line, MarkerPhase, Memory};

const ROLE: &str = "STREAMLAB_INJECT_TEST_ROLE";
const THIS_TEST: &str = "a_process_recorded_through_a_stand_in_cupti";

fn child() {
    let library = built_library();
    // SAFETY: loading the recorder runs no initialiser with preconditions.
    let library = unsafe { libloading::Library::new(&library) }
        .unwrap_or_else(|e| panic!("{}: {e}", library.display()));
    // SAFETY: the entry point's C signature, `int InitializeInjection(void)`.
    let init = unsafe { library.get::<extern "C" fn() -> i32>(b"InitializeInjection\0") }.unwrap();
    assert_eq!(init(), 1);
    // Three periodic flushes (20 ms apart) pass, then the process exits through its exit
    // handlers. The file is watched rather than a time slept: a loaded machine is slow.
    let file = Path::new(&std::env::var_os("STREAMLAB_TRACE_DIR").unwrap())
        .join(format!("{}.jsonl", std::process::id()));
    let flushed = || {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        text.lines().filter(|l| matches!(Line::parse(l), Some(Line::Flushed { .. }))).count()
    };
    let start = std::time::Instant::now();
    while flushed() < 3 && start.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::mem::forget(library);
}

/// The stand-in, compiled into `dir` under a libcupti name.
fn fake_cupti(dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fake_cupti.c");
    let library = dir.join("libcupti.so.99");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&library)
        .arg(&source)
        .output()
        .unwrap_or_else(|e| panic!("{cc} (the C compiler that links Rust here too): {e}"));
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    library
}

#[test]
fn a_process_recorded_through_a_stand_in_cupti() {
    if std::env::var_os(ROLE).is_some() {
        return child();
    }
    let dir = std::env::temp_dir().join(format!("streamlab-inject-record-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cupti = fake_cupti(&dir);
    let trace = dir.join("trace");
    let run = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", THIS_TEST, "--test-threads=1"])
        .env(ROLE, "child")
        .env("STREAMLAB_TRACE_DIR", &trace)
        .env("STREAMLAB_CUPTI", &cupti)
        .env("NVTX_INJECTION64_PATH", &cupti)
        .env("STREAMLAB_TRACE_FLUSH_MS", "20")
        .env("STREAMLAB_TRACE_MAX_RECORDS", "5")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stdout));
    let file = trace.join(format!("{}.jsonl", run_pid(&trace)));
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<Line> = text.lines().map(|l| Line::parse(l).unwrap()).collect();

    // First the process: the stand-in's file and version; what it would not turn on.
    let Line::Process { cupti: path, cupti_version, flush_ms, max_records, missing, .. } =
        &lines[0]
    else {
        panic!("{text}")
    };
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
    std::fs::remove_dir_all(dir).unwrap();
}

/// The pid of the one trace file in `dir`.
fn run_pid(dir: &Path) -> u32 {
    let names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    names[0].trim_end_matches(".jsonl").parse().unwrap()
}
