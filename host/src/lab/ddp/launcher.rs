//! `streamlab launch --gpus N run LESSON ...`: one process per GPU, as DDP jobs run.
//!
//! The launcher starts N copies of this program, `RANK` and `LOCAL_RANK` = i (and `--device
//! i`), `WORLD_SIZE` = N, and a rendezvous file in a folder it owns (`STREAMLAB_RENDEZVOUS`),
//! through which rank 0 hands NCCL's unique id to the others ([`crate::lab::ddp::ranks`]). Rank 0's
//! report is printed.
//!
//! Under faults it behaves as torchrun does, because a rank whose partner died waits in NCCL
//! forever:
//! - every rank's stderr comes through a pipe: ordinary lines are forwarded as they come
//!   (`rank N: ` before them for N > 0); a rank's last line, when it is streamlab's error line
//!   (`streamlab: ...`), is kept back to say why the rank failed;
//! - the first rank to fail is named with its cause in one line; ranks that then fail the same
//!   way on their own get one more line between them, not the cause again;
//! - the others get [`SETTLE`] to finish, then SIGTERM, then SIGKILL after [`GRACE`], and one
//!   line each;
//! - SIGINT or SIGTERM on the launcher stops every rank the same way (exit 130 or 143);
//! - each rank watches its launcher ([`LAUNCHER_PID`]) and ends by SIGHUP ([`LAUNCHER_GONE`],
//!   129 in a shell) within a fraction of a second when the launcher is gone (killed with
//!   SIGKILL, say).
//!
//! The exit code is the first failing rank's own, or 128 + N when signal N killed it (what a
//! shell reports).
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::runtime::context::device_count;
use crate::runtime::{nccl, Error, Result};

/// The lessons that run as one rank per process.
pub const LESSONS: [&str; 1] = ["allreduce-overlap"];
/// How long the other ranks may go on after one has failed, before they are sent SIGTERM:
/// they may be finishing their own report, or failing for the same reason.
pub const SETTLE: Duration = Duration::from_secs(2);
/// How long a rank sent SIGTERM has to end before it is sent SIGKILL.
pub const GRACE: Duration = Duration::from_secs(5);
/// The launcher's pid, for its ranks: a rank whose parent is no longer this pid stops.
pub const LAUNCHER_PID: &str = "STREAMLAB_LAUNCHER_PID";
/// A rank's exit status when its launcher is gone, as a shell reports it: the rank ends by
/// SIGHUP, as if the launcher had hung up (128 + 1).
pub const LAUNCHER_GONE: i32 = 129;
/// How often a rank looks for its launcher.
const WATCH_EVERY: Duration = Duration::from_millis(200);
/// Test-only: the program to start as each rank instead of this one, for tests that run the
/// launcher with stand-in ranks on a machine without a GPU (the GPU and NCCL checks are
/// skipped). Each rank gets the same arguments and variables as a real one.
pub const RANK_PROGRAM: &str = "STREAMLAB_LAUNCH_RANK_PROGRAM";

/// Checks `run_args` (what follows `launch --gpus N`) and returns the lesson's name.
pub fn check_args(run_args: &[String]) -> Result<&str> {
    let bad = |why: String| Err(Error::InvalidInput(why));
    match run_args {
        [run, lesson, rest @ ..] if run == "run" => {
            if !LESSONS.contains(&lesson.as_str()) {
                return bad(format!("launch runs one process per GPU for {}; `{lesson}` is not one of them (run it with `streamlab run {lesson}`)", LESSONS.join(", ")));
            }
            if rest.iter().any(|a| a == "--device" || a.starts_with("--device=")) {
                return bad("launch sets --device for each rank (rank i uses GPU i): leave it out".into());
            }
            Ok(lesson)
        }
        _ => bad("launch takes `run LESSON [flags]` after --gpus N, e.g. `streamlab launch --gpus 2 run allreduce-overlap`".into()),
    }
}

/// A folder of this launch's own, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where the launcher's lines and the ranks' forwarded lines go: stderr, or a test's list.
pub type Say = Arc<dyn Fn(&str) + Send + Sync>;

