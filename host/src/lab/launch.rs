//! `streamlab launch --gpus N run LESSON ...`: one process per GPU, as DDP jobs run.
//!
//! The launcher starts N copies of this program, `RANK` and `LOCAL_RANK` = i (and `--device
//! i`), `WORLD_SIZE` = N, and a rendezvous file in a folder it owns (`STREAMLAB_RENDEZVOUS`),
//! through which rank 0 hands NCCL's unique id to the others ([`crate::lab::ranks`]). Rank 0's
//! report is printed; every rank's errors are. The launcher's exit code is the first failing
//! rank's, and when one rank fails the others get a grace period, then are stopped: a rank
//! whose partner died waits in NCCL forever.
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::runtime::context::device_count;
use crate::runtime::{nccl, Error, Result};

/// The lessons that run as one rank per process.
pub const LESSONS: [&str; 1] = ["allreduce-overlap"];
/// How long the other ranks may go on after one has failed.
pub const GRACE: Duration = Duration::from_secs(10);

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

/// Runs `run_args` as `gpus` ranks, one process each; returns the exit code to use.
pub fn launch(gpus: usize, run_args: &[String]) -> Result<i32> {
    check_args(run_args)?;
    let found = device_count()? as usize;
    if found < gpus {
        return Err(Error::NotRun(format!(
            "launch --gpus {gpus} needs {gpus} GPUs, found {found}"
        )));
    }
    nccl::version()?;
    let exe = std::env::current_exe().map_err(|e| {
        Error::Internal(format!("cannot find this program to start its ranks: {e}"))
    })?;
    let scratch =
        Scratch(std::env::temp_dir().join(format!("streamlab-launch-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0)
        .map_err(|e| Error::InvalidInput(format!("creating {}: {e}", scratch.0.display())))?;
    let rendezvous = format!("file:{}", scratch.0.join("nccl-id").display());
    let mut ranks: Vec<Child> = Vec::new();
    for rank in 0..gpus {
        let child = Command::new(&exe)
            .args(run_args)
            .args(["--device", &rank.to_string()])
            .env("RANK", rank.to_string())
            .env("LOCAL_RANK", rank.to_string())
            .env("WORLD_SIZE", gpus.to_string())
            .env("STREAMLAB_RENDEZVOUS", &rendezvous)
            .stdout(if rank == 0 { Stdio::inherit() } else { Stdio::null() })
            .spawn();
        match child {
            Ok(c) => ranks.push(c),
            Err(e) => {
                ranks.iter_mut().for_each(|c| drop(c.kill()));
                return Err(Error::Internal(format!("starting rank {rank}: {e}")));
            }
        }
    }
    Ok(wait_for(ranks))
}

/// Waits for every rank; after the first failure, gives the rest [`GRACE`] and stops them.
/// Returns the code of the rank that failed first (in time, not by rank number: a rank
/// stopped because another failed has not told what went wrong), or 0.
fn wait_for(mut ranks: Vec<Child>) -> i32 {
    let mut codes: Vec<Option<i32>> = vec![None; ranks.len()];
    let mut failed_at: Option<Instant> = None;
    let mut first_failure = 0;
    while codes.iter().any(Option::is_none) {
        for (rank, child) in ranks.iter_mut().enumerate() {
            if codes[rank].is_some() {
                continue;
            }
            if let Ok(Some(status)) = child.try_wait() {
                // Killed by a signal: count it as an internal failure.
                let code = status.code().unwrap_or(70);
                if code != 0 && failed_at.is_none() {
                    failed_at = Some(Instant::now());
                    first_failure = code;
                }
                codes[rank] = Some(code);
            }
        }
        if failed_at.is_some_and(|t| t.elapsed() > GRACE) {
            for (rank, child) in ranks.iter_mut().enumerate() {
                if codes[rank].is_none() {
                    let _ = child.kill();
                    let _ = child.wait();
                    eprintln!("streamlab launch: rank {rank} stopped: another rank failed and it did not finish within {} s", GRACE.as_secs());
                    codes[rank] = Some(4);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    first_failure
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

    #[test]
    fn the_first_failing_rank_decides_the_exit_code() {
        let sh =
            |code: i32| Command::new("sh").args(["-c", &format!("exit {code}")]).spawn().unwrap();
        assert_eq!(wait_for(vec![sh(0), sh(0)]), 0);
        assert_eq!(wait_for(vec![sh(0), sh(5)]), 5);
        // A rank that would wait forever is stopped after the grace period.
        let start = Instant::now();
        let hang = Command::new("sleep").arg("600").spawn().unwrap();
        assert_eq!(wait_for(vec![sh(3), hang]), 3);
        assert!(start.elapsed() < GRACE + Duration::from_secs(5));
        // Rank 1 fails first and rank 0, waiting for it, is stopped: rank 1's code, not the
        // stopped rank's.
        let hang = Command::new("sleep").arg("600").spawn().unwrap();
        assert_eq!(wait_for(vec![hang, sh(3)]), 3);
    }
}
