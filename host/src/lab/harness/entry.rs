//! The registry entry of a lesson: what `streamlab` needs to list it, parse its flags and
//! run it through the harness.
use crate::lab::harness::common::Settings;
use crate::lab::harness::lesson::Lesson;
use crate::lab::harness::{check_matches, command, run_matches};
use crate::lab::record::drawing::Drawing;
use crate::lab::record::report::Report;
use crate::runtime::{Gpu, Result};
use crate::text::Text;

/// A lesson's run as the command line sees it: its report, and what `--trace` and `--svg`
/// wrote, a note per flag (said in the learner's language).
pub type Ran = (Report, Vec<Text>);

/// A lesson as the command line sees it: its name, its flags, and how to run it.
pub struct Entry {
    pub name: &'static str,
    pub summary: &'static str,
    /// The `streamlab run <name>` subcommand, with the lesson's flags.
    pub command: fn() -> clap::Command,
    /// Parses the flags and checks them against the budget, without a GPU.
    pub check: fn(&clap::ArgMatches) -> Result<()>,
    /// Parses the flags and runs the lesson.
    pub run: fn(&Gpu, &clap::ArgMatches, &Settings) -> Result<Ran>,
    /// How its pictures draw a run ([`Lesson::DRAWING`]): `--recorded` draws with it too.
    pub drawing: Drawing,
}

/// The registry entry of lesson `L`.
pub const fn entry<L: Lesson>() -> Entry {
    Entry {
        name: L::NAME,
        summary: L::SUMMARY,
        command: command::<L>,
        check: check_matches::<L>,
        run: run_matches::<L>,
        drawing: L::DRAWING,
    }
}
