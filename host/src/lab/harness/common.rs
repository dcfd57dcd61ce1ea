//! The flags every lesson shares (`--reps`, `--seed`, `--timeline`, `--trace`, `--svg`,
//! `--recorded`, `--device`, `--json`, `--lang`), as ripgrep keeps its flags: each defined
//! once, with its default declared once, parsed into [`Common`], then resolved once into
//! what a run uses ([`Resolved`]) and, for each lesson, into its [`Settings`].
//!
//! Resolving is where `--trace` and `--svg` become [`OutputFile`]s: checked before any GPU
//! work (their folder exists), then named for each lesson under `run all`
//! (`t.json` -> `t-overlap.json`) and for rank i > 0 of a multi-process run
//! (`t-overlap.json` -> `t-overlap-rank1.json`), so that lessons and ranks that share a
//! folder do not overwrite each other. The writers (`lab::record::output`) write exactly
//! those files.
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, FromArgMatches as _};

use crate::lab::harness::args::whole;
use crate::lab::record::output::OutputFile;
use crate::runtime::{Error, Result};
use crate::text::Lang;

/// Timed repeats of each version, unless `--reps` says otherwise.
pub const REPS: usize = 10;
/// The seed of the input data, unless `--seed` says otherwise: 0x5EED (24301), the seed
/// of the C++ twins in `cuda-reference/` too, so both generate the same inputs.
pub const SEED: u64 = 0x5EED;
/// The CUDA device, unless `--device` (or a local rank) says otherwise.
pub const DEVICE: u32 = 0;
/// The highest device number `--device` takes.
pub const MAX_DEVICE: u32 = 1023;

/// `--lang`'s help, for `run` (here) and for `list`, which takes it too.
pub const LANG_HELP: &str = "Language of what you read: lesson summaries, the interpretation, check and figure names (default: zh when LC_ALL, LC_MESSAGES or LANG starts with zh, else en; --json stays English)";

const HEADING: &str = "Common flags";

// The common flags as given: `run`'s own, global so that they may come after the lesson's
// name too (`run overlap --reps 5`). (`//`, not `///`: clap would make a doc comment here
// the about line of the command that takes these flags.)
#[derive(clap::Args, Debug, Clone)]
pub struct Common {
    #[arg(
        long,
        value_name = "N",
        global = true,
        help_heading = HEADING,
        default_value_t = REPS,
        value_parser = whole(1usize..=10_000),
        help = "Timed repeats of each version [1..=10000]; every figure is their median"
    )]
    pub reps: usize,
    #[arg(
        long,
        value_name = "N",
        global = true,
        help_heading = HEADING,
        default_value_t = SEED,
        value_parser = whole(0u64..=u64::MAX),
        help = "Seed of the pseudo-random input data [0..=2^64-1]; the same seed gives the same inputs"
    )]
    pub seed: u64,
    #[arg(
        long,
        global = true,
        help_heading = HEADING,
        help = "Also draw in the terminal what each stream did, one row per stream, for one extra run of each version"
    )]
    pub timeline: bool,
    #[arg(
        long,
        value_name = "FILE.json",
        global = true,
        help_heading = HEADING,
        help = "Also write one recorded run of each version as a Chrome trace (ui.perfetto.dev); with `all`, FILE-<lesson>.json; rank i > 0 of a multi-process run writes FILE-rank<i>.json; stderr says where it wrote"
    )]
    pub trace: Option<PathBuf>,
    #[arg(
        long,
        value_name = "FILE.svg",
        global = true,
        help_heading = HEADING,
        help = "Also draw one recorded run of each version as an SVG picture (a sweep's plot goes to FILE-plot.svg); with `all`, FILE-<lesson>.svg; rank i > 0 writes FILE-rank<i>.svg; stderr says where it wrote"
    )]
    pub svg: Option<PathBuf>,
    #[arg(
        long,
        global = true,
        help_heading = HEADING,
        help = "Show the run recorded on a real GPU that this binary embeds, instead of running (no GPU needed); a lesson it embeds none of exits 3, and `all` skips it, saying so"
    )]
    pub recorded: bool,
    #[arg(
        long,
        value_name = "N",
        global = true,
        help_heading = HEADING,
        default_value_t = DEVICE,
        value_parser = whole(0u32..=MAX_DEVICE),
        help = "Which CUDA device, 0-based [0..=1023]; a two-GPU lesson also takes the lowest-numbered other one"
    )]
    pub device: u32,
    // main.rs also looks for `--json` in the raw arguments, so that an error clap finds
    // before anything is parsed is printed as JSON too.
    #[arg(
        long,
        global = true,
        help_heading = HEADING,
        help = "Machine-readable output on stdout (errors too)"
    )]
    pub json: bool,
    #[arg(
        long,
        value_name = "LANG",
        global = true,
        help_heading = HEADING,
        value_parser = Lang::NAMES,
        help = LANG_HELP
    )]
    pub lang: Option<String>,
    /// Which of `--reps`, `--seed` and `--device` the command line gave (clap's defaults
    /// fill the others): `--recorded` names the ones it ignores, and a local rank picks
    /// the device only where `--device` was not given.
    #[arg(skip)]
    pub given: Vec<&'static str>,
}

