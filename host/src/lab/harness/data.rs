//! Inputs, chunking, and the comparisons the checks use: bit for bit between two GPU
//! versions, and `approx` between the GPU and the CPU reference.
use std::ops::Range;

use crate::runtime::{Error, Result};
use crate::t;
use crate::text::Text;

/// Deterministic pseudo-random floats in [-π, π) (xorshift64*): the same `seed` gives the
/// same input on every machine, so a failing check can be rerun exactly.
pub fn random_inputs(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let bits = state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40; // 24 random bits
            (bits as f32 / (1u32 << 24) as f32) * 2.0 * std::f32::consts::PI - std::f32::consts::PI
        })
        .collect()
}

/// `k` contiguous ranges covering `0..n`, as even as possible; when `k` does not divide `n`
/// the first `n % k` chunks get one more element, so the last chunk is the shorter one.
pub fn chunk_ranges(n: usize, k: usize) -> Vec<Range<usize>> {
    let (base, extra) = (n / k.max(1), n % k.max(1));
    let mut start = 0;
    (0..k)
        .map(|i| {
            let len = base + usize::from(i < extra);
            let r = start..start + len;
            start += len;
            r
        })
        .collect()
}

/// Fails unless `a` and `b` are identical bit for bit; the message names the first
/// difference and how many elements differ.
pub fn ensure_bitwise_equal(what: &str, a: &[f32], b: &[f32]) -> Result<()> {
    if a.len() != b.len() {
        let (what, a, b) = (Text::label(what), a.len(), b.len());
        return Err(Error::Verification(t!("error.data.lengths_differ", what, a, b)));
    }
    let mut differing =
        a.iter().zip(b).enumerate().filter(|(_, (x, y))| x.to_bits() != y.to_bits());
    if let Some((i, (x, y))) = differing.next() {
        let (count, n, what) = (1 + differing.count(), a.len(), Text::label(what));
        let (x, y) = (format!("{x:e}"), format!("{y:e}"));
        return Err(Error::Verification(t!("error.data.bits_differ", what, count, n, i, x, y)));
    }
    Ok(())
}

/// How GPU results are compared with the CPU reference. libdevice's `sinf`/`cosf` and the
/// host's agree within a few ulps per call; `x = sin(x)cos(x)` has slope |cos 2x| <= 1, so
/// per-step differences add up at most linearly: after 100 steps a relative 1e-4 (about
/// 800 ulps) with an absolute floor of 1e-6 for values near zero is a bound with margin,
/// while any real bug (a skipped element, a wrong chunk offset) is off by far more.
pub const REL_TOLERANCE: f32 = 1e-4;
pub const ABS_TOLERANCE: f32 = 1e-6;

/// The indices a CPU check samples: all of them up to `limit`, else `limit` evenly spread
/// ones including the first and last (the CPU would take seconds on 16M elements × 100 iters).
pub fn sample_indices(n: usize, limit: usize) -> Vec<usize> {
    if n <= limit {
        return (0..n).collect();
    }
    let step = (n - 1) as f64 / (limit - 1) as f64;
    (0..limit).map(|k| ((k as f64 * step).round() as usize).min(n - 1)).collect()
}

/// Compares `gpu[i]` with `reference(i)` at the sampled indices, with the tolerances above.
/// Returns how many elements were checked.
pub fn ensure_close_to_reference(
    what: &str,
    gpu: &[f32],
    limit: usize,
    reference: impl Fn(usize) -> f32,
) -> Result<usize> {
    let indices = sample_indices(gpu.len(), limit);
    for &i in &indices {
        let expected = reference(i);
        let got = gpu[i];
        let ok = approx::relative_eq!(
            got,
            expected,
            epsilon = ABS_TOLERANCE,
            max_relative = REL_TOLERANCE
        );
        if !ok {
            let (got, expected) = (format!("{got:e}"), format!("{expected:e}"));
            let (rel, abs) = (format!("{REL_TOLERANCE:e}"), format!("{ABS_TOLERANCE:e}"));
            let what = Text::label(what);
            let line = t!("error.data.not_close", what, i, got, expected, rel, abs);
            return Err(Error::Verification(line));
        }
    }
    Ok(indices.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_deterministic_and_in_range() {
        let a = random_inputs(10_000, 7);
        assert_eq!(a, random_inputs(10_000, 7));
        assert_ne!(a, random_inputs(10_000, 8));
        assert!(a.iter().all(|x| (-std::f32::consts::PI..std::f32::consts::PI).contains(x)));
        // Not degenerate: both signs, many distinct values.
        assert!(a.iter().any(|&x| x < -1.0) && a.iter().any(|&x| x > 1.0));
    }

    #[test]
    fn bitwise_check_reports_first_difference() {
        assert!(ensure_bitwise_equal("t", &[1.0, 2.0], &[1.0, 2.0]).is_ok());
        let err =
            ensure_bitwise_equal("t", &[1.0, 2.0, 3.0], &[1.0, 2.5, 3.5]).unwrap_err().to_string();
        assert!(err.contains("2 of 3") && err.contains("index 1"), "{err}");
        assert_eq!(
            err,
            "verification failed: t: 2 of 3 elements differ; first at index 1: 2e0 vs 2.5e0"
        );
        let zh = ensure_bitwise_equal("t", &[1.0], &[2.0]).unwrap_err();
        assert!(crate::text::has_chinese(&zh.render(crate::text::Lang::Zh)), "{zh}");
        // -0.0 == 0.0 numerically, but not bit for bit.
        assert!(ensure_bitwise_equal("t", &[0.0], &[-0.0]).is_err());
    }

    #[test]
    fn chunks_cover_everything_once_with_the_last_shorter() {
        for (n, k) in [(10, 4), (16, 8), (7, 7), (1, 1), (1000, 64), (65, 64)] {
            let c = chunk_ranges(n, k);
            assert_eq!(c.len(), k);
            assert_eq!((c[0].start, c[k - 1].end), (0, n));
            assert!(c.windows(2).all(|w| w[0].end == w[1].start));
            assert!(c.iter().all(|r| !r.is_empty() && r.len() >= c[k - 1].len()));
        }
        assert_eq!(chunk_ranges(10, 4), vec![0..3, 3..6, 6..8, 8..10]);
    }

    #[test]
    fn samples_cover_both_ends() {
        assert_eq!(sample_indices(5, 10), vec![0, 1, 2, 3, 4]);
        let s = sample_indices(1_000_000, 100);
        assert_eq!((s.len(), s[0], s[99]), (100, 0, 999_999));
    }

    #[test]
    fn reference_check_catches_a_wrong_element() {
        let gpu = vec![1.0f32, 2.0, 3.0];
        assert!(ensure_close_to_reference("t", &gpu, 10, |i| (i + 1) as f32).is_ok());
        assert!(ensure_close_to_reference("t", &gpu, 10, |i| if i == 2 {
            3.01
        } else {
            (i + 1) as f32
        })
        .is_err());
    }
}
