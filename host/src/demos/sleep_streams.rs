//! # sleep-streams (placeholder: being written; replaced before this lands)
use crate::demos::Options;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::report::Report;

pub const SUMMARY: &str = "SleepKernel 4x on one stream vs once on each of 4 streams, with a full grid and with one block";
pub const FLAGS: &str = "";

pub fn run(_gpu: &Gpu, _opts: &Options) -> Result<Report> {
    Err(Error::InvalidInput(
        "demo `sleep-streams` is not written yet".into(),
    ))
}