/// This process as one rank of a multi-process run (from `lab::ddp::ranks`, which `main`
/// reads: the harness sits below that room).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rank {
    pub rank: usize,
    /// The rank on its own machine (`LOCAL_RANK`), the device when `--device` is not given.
    pub local_rank: Option<usize>,
}

/// The common flags resolved for this process: the files checked, the device and the
/// language chosen.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub reps: usize,
    pub seed: u64,
    pub timeline: bool,
    pub recorded: bool,
    pub device: u32,
    pub lang: Lang,
    /// `--reps`, `--seed`, `--device` where the command line gave them.
    pub given: Vec<&'static str>,
    trace: Option<OutputFile>,
    svg: Option<OutputFile>,
    /// Whether this is `run all`, where each lesson writes files of its own.
    all: bool,
    rank: Option<usize>,
}

/// What a lesson runs with: the common flags resolved for it.
#[derive(Debug, Clone)]
pub struct Settings {
    pub reps: usize,
    pub seed: u64,
    pub timeline: bool,
    /// `--trace FILE.json`: the recorded runs as a Chrome Trace Event file (Perfetto).
    pub trace: Option<OutputFile>,
    /// `--svg FILE.svg`: the recorded runs as a picture (and a sweeping lesson's plot
    /// beside it, `FILE-plot.svg`).
    pub svg: Option<OutputFile>,
    /// The language the picture's words and the notes on stderr are in (`--lang`).
    pub lang: Lang,
}

impl Settings {
    /// Whether the first two versions are recorded (for the timeline, the trace or the
    /// picture).
    pub fn records(&self) -> bool {
        self.timeline || self.trace.is_some() || self.svg.is_some()
    }
}

impl Default for Settings {
    fn default() -> Settings {
        Settings { reps: REPS, seed: SEED, timeline: false, trace: None, svg: None, lang: Lang::En }
    }
}

impl Common {
    /// The common flags in `run`'s matches (a global flag given after the lesson's name is
    /// there too).
    pub fn from_matches(matches: &ArgMatches) -> Result<Common> {
        let mut common = Common::from_arg_matches(matches)
            .map_err(|e| Error::Internal(format!("the common flags: {e}")))?;
        let given = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
        common.given = ["reps", "seed", "device"].into_iter().filter(|id| given(id)).collect();
        Ok(common)
    }

    /// The language `--lang` names, else the locale's ([`Lang::from_env`]).
    pub fn lang(&self) -> Lang {
        Lang::or_locale(self.lang.as_deref())
    }

    /// Resolves the flags for this process, `rank` of a multi-process run or alone, running
    /// every lesson (`all`) or one. A `--trace` or `--svg` file that cannot be written, that
    /// is named for another format, or that both name, is refused here, before minutes of
    /// GPU work.
    pub fn resolve(&self, all: bool, rank: Option<Rank>) -> Result<Resolved> {
        let trace = self.trace.as_deref().map(|p| OutputFile::checked("--trace", p)).transpose()?;
        let svg = self.svg.as_deref().map(|p| OutputFile::checked("--svg", p)).transpose()?;
        OutputFile::apart(&[trace.as_ref(), svg.as_ref()])?;
        // Under mpirun or srun the local rank picks the GPU; an explicit --device wins.
        let local = rank.and_then(|r| r.local_rank).and_then(|l| u32::try_from(l).ok());
        let device = match local {
            Some(local) if !self.given.contains(&"device") => local,
            _ => self.device,
        };
        Ok(Resolved {
            reps: self.reps,
            seed: self.seed,
            timeline: self.timeline,
            recorded: self.recorded,
            device,
            lang: self.lang(),
            given: self.given.clone(),
            trace,
            svg,
            all,
            rank: rank.map(|r| r.rank),
        })
    }
}

