//! Running a program under the recorder, and showing what its files say.
//! - `streamlab trace -- <program>`: the command ([`command`]: its flags and checks) hands a
//!   trace to [`session`], which prepares the recorder ([`injection`]), runs the program as
//!   it is ([`program`]), describes the run beside the recorder's files, and analyses them
//!   ([`analysis`], over `trace::read` and `trace::inspect`);
//! - `streamlab report DIR` ([`report_command`]) analyses a kept folder again;
//! - `streamlab diff A.json B.json` ([`diff_command`], over [`diff`]) compares two JSON
//!   reports, before and after a fix.
//!
//! Both `trace` and `report` share their flags ([`flags`]) and show an analysis the same way
//! ([`present`]): the header and the JSON's shape ([`summary`]), the report's text, and the
//! drawings ([`recordings`]: a Perfetto trace, an SVG of the time [`svg_range`] chose, the
//! terminal's timeline). The recorder's English sentences are read back into the catalogs'
//! words by [`file_text`].
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
pub mod svg_range;
