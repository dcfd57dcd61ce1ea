//! # callback (placeholder: being written; replaced before this lands)
use crate::demos::Options;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::report::Report;

pub const SUMMARY: &str =
    "host functions (cuLaunchHostFunc) wake the host to prepare the next batch: a pipeline";
pub const FLAGS: &str = "";

pub fn run(_gpu: &Gpu, _opts: &Options) -> Result<Report> {
    Err(Error::InvalidInput(
        "demo `callback` is not written yet".into(),
    ))
}
