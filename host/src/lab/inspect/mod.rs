//! What a recorded run says about overlap, from its spans alone: each engine class's busy
//! time, how much of the copying ran under compute, and the findings that keep a run from
//! overlapping, each naming the lesson that teaches the fix. It needs no GPU: it reads `record`'s
//! spans, whichever recorder made them. `streamlab trace -- <program>` will feed it another
//! program's spans (recorded by the injected CUPTI library); no command calls it yet.
//!
//! Its parts, each a floor below the next: [`intervals`] (time as unions of spans),
//! [`engines`] (which engine class each kind of work occupies) and [`findings`] (the rules
//! and their thresholds).
pub mod engines;
pub mod findings;
pub mod intervals;
