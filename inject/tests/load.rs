//! The built library loaded as the driver loads it, on a machine with no GPU and no CUPTI:
//! what the trace command finds in the folder when the recorder ran but CUPTI did not.
//!
//! The test runs itself again as a child process (its exit handlers are part of what is
//! tested); the child loads `libstreamlab_inject.so` from cargo's output folder, calls
//! `InitializeInjection` without a trace folder, then with one but with `STREAMLAB_CUPTI`
//! naming no file, then once more, forks a child that exits at once, and exits.
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::built_library;
use streamlab_cupti::trace_file::Line;

const ROLE: &str = "STREAMLAB_INJECT_TEST_ROLE";
const THIS_TEST: &str = "a_recorder_without_cupti_writes_its_process_and_exit_lines";

fn child(dir: &Path) {
    let library = built_library();
    // SAFETY: loading the recorder runs no initialiser of its own (Rust cdylibs have none
    // but std's, which has no preconditions).
    let library = unsafe { libloading::Library::new(&library) }
        .unwrap_or_else(|e| panic!("{}: {e}", library.display()));
    // SAFETY: the entry point's C signature, `int InitializeInjection(void)`.
    let init = unsafe { library.get::<extern "C" fn() -> i32>(b"InitializeInjection\0") }.unwrap();
    // Without a folder: success, and nothing set up (the next call would find it set).
    std::env::remove_var("STREAMLAB_TRACE_DIR");
    assert_eq!(init(), 1);
    std::env::set_var("STREAMLAB_TRACE_DIR", dir);
    assert_eq!(init(), 1);
    // The driver calls it once; a second call must not start a second recorder.
    assert_eq!(init(), 1);
    // SAFETY: the forked child only calls `exit`, which runs the exit handlers it inherited
    // (the recorder's among them) and ends it.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: ends the forked child.
        unsafe { libc::exit(0) };
    }
    assert!(pid > 0, "fork failed");
    let mut status = 0;
    // SAFETY: waits for the child just forked, with a valid out-pointer.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    // The library stays loaded: its exit handler runs when this process exits.
    std::mem::forget(library);
}

#[test]
fn a_recorder_without_cupti_writes_its_process_and_exit_lines() {
    if let Some(dir) = std::env::var_os(ROLE) {
        return child(Path::new(&dir));
    }
    assert!(built_library().is_file(), "{} not built", built_library().display());
    let dir = std::env::temp_dir().join(format!("streamlab-inject-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let missing_cupti = dir.join("no-libcupti.so.13");
    let run = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", THIS_TEST, "--test-threads=1"])
        .env(ROLE, &dir)
        .env("STREAMLAB_CUPTI", &missing_cupti)
        .env("STREAMLAB_TRACE_MAX_RECORDS", "1234")
        .env_remove("NVTX_INJECTION64_PATH")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stdout));
    // One file, the child's (not the fork's), with two lines: no second Process line from the
    // second call, no Exit from the forked child.
    let files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let lines: Vec<Line> = text.lines().map(|l| Line::parse(l).unwrap()).collect();
    let [Line::Process { pid, cupti, cupti_version, max_records, missing, args, .. }, Line::Exit { time: 0 }] =
        &lines[..]
    else {
        panic!("{text}");
    };
    assert_eq!(files[0], dir.join(format!("{pid}.jsonl")));
    assert_ne!(*pid, std::process::id());
    assert_eq!((cupti.as_str(), *cupti_version), (missing_cupti.to_str().unwrap(), 0));
    assert_eq!(*max_records, 1234);
    assert!(args.iter().any(|a| a == THIS_TEST), "{args:?}");
    assert_eq!(missing.len(), 1, "{missing:?}");
    assert!(missing[0].starts_with("everything: CUPTI could not be loaded: "), "{missing:?}");
    assert!(missing[0].contains("no-libcupti.so.13"), "{missing:?}");
    std::fs::remove_dir_all(dir).unwrap();
}
