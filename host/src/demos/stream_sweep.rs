//! # stream-sweep (placeholder: being written; replaced before this lands)
use crate::demos::Options;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::report::Report;

pub const SUMMARY: &str =
    "the overlap demo for K = 1, 2, 4, ... 64: time and bound for each, and the best K";
pub const FLAGS: &str = "";

pub fn run(_gpu: &Gpu, _opts: &Options) -> Result<Report> {
    Err(Error::InvalidInput(
        "demo `stream-sweep` is not written yet".into(),
    ))
}
