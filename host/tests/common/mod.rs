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
