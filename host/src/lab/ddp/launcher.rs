//! `streamlab launch --gpus N run LESSON ...`: one process per GPU, as DDP jobs run.
//!
//! The launcher starts N copies of this program, `RANK` and `LOCAL_RANK` = i (and `--device
//! i`), `WORLD_SIZE` = N, and a rendezvous file (`STREAMLAB_RENDEZVOUS`) in a folder that it
//! owns and only its user can read, through which rank 0 hands NCCL's unique id to the others
//! ([`crate::lab::ddp::rendezvous`]); being on one machine, they need no TCP rendezvous nor its run
//! token. Rank 0's report is printed.
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
use std::fs::DirBuilder;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;

// Re-exported from the files they moved to, so that `launcher::...` paths keep working.
use crate::lab::ddp::handshake::ranks_named;
pub use crate::lab::ddp::rank_endings::{wait_for, Timing, GRACE, SETTLE};
pub use crate::lab::ddp::rank_process::{RankProcess, Say};
use crate::lab::record::recorded_runs;
use crate::runtime::context::device_count;
use crate::runtime::{nccl, Error, Result};
use crate::t;
use crate::text::{Lang, Text};

/// The lessons that run as one rank per process.
pub const LESSONS: [&str; 1] = ["allreduce-overlap"];
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

const ABOUT: &str = "\
Starts one `streamlab run` per GPU with RANK, LOCAL_RANK and WORLD_SIZE set (torchrun's names) \
and a rendezvous file in a folder this launcher owns and only its user can read, through which \
rank 0 hands NCCL's unique id to the others. Rank 0's report is printed.

