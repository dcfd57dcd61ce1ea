//! Running the traced program as it is: found as a shell finds it (exit 127 where it is not
//! found, 126 where it cannot be run, as `env` and `timeout` do; an executable script
//! without `#!` is run by /bin/sh, as their execvp does), started with the recorder's
//! variables added and this process's stdin, stdout and stderr, and waited for. The traced
//! run is also told when it started (CLOCK_MONOTONIC, read just before the program is
//! started: the recorder counts `--delay` from it).
//!
//! SIGINT and SIGTERM sent to `streamlab trace` are passed on to the program, so that it
//! ends as it would have and its recorder flushes at exit, and streamlab stays to read what
//! was recorded. The one exception is Ctrl-C at a terminal: the terminal sends SIGINT to its
//! whole foreground process group, the program included, so passing it on would send the
//! program a second SIGINT (which many programs read as "stop now, skip the cleanup").
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{kill, Signal};
use nix::unistd::{getpgrp, tcgetpgrp, Pid};

use crate::runtime::error::{echoed, io_text};
use crate::t;
use crate::text::Text;
use crate::trace::capture::summary::Ended;

/// Why the program could not be started, and the code a shell would exit with.
#[derive(Debug, Clone, PartialEq)]
pub struct NotStarted {
    /// 127: not found; 126: found but cannot be run.
    pub code: i32,
    pub why: Text,
}

/// How a run went.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ran {
    pub ended: Ended,
    /// From just before the program started to its end.
    pub wall_ms: f64,
    /// The last SIGINT or SIGTERM streamlab got while the program ran (the user asked to
    /// stop), whether or not it was passed on.
    pub interrupted: Option<i32>,
}

/// Where the shell would look when `PATH` is unset (glibc's `execvp`).
const DEFAULT_PATH: &str = "/bin:/usr/bin";
/// How often the wait looks for a signal to pass on.
const POLL: Duration = Duration::from_millis(20);

fn executable(path: &Path) -> bool {
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The file `program` names: itself where it holds a `/`, else the first executable file of
/// that name in a folder of `path` (the `PATH` variable's value).
pub fn resolve(program: &str, path: Option<&str>) -> Result<PathBuf, NotStarted> {
    let not_found = |why: Text| NotStarted { code: 127, why };
    let cannot_run = |why: Text| NotStarted { code: 126, why };
    let name = program.to_string();
    if program.contains('/') {
        let file = Path::new(program);
        return if !file.exists() {
            Err(not_found(t!("error.trace.no_such_file", program = name)))
        } else if file.is_dir() {
            Err(cannot_run(t!("error.trace.a_folder", program = name)))
        } else if !executable(file) {
            Err(cannot_run(t!("error.trace.not_executable_chmod", program = name)))
        } else {
            Ok(file.to_path_buf())
        };
    }
    let mut not_executable = None;
    if !program.is_empty() {
        for folder in path.unwrap_or(DEFAULT_PATH).split(':') {
            // An empty entry is the current folder, as for the shell.
            let file = Path::new(if folder.is_empty() { "." } else { folder }).join(program);
            if executable(&file) {
                return Ok(file);
            }
            if file.is_file() && not_executable.is_none() {
                not_executable = Some(file);
            }
        }
    }
    match not_executable {
        Some(file) => {
            Err(cannot_run(t!("error.trace.not_executable", file = file.display().to_string())))
        }
        None => Err(not_found(t!("error.trace.command_not_found", program = name))),
    }
}

/// SIGINT and SIGTERM noted in a flag instead of ending this process, from the first call
/// on (the registration stays for the life of the process).
pub fn forward_signals() -> Result<&'static AtomicUsize, Text> {
    static FLAG: OnceLock<Result<Arc<AtomicUsize>, Text>> = OnceLock::new();
    let flag = FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicUsize::new(0));
        for signal in [Signal::SIGINT, Signal::SIGTERM] {
            signal_hook::flag::register_usize(signal as i32, Arc::clone(&flag), signal as usize)
                .map_err(|e| {
                    let (signal, why) = (signal.as_str().to_string(), e.to_string());
                    t!("error.trace.catching", signal, why)
                })?;
        }
        Ok(flag)
    });
    flag.as_ref().map(|f| &**f).map_err(Clone::clone)
}