fn to_stderr() -> Say {
    // A closed stderr must not stop the launcher: its ranks still need stopping.
    Arc::new(|line: &str| drop(writeln!(std::io::stderr().lock(), "{line}")))
}

/// Runs `run_args` as `gpus` ranks, one process each; returns the exit code to use.
pub fn launch(gpus: usize, run_args: &[String]) -> Result<i32> {
    check_args(run_args)?;
    let stand_in = std::env::var_os(RANK_PROGRAM);
    let exe = match stand_in {
        Some(program) => PathBuf::from(program),
        None => {
            let found = device_count()? as usize;
            if found < gpus {
                return Err(Error::NotRun(format!(
                    "launch --gpus {gpus} needs {gpus} GPUs, found {found}"
                )));
            }
            nccl::version()?;
            std::env::current_exe().map_err(|e| {
                Error::Internal(format!("cannot find this program to start its ranks: {e}"))
            })?
        }
    };
    // Noted before the first rank starts, so that no Ctrl-C leaves a rank behind.
    let interrupt = Arc::new(AtomicUsize::new(0));
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        signal_hook::flag::register_usize(signal as i32, Arc::clone(&interrupt), signal as usize)
            .map_err(|e| Error::Internal(format!("catching {}: {e}", signal.as_str())))?;
    }
    let scratch =
        Scratch(std::env::temp_dir().join(format!("streamlab-launch-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0)
        .map_err(|e| Error::InvalidInput(format!("creating {}: {e}", scratch.0.display())))?;
    let rendezvous = format!("file:{}", scratch.0.join("nccl-id").display());
    let say = to_stderr();
    let mut ranks: Vec<RankProcess> = Vec::new();
    for rank in 0..gpus {
        let mut command = Command::new(&exe);
        command
            .args(run_args)
            .args(["--device", &rank.to_string()])
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("WORLD_SIZE", gpus.to_string())
            .env("STREAMLAB_RENDEZVOUS", &rendezvous)
            .env(LAUNCHER_PID, std::process::id().to_string())
            .stdout(if rank == 0 { Stdio::inherit() } else { Stdio::null() });
        match RankProcess::start(rank, rank, command, &say) {
            Ok(r) => ranks.push(r),
            Err(e) => {
                for r in &mut ranks {
                    let _ = r.child.kill();
                    let _ = r.child.wait();
                }
                return Err(Error::Internal(format!(
                    "starting rank {rank} ({}): {e}",
                    exe.display()
                )));
            }
        }
    }
    Ok(wait_for(ranks, Timing::LAUNCH, &interrupt, &say))
}

/// A rank's process, its stderr read by a thread of its own.
pub struct RankProcess {
    pub rank: usize,
    pub gpu: usize,
    child: Child,
    stderr: Arc<Mutex<Held>>,
}

/// What a rank's stderr reader keeps: the `streamlab: ` line not yet known to be its last,
/// and whether the pipe has closed.
#[derive(Default)]
struct Held {
    line: Option<String>,
    closed: bool,
}

fn lock(held: &Mutex<Held>) -> MutexGuard<'_, Held> {
    held.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RankProcess {
    /// Starts `command` as rank `rank` on GPU `gpu`, its stderr through a pipe to `say`.
    pub fn start(
        rank: usize,
        gpu: usize,
        mut command: Command,
        say: &Say,
    ) -> std::io::Result<RankProcess> {
        let mut child = command.stderr(Stdio::piped()).spawn()?;
        let stderr = Arc::new(Mutex::new(Held::default()));
        match child.stderr.take() {
            Some(pipe) => {
                let (held, say) = (Arc::clone(&stderr), Arc::clone(say));
                std::thread::spawn(move || forward(pipe, rank, &held, &say));
            }
            None => lock(&stderr).closed = true,
        }
        Ok(RankProcess { rank, gpu, child, stderr })
    }

    /// The rank's last `streamlab: ` line, once its stderr has closed. Waits a little at most:
    /// a process the rank started may hold the pipe open after the rank has ended.
    fn kept_line(&self) -> Option<String> {
        let until = Instant::now() + Duration::from_millis(500);
        loop {
            let held = lock(&self.stderr);
            if held.closed || Instant::now() >= until {
                return held.line.clone();
            }
            drop(held);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `rank 2 (GPU 2)`.
    fn name(&self) -> String {
        format!("rank {} (GPU {})", self.rank, self.gpu)
    }
}

/// Forwards a rank's stderr line by line, holding back a `streamlab: ` line until another
/// follows it: only the last one is the error line `fail` prints.
fn forward(pipe: impl Read, rank: usize, held: &Mutex<Held>, say: &Say) {
    let prefix = if rank == 0 { String::new() } else { format!("rank {rank}: ") };
    let mut reader = BufReader::new(pipe);
    let mut bytes = Vec::new();
    loop {
        bytes.clear();
        match reader.read_until(b'\n', &mut bytes) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let line = String::from_utf8_lossy(&bytes).trim_end_matches(['\n', '\r']).to_string();
        let mut h = lock(held);
        if let Some(earlier) = h.line.take() {
            say(&format!("{prefix}{earlier}"));
        }
        if line.starts_with("streamlab: ") {
            h.line = Some(line);
        } else {
            say(&format!("{prefix}{line}"));
        }
    }
    lock(held).closed = true;
}

/// How a rank ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Code(i32),
    Signal(i32),
}

impl End {
    fn of(status: ExitStatus) -> End {
        match status.signal() {
            Some(n) => End::Signal(n),
            None => End::Code(status.code().unwrap_or(1)),
        }
    }

    fn failed(self) -> bool {
        self != End::Code(0)
    }

    /// The code a shell reports: the process's own, or 128 + N for signal N.
    fn exit_code(self) -> i32 {
        match self {
            End::Code(c) => c,
            End::Signal(n) => 128 + n,
        }
    }

    /// `exited 5`, `was killed by signal 9 (SIGKILL)` (`were` for several ranks).
    fn how(self, several: bool) -> String {
        match self {
            End::Code(c) => format!("exited {c}"),
            End::Signal(n) => {
                format!(
                    "{} killed by signal {n} ({})",
                    if several { "were" } else { "was" },
                    signal_name(n)
                )
            }
        }
    }
}

fn signal_name(n: i32) -> &'static str {
    Signal::try_from(n).map(Signal::as_str).unwrap_or("unknown signal")
}

/// The settle and grace periods ([`SETTLE`], [`GRACE`]; shorter in tests).
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub settle: Duration,
    pub grace: Duration,
}

impl Timing {
    pub const LAUNCH: Timing = Timing { settle: SETTLE, grace: GRACE };
}

/// Why the launcher stops the ranks still running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// This rank failed first.
    Failed(usize),
    /// The launcher got this signal (SIGINT or SIGTERM).
    Interrupted(i32),
}

