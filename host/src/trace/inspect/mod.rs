//! What a capture says about overlap: per window, each engine class's busy time, how much of
//! the copying ran under compute, the bound that perfect overlap would reach, and the
//! findings that keep a run from it, each naming the lesson that teaches the fix
//! ([`overlap::overlap_report`]). It needs no GPU: it reads the columns of `read`.
//!
//! Its parts, each a floor below the next: [`overlap`] (the report) and [`overlap_text`] (its
//! words); [`ranks`] (late ranks, across windows), [`ahead`] (the CPU ahead of the GPU),
//! [`rules`] and `gap_rules` (one window's findings, over a [`scope`]); [`measure`] (a
//! window's figures);
//! [`windows`] (whole runs, start-up and the rest, ranges launched in and ran during),
//! [`projection`] (each record charged to the range that launched it), [`wholeness`]
//! (which ranges were recorded whole); [`findings`] (the rules and their thresholds),
//! [`host_index`] and [`union`] (the questions the rules ask, answered by binary search);
//! [`engines`] (which engine class each kind of work occupies).
pub mod ahead;
pub mod engines;
pub mod findings;
mod gap_rules;
pub mod host_index;
pub mod measure;
pub mod overlap;
#[cfg(test)]
mod overlap_tests;
pub mod overlap_text;
pub mod projection;
pub mod ranks;
pub mod rules;
#[cfg(test)]
mod rules_tests;
pub mod scope;
pub mod tables;
#[cfg(test)]
pub(crate) mod test_lines;
pub mod union;
pub mod wholeness;
pub mod windows;
