//! What a recorded run says about overlap, from its spans alone: each engine class's busy
//! time and how much of the copying ran under compute. It needs no GPU: it reads `record`'s
//! spans, whichever recorder made them. `streamlab trace -- <program>` will feed it another
//! program's spans (recorded by the injected CUPTI library); no command calls it yet.
//!
//! Its parts, each a floor below the next: [`intervals`] (time as unions of spans) and
//! [`engines`] (which engine class each kind of work occupies).
pub mod engines;
pub mod intervals;
