//! # graph (placeholder: being written; replaced before this lands)
use crate::demos::Options;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::report::Report;

pub const SUMMARY: &str = "a multi-stream DAG replayed with streams+events vs a captured CUDA graph; update in place; launch overhead";
pub const FLAGS: &str = "";

pub fn run(_gpu: &Gpu, _opts: &Options) -> Result<Report> {
    Err(Error::InvalidInput(
        "demo `graph` is not written yet".into(),
    ))
}