impl Resolved {
    /// The settings of `lesson`: its own files under `all`, then this rank's own.
    pub fn settings_for(&self, lesson: &str) -> Settings {
        let file = |f: &OutputFile| {
            let f = if self.all { f.tagged(lesson) } else { f.clone() };
            match self.rank {
                // Rank 0, or a process that runs alone, writes the file itself.
                Some(r) if r > 0 => f.tagged(&format!("rank{r}")),
                _ => f,
            }
        };
        Settings {
            reps: self.reps,
            seed: self.seed,
            timeline: self.timeline,
            trace: self.trace.as_ref().map(file),
            svg: self.svg.as_ref().map(file),
            lang: self.lang,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args as _, Command};

    use super::*;

    fn resolved(flags: &[&str], all: bool, rank: Option<Rank>) -> Result<Resolved> {
        let run = Common::augment_args(Command::new("run"));
        let matches = run.try_get_matches_from(std::iter::once("run").chain(flags.iter().copied()));
        Common::from_matches(&matches.map_err(|e| Error::InvalidInput(e.to_string().into()))?)?
            .resolve(all, rank)
    }

    fn paths(s: &Settings) -> (PathBuf, PathBuf) {
        let path = |f: &Option<OutputFile>| f.as_ref().unwrap().path().to_path_buf();
        (path(&s.trace), path(&s.svg))
    }

    #[test]
    fn the_defaults_are_the_settings_defaults() {
        let r = resolved(&[], false, None).unwrap();
        let s = r.settings_for("overlap");
        let d = Settings::default();
        assert_eq!((s.reps, s.seed, s.timeline), (d.reps, d.seed, d.timeline));
        assert_eq!((s.reps, s.seed), (10, 24301));
        assert!(s.trace.is_none() && s.svg.is_none() && !s.records());
        assert_eq!((r.device, r.given.len()), (0, 0));
    }

    /// Each lesson of `all` writes its own files, and rank i > 0 its own after that.
    #[test]
    fn files_are_tagged_per_lesson_then_per_rank() {
        let dir = std::env::temp_dir();
        let (t, s) = (dir.join("t.json"), dir.join("s.svg"));
        let flags = ["--trace", t.to_str().unwrap(), "--svg", s.to_str().unwrap()];
        let alone = resolved(&flags, false, None).unwrap().settings_for("overlap");
        assert_eq!(paths(&alone), (t.clone(), s.clone()));
        let rank0 = Some(Rank { rank: 0, local_rank: Some(0) });
        let first = resolved(&flags, false, rank0).unwrap().settings_for("overlap");
        assert_eq!(paths(&first), (t.clone(), s.clone()));
        let rank3 = Some(Rank { rank: 3, local_rank: None });
        let one = resolved(&flags, false, rank3).unwrap().settings_for("overlap");
        assert_eq!(paths(&one), (dir.join("t-rank3.json"), dir.join("s-rank3.svg")));
        let all = resolved(&flags, true, None).unwrap().settings_for("graph");
        assert_eq!(paths(&all), (dir.join("t-graph.json"), dir.join("s-graph.svg")));
        let all3 = resolved(&flags, true, rank3).unwrap().settings_for("graph");
        assert_eq!(paths(&all3), (dir.join("t-graph-rank3.json"), dir.join("s-graph-rank3.svg")));
    }

    #[test]
    fn a_file_in_a_missing_folder_is_refused_when_resolved() {
        let e = resolved(&["--svg", "/nonexistent-folder/s.svg"], true, None).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().starts_with("--svg /nonexistent-folder/s.svg: cannot write"));
        assert!(resolved(&["--trace", "t.json"], false, None).is_ok());
    }

    /// The local rank picks the device unless `--device` was given.
    #[test]
    fn the_local_rank_is_the_device_unless_one_is_given() {
        let rank = Some(Rank { rank: 1, local_rank: Some(1) });
        assert_eq!(resolved(&[], false, rank).unwrap().device, 1);
        let given = resolved(&["--device", "0", "--reps", "3"], false, rank).unwrap();
        assert_eq!((given.device, given.reps), (0, 3));
        assert_eq!(given.given, ["reps", "device"]);
    }
}