/// Whether this process is in the foreground process group of its terminal: then Ctrl-C's
/// SIGINT reached the program too.
fn in_terminal_foreground() -> bool {
    let group = getpgrp();
    let (stdin, stdout, stderr) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
    let foreground = [stdin.as_fd(), stdout.as_fd(), stderr.as_fd()]
        .into_iter()
        .any(|fd| tcgetpgrp(fd).is_ok_and(|g| g == group));
    foreground
}

/// CLOCK_MONOTONIC now, in ns.
fn monotonic_ns() -> u64 {
    use nix::time::{clock_gettime, ClockId};
    clock_gettime(ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        (t.tv_sec() as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec() as u64)
    })
}

/// Runs `args` (the program and its arguments) with `env` added, passing on SIGINT and
/// SIGTERM (see the module's doc), until it ends. With `started`, that variable is set to
/// CLOCK_MONOTONIC in ns as the program is started.
pub fn run(
    args: &[String],
    env: &[(String, String)],
    started: Option<&str>,
) -> Result<Ran, NotStarted> {
    let (program, rest) =
        args.split_first().ok_or(NotStarted { code: 127, why: t!("error.trace.no_program") })?;
    let path = std::env::var("PATH").ok();
    let file = resolve(program, path.as_deref())?;
    let signals = forward_signals().map_err(|why| NotStarted { code: 126, why })?;
    // A signal that came before the program started is not its to get.
    signals.store(0, Ordering::SeqCst);
    let start = Instant::now();
    let stamp: Option<(&str, String)> = started.map(|name| (name, monotonic_ns().to_string()));
    let spawn = |command: &mut Command| {
        command.args(rest).envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        if let Some((name, value)) = &stamp {
            command.env(name, value);
        }
        command.spawn()
    };
    let mut spawned = spawn(Command::new(&file).arg0(program));
    // A file the kernel will not run (a script without `#!`): the shell runs it, as
    // glibc's execvp does (and so env and timeout).
    if spawned.as_ref().is_err_and(|e| e.raw_os_error() == Some(Errno::ENOEXEC as i32)) {
        spawned = spawn(Command::new("/bin/sh").arg(&file));
    }
    let mut child = spawned.map_err(|e| {
        let code = if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 };
        let (program, why) = (echoed(program), io_text(&e));
        NotStarted { code, why: t!("error.trace.cannot_be_run", program, why) }
    })?;
    let pid = Pid::from_raw(child.id() as i32);
    let (done, ended) = channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait());
    });
    let mut interrupted = None;
    let status = loop {
        match ended.recv_timeout(POLL) {
            Ok(status) => break status.map_err(|e| io_text(&e)),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break Err(t!("error.trace.wait_ended")),
        }
        let got = signals.swap(0, Ordering::SeqCst) as i32;
        let Ok(signal) = Signal::try_from(got) else { continue };
        interrupted = Some(got);
        if signal == Signal::SIGINT && in_terminal_foreground() {
            continue;
        }
        let _ = kill(pid, signal);
    };
    let wall_ms = start.elapsed().as_secs_f64() * 1e3;
    let status = status.map_err(|why| {
        let program = echoed(program);
        NotStarted { code: 126, why: t!("error.trace.waiting", program, why) }
    })?;
    let ended = match status.signal() {
        Some(n) => Ended::Signal(n),
        None => Ended::Code(status.code().unwrap_or(1)),
    };
    Ok(Ran { ended, wall_ms, interrupted })
}

