//! # launch-order (placeholder: being written; replaced before this lands)
use crate::demos::Options;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::report::Report;

pub const SUMMARY: &str =
    "kernels issued to several streams start in issue order: the gaps between starts";
pub const FLAGS: &str = "";

pub fn run(_gpu: &Gpu, _opts: &Options) -> Result<Report> {
    Err(Error::InvalidInput(
        "demo `launch-order` is not written yet".into(),
    ))
}
