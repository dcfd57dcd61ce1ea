//! # basics (placeholder: being written; replaced before this lands)
use crate::demos::Options;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::report::Report;

pub const SUMMARY: &str = "blocking copies + kernel vs the same on one stream with async copies from pinned memory; host work done meanwhile";
pub const FLAGS: &str = "";

pub fn run(_gpu: &Gpu, _opts: &Options) -> Result<Report> {
    Err(Error::InvalidInput(
        "demo `basics` is not written yet".into(),
    ))
}
