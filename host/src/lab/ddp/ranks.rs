//! One process per GPU, as DDP jobs run: which rank this process is, and how the ranks meet.
//!
//! Where the rank comes from, first match wins:
//! 1. `RANK` and `WORLD_SIZE` (both, or neither), `LOCAL_RANK`: torchrun's names, which
//!    `streamlab launch` sets too;
//! 2. `OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`, `OMPI_COMM_WORLD_LOCAL_RANK`: Open MPI's
//!    `mpirun`;
//! 3. `SLURM_PROCID`, `SLURM_STEP_NUM_TASKS`, `SLURM_LOCALID`: a task of an `srun` step. Only
//!    inside a step: `sbatch` sets `SLURM_PROCID` and `SLURM_NTASKS` in the batch script itself,
//!    where no other task runs, and only `srun` sets `SLURM_STEP_NUM_TASKS`. So a batch script
//!    that runs streamlab without `srun` runs it alone.
//!
//! A world of one from Open MPI or Slurm runs alone too: it has no one to meet. The local
//! rank is the default `--device` (an explicit `--device` wins).
//!
//! The ranks meet through NCCL's unique id, which rank 0 makes and hands to the others
//! ([`RankEnv::share_id`], in [`crate::lab::ddp::rendezvous`]), by
//! - `STREAMLAB_RENDEZVOUS=file:/shared/path`: rank 0 writes the id there (`streamlab
//!   launch` uses a file in a folder it owns and removes). Give each run a path of its own:
//!   a rank that finds the previous run's id there joins a communicator that no longer
//!   exists and waits in NCCL;
//! - `STREAMLAB_RENDEZVOUS=tcp:host:port`, or torchrun's `MASTER_ADDR` and `MASTER_PORT`:
//!   rank 0 listens there and sends the id to each rank of its run that greets it (across
//!   machines). From `MASTER_PORT` it takes the port above
//!   it: under torchrun, `MASTER_PORT` itself is torchrun's own store, already bound.
//!
//! `mpirun` and `srun` set neither: export `MASTER_ADDR` and `MASTER_PORT` in the job script
//! (e.g. the first host of the allocation), or `STREAMLAB_RENDEZVOUS`. A rank waits
//! `STREAMLAB_RENDEZVOUS_TIMEOUT` seconds (default 120) for rank 0's id, then gives up; rank 0
//! waits as long for every rank to ask for it.
//!
//! Over TCP, rank 0 answers only ranks with its run token ([`RunToken`]):
//! `STREAMLAB_RENDEZVOUS_TOKEN` where it is set, else one taken from what started the ranks:
//! torchrun's `TORCHELASTIC_RUN_ID`, Open MPI's `OMPI_MCA_ess_base_jobid` (or PMIx's
//! `PMIX_NAMESPACE`), Slurm's `SLURM_JOB_ID` and `SLURM_STEP_ID`, each only for ranks that
//! source gave. Ranks started by hand with `MASTER_ADDR` have none unless it is set: rank 0
//! then still answers only well-formed greetings of its world size, one per rank, but any
//! process that can reach the port and greets as a rank gets the id (set the variable on
//! shared machines). The file rendezvous takes no token.
use std::path::PathBuf;
use std::time::Duration;

use crate::runtime::{Error, Result};
use crate::t;
use crate::text::Text;

/// How long a rank waits for rank 0's id when `STREAMLAB_RENDEZVOUS_TIMEOUT` is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The variable that sets the run token.
pub const TOKEN_VAR: &str = "STREAMLAB_RENDEZVOUS_TOKEN";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rendezvous {
    File(PathBuf),
    Tcp(String),
}

/// This process's place in a multi-process run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankEnv {
    pub rank: usize,
    pub world: usize,
    /// The rank on this machine, when the source tells it: the default `--device`.
    pub local_rank: Option<usize>,
    /// Which variables gave the rank: "torchrun/launch", "Open MPI" or "Slurm".
    pub source: &'static str,
    pub rendezvous: Rendezvous,
    /// How long to wait for the other ranks (rank 0's id, and NCCL's communicator).
    pub timeout: Duration,
    /// What every rank of this run shares, for the TCP rendezvous.
    pub token: Option<RunToken>,
}

/// What every rank of one run shares, so that rank 0 answers only them at the TCP
/// rendezvous: the module doc says where it comes from. It is never printed: its `Debug`
/// says where it came from and how long it is.
#[derive(Clone, PartialEq, Eq)]
pub struct RunToken {
    value: String,
    /// Where it came from (`STREAMLAB_RENDEZVOUS_TOKEN`, `SLURM_JOB_ID and SLURM_STEP_ID`...).
    pub from: &'static str,
}