/// Tests that run programs take this first: one of them sends SIGTERM to the test process,
/// which every run going on at the time would pass on to its own program.
#[cfg(test)]
pub(crate) static RUNS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        RUNS.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_program_is_found_as_a_shell_finds_it() {
        let dir = std::env::temp_dir().join(format!("streamlab-program-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("plain.txt");
        std::fs::write(&script, "echo hi\n").unwrap();
        let folder = dir.to_str().unwrap();
        assert_eq!(
            resolve("sh", Some("/no/such:/bin:/usr/bin")).unwrap().file_name().unwrap(),
            "sh"
        );
        assert_eq!(resolve("no-such-program-x", Some(folder)).unwrap_err().code, 127);
        // Found, but not executable: 126, naming the file.
        let e = resolve("plain.txt", Some(folder)).unwrap_err();
        assert_eq!(e.code, 126);
        assert!(e.why.en().contains("plain.txt: not executable"), "{:?}", e.why);
        assert_eq!(resolve(script.to_str().unwrap(), None).unwrap_err().code, 126);
        assert_eq!(resolve(folder, None).unwrap_err().code, 126);
        assert_eq!(resolve("./no-such-file", None).unwrap_err().code, 127);
        assert_eq!(resolve("", Some("/bin")).unwrap_err().code, 127);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_programs_own_code_or_128_plus_its_signal() {
        let _one_at_a_time = serial();
        let ran = run(&args(&["sh", "-c", "exit 7"]), &[], None).unwrap();
        assert_eq!(ran.ended, Ended::Code(7));
        let ran = run(&args(&["sh", "-c", "kill -9 $$"]), &[], None).unwrap();
        assert_eq!((ran.ended, ran.ended.exit_code()), (Ended::Signal(9), 137));
        // The variables reach the program.
        let env = [("STREAMLAB_TEST_MARK".to_string(), "seen".to_string())];
        let script = "test \"$STREAMLAB_TEST_MARK\" = seen";
        let ran = run(&args(&["sh", "-c", script]), &env, None).unwrap();
        assert_eq!(ran.ended, Ended::Code(0));
        assert_eq!(run(&args(&["no-such-program-x"]), &[], None).unwrap_err().code, 127);
        // An executable script without `#!`: /bin/sh runs it, with its arguments.
        let dir = std::env::temp_dir().join(format!("streamlab-noshebang-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("plain-script");
        std::fs::write(&script, "exit $1\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let ran = run(&args(&[script.to_str().unwrap(), "5"]), &[], None).unwrap();
        assert_eq!(ran.ended, Ended::Code(5));
        // Told when it started, on CLOCK_MONOTONIC: between the readings before and after.
        let said = dir.join("started");
        let script = format!("echo \"$STREAMLAB_TEST_STARTED\" > {}", said.display());
        let before = monotonic_ns();
        run(&args(&["sh", "-c", &script]), &[], Some("STREAMLAB_TEST_STARTED")).unwrap();
        let after = monotonic_ns();
        let started: u64 = std::fs::read_to_string(&said).unwrap().trim().parse().unwrap();
        assert!(before <= started && started <= after, "{before} {started} {after}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A SIGTERM sent to streamlab reaches the program, which ends as it chooses (here
    /// with 42 from its trap), and streamlab lives on to report it.
    #[test]
    fn sigterm_is_passed_on_to_the_program() {
        let _one_at_a_time = serial();
        forward_signals().unwrap();
        let sender = std::thread::spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            kill(Pid::this(), Signal::SIGTERM).unwrap();
        });
        let script = "trap 'exit 42' TERM; sleep 5 & wait";
        let ran = run(&args(&["sh", "-c", script]), &[], None).unwrap();
        sender.join().unwrap();
        assert_eq!((ran.ended, ran.interrupted), (Ended::Code(42), Some(Signal::SIGTERM as i32)));
        assert!(ran.wall_ms < 4000.0, "{} ms: the signal did not arrive", ran.wall_ms);
    }
}