/// Waits for every rank and says what happened, in the lines the module doc describes.
/// `interrupt` holds the signal the launcher got, 0 for none. Returns the exit code: the
/// first failing rank's (first in time, not by number: a rank stopped because another failed
/// has not told what went wrong), 128 + the launcher's signal, or 0.
pub fn wait_for(
    mut ranks: Vec<RankProcess>,
    timing: Timing,
    interrupt: &AtomicUsize,
    say: &Say,
) -> i32 {
    let n = ranks.len();
    let mut ends: Vec<Option<(End, Instant)>> = vec![None; n];
    // The ranks in the order they ended, and the last signal the launcher sent each.
    let mut order: Vec<usize> = Vec::new();
    let mut sent: Vec<Option<Signal>> = vec![None; n];
    let mut stop: Option<(Stop, Instant)> = None;
    // Kept apart from `stop`: an interrupt after a failure changes why, not who failed first.
    let mut first: Option<usize> = None;
    let mut termed_at: Option<Instant> = None;
    loop {
        let got = interrupt.load(Ordering::SeqCst) as i32;
        if got != 0 && !matches!(stop, Some((Stop::Interrupted(_), _))) {
            say(&format!("streamlab launch: got {}: stopping the ranks", signal_name(got)));
            stop = Some((Stop::Interrupted(got), Instant::now()));
        }
        for (r, rank) in ranks.iter_mut().enumerate() {
            if ends[r].is_none() {
                if let Ok(Some(status)) = rank.child.try_wait() {
                    ends[r] = Some((End::of(status), Instant::now()));
                    order.push(r);
                }
            }
        }
        if stop.is_none() {
            let failed = order.iter().copied().find(|&r| ends[r].is_some_and(|(e, _)| e.failed()));
            if let Some(r) = failed.filter(|&r| !maybe_interrupted(ends[r])) {
                say(&format!(
                    "streamlab launch: {} {}",
                    ranks[r].name(),
                    cause(&ranks[r], ends[r])
                ));
                stop = Some((Stop::Failed(r), Instant::now()));
                first = Some(r);
            }
        }
        let running: Vec<usize> = (0..n).filter(|&r| ends[r].is_none()).collect();
        // Once all have ended, only a rank that may have died of the launcher's own signal
        // keeps it waiting (a moment) to tell an interrupt from a failure.
        let deciding = stop.is_none() && order.iter().any(|&r| maybe_interrupted(ends[r]));
        if running.is_empty() && !deciding {
            break;
        }
        if let Some((why, since)) = stop {
            let settle =
                if matches!(why, Stop::Failed(_)) { timing.settle } else { Duration::ZERO };
            if termed_at.is_none() && since.elapsed() >= settle {
                for &r in &running {
                    if let Ok(pid) = i32::try_from(ranks[r].child.id()) {
                        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
                    }
                    sent[r] = Some(Signal::SIGTERM);
                }
                termed_at = Some(Instant::now());
            }
            if termed_at.is_some_and(|t| t.elapsed() >= timing.grace) {
                for &r in &running {
                    if sent[r] != Some(Signal::SIGKILL) {
                        let _ = ranks[r].child.kill();
                        sent[r] = Some(Signal::SIGKILL);
                    }
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    report(&ranks, &ends, &order, &sent, first, stop.map(|(why, _)| why), say)
}

/// A rank killed by SIGINT, SIGTERM or SIGHUP a moment ago: the same signal may have reached
/// the launcher (Ctrl-C reaches the whole process group) and not been noted yet.
fn maybe_interrupted(end: Option<(End, Instant)>) -> bool {
    let outside = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP].map(|s| End::Signal(s as i32));
    end.is_some_and(|(e, at)| outside.contains(&e) && at.elapsed() < Duration::from_millis(100))
}

/// `exited 4: <its error line>`, `exited 4 without an error message`, `was killed by ...`.
fn cause(rank: &RankProcess, end: Option<(End, Instant)>) -> String {
    let Some((end, _)) = end else { return "is still running".into() };
    match (end, rank.kept_line()) {
        (End::Code(c), Some(line)) => {
            format!("exited {c}: {}", line.strip_prefix("streamlab: ").unwrap_or(&line))
        }
        (End::Code(c), None) => format!("exited {c} without an error message"),
        (signal, _) => signal.how(false),
    }
}

/// The lines after the first failure (or the interrupt), and the exit code.
fn report(
    ranks: &[RankProcess],
    ends: &[Option<(End, Instant)>],
    order: &[usize],
    sent: &[Option<Signal>],
    first: Option<usize>,
    stop: Option<Stop>,
    say: &Say,
) -> i32 {
    let end = |r: usize| ends[r].map(|(e, _)| e).unwrap_or(End::Code(0));
    let prefix = |r: usize| if r == 0 { String::new() } else { format!("rank {r}: ") };
    // Failed on their own: not the first, not stopped by the launcher, and not killed by the
    // signal that interrupted the launcher (Ctrl-C reaches every rank too).
    let own: Vec<usize> = order
        .iter()
        .copied()
        .filter(|&r| end(r).failed() && sent[r].is_none())
        .filter(|&r| first != Some(r))
        .filter(|&r| !matches!(stop, Some(Stop::Interrupted(s)) if end(r) == End::Signal(s)))
        .collect();
    let same: Vec<usize> =
        own.iter().copied().filter(|&r| first.is_some_and(|f| end(r) == end(f))).collect();
    if let (Some(f), false) = (first, same.is_empty()) {
        let mut numbers: Vec<usize> = same.clone();
        numbers.sort_unstable();
        let list: Vec<String> = numbers.iter().map(usize::to_string).collect();
        let who = if numbers.len() == 1 { "rank" } else { "ranks" };
        say(&format!(
            "streamlab launch: {who} {} also {}",
            list.join(", "),
            end(f).how(numbers.len() > 1)
        ));
    }
    for &r in own.iter().filter(|r| !same.contains(r)) {
        let also = if first.is_some() { "also " } else { "" };
        say(&format!("streamlab launch: {} {also}{}", ranks[r].name(), cause(&ranks[r], ends[r])));
    }
    let after = match stop {
        Some(Stop::Failed(f)) => format!("rank {f} failed"),
        Some(Stop::Interrupted(s)) => format!("the launcher got {}", signal_name(s)),
        None => String::new(),
    };
    for (r, signal) in sent.iter().enumerate() {
        if let Some(signal) = signal {
            say(&format!(
                "streamlab launch: {} stopped ({}) after {after}",
                ranks[r].name(),
                signal.as_str()
            ));
        }
    }
    // A `streamlab: ` line that did not say why a rank failed was an ordinary message.
    let told = |r: usize| {
        matches!(end(r), End::Code(c) if c != 0) && (first == Some(r) || own.contains(&r))
    };
    for r in (0..ranks.len()).filter(|&r| !told(r)) {
        if let Some(line) = ranks[r].kept_line() {
            say(&format!("{}{line}", prefix(r)));
        }
    }
    match stop {
        Some(Stop::Interrupted(s)) => 128 + s,
        Some(Stop::Failed(_)) => first.map_or(1, |f| end(f).exit_code()),
        None => 0,
    }
}

/// In a rank started by `streamlab launch` ([`LAUNCHER_PID`] set): a thread that ends this
/// process with [`LAUNCHER_GONE`] once the launcher is gone, so that no rank outlives it
/// waiting in NCCL. Nothing otherwise.
pub fn watch_launcher(rank: Option<usize>) {
    let Some(pid) = std::env::var(LAUNCHER_PID).ok().and_then(|p| p.trim().parse::<u32>().ok())
    else {
        return;
    };
    let who = rank.map(|r| format!("rank {r}")).unwrap_or_else(|| "this rank".into());
    std::thread::spawn(move || loop {
        // An orphan is adopted by another process (init, or a subreaper): its parent changes.
        if std::os::unix::process::parent_id() != pid {
            // Not eprintln: stderr is the dead launcher's pipe, and writing to it fails.
            let _ = writeln!(
                std::io::stderr(),
                "streamlab: {who}: the launcher (pid {pid}) is gone: stopping"
            );
            // A signal, not exit(): the atexit handlers of CUDA and NCCL can wait for a
            // collective whose partners are gone, and the rank would never end (seen on four
            // H200s: one rank in four stayed after the launcher was killed). SIGHUP ends it
            // as a closed terminal would, with 129 (LAUNCHER_GONE); SIGKILL where SIGHUP is
            // ignored (nohup).
            use nix::sys::signal::{raise, Signal};
            let _ = raise(Signal::SIGHUP);
            let _ = raise(Signal::SIGKILL);
            std::process::exit(LAUNCHER_GONE);
        }
        std::thread::sleep(WATCH_EVERY);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn launch_takes_a_rank_lesson_and_sets_the_device_itself() {
        assert_eq!(
            check_args(&args(&["run", "allreduce-overlap", "--buckets", "4"])).unwrap(),
            "allreduce-overlap"
        );
        for bad in [
            vec![],
            vec!["allreduce-overlap"],
            vec!["run", "overlap"],
            vec!["run", "allreduce-overlap", "--device", "1"],
            vec!["run", "allreduce-overlap", "--device=1"],
        ] {
            let e = check_args(&args(&bad)).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}: {e}");
        }
    }

    /// A `Say` that keeps the lines, and the lines.
    fn kept() -> (Say, Arc<Mutex<Vec<String>>>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&lines);
        let say: Say = Arc::new(move |l: &str| keep.lock().unwrap().push(l.to_string()));
        (say, lines)
    }

    const QUICK: Timing =
        Timing { settle: Duration::from_millis(300), grace: Duration::from_millis(1000) };

    /// Stand-in ranks, one `sh -c` script each (rank i on GPU i), under `timing`, with the
    /// launcher's signal set to `signal` after `after` (if given): the exit code, the lines
    /// said, and how long it took.
    fn ranks_of(
        scripts: &[&str],
        timing: Timing,
        signal: Option<(i32, Duration)>,
    ) -> (i32, Vec<String>, Duration) {
        let (say, lines) = kept();
        let start = Instant::now();
        let ranks = scripts
            .iter()
            .enumerate()
            .map(|(i, script)| {
                let mut sh = Command::new("sh");
                sh.args(["-c", script]);
                RankProcess::start(i, i, sh, &say).unwrap()
            })
            .collect();
        let interrupt = Arc::new(AtomicUsize::new(0));
        if let Some((n, after)) = signal {
            let flag = Arc::clone(&interrupt);
            std::thread::spawn(move || {
                std::thread::sleep(after);
                flag.store(n as usize, Ordering::SeqCst);
            });
        }
        let code = wait_for(ranks, timing, &interrupt, &say);
        let said = lines.lock().unwrap().clone();
        (code, said, start.elapsed())
    }

    fn has(lines: &[String], line: &str) -> bool {
        lines.iter().any(|l| l == line)
    }

    const SLEEPS: &str = "exec sleep 30";

    #[test]
    fn ranks_that_succeed_are_forwarded_line_by_line_and_exit_0() {
        let (code, lines, _) = ranks_of(
            &[
                "echo hello >&2",
                "echo 'streamlab: a note, not an error' >&2; echo hello >&2",
                "echo 'streamlab: last, but the rank succeeded' >&2",
            ],
            QUICK,
            None,
        );
        assert_eq!(code, 0, "{lines:?}");
        let mut sorted = lines.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            [
                "hello",
                "rank 1: hello",
                "rank 1: streamlab: a note, not an error",
                "rank 2: streamlab: last, but the rank succeeded"
            ],
            "{lines:?}"
        );
    }

    #[test]
    fn a_rank_killed_by_a_signal_is_named_and_the_others_are_stopped() {
        let (code, lines, took) = ranks_of(&[SLEEPS, "kill -9 $$", SLEEPS], QUICK, None);
        assert_eq!(code, 137, "{lines:?}");
        assert_eq!(
            lines,
            [
                "streamlab launch: rank 1 (GPU 1) was killed by signal 9 (SIGKILL)",
                "streamlab launch: rank 0 (GPU 0) stopped (SIGTERM) after rank 1 failed",
                "streamlab launch: rank 2 (GPU 2) stopped (SIGTERM) after rank 1 failed",
            ]
        );
        // The settle period, then SIGTERM ended them: no grace period spent.
        assert!(took >= QUICK.settle && took < QUICK.settle + QUICK.grace, "{took:?}");
    }

    #[test]
    fn a_rank_that_fails_is_named_with_its_error_line_which_is_not_forwarded() {
        let broke = "echo working >&2; echo 'streamlab: x: something broke' >&2; exit 4";
        let (code, lines, _) = ranks_of(&[SLEEPS, broke], QUICK, None);
        assert_eq!(code, 4, "{lines:?}");
        assert_eq!(
            lines,
            [
                "rank 1: working",
                "streamlab launch: rank 1 (GPU 1) exited 4: x: something broke",
                "streamlab launch: rank 0 (GPU 0) stopped (SIGTERM) after rank 1 failed",
            ]
        );
        let (code, lines, _) = ranks_of(&["exit 3", "exec sleep 1"], QUICK, None);
        assert_eq!(code, 3, "{lines:?}");
        assert_eq!(lines[0], "streamlab launch: rank 0 (GPU 0) exited 3 without an error message");
    }

    #[test]
    fn ranks_that_fail_the_same_way_say_the_cause_once() {
        let verify =
            "echo 'streamlab: allreduce-overlap: verification failed: sums differ' >&2; exit 5";
        let later = format!("sleep 0.1; {verify}");
        let (code, lines, _) = ranks_of(&[&later, &later, verify, &later, "exit 0"], QUICK, None);
        assert_eq!(code, 5, "{lines:?}");
        assert_eq!(
            lines,
            [
                "streamlab launch: rank 2 (GPU 2) exited 5: allreduce-overlap: verification failed: sums differ",
                "streamlab launch: ranks 0, 1, 3 also exited 5",
            ]
        );
        // A rank that fails otherwise on its own says its own cause.
        let other =
            "sleep 0.1; echo 'streamlab: allreduce-overlap: cuMemcpy: out of memory' >&2; exit 4";
        let (code, lines, _) = ranks_of(&[verify, other], QUICK, None);
        assert_eq!(code, 5, "{lines:?}");
        assert_eq!(
            lines[1],
            "streamlab launch: rank 1 (GPU 1) also exited 4: allreduce-overlap: cuMemcpy: out of memory"
        );
    }

    #[test]
    fn a_rank_that_ignores_sigterm_gets_sigkill_after_the_grace_period() {
        let stubborn = "trap '' TERM; while :; do sleep 0.05; done";
        let (code, lines, took) = ranks_of(&[stubborn, "exit 3"], QUICK, None);
        assert_eq!(code, 3, "{lines:?}");
        assert!(
            has(&lines, "streamlab launch: rank 0 (GPU 0) stopped (SIGKILL) after rank 1 failed"),
            "{lines:?}"
        );
        assert!(took >= QUICK.settle + QUICK.grace, "{took:?}");
        assert!(took < QUICK.settle + QUICK.grace + Duration::from_secs(2), "{took:?}");
    }

    #[test]
    fn sigterm_on_the_launcher_stops_every_rank_at_once_and_exits_143() {
        let slow = Timing { settle: Duration::from_secs(20), grace: Duration::from_secs(1) };
        let term = Some((Signal::SIGTERM as i32, Duration::from_millis(200)));
        let (code, lines, took) = ranks_of(&[SLEEPS, SLEEPS], slow, term);
        assert_eq!(code, 143, "{lines:?}");
        assert_eq!(
            lines,
            [
                "streamlab launch: got SIGTERM: stopping the ranks",
                "streamlab launch: rank 0 (GPU 0) stopped (SIGTERM) after the launcher got SIGTERM",
                "streamlab launch: rank 1 (GPU 1) stopped (SIGTERM) after the launcher got SIGTERM",
            ]
        );
        assert!(took < Duration::from_secs(1), "no settle period on an interrupt: {took:?}");
    }

    #[test]
    fn an_interrupt_after_a_failure_stops_at_once_without_naming_the_failure_again() {
        let slow = Timing { settle: Duration::from_secs(20), grace: Duration::from_secs(1) };
        let int = Some((Signal::SIGINT as i32, Duration::from_millis(300)));
        let (code, lines, took) = ranks_of(&["exit 4", SLEEPS], slow, int);
        assert_eq!(code, 130, "{lines:?}");
        assert_eq!(
            lines,
            [
                "streamlab launch: rank 0 (GPU 0) exited 4 without an error message",
                "streamlab launch: got SIGINT: stopping the ranks",
                "streamlab launch: rank 1 (GPU 1) stopped (SIGTERM) after the launcher got SIGINT",
            ]
        );
        assert!(took < Duration::from_secs(2), "{took:?}");
    }

    #[test]
    fn ctrl_c_that_reached_the_ranks_too_is_an_interrupt_not_a_failure() {
        // Ctrl-C reaches the whole process group: a rank may die of it before the launcher
        // has noted its own.
        let int = Some((Signal::SIGINT as i32, Duration::from_millis(20)));
        let (code, lines, _) = ranks_of(&["kill -INT $$", SLEEPS], QUICK, int);
        assert_eq!(code, 130, "{lines:?}");
        assert_eq!(
            lines,
            [
                "streamlab launch: got SIGINT: stopping the ranks",
                "streamlab launch: rank 1 (GPU 1) stopped (SIGTERM) after the launcher got SIGINT",
            ]
        );
    }
}