impl RunToken {
    /// `value`, where it is [`RunToken::valid`].
    pub fn new(value: &str, from: &'static str) -> Option<RunToken> {
        RunToken::valid(value).then(|| RunToken { value: value.to_string(), from })
    }

    pub fn value(&self) -> &str {
        &self.value
    }

    /// 1 to 256 visible ASCII characters, no spaces: a token is one word of a greeting line.
    pub fn valid(text: &str) -> bool {
        (1..=256).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_graphic())
    }
}

impl std::fmt::Debug for RunToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RunToken(from {}, {} characters)", self.from, self.value.len())
    }
}

/// The run token of ranks from `source`: `STREAMLAB_RENDEZVOUS_TOKEN`, else the one `source`
/// gives (module doc), else none.
fn run_token(vars: &impl Fn(&str) -> Option<String>, source: &str) -> Result<Option<RunToken>> {
    if let Some(set) = vars(TOKEN_VAR) {
        return match RunToken::new(set.trim(), TOKEN_VAR) {
            Some(token) => Ok(Some(token)),
            // The value is not repeated: it is meant to be a secret.
            None => {
                let var = TOKEN_VAR.to_string();
                Err(Error::InvalidInput(t!("error.ddp.bad_token", var)))
            }
        };
    }
    let var = |name: &str| vars(name).map(|v| v.trim().to_string());
    let derived = match source {
        "torchrun/launch" => {
            var("TORCHELASTIC_RUN_ID").map(|id| (format!("torchrun:{id}"), "TORCHELASTIC_RUN_ID"))
        }
        "Open MPI" => var("OMPI_MCA_ess_base_jobid")
            .map(|id| (format!("ompi:{id}"), "OMPI_MCA_ess_base_jobid"))
            .or_else(|| var("PMIX_NAMESPACE").map(|ns| (format!("pmix:{ns}"), "PMIX_NAMESPACE"))),
        "Slurm" => match (var("SLURM_JOB_ID"), var("SLURM_STEP_ID")) {
            (Some(job), Some(step)) => {
                Some((format!("slurm:{job}.{step}"), "SLURM_JOB_ID and SLURM_STEP_ID"))
            }
            _ => None,
        },
        _ => None,
    };
    Ok(derived.and_then(|(value, from)| RunToken::new(&value, from)))
}

