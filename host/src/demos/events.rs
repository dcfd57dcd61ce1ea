//! # events (placeholder: being written; replaced before this lands)
use crate::demos::Options;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::report::Report;

pub const SUMMARY: &str =
    "event timing, and a cross-stream dependency with and without cuStreamWaitEvent";
pub const FLAGS: &str = "";

pub fn run(_gpu: &Gpu, _opts: &Options) -> Result<Report> {
    Err(Error::InvalidInput(
        "demo `events` is not written yet".into(),
    ))
}
