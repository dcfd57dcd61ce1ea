//! What the lessons on the chunked copy-compute-copy pipeline share (`overlap` runs it for
//! one K, `stream-sweep` for K = 1, 2, 4, ...): its bound.

/// The pipeline bound `T(K) = (H + C + D)/K + (K-1)/K * max(H, C, D)`, with H, C and D the
/// whole array's copy-in, compute and copy-out times: one chunk's full trip, then the
/// slowest stage for the remaining K-1 chunks.
pub fn pipeline_bound(h: f64, c: f64, d: f64, k: usize) -> f64 {
    let k = k as f64;
    (h + c + d) / k + (k - 1.0) / k * h.max(c).max(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_matches_the_formula() {
        // One stream: the bound is the plain sum.
        assert_eq!(pipeline_bound(1.0, 2.0, 1.0, 1), 4.0);
        // 8 streams: 4/8 + 7/8 * 2.
        assert!((pipeline_bound(1.0, 2.0, 1.0, 8) - 2.25).abs() < 1e-12);
        // Many streams approach the slowest stage, whichever stage it is.
        assert!((pipeline_bound(1.0, 2.0, 1.0, 1_000_000) - 2.0).abs() < 1e-5);
        assert!((pipeline_bound(3.0, 2.0, 1.0, 1_000_000) - 3.0).abs() < 1e-5);
    }
}
