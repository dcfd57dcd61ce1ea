//! The lab: the harness every lesson runs in.
//!
//! A lesson ([`Lesson`]) provides its flags, its setup, the version without the technique
//! and the version with it, its checks against the CPU, and what the numbers mean. The
//! harness ([`harness::run`]) owns the rest, the same way for every lesson: the budget
//! ([`budget`]), one warm-up of each version, interleaved repeats and their medians
//! ([`stats`]), the checks ([`checks`]), the recorded runs ([`record`]: CUPTI's activity
//! records, else events; drawn as the terminal's [`timeline`], a Perfetto [`trace`], a
//! [`picture`] and a sweep's [`plot`], written by [`output`]; runs [`recorded`] on a real GPU
//! ship in the binary), the report as text or JSON ([`report`]), its words in English and
//! Chinese ([`text`]) and the exit code. It is the shape of wgpu's examples framework: the
//! framework owns the loop, each example implements a trait.
pub mod args;
pub mod batches;
pub mod budget;
pub mod checks;
pub mod data;
pub mod devices;
pub mod graph_sweep;
pub mod harness;
pub mod host_pipeline;
pub mod launch;
pub mod output;
pub mod picture;
pub mod pipeline;
pub mod plot;
pub mod race;
pub mod ranks;
pub mod record;
pub mod recorded;
pub mod replay;
pub mod report;
pub mod sleep;
pub mod span;
pub mod stats;
pub mod text;
pub mod timeline;
pub mod trace;

use serde::Serialize;

/// `t!("key", name = value)`: a message of the catalogs ([`text`]).
pub use crate::t;
pub use budget::{Plan, WorkModel};
pub use checks::Checks;
pub use harness::{Measured, Outcome, Sample, Settings, VersionStats};
pub use report::Report;
pub use text::{fixed, Lang, Text};

use crate::runtime::{Gpu, Result, Stream};

/// A technique, taught as a pair of versions. See `lessons/overlap.rs` for the shape.
pub trait Lesson: Sized {
    /// The name `streamlab run` takes.
    const NAME: &'static str;
    /// One line: what the lesson compares.
    const SUMMARY: &'static str;
    /// Whether the first two versions are the same work done two ways, so that the ratio of
    /// their times is a speed-up the report should print. Not so where the first version is
    /// wrong on purpose (the events lesson's race).
    const SPEEDUP: bool = true;
    /// The lesson's own flags, with their defaults and ranges.
    type Args: clap::Args + clap::FromArgMatches + Clone + std::fmt::Debug + Serialize;

    /// The versions' names, baseline first: what `without` and `with` measure, then any
    /// versions [`Lesson::other`] runs (a third variant, the points of a sweep).
    fn versions(args: &Self::Args) -> Vec<String>;

    /// What the flags will cost, and any combination of them that cannot work, checked
    /// before the GPU is touched (`model` is an H100 then, and the real GPU after).
    fn plan(args: &Self::Args, model: &WorkModel) -> Result<Plan>;

    /// Buffers and streams, allocated once, outside anything timed.
    fn setup(gpu: &Gpu, args: &Self::Args, seed: u64) -> Result<Self>;

    /// The version without the technique. Returns its timing.
    fn without(&mut self, gpu: &Gpu) -> Result<Sample>;

    /// The version with the technique.
    fn with(&mut self, gpu: &Gpu) -> Result<Sample>;

    /// Version `index` (2 and up) of [`Lesson::versions`].
    fn other(&mut self, _gpu: &Gpu, index: usize) -> Result<Sample> {
        Err(crate::runtime::Error::Internal(format!("{} has no version {index}", Self::NAME)))
    }

    /// The streams a timeline observes.
    fn streams(&self) -> Vec<&Stream>;

    /// The checks, after the measurements: async against sync bit for bit, GPU against the
    /// CPU reference, and whatever the technique promises.
    fn verify(&mut self, gpu: &Gpu, measured: &Measured, checks: &mut Checks) -> Result<()>;

    /// The lesson's own figures (its bound) and what the numbers mean, from the data.
    fn explain(&self, measured: &Measured, report: &mut Report);

    /// A plot of what the lesson sweeps (time against K, bandwidth bars, ...), drawn beside
    /// the `--svg` picture and kept in the report. None by default.
    fn plot(&self, _measured: &Measured) -> Option<plot::Plot> {
        None
    }

    /// The versions a recorded run draws (`--timeline`, `--trace`, `--svg`): the one without
    /// the technique and the one with it, unless a third tells the story too.
    fn drawn(&self) -> Vec<usize> {
        vec![0, 1]
    }
}

/// A lesson as the command line sees it: its name, its flags, and how to run it.
pub struct Entry {
    pub name: &'static str,
    pub summary: &'static str,
    /// The `streamlab run <name>` subcommand, with the lesson's flags.
    pub command: fn() -> clap::Command,
    /// Parses the flags and checks them against the budget, without a GPU.
    pub check: fn(&clap::ArgMatches) -> Result<()>,
    /// Parses the flags and runs the lesson.
    pub run: fn(&Gpu, &clap::ArgMatches, &Settings) -> Result<Report>,
}

/// The registry entry of lesson `L`.
pub const fn entry<L: Lesson>() -> Entry {
    Entry {
        name: L::NAME,
        summary: L::SUMMARY,
        command: harness::command::<L>,
        check: harness::check_matches::<L>,
        run: harness::run_matches::<L>,
    }
}
