//! What the recorder's integration tests share: the built library, the stand-in libcupti
//! (`fake_cupti.c`, built with the system's C compiler), and a child process that records
//! through them.
//!
//! Each test runs its own test binary again as the child (`ROLE` set): the child loads the
//! recorder as the driver does, calls `InitializeInjection`, lets `STREAMLAB_INJECT_TEST_FLUSHES`
//! periodic flushes pass (the file is watched rather than a time slept: a loaded machine is
//! slow), and ends as `STREAMLAB_INJECT_TEST_END` says: `exit` (through its exit handlers),
//! `segv` (a write through a null pointer) or `abort`. With `STREAMLAB_INJECT_TEST_PREVIOUS`
//! set, it first installs a SIGSEGV handler of its own, as Python's faulthandler does, which
//! writes a line on stderr and lets the signal act again.
#![allow(dead_code)] // each test file uses its own part of this

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use streamlab_cupti::trace_file::{self, Line};

pub const ROLE: &str = "STREAMLAB_INJECT_TEST_ROLE";
const FLUSHES: &str = "STREAMLAB_INJECT_TEST_FLUSHES";
const END: &str = "STREAMLAB_INJECT_TEST_END";
const PREVIOUS: &str = "STREAMLAB_INJECT_TEST_PREVIOUS";
/// What the stand-in for Python's faulthandler writes.
pub const PREVIOUS_SAID: &str = "the program's own SIGSEGV handler ran";

/// `libstreamlab_inject.so` as cargo built it for this test: in `target/<profile>/deps/`
/// beside the test (or one folder up, where `cargo build` puts it).
pub fn built_library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let beside = deps.join("libstreamlab_inject.so");
    if beside.is_file() {
        return beside;
    }
    deps.parent().unwrap().join("libstreamlab_inject.so")
}

/// The stand-in, compiled into `dir` under a libcupti name.
pub fn fake_cupti(dir: &Path) -> PathBuf {
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

/// The lines of a file (none where it is missing); a line that does not parse fails.
pub fn lines(path: &Path) -> Vec<Line> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().map(|l| Line::parse(l).unwrap_or_else(|| panic!("{l}"))).collect()
}

/// The stand-in for faulthandler: a line on stderr, then the default action, raised again.
extern "C" fn previous_handler(signal: i32) {
    let text = format!("{PREVIOUS_SAID}\n");
    // SAFETY: write(2) of a valid buffer; then plain calls that end the process by `signal`.
    unsafe {
        libc::write(2, text.as_ptr().cast(), text.len());
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

/// The child's side (see the module's doc).
pub fn child() {
    // SAFETY: no core file from the crashes tests make on purpose.
    unsafe {
        let none = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::setrlimit(libc::RLIMIT_CORE, &none);
    }
    if std::env::var_os(PREVIOUS).is_some() {
        let handler: extern "C" fn(i32) = previous_handler;
        // SAFETY: a handler of the plain signature, installed before the recorder's.
        unsafe { libc::signal(libc::SIGSEGV, handler as *const () as libc::sighandler_t) };
    }
    let library = built_library();
    // SAFETY: loading the recorder runs no initialiser with preconditions.
    let library = unsafe { libloading::Library::new(&library) }
        .unwrap_or_else(|e| panic!("{}: {e}", library.display()));
    // SAFETY: the entry point's C signature, `int InitializeInjection(void)`.
    let init = unsafe { library.get::<extern "C" fn() -> i32>(b"InitializeInjection\0") }.unwrap();
    assert_eq!(init(), 1);
    let wanted: usize = std::env::var(FLUSHES).ok().and_then(|n| n.parse().ok()).unwrap_or(3);
    let dir = PathBuf::from(std::env::var_os("STREAMLAB_TRACE_DIR").unwrap());
    let file = trace_file::main_path(&dir, std::process::id());
    let flushed = || lines(&file).iter().filter(|l| matches!(l, Line::Flushed { .. })).count();
    let start = Instant::now();
    while flushed() < wanted && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
    match std::env::var(END).as_deref() {
        Ok("segv") => {
            let nowhere: *mut u8 = std::ptr::null_mut();
            // SAFETY: not safe at all: the point is the SIGSEGV.
            unsafe { std::ptr::write_volatile(nowhere, 1) };
        }
        // SAFETY: ends the process by SIGABRT.
        Ok("abort") => unsafe { libc::abort() },
        _ => {}
    }
    // The library stays loaded: its exit handler runs when this process exits.
    std::mem::forget(library);
}

/// A child run: its output, and its trace folder.
pub struct Run {
    pub output: Output,
    pub trace: PathBuf,
    /// The scratch folder, removed by [`Run::done`].
    scratch: PathBuf,
}

impl Run {
    /// The pid of the one process recorded.
    pub fn pid(&self) -> u32 {
        let pids: std::collections::BTreeSet<u32> = std::fs::read_dir(&self.trace)
            .unwrap()
            .filter_map(|e| trace_file::file_name(e.ok()?.file_name().to_str()?).map(|n| n.0))
            .collect();
        assert_eq!(pids.len(), 1, "{pids:?}");
        pids.into_iter().next().unwrap()
    }

    /// The main file's lines.
    pub fn main(&self) -> Vec<Line> {
        lines(&trace_file::main_path(&self.trace, self.pid()))
    }

    /// Each segment file's lines, by seq.
    pub fn segments(&self) -> BTreeMap<u64, Vec<Line>> {
        std::fs::read_dir(&self.trace)
            .unwrap()
            .filter_map(|e| {
                let path = e.ok()?.path();
                let (_, seq) = trace_file::file_name(path.file_name()?.to_str()?)?;
                Some((seq?, lines(&path)))
            })
            .collect()
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    pub fn done(self) {
        std::fs::remove_dir_all(&self.scratch).unwrap();
    }
}

/// Runs test `test` of this binary as a child recording through the stand-in, with
/// `script` for it (none: its fixed records) and `env` added; flushes every 20 ms unless
/// `env` says.
pub fn run_child(test: &str, script: Option<&str>, env: &[(&str, &str)]) -> Run {
    let scratch =
        std::env::temp_dir().join(format!("streamlab-inject-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let cupti = fake_cupti(&scratch);
    let trace = scratch.join("trace");
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", test, "--test-threads=1"])
        .env(ROLE, "child")
        .env("STREAMLAB_TRACE_DIR", &trace)
        .env("STREAMLAB_CUPTI", &cupti)
        .env("NVTX_INJECTION64_PATH", &cupti)
        .env("STREAMLAB_TRACE_FLUSH_MS", "20")
        .env_remove("FAKE_CUPTI_SCRIPT");
    if let Some(script) = script {
        let file = scratch.join("script.txt");
        std::fs::write(&file, script).unwrap();
        command.env("FAKE_CUPTI_SCRIPT", file);
    }
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().unwrap();
    Run { output, trace, scratch }
}
