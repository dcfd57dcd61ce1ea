//! What a recorded run says about overlap, from its spans alone: each engine class's busy
//! time, how much of the copying ran under compute, the bound that perfect overlap would
//! reach, and the findings that keep a run from it, each naming the lesson that teaches the
//! fix ([`overlap::overlap_report`]). It needs no GPU: it reads `record`'s spans, whichever
//! recorder made them. `streamlab trace -- <program>` will feed it another program's spans
//! (recorded by the injected CUPTI library); no command calls it yet.
//!
//! Its parts, each a floor below the next: [`intervals`] (time as unions of spans),
//! [`engines`] (which engine class each kind of work occupies), [`findings`] (the rules and
//! their thresholds) and [`overlap`] (the report per window, and its text).
pub mod engines;
pub mod findings;
pub mod host;
pub mod intervals;
pub mod overlap;