/// Where ranks come from, in the order they win: the source's name and its rank, world and
/// local-rank variables.
const SOURCES: [(&str, &str, &str, &str); 3] = [
    ("torchrun/launch", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
    ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("Slurm", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID"),
];

/// The rank this process is, from `vars` (the environment: see [`from_env`]); None when it
/// runs alone.
pub fn parse(vars: impl Fn(&str) -> Option<String>) -> Result<Option<RankEnv>> {
    let bad = |why: Text| Err(Error::InvalidInput(why));
    // A variable's value as an error line quotes it.
    let quoted = |v: &String| format!("{v:?}");
    let number = |name: &str| -> Result<Option<usize>> {
        match vars(name) {
            None => Ok(None),
            Some(v) => v.trim().parse().map(Some).map_err(|_| {
                let (name, value) = (name.to_string(), quoted(&v));
                Error::InvalidInput(t!("error.ddp.not_whole", name, value))
            }),
        }
    };
    let mut found = None;
    for (source, rank_var, world_var, local_var) in SOURCES {
        let (rank, world) = match (number(rank_var)?, number(world_var)?) {
            (None, None) => continue,
            // The batch script of `sbatch` has SLURM_PROCID without a step: it runs alone.
            (Some(_), None) if source == "Slurm" => continue,
            (Some(r), Some(w)) => (r, w),
            _ => {
                let (rank_var, world_var) = (rank_var.to_string(), world_var.to_string());
                return bad(t!("error.ddp.set_both", rank_var, world_var));
            }
        };
        if world == 0 || rank >= world {
            let (rank_var, world_var) = (rank_var.to_string(), world_var.to_string());
            return bad(t!("error.ddp.rank_not_below", rank_var, rank, world_var, world));
        }
        // One task of mpirun or srun has no one to meet: it runs as a process alone would.
        if world == 1 && source != "torchrun/launch" {
            continue;
        }
        found = Some((source, rank, world, number(local_var)?));
        break;
    }
    let Some((source, rank, world, local_rank)) = found else { return Ok(None) };
    let rendezvous = match (vars("STREAMLAB_RENDEZVOUS"), vars("MASTER_ADDR"), vars("MASTER_PORT"))
    {
        (Some(r), _, _) => match r.split_once(':') {
            Some(("file", path)) if !path.is_empty() => Rendezvous::File(path.into()),
            Some(("tcp", addr)) if addr.contains(':') => Rendezvous::Tcp(addr.into()),
            _ => return bad(t!("error.ddp.bad_rendezvous", value = quoted(&r))),
        },
        (None, Some(host), Some(port)) => {
            let above = port.trim().parse::<u16>().ok().and_then(|p| p.checked_add(1));
            let Some(above) = above else {
                return bad(t!("error.ddp.bad_master_port", value = quoted(&port)));
            };
            Rendezvous::Tcp(format!("{host}:{above}"))
        }
        _ => return bad(t!("error.ddp.no_rendezvous", rank, world, source = source.to_string())),
    };
    let timeout = match vars("STREAMLAB_RENDEZVOUS_TIMEOUT") {
        None => DEFAULT_TIMEOUT,
        Some(v) => match v.trim().parse::<f64>().ok().filter(|s| *s > 0.0 && *s <= 86_400.0) {
            Some(seconds) => Duration::from_secs_f64(seconds),
            None => return bad(t!("error.ddp.bad_timeout", value = quoted(&v))),
        },
    };
    let token = run_token(&vars, source)?;
    Ok(Some(RankEnv { rank, world, local_rank, source, rendezvous, timeout, token }))
}

/// [`parse`] of this process's environment.
pub fn from_env() -> Result<Option<RankEnv>> {
    parse(|k| std::env::var(k).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<Option<RankEnv>> {
        let map: std::collections::HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        parse(|k| map.get(k).cloned())
    }

    /// A rank env for the tests: `rank` of `world` meeting at `rendezvous`.
    fn rank_env(rank: usize, world: usize, rendezvous: Rendezvous) -> RankEnv {
        RankEnv {
            rank,
            world,
            local_rank: None,
            source: "torchrun/launch",
            rendezvous,
            timeout: DEFAULT_TIMEOUT,
            token: None,
        }
    }

    #[test]
    fn ranks_come_from_torchrun_style_variables() {
        assert_eq!(env(&[]).unwrap(), None);
        let file =
            env(&[("RANK", "1"), ("WORLD_SIZE", "2"), ("STREAMLAB_RENDEZVOUS", "file:/tmp/id")]);
        assert_eq!(file.unwrap().unwrap().rendezvous, Rendezvous::File("/tmp/id".into()));
        let tcp = env(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "4"),
            ("LOCAL_RANK", "0"),
            ("MASTER_ADDR", "10.0.0.1"),
            ("MASTER_PORT", "29500"),
        ]);
        assert_eq!(
            tcp.unwrap().unwrap(),
            RankEnv {
                local_rank: Some(0),
                ..rank_env(0, 4, Rendezvous::Tcp("10.0.0.1:29501".into()))
            }
        );
        // torchrun's one-process world is still a rank: `launch --gpus 1` runs that way.
        let one = env(&[("RANK", "0"), ("WORLD_SIZE", "1"), ("STREAMLAB_RENDEZVOUS", "file:/x")]);
        assert_eq!(one.unwrap().unwrap().world, 1);
        for bad in [
            vec![("RANK", "0")],
            vec![("RANK", "2"), ("WORLD_SIZE", "2"), ("STREAMLAB_RENDEZVOUS", "file:/x")],
            vec![("RANK", "x"), ("WORLD_SIZE", "2")],
            vec![("RANK", "0"), ("WORLD_SIZE", "2")],
            vec![("RANK", "0"), ("WORLD_SIZE", "2"), ("STREAMLAB_RENDEZVOUS", "smoke:signals")],
            vec![
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("MASTER_ADDR", "a"),
                ("MASTER_PORT", "65535"),
            ],
            vec![("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "a"), ("MASTER_PORT", "http")],
        ] {
            let e = env(&bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}: {e}");
        }
    }

    const MEET: (&str, &str) = ("STREAMLAB_RENDEZVOUS", "file:/shared/id");

    #[test]
    fn ranks_come_from_open_mpi_and_from_an_srun_step() {
        let mpi = env(&[
            ("OMPI_COMM_WORLD_RANK", "3"),
            ("OMPI_COMM_WORLD_SIZE", "8"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            MEET,
        ]);
        assert_eq!(
            mpi.unwrap().unwrap(),
            RankEnv {
                local_rank: Some(1),
                source: "Open MPI",
                ..rank_env(3, 8, Rendezvous::File("/shared/id".into()))
            }
        );
        let srun = env(&[
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "6"),
            ("SLURM_STEP_NUM_TASKS", "6"),
            ("SLURM_LOCALID", "2"),
            ("MASTER_ADDR", "node7"),
            ("MASTER_PORT", "29500"),
        ]);
        let srun = srun.unwrap().unwrap();
        assert_eq!((srun.rank, srun.world, srun.local_rank), (5, 6, Some(2)));
        assert_eq!(
            (srun.source, srun.rendezvous),
            ("Slurm", Rendezvous::Tcp("node7:29501".into()))
        );
    }

    #[test]
    fn torchrun_wins_over_open_mpi_which_wins_over_slurm() {
        let slurm = [("SLURM_PROCID", "1"), ("SLURM_STEP_NUM_TASKS", "4"), ("SLURM_LOCALID", "1")];
        let mpi = [
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "0"),
        ];
        let torch = [("RANK", "3"), ("WORLD_SIZE", "4")];
        let all: Vec<_> = [&slurm[..], &mpi, &torch, &[MEET]].concat();
        let got = env(&all).unwrap().unwrap();
        // LOCAL_RANK is torchrun's: Open MPI's local rank is not borrowed.
        assert_eq!((got.source, got.rank, got.local_rank), ("torchrun/launch", 3, None));
        let got = env(&[&slurm[..], &mpi, &[MEET]].concat()).unwrap().unwrap();
        assert_eq!((got.source, got.rank, got.local_rank), ("Open MPI", 2, Some(0)));
        let got = env(&[&slurm[..], &[MEET]].concat()).unwrap().unwrap();
        assert_eq!((got.source, got.rank, got.local_rank), ("Slurm", 1, Some(1)));
    }

    #[test]
    fn an_sbatch_script_without_srun_runs_alone() {
        // What sbatch sets in the batch script: no step, so no ranks, even with 4 tasks.
        let batch = [("SLURM_PROCID", "0"), ("SLURM_NTASKS", "4"), ("SLURM_LOCALID", "0")];
        assert_eq!(env(&batch).unwrap(), None);
        assert_eq!(env(&[&batch[..], &[MEET]].concat()).unwrap(), None);
        // One task of srun or mpirun has no one to meet, and needs no rendezvous.
        assert_eq!(env(&[("SLURM_PROCID", "0"), ("SLURM_STEP_NUM_TASKS", "1")]).unwrap(), None);
        assert_eq!(
            env(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "1")]).unwrap(),
            None
        );
    }

    #[test]
    fn the_rendezvous_timeout_is_set_in_seconds_and_checked() {
        let with = |t: &str| {
            env(&[("RANK", "1"), ("WORLD_SIZE", "2"), MEET, ("STREAMLAB_RENDEZVOUS_TIMEOUT", t)])
        };
        assert_eq!(
            env(&[("RANK", "1"), ("WORLD_SIZE", "2"), MEET]).unwrap().unwrap().timeout,
            DEFAULT_TIMEOUT
        );
        assert_eq!(with("600").unwrap().unwrap().timeout, Duration::from_secs(600));
        assert_eq!(with(" 2.5 ").unwrap().unwrap().timeout, Duration::from_millis(2500));
        for bad in ["", "0", "-3", "soon", "inf", "NaN", "1e9"] {
            let e = with(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}: {e}");
            assert!(e.to_string().starts_with("STREAMLAB_RENDEZVOUS_TIMEOUT="), "{bad:?}: {e}");
        }
    }

    #[test]
    fn bad_open_mpi_and_slurm_values_name_their_variable() {
        for (bad, named) in [
            (
                vec![("OMPI_COMM_WORLD_RANK", "4"), ("OMPI_COMM_WORLD_SIZE", "4"), MEET],
                "OMPI_COMM_WORLD_RANK=4 must be below OMPI_COMM_WORLD_SIZE=4",
            ),
            (
                vec![("OMPI_COMM_WORLD_RANK", "1"), MEET],
                "OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE go together",
            ),
            (
                vec![
                    ("OMPI_COMM_WORLD_RANK", "1"),
                    ("OMPI_COMM_WORLD_SIZE", "2"),
                    ("OMPI_COMM_WORLD_LOCAL_RANK", "one"),
                    MEET,
                ],
                "OMPI_COMM_WORLD_LOCAL_RANK=\"one\"",
            ),
            (
                vec![("SLURM_PROCID", "x"), ("SLURM_STEP_NUM_TASKS", "2"), MEET],
                "SLURM_PROCID=\"x\"",
            ),
            (
                vec![("SLURM_STEP_NUM_TASKS", "2"), MEET],
                "SLURM_PROCID and SLURM_STEP_NUM_TASKS go together",
            ),
            (
                vec![("SLURM_PROCID", "1"), ("SLURM_STEP_NUM_TASKS", "2")],
                "rank 1 of 2 (Slurm) but not how the ranks meet",
            ),
            (
                vec![("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "2")],
                "rank 0 of 2 (Open MPI) but not how the ranks meet",
            ),
        ] {
            let e = env(&bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}: {e}");
            assert!(e.to_string().contains(named), "{bad:?}: {e}");
        }
    }

    /// The run token that `pairs` give a rank (torchrun's, Open MPI's or Slurm's).
    fn token_of(pairs: &[(&str, &str)]) -> Option<RunToken> {
        env(pairs).unwrap().unwrap().token
    }

    #[test]
    fn the_run_token_comes_from_its_variable_else_from_what_started_the_ranks() {
        let torch = [("RANK", "1"), ("WORLD_SIZE", "2"), MEET];
        assert_eq!(token_of(&torch), None);
        let with = |more: &[(&str, &str)]| token_of(&[&torch[..], more].concat()).unwrap();
        let set = with(&[(TOKEN_VAR, " s3cret ")]);
        assert_eq!((set.value(), set.from), ("s3cret", TOKEN_VAR));
        let elastic = with(&[("TORCHELASTIC_RUN_ID", "job-7")]);
        assert_eq!((elastic.value(), elastic.from), ("torchrun:job-7", "TORCHELASTIC_RUN_ID"));
        // The variable wins.
        assert_eq!(with(&[("TORCHELASTIC_RUN_ID", "job-7"), (TOKEN_VAR, "mine")]).value(), "mine");

        let step = [("SLURM_PROCID", "1"), ("SLURM_STEP_NUM_TASKS", "2"), MEET];
        let ids = [("SLURM_JOB_ID", "4242"), ("SLURM_STEP_ID", "0")];
        let slurm = token_of(&[&step[..], &ids].concat()).unwrap();
        assert_eq!((slurm.value(), slurm.from), ("slurm:4242.0", "SLURM_JOB_ID and SLURM_STEP_ID"));
        assert_eq!(token_of(&[&step[..], &ids[..1]].concat()), None);
        // A source's token goes only with the ranks it gave: torchrun's ranks in a Slurm step
        // share no Slurm token with ranks started otherwise.
        assert_eq!(token_of(&[&torch[..], &ids].concat()), None);

        let mpi = [("OMPI_COMM_WORLD_RANK", "1"), ("OMPI_COMM_WORLD_SIZE", "2"), MEET];
        let job = token_of(&[&mpi[..], &[("OMPI_MCA_ess_base_jobid", "2404974593")]].concat());
        assert_eq!(job.unwrap().value(), "ompi:2404974593");
        let pmix = token_of(&[&mpi[..], &[("PMIX_NAMESPACE", "prterun-a-81@1")]].concat());
        assert_eq!(
            pmix.map(|t| (t.value().to_string(), t.from)),
            Some(("pmix:prterun-a-81@1".into(), "PMIX_NAMESPACE"))
        );
    }

    #[test]
    fn a_bad_run_token_is_refused_and_no_token_is_ever_shown() {
        let long = "x".repeat(257);
        for bad in ["", "  ", "two words", "caf\u{e9}", &long] {
            let e = env(&[("RANK", "1"), ("WORLD_SIZE", "2"), MEET, (TOKEN_VAR, bad)]).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}: {e}");
            assert_eq!(
                e.to_string(),
                "STREAMLAB_RENDEZVOUS_TOKEN must be 1 to 256 visible ASCII characters, without spaces"
            );
        }
        let good = "y".repeat(256);
        let rank = env(&[("RANK", "1"), ("WORLD_SIZE", "2"), MEET, (TOKEN_VAR, &good)]);
        let rank = rank.unwrap().unwrap();
        assert_eq!(rank.token.as_ref().unwrap().value(), good);
        let shown = format!("{rank:?}");
        assert!(!shown.contains(&good[..8]), "{shown}");
        assert!(
            shown.contains("RunToken(from STREAMLAB_RENDEZVOUS_TOKEN, 256 characters)"),
            "{shown}"
        );
    }
}
