//! The [`Lesson`] trait every lesson implements, and the registry [`Entry`] the command
//! line reads each lesson through.
use serde::Serialize;

use crate::lab::harness::budget::{Plan, WorkModel};
use crate::lab::harness::checks::Checks;
use crate::lab::harness::{self, Measured, Sample, Settings};
use crate::lab::record::plot;
use crate::lab::record::report::Report;
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
