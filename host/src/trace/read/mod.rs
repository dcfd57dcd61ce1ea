//! The recorder's files read as a stream into columns: every process's lines ([`reader`],
//! parsed flat by [`flat_line`] and put in order by [`builder`]) into a [`model::Capture`],
//! on one clock. It needs no GPU and no driver: `streamlab report DIR` reads a kept folder
//! with it alone.
pub mod builder;
pub mod flat_line;
pub mod model;
pub mod names;
pub mod reader;
#[cfg(test)]
pub(crate) mod reader_tests;
