//! # pinned-vs-pageable (placeholder: being written; replaced before this lands)
use crate::demos::Options;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::report::Report;

pub const SUMMARY: &str =
    "copy bandwidth from pinned and pageable memory, and how long an 'async' call holds the host";
pub const FLAGS: &str = "";

pub fn run(_gpu: &Gpu, _opts: &Options) -> Result<Report> {
    Err(Error::InvalidInput(
        "demo `pinned-vs-pageable` is not written yet".into(),
    ))
}
