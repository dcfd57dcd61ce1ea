//! `streamlab trace -- <program>` and `streamlab report DIR`: a profiler of any CUDA program,
//! beside the lessons' lab. It never runs a lesson; of the lab it uses only the drawing room
//! (`lab::record`: spans, the Perfetto trace, the picture, the timeline) and the words
//! (`text`). Its rooms, top down (`tests/layers.rs` checks the order):
//! - [`capture`]: running another program under the recorder (`inject/`, loaded by the CUDA
//!   driver), its files read back per process, drawn and reported on;
//! - [`inspect`]: what the records say about overlap: windows, each engine class's busy
//!   time, the bound, and the findings that name the lesson teaching each fix;
//! - [`read`]: the recorder's files read as a stream into columns, one clock for every
//!   process.
// The rooms, top down: `tests/layers.rs` reads this order.
pub mod capture;
// -
pub mod inspect;
// -
pub mod read;
