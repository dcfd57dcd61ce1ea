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

/// Whether the NVIDIA driver's device nodes exist: decided outside streamlab, so a
/// regression that misreports "no device" on a GPU machine fails here.
fn machine_has_nvidia_gpu() -> bool {
    // /dev/nvidiactl alone is not enough: containers without a GPU can have it.
    std::fs::read_dir("/dev").is_ok_and(|dir| {
        dir.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.strip_prefix("nvidia")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
    })
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
    if machine_has_nvidia_gpu() {
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        for fact in [
            "compute capability",
            "multiprocessors",
            "asyncEngineCount",
            "concurrentKernels",
            "deviceOverlap",
            "stream priorities",
        ] {
            assert!(out.contains(fact), "missing {fact}: {out}");
        }
    } else {
        assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("streamlab: no CUDA device available (cuInit: "),
            "{err}"
        );
    }
}

#[test]
fn bad_sizes_are_refused_before_the_gpu_is_touched() {
    // Exit 2 with or without a GPU: these are checked before cuInit.
    for (args, expected) in [
        (
            &["run", "overlap", "--elements", "3", "--streams", "4"][..],
            "--streams 4 is more than --elements 3",
        ),
        (
            &["run", "overlap", "--elements", "5000000000"],
            "is more than this demo takes",
        ),
        (
            &["run", "all", "--elements", "10", "--streams", "64"],
            "--streams 64 is more than --elements 10",
        ),
    ] {
        let o = streamlab(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(expected), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?}: printed before refusing");
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
