//! What the binary's tests share: running `streamlab` (the binary cargo built, or
//! `STREAMLAB_BIN` on a GPU machine without the build tree) and reading what it printed.
// Each test file uses the part it needs.
#![allow(dead_code)]

use std::process::{Command, Output};

/// `streamlab` with `args`, under exactly the locale variables in `locale` (the others
/// removed, so the machine's own locale cannot change the language).
pub fn streamlab_in(locale: &[(&str, &str)], args: &[&str]) -> Output {
    let bin =
        std::env::var_os("STREAMLAB_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_streamlab").into());
    let mut command = Command::new(bin);
    for var in ["LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE"] {
        command.env_remove(var);
    }
    command.envs(locale.iter().copied()).args(args).output().expect("run streamlab")
}

/// `streamlab` with `args`, in English.
pub fn streamlab(args: &[&str]) -> Output {
    streamlab_in(&[], args)
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn stdout(o: &Output) -> String {
    text(&o.stdout)
}

pub fn stderr(o: &Output) -> String {
    text(&o.stderr)
}

/// Whether the NVIDIA driver's device nodes exist: decided outside streamlab, so a
/// regression that misreports "no device" on a GPU machine fails.
pub fn machine_has_nvidia_gpu() -> bool {
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

/// Whether at least `n` CUDA GPUs are visible to this process (`CUDA_VISIBLE_DEVICES`
/// counts). Where fewer are, it writes `skipped: <test>: needs <n> GPUs, found <m>` on stderr
/// and the test returns: a pass that scripts/gpu-run.sh counts apart (tests/support's
/// `testkit::gpus` writes the same line). Written to the file itself, past libtest's capture
/// of `eprintln!`, so that it shows in every run's log. With no GPU at all it panics: a GPU
/// test run where there is none is a mistake.
pub fn has_gpus(n: usize) -> bool {
    use std::io::Write;
    let found = streamlab::runtime::context::device_count()
        .unwrap_or_else(|e| panic!("this test needs {n} CUDA GPUs and found none: {e}"));
    if found as usize >= n {
        return true;
    }
    let thread = std::thread::current();
    let test = thread.name().filter(|t| *t != "main").unwrap_or("a test");
    let line = format!("skipped: {test}: needs {n} GPUs, found {found}\n");
    // Nothing to do if stderr is gone: the test passes either way.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    false
}
