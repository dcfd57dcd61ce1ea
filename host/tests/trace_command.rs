//! `streamlab trace` as a script sees it: its refusals before the program starts, and the
//! program's own exit code after. Without a GPU (no libcuda) the trace stops with exit 3
//! before the program starts; with one, the program runs under the recorder. The rest of the
//! command runs without a GPU in the unit tests of `lab::capture` (a stand-in recorder).
mod common;
use common::{machine_has_nvidia_gpu, stderr, stdout, streamlab};

/// One line on stderr starting `streamlab: `, nothing on stdout, the exit code `code`.
fn assert_one_line(args: &[&str], code: i32, expected: &str) {
    let o = streamlab(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(err.starts_with("streamlab: "), "{args:?}: {err}");
    assert!(err.contains(expected), "{args:?}: {err} (expected {expected:?})");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(o.stdout.is_empty(), "{args:?}: stdout is the program's: {}", stdout(&o));
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("streamlab-trace-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_missing_or_misplaced_program_is_exit_2_in_one_line() {
    assert_one_line(&["trace"], 2, "trace: the program to run is missing");
    assert_one_line(&["trace", "--timeline"], 2, "streamlab trace [FLAGS] -- <PROGRAM>");
    assert_one_line(&["trace", "python", "x.py"], 2, "the program comes after `--`");
    // `--json FILE` names a file: the error stays one line on stderr, none on stdout.
    assert_one_line(&["trace", "--json", "r.json"], 2, "the program to run is missing");
    assert_one_line(&["trace", "--flush-ms", "5", "--", "sh"], 2, "from 10 to 60000");
    assert_one_line(&["trace", "--idle-gap-ms", "70000", "--", "sh"], 2, "from 0 to 60000");
}

#[test]
fn files_to_write_and_the_keep_folder_are_checked_first() {
    let dir = scratch("files");
    let missing = dir.join("no-such-folder").join("t.json");
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    for flag in ["--trace", "--svg", "--json"] {
        assert_one_line(
            &["trace", flag, missing.to_str().unwrap(), "--", "sh"],
            2,
            &format!("trace: {flag} {}: cannot write it", missing.display()),
        );
    }
    assert_one_line(
        &["trace", "--keep", file.to_str().unwrap(), "--", "sh"],
        2,
        "a file, not a folder",
    );
    std::fs::write(dir.join("1.jsonl"), "{}").unwrap();
    assert_one_line(
        &["trace", "--keep", dir.to_str().unwrap(), "--", "sh"],
        2,
        "already holds trace files",
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_program_that_cannot_be_found_or_run_gives_the_shells_codes() {
    assert_one_line(&["trace", "--", "no-such-program-streamlab"], 127, "command not found");
    let dir = scratch("not-executable");
    let plain = dir.join("plain.sh");
    std::fs::write(&plain, "exit 0\n").unwrap();
    assert_one_line(&["trace", "--", plain.to_str().unwrap()], 126, "not executable");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Without the driver the trace stops before the program starts (exit 3, one line); with a
/// GPU and the recorder, the program's own code comes back, and a signal's 128 + N.
#[test]
fn the_program_does_not_start_without_a_driver_and_its_code_comes_back_with_one() {
    let dir = scratch("runs");
    let marker = dir.join("ran");
    let touch = format!("touch {}; exit 7", marker.display());
    let o = streamlab(&["trace", "--", "sh", "-c", &touch]);
    let err = stderr(&o);
    if !machine_has_nvidia_gpu() {
        assert_eq!(o.status.code(), Some(3), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("streamlab: trace: "), "{err}");
        assert!(!marker.exists(), "the program ran before the check");
    } else {
        assert_eq!(o.status.code(), Some(7), "{err}");
        assert!(marker.exists());
        assert!(err.contains("the program exited 7"), "{err}");
        let o = streamlab(&["trace", "--", "sh", "-c", "kill -9 $$"]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(137), "{err}");
        assert!(err.contains("the program was killed by signal 9 (SIGKILL)"), "{err}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_top_help_names_the_trace_command() {
    let out = stdout(&streamlab(&["--help"]));
    assert!(out.contains("trace") && out.contains("streamlab trace -- python train.py"), "{out}");
    let help = stdout(&streamlab(&["trace", "--help"]));
    assert!(help.contains("Exit codes") && help.contains("128+N"), "{help}");
}
