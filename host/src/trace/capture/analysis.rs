//! The analysis of a trace folder, from its files to the overlap report, with nothing drawn
//! or written: what `streamlab trace` does once the program has ended, what `streamlab
//! report DIR` does with a kept folder, and what `benches/trace_analysis.rs` times.
use std::path::Path;

use crate::text::Text;
use crate::trace::inspect::findings::Thresholds;
use crate::trace::inspect::overlap::{overlap_report_of, OverlapReport};
use crate::trace::read::model::Capture;
use crate::trace::read::reader;

/// A trace folder read and reported on.
pub struct Analysis {
    pub capture: Capture,
    pub report: OverlapReport,
}

/// Reads every recorder file of `dir` and reports on them with `thresholds`; why not, in
/// English (the benchmark and the generated traces' tests read it as a `String`).
pub fn analyse(dir: &Path, thresholds: &Thresholds) -> Result<Analysis, String> {
    analyse_ranges(dir, thresholds, &[]).map_err(|why| why.en())
}

/// [`analyse`], with windows for the NVTX range names `ranges` only (all, when empty).
pub fn analyse_ranges(
    dir: &Path,
    thresholds: &Thresholds,
    ranges: &[String],
) -> Result<Analysis, Text> {
    let capture = reader::read_dir(dir)?;
    let report = overlap_report_of(&capture, thresholds, ranges);
    Ok(Analysis { capture, report })
}