To run across machines, start `streamlab run allreduce-overlap --device <LOCAL_RANK>` on each \
with RANK, WORLD_SIZE and either MASTER_ADDR/MASTER_PORT (rank 0 listens on MASTER_PORT + 1: \
torchrun's own store holds MASTER_PORT) or STREAMLAB_RENDEZVOUS=tcp:host:port, and \
STREAMLAB_RENDEZVOUS_TOKEN set to one value of the run's own on every rank: rank 0 hands the id \
only to ranks that greet it with that token, and turns away any other connection without \
waiting on it. Under torchrun, mpirun or srun the token is the job's id when the variable is \
not set. With no token at all, rank 0 still answers only greetings of its world size, once per \
rank, but any process that reaches the port and greets as a rank gets the id. Under mpirun or \
srun the ranks come from Open MPI's or Slurm's variables (docs/ARCHITECTURE.md, \"Running \
across GPUs\").

Every rank's stderr comes through the launcher: rank 0's lines as they are, rank N's after \
`rank N: `. When a rank fails, one line names it and its cause (its error line, or the signal \
that killed it); ranks that fail the same way on their own get one more line. The others get \
2 s to finish, then SIGTERM, then SIGKILL 5 s later, one line each. Ctrl-C or SIGTERM on the \
launcher stops every rank the same way. A rank whose launcher is gone (killed with SIGKILL) \
notices within 0.2 s and ends by SIGHUP (129 in a shell).

Exit code: the first failing rank's own code, or 128+N when signal N killed it (137 for \
SIGKILL), as shells report it; 130 after Ctrl-C (SIGINT), 143 after SIGTERM; 0 when every \
rank succeeded.";

/// `streamlab launch`'s flags and help, for main.rs (and the tests of its error lines).
pub fn command() -> clap::Command {
    clap::Command::new("launch")
        .about("Run a lesson as one process per GPU, as DDP jobs do (allreduce-overlap)")
        .long_about(ABOUT)
        .arg(
            clap::Arg::new("gpus")
                .long("gpus")
                .value_name("N")
                .required(true)
                .value_parser(crate::lab::harness::args::whole(1usize..=64))
                .help("Processes to start, one per GPU: rank i uses GPU i [1..=64]"),
        )
        .arg(
            clap::Arg::new("command")
                .num_args(1..)
                .trailing_var_arg(true)
                .allow_hyphen_values(true)
                .value_name("run LESSON [FLAGS]")
                .required(true)
                .help("What each rank runs: `run allreduce-overlap` and its flags"),
        )
}

/// Checks `run_args` (what follows `launch --gpus N`) and returns the lesson's name.
pub fn check_args(run_args: &[String]) -> Result<&str> {
    let bad = |why: Text| Err(Error::InvalidInput(why));
    // A recorded run is shown, not measured: nothing for a process per GPU to do.
    if run_args.iter().any(|a| a == "--recorded") {
        // The lesson the user named, where there is one after `run`.
        let lesson = match run_args {
            [run, lesson, ..] if run == "run" && !lesson.starts_with('-') => lesson.as_str(),
            _ => "allreduce-overlap",
        };
        return bad(t!("error.ddp.launch_recorded", lesson = lesson.to_string()));
    }
    match run_args {
        [run, lesson, rest @ ..] if run == "run" => {
            if !LESSONS.contains(&lesson.as_str()) {
                let (lessons, lesson) = (LESSONS.join(", "), lesson.to_string());
                return bad(t!("error.ddp.launch_not_ddp", lessons, lesson));
            }
            if rest.iter().any(|a| a == "--device" || a.starts_with("--device=")) {
                return bad(t!("error.ddp.launch_sets_device"));
            }
            Ok(lesson)
        }
        _ => bad(t!("error.ddp.launch_usage")),
    }
}

/// A folder of this launch's own, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    /// `streamlab-launch-<pid>` in the temporary folder, readable by this user alone: the
    /// NCCL id in it is what lets a process join the ranks' communicator. A folder of that
    /// name left by an earlier launcher with this pid is replaced; one that is not this
    /// user's cannot be, and is an error.
    fn create() -> Result<Scratch> {
        let path = std::env::temp_dir().join(format!("streamlab-launch-{}", std::process::id()));
        let make = || DirBuilder::new().mode(0o700).create(&path);
        let made = match make() {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                std::fs::remove_dir_all(&path).and_then(|()| make())
            }
            other => other,
        };
        made.map_err(|e| {
            let (path, why) = (path.display().to_string(), e.to_string());
            Error::InvalidInput(t!("error.ddp.creating", path, why))
        })?;
        Ok(Scratch(path))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The launcher's [`Say`]: its lines and the ranks' forwarded lines go to stderr.
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
            // Too few GPUs, or none: the recorded run of the lesson is offered.
            let program = std::env::args().next().unwrap_or_else(|| "streamlab".into());
            let argv: Vec<String> = std::iter::once(program).chain(run_args.to_vec()).collect();
            let lesson = run_args.get(1).map_or("all", String::as_str);
            let recorded = || recorded_runs::hint_for(lesson, &argv);
            let found = device_count().map_err(|e| match e {
                Error::NoDevice(why) => Error::NoDevice(t!("error.then", why, then = recorded())),
                other => other,
            })? as usize;
            if found < gpus {
                let why = t!("error.ddp.launch_needs_gpus", gpus, found);
                return Err(Error::NotRun(t!("error.then", why, then = recorded())));
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
    let scratch = Scratch::create()?;
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
    // The launcher's lines are said in the language of its ranks' reports.
    Ok(wait_for(ranks, Timing::LAUNCH, &interrupt, &say, Lang::named_in(run_args)))
}

/// In a rank started by `streamlab launch` ([`LAUNCHER_PID`] set): a thread that ends this
/// process with [`LAUNCHER_GONE`] once the launcher is gone, so that no rank outlives it
/// waiting in NCCL. Nothing otherwise.
pub fn watch_launcher(rank: Option<usize>) {
    let Some(pid) = std::env::var(LAUNCHER_PID).ok().and_then(|p| p.trim().parse::<u32>().ok())
    else {
        return;
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let who = match rank {
        Some(r) => ranks_named(&[r]),
        None => t!("error.ddp.this_rank"),
    };
    let line = t!("error.ddp.launcher_gone", who, pid).render(Lang::named_in(&args));
    std::thread::spawn(move || loop {
        // An orphan is adopted by another process (init, or a subreaper): its parent changes.
        if std::os::unix::process::parent_id() != pid {
            // Not eprintln: stderr is the dead launcher's pipe, and writing to it fails.
            let _ = writeln!(std::io::stderr(), "streamlab: {line}");
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
            vec!["run", "allreduce-overlap", "--recorded"],
            vec!["run", "--recorded", "allreduce-overlap"],
        ] {
            let e = check_args(&args(&bad)).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}: {e}");
        }
    }
}
