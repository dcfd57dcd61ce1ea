//! `streamlab trace` as a script sees it: its refusals before the program starts, and the
//! program's own exit code after. Without a GPU (no libcuda), or without CUPTI, the trace
//! stops with exit 3 before the program starts; with both, the program runs under the
//! recorder. The rest of the
//! command runs without a GPU in the unit tests of `trace::capture` (a stand-in recorder).
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
    // A negative number is told its range (not taken for a flag, nor for the program), and
    // every error of trace says so.
    assert_one_line(&["trace", "--idle-gap-ms", "-1", "--", "sh"], 2, "trace: invalid value '-1'");
    assert_one_line(&["trace", "--flush-ms", "-5", "--", "sh"], 2, "from 10 to 60000");
    assert_one_line(&["trace", "--lang", "xx", "--", "sh"], 2, "trace: invalid value 'xx'");
    // What to keep: a count needs its range; words and ranges are checked.
    assert_one_line(&["trace", "--capture-count", "3", "--", "sh"], 2, "--capture-range <NAME>");
    assert_one_line(
        &["trace", "--when-full", "newest", "--", "sh"],
        2,
        "one of first, last, sample",
    );
    assert_one_line(&["trace", "--delay", "-1", "--", "sh"], 2, "from 0 to 604800");
    assert_one_line(&["trace", "--duration", "0", "--", "sh"], 2, "from 0.001 to 604800");
    let o = streamlab(&["trace", "--bogus", "--", "sh"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.starts_with("streamlab: trace: unknown flag '--bogus'"), "{err}");
    assert!(!err.contains("'-- --bogus'"), "clap's tip would make it the program: {err}");
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
    // A folder that cannot be made is refused before anything runs; one that can is not
    // left behind by a trace that never ran (here: no such program).
    assert_one_line(
        &["trace", "--keep", missing.to_str().unwrap(), "--", "sh"],
        2,
        &format!("trace: --keep {}: the folder", missing.display()),
    );
    let new = dir.join("new");
    assert_one_line(
        &["trace", "--keep", new.to_str().unwrap(), "--", "no-such-program-streamlab"],
        127,
        "command not found",
    );
    assert!(!new.exists(), "an empty --keep folder was left");
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

/// Without the driver, or with it and no CUPTI, the trace stops before the program starts
/// (exit 3, one line saying what to install); with a GPU and CUPTI, the program's own code
/// comes back, and a signal's 128 + N.
#[test]
fn the_program_does_not_start_without_a_driver_and_its_code_comes_back_with_one() {
    let dir = scratch("runs");
    let marker = dir.join("ran");
    let touch = format!("touch {}; exit 7", marker.display());
    let o = streamlab(&["trace", "--", "sh", "-c", &touch]);
    let err = stderr(&o);
    // A machine with the driver may lack CUPTI: then the line says so, and what to install.
    let no_cupti = o.status.code() == Some(3) && err.contains("no usable CUPTI");
    if !machine_has_nvidia_gpu() || no_cupti {
        assert_eq!(o.status.code(), Some(3), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("streamlab: trace: "), "{err}");
        assert!(err.contains("install"), "{err}");
        if !machine_has_nvidia_gpu() && !no_cupti {
            assert!(err.contains("install the NVIDIA driver; nothing to trace"), "{err}");
        }
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
