//! The `streamlab` binary as a script sees it: exit codes and one-line errors. These run
//! everywhere; where a GPU is present the device branch is asserted instead.
use std::process::{Command, Output};

/// The binary cargo built, or `STREAMLAB_BIN` when the test executable was copied to a GPU
/// machine without the build tree.
fn streamlab(args: &[&str]) -> Output {
    let bin =
        std::env::var_os("STREAMLAB_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_streamlab").into());
    Command::new(bin)
        .args(args)
        .output()
        .expect("run streamlab")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn invalid_arguments_exit_2_with_one_explanation() {
    for args in [
        &["run", "overlap", "--elements", "0"][..],
        &["run", "overlap", "--streams", "0"],
        &["run", "overlap", "--streams", "65"],
        &["run", "overlap", "--reps", "0"],
        &["run", "overlap", "--sleep-us", "-3"],
        &["run", "no-such-demo"],
    ] {
        let o = streamlab(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
            "{args:?}: {err}"
        );
    }
    let unknown = stderr(&streamlab(&["run", "no-such-demo"]));
    assert_eq!(unknown.lines().count(), 1, "{unknown}");
    assert!(
        unknown.contains("overlap"),
        "the error should list the demos: {unknown}"
    );
}

#[test]
fn info_reports_the_device_or_says_in_one_line_there_is_none() {
    let o = streamlab(&["info"]);
    match o.status.code() {
        Some(0) => {
            let out = String::from_utf8_lossy(&o.stdout);
            for fact in [
                "compute capability",
                "multiprocessors",
                "asyncEngineCount",
                "concurrentKernels",
                "stream priorities",
            ] {
                assert!(out.contains(fact), "missing {fact}: {out}");
            }
        }
        Some(3) => {
            let err = stderr(&o);
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(
                err.starts_with("streamlab: no CUDA device available ("),
                "{err}"
            );
        }
        other => panic!("unexpected exit {other:?}: {}", stderr(&o)),
    }
}

#[test]
fn more_streams_than_elements_is_an_argument_error_not_a_crash() {
    let o = streamlab(&["run", "overlap", "--elements", "3", "--streams", "4"]);
    // With a GPU the demo refuses before allocating (2); without one, cuInit fails first (3).
    let code = o.status.code();
    assert!(
        code == Some(2) || code == Some(3),
        "{code:?}: {}",
        stderr(&o)
    );
    if code == Some(2) {
        assert!(
            stderr(&o).contains("--streams 4 is more than --elements 3"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn list_names_every_demo_with_its_flags() {
    let o = streamlab(&["list", "--json"]);
    assert!(o.status.success());
    let list: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"overlap"), "{names:?}");
    assert_eq!(names.len(), streamlab::demos::DEMOS.len());
}

#[test]
fn help_documents_the_exit_codes() {
    let o = streamlab(&["--help"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("Exit codes") && out.contains("5  a result check failed"),
        "{out}"
    );
}
