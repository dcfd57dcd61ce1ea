//! How the ranks of a launch ended, and the lines that say so: [`wait_for`] waits for every
//! rank, and after the first failure (or a signal to the launcher) stops the others, SIGTERM
//! after [`SETTLE`] and SIGKILL after [`GRACE`], as the launcher's module doc
//! ([`crate::lab::ddp::launcher`]) describes; then it names the first failing rank with its
//! cause, the ranks that failed the same way in one more line, and the ranks it stopped.
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::lab::ddp::handshake::ranks_named;
use crate::lab::ddp::rank_process::{RankProcess, Say};
use crate::t;
use crate::text::{Lang, Text};

/// How long the other ranks may go on after one has failed, before they are sent SIGTERM:
/// they may be finishing their own report, or failing for the same reason.
pub const SETTLE: Duration = Duration::from_secs(2);
/// How long a rank sent SIGTERM has to end before it is sent SIGKILL.
pub const GRACE: Duration = Duration::from_secs(5);

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

    /// `ranks 1, 2 also exited 5`, `rank 1 was also killed by signal 9 (SIGKILL)`: the
    /// ranks that ended as the first failing one did.
    fn same_for(self, numbers: &[usize]) -> Text {
        let ranks = ranks_named(numbers);
        match self {
            End::Code(code) => t!("error.ddp.same_exited", ranks, code),
            End::Signal(n) => {
                let signal = signal_name(n).to_string();
                match numbers.len() {
                    1 => t!("error.ddp.same_killed_one", ranks, n, signal),
                    _ => t!("error.ddp.same_killed", ranks, n, signal),
                }
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

/// Where the launcher's lines go, and the language of its own.
struct Voice<'a> {
    say: &'a Say,
    lang: Lang,
}

impl Voice<'_> {
    /// A line of the launcher's own.
    fn line(&self, line: Text) {
        (self.say)(&format!("streamlab launch: {}", line.render(self.lang)));
    }
}

/// Waits for every rank and says what happened, in the lines the module doc describes, in
/// `lang`.
/// `interrupt` holds the signal the launcher got, 0 for none. Returns the exit code: the
/// first failing rank's (first in time, not by number: a rank stopped because another failed
/// has not told what went wrong), 128 + the launcher's signal, or 0.
pub fn wait_for(
    mut ranks: Vec<RankProcess>,
    timing: Timing,
    interrupt: &AtomicUsize,
    say: &Say,
    lang: Lang,
) -> i32 {
    let voice = Voice { say, lang };
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
            let signal = signal_name(got).to_string();
            voice.line(t!("error.ddp.launch_interrupted", signal));
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
                voice.line(cause(&ranks[r], ends[r], false));
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
    report(&ranks, &ends, &order, &sent, first, stop.map(|(why, _)| why), &voice)
}

/// A rank killed by SIGINT, SIGTERM or SIGHUP a moment ago: the same signal may have reached
/// the launcher (Ctrl-C reaches the whole process group) and not been noted yet.
fn maybe_interrupted(end: Option<(End, Instant)>) -> bool {
    let outside = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP].map(|s| End::Signal(s as i32));
    end.is_some_and(|(e, at)| outside.contains(&e) && at.elapsed() < Duration::from_millis(100))
}

/// `rank 1 (GPU 1) exited 4: <its error line>`, `... exited 4 without an error message`,
/// `... was killed by ...`; `also` after the rank's name where another failed first.
fn cause(rank: &RankProcess, end: Option<(End, Instant)>, also: bool) -> Text {
    let name = rank.name();
    let Some((end, _)) = end else { return t!("error.ddp.rank_still_running", name) };
    match (end, rank.kept_line(), also) {
        (End::Code(code), Some(line), _) => {
            // The rank's own error line, as it said it (in the language it was given).
            let line = line.strip_prefix("streamlab: ").unwrap_or(&line).to_string();
            match also {
                false => t!("error.ddp.rank_exited_said", name, code, line),
                true => t!("error.ddp.rank_also_exited_said", name, code, line),
            }
        }
        (End::Code(code), None, false) => t!("error.ddp.rank_exited_silent", name, code),
        (End::Code(code), None, true) => t!("error.ddp.rank_also_exited_silent", name, code),
        (End::Signal(n), _, also) => {
            let signal = signal_name(n).to_string();
            match also {
                false => t!("error.ddp.rank_killed", name, n, signal),
                true => t!("error.ddp.rank_also_killed", name, n, signal),
            }
        }
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
    voice: &Voice,
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
        voice.line(end(f).same_for(&numbers));
    }
    for &r in own.iter().filter(|r| !same.contains(r)) {
        voice.line(cause(&ranks[r], ends[r], first.is_some()));
    }
    let after = match stop {
        Some(Stop::Failed(f)) => t!("error.ddp.after_rank_failed", f),
        Some(Stop::Interrupted(s)) => {
            t!("error.ddp.after_interrupt", signal = signal_name(s).to_string())
        }
        None => Text::Plain(String::new()),
    };
    for (r, signal) in sent.iter().enumerate() {
        if let Some(signal) = signal {
            let (name, signal) = (ranks[r].name(), signal.as_str().to_string());
            voice.line(t!("error.ddp.rank_stopped", name, signal, after));
        }
    }
    // A `streamlab: ` line that did not say why a rank failed was an ordinary message.
    let told = |r: usize| {
        matches!(end(r), End::Code(c) if c != 0) && (first == Some(r) || own.contains(&r))
    };
    for r in (0..ranks.len()).filter(|&r| !told(r)) {
        if let Some(line) = ranks[r].kept_line() {
            (voice.say)(&format!("{}{line}", prefix(r)));
        }
    }
    match stop {
        Some(Stop::Interrupted(s)) => 128 + s,
        Some(Stop::Failed(_)) => first.map_or(1, |f| end(f).exit_code()),
        None => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::process::Command;
    use std::sync::{Arc, Mutex};

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
        let code = wait_for(ranks, timing, &interrupt, &say, Lang::En);
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
