//! What a recorded run says about overlap, from its spans (and a traced program's host
//! records where it has them): each engine class's busy
//! time, how much of the copying ran under compute, the bound that perfect overlap would
//! reach, and the findings that keep a run from it, each naming the lesson that teaches the
//! fix ([`overlap::overlap_report`]). It needs no GPU: it reads `record`'s spans, whichever
//! recorder made them. `streamlab trace -- <program>` feeds it another program's spans
//! (recorded by the injected CUPTI library), with its host calls and NVTX ranges.
//!
//! Its parts, each a floor below the next (time as unions of spans is `lab::record::intervals`):
//! [`engines`] (which engine class each kind of work occupies), [`host`] (the host's calls,
//! waits and NVTX ranges), [`windows`] (whole runs and ranges), [`findings`] (the rules and
//! their thresholds), [`rules`] and `gap_rules` (one window's findings), [`ranks`] (late
//! ranks, across windows) and [`overlap`] (the report, and its text in the catalogs' words).
pub mod engines;
pub mod findings;
mod gap_rules;
pub mod host;
pub mod overlap;
pub mod ranks;
pub mod rules;
pub mod windows;
