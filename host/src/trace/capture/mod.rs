//! `streamlab trace -- <program>`: any CUDA program run with CUPTI injected, and what its
//! streams did. The command ([`command`]: its flags and checks) hands a trace to
//! [`session`], which prepares the recorder ([`injection`]), runs the program as it is
//! ([`program`]), reads the files the recorder left, one per process ([`reader`], into the
//! [`model`]), turns them into the recordings the lessons' writers draw
//! ([`recordings`]: a Perfetto trace, an SVG, the terminal's timeline) and reports what they
//! say about overlap ([`summary`], from `inspect`). `streamlab report DIR` ([`report_command`])
//! analyses a kept folder again; `streamlab diff A.json B.json` ([`diff_command`], over
//! [`diff`]) compares two JSON reports, before and after a fix.
//!
//! Named "capture" so that its files are not confused with the Perfetto writer
//! (`record::trace`).
pub mod analysis;
pub mod command;
pub mod diff;
pub mod diff_command;
#[cfg(test)]
pub(crate) mod diff_tests;
pub mod file_text;
pub mod flags;
pub mod injection;
pub mod present;
pub mod program;
pub mod recordings;
pub mod report_command;
pub mod session;
pub mod summary;
