//! Summaries of repeated measurements. Every figure streamlab reports is a median over
//! `--reps` repeats, with the spread beside it.
use serde::Serialize;

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Stats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub count: usize,
}

impl Stats {
    /// The statistics of one field of a list of runs.
    pub fn of_each<T>(runs: &[T], field: impl Fn(&T) -> f64) -> Stats {
        Stats::of(&runs.iter().map(field).collect::<Vec<_>>())
    }

    /// Median, min and max of `samples` (NaN-free). Panics on an empty slice: callers always
    /// measure at least once.
    pub fn of(samples: &[f64]) -> Stats {
        assert!(!samples.is_empty(), "Stats::of needs at least one sample");
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median =
            if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
        Stats { median, min: sorted[0], max: sorted[n - 1], count: n }
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:.3} ms (min {:.3}, max {:.3}, n={})",
            self.median, self.min, self.max, self.count
        )
    }
}

/// Host wall-clock milliseconds spent in `f`.
pub fn host_ms<T>(f: impl FnOnce() -> T) -> (T, f64) {
    let t = std::time::Instant::now();
    let out = f();
    (out, t.elapsed().as_secs_f64() * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(Stats::of(&[3.0, 1.0, 2.0]).median, 2.0);
        assert_eq!(Stats::of(&[4.0, 1.0, 3.0, 2.0]).median, 2.5);
        let s = Stats::of(&[5.0, 1.0, 9.0]);
        assert_eq!((s.min, s.max, s.count), (1.0, 9.0, 3));
        let s = Stats::of_each(&[(1, 2.0), (2, 4.0), (3, 9.0)], |r| r.1);
        assert_eq!(s.median, 4.0);
    }
}
