//! The lab: the harness every lesson runs in.
//!
//! A lesson ([`Lesson`]) provides its flags, its setup, the version without the technique
//! and the version with it, its checks against the CPU, and what the numbers mean. The
//! harness ([`harness::run`]) owns the rest, the same way for every lesson: the budget
//! ([`harness::budget`]), one warm-up of each version, interleaved repeats and their medians
//! ([`harness::stats`]), the checks ([`harness::checks`]), the recorded runs
//! ([`record::recorder`]: CUPTI's activity records, else events; drawn as the terminal's
//! [`record::timeline`], a Perfetto [`record::trace`], a [`record::picture`] and a sweep's
//! [`record::plot`], written by [`record::output`]; runs recorded on a real GPU ship in the
//! binary, [`record::recorded_runs`]), the report as text or JSON ([`record::report`]), its
//! words in English and Chinese ([`text`]) and the exit code. It is the shape of wgpu's
//! examples framework: the framework owns the loop, each example implements a trait.
//!
//! The lab has rooms, declared below from the top down. A room imports only the rooms
//! below it (`tests/layers.rs` checks it, in this order):
//! - [`ddp`]: one process per GPU: the ranks, their rendezvous, the launcher;
//! - [`kit`]: what several lessons share: the stream pipeline, the host's batch log, sleep
//!   kernels, batches, the other GPUs;
//! - [`harness`]: the [`Lesson`] trait, the run loop, the common flags (`harness::common`),
//!   budget, statistics, checks, data, and the commands `main.rs` dispatches to (`info`,
//!   `list`, `run`);
//! - [`record`]: recorders, spans, timeline, trace, picture, plot, output, the report and the
//!   recorded runs (the report is here, not in the harness, because everything that draws
//!   or writes a run reads it); `crate::trace` draws with it too;
// The rooms, top down: `tests/layers.rs` reads this order (rustfmt keeps it, one per group).
pub mod ddp;
// -
pub mod kit;
// -
pub mod harness;
// -
pub mod record;

/// `t!("key", name = value)`: a message of the catalogs ([`crate::text`]).
pub use crate::t;
pub use crate::text::{fixed, Lang, Text};
/// The flags' parsers every lesson's `Args` uses.
pub use harness::args;
pub use harness::budget::{Plan, WorkModel};
pub use harness::checks::Checks;
pub use harness::entry::{entry, Entry};
pub use harness::lesson::Lesson;
pub use harness::{Measured, Outcome, Sample, Settings, VersionStats};
pub use record::drawing::Drawing;
pub use record::report::Report;
