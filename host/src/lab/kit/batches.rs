//! What the lessons that stream work through in batches share (`callback`, `compute-transfer`,
//! `prefetch`): how many elements all batches together may hold, the check that `--batches` x
//! `--elements` fits, and the estimate of a perfect two-stage pipeline.
use crate::runtime::{Error, Result};
use crate::t;
use crate::text::Text;

/// The most elements over all batches (1 GiB of floats): what a batch lesson keeps at once,
/// on the host or the device, stays well inside a GPU's and a machine's memory.
pub const MAX_TOTAL_ELEMENTS: usize = 1 << 28;

/// `batches` x `elements`, or a one-line refusal naming both flags when the product is over
/// [`MAX_TOTAL_ELEMENTS`]; `kept` says what the lesson keeps of them ("floats of results": a
/// label, or a sentence of the catalogs).
pub fn total_elements(batches: usize, elements: usize, kept: impl Into<Text>) -> Result<usize> {
    batches.checked_mul(elements).filter(|&t| t <= MAX_TOTAL_ELEMENTS).ok_or_else(|| {
        let (kept, max) = (kept.into(), MAX_TOTAL_ELEMENTS);
        Error::InvalidInput(t!("error.kit.too_many_elements", batches, elements, max, kept))
    })
}

/// The time a perfect two-stage pipeline takes for `b` batches when the first stage takes
/// `p` and the second `g` per batch (ms): the first batch's first stage, then the slower
/// stage for the other b-1 batches, then the last batch's second stage.
pub fn pipeline_estimate(p: f64, g: f64, b: usize) -> f64 {
    p + b.saturating_sub(1) as f64 * p.max(g) + g
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimate_is_the_sum_for_one_batch_and_the_slow_stage_for_many() {
        assert_eq!(pipeline_estimate(1.0, 2.0, 1), 3.0);
        assert_eq!(pipeline_estimate(1.0, 2.0, 8), 1.0 + 7.0 * 2.0 + 2.0);
        assert_eq!(pipeline_estimate(3.0, 1.0, 4), 3.0 + 9.0 + 1.0);
        assert_eq!(pipeline_estimate(1.0, 2.0, 0), 3.0);
    }

    #[test]
    fn totals_over_the_cap_or_overflowing_are_refused() {
        assert_eq!(total_elements(8, 1 << 20, "floats").unwrap(), 8 << 20);
        assert_eq!(total_elements(1, MAX_TOTAL_ELEMENTS, "floats").unwrap(), MAX_TOTAL_ELEMENTS);
        let e = total_elements(1024, 100_000_000, "floats of results").unwrap_err().to_string();
        assert!(
            e.contains("--batches 1024 x --elements 100000000") && e.contains("of results"),
            "{e}"
        );
        assert!(total_elements(usize::MAX, usize::MAX, "floats").is_err());
        assert!(total_elements(2, MAX_TOTAL_ELEMENTS / 2 + 1, "floats").is_err());
    }
}
