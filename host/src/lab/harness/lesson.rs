//! The [`Lesson`] trait every lesson implements, and the registry
//! [`Entry`](crate::lab::harness::entry::Entry) the command line reads each lesson through.
use serde::Serialize;

use crate::lab::harness::budget::{Plan, WorkModel};
use crate::lab::harness::checks::Checks;
use crate::lab::harness::measured::{Measured, Sample};
use crate::lab::record::drawing::Drawing;
use crate::lab::record::plot;
use crate::lab::record::report::Report;
use crate::runtime::{Gpu, Result, Stream};

/// A technique, taught as a pair of versions. See `lessons/overlap/mod.rs` for the shape.
pub trait Lesson: Sized {
    /// The name `streamlab run` takes.
    const NAME: &'static str;
    /// One line: what the lesson compares.
    const SUMMARY: &'static str;
    /// Whether the first two versions are the same work done two ways, so that the ratio of
    /// their times is a speed-up the report should print. Not so where the first version is
    /// wrong on purpose (the events lesson's race).
    const SPEEDUP: bool = true;
    /// How its pictures draw a run (`--svg`, live or `--recorded`): the host's row, kernels
    /// told apart, rows and versions named for the picture, what ran untimed.
    const DRAWING: Drawing = Drawing::PLAIN;
    /// The lesson's own flags, with their defaults and ranges.
    type Args: clap::Args + clap::FromArgMatches + Clone + std::fmt::Debug + Serialize;

    /// The versions' names, baseline first: the one without the technique, the one with it,
    /// then any others (a third variant, the points of a sweep). [`Lesson::version`] takes
    /// an index into this list; a lesson names its indices (constants, or a function of a
    /// sweep's point) rather than writing numbers.
    fn versions(args: &Self::Args) -> Vec<String>;

    /// What the flags will cost, and any combination of them that cannot work, checked
    /// before the GPU is touched (`model` is an H100 then, and the real GPU after).
    fn plan(args: &Self::Args, model: &WorkModel) -> Result<Plan>;

    /// Buffers and streams, allocated once, outside anything timed.
    fn setup(gpu: &Gpu, args: &Self::Args, seed: u64) -> Result<Self>;

    /// Runs version `v` of [`Lesson::versions`] once and returns its timing. Each version
    /// is a method of the lesson's own, with its doc comment, so that the file reads like
    /// the tutorial; this is only the `match` from a version's name to its method, ending
    /// in [`no_such_version`].
    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample>;

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

/// The error for an index past a lesson's versions: the last arm of [`Lesson::version`].
pub fn no_such_version<L: Lesson>(v: usize) -> Result<Sample> {
    Err(crate::runtime::Error::Internal(format!("{} has no version {v}", L::NAME)))
}
