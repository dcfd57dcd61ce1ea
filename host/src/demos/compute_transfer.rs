//! # compute-transfer (placeholder: being written; replaced before this lands)
use crate::demos::Options;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::report::Report;

pub const SUMMARY: &str =
    "one transfer stream and one compute stream linked by events, batch by batch";
pub const FLAGS: &str = "";

pub fn run(_gpu: &Gpu, _opts: &Options) -> Result<Report> {
    Err(Error::InvalidInput(
        "demo `compute-transfer` is not written yet".into(),
    ))
}
