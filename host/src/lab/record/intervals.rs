//! Time as sets of intervals, in ms: the union of spans (so that two spans running at once
//! count once), its length, the intersection of two unions, and the gaps inside one. The
//! overlap report is this arithmetic over the spans of one engine class at a time.

/// Two times closer than this (a nanosecond, the resolution of CUPTI's clock) are equal. Spans
/// are `f64` ms made by subtracting nanosecond timestamps, so `2.1 - 2.0` is not exactly `0.1`:
/// a gap "at the threshold" must not turn into one "over" it by rounding.
pub const EPS_MS: f64 = 1e-6;

/// A `[start, end)` interval in ms.
pub type Interval = (f64, f64);

/// The union of `intervals`: sorted, disjoint, with touching intervals merged. Intervals of no
/// length hold no time and are dropped.
pub fn union(mut intervals: Vec<Interval>) -> Vec<Interval> {
    intervals.retain(|(start, end)| end > start);
    intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut merged: Vec<Interval> = Vec::new();
    for (start, end) in intervals {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// The time a union covers.
pub fn length(union: &[Interval]) -> f64 {
    // A fold from +0.0: `sum()` of no `f64`s is -0.0, which prints as "-0.000".
    union.iter().fold(0.0, |total, (start, end)| total + (end - start))
}

/// The parts of `a` inside `b`, in order (both must be unions: sorted and disjoint).
pub fn intersection(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    // Walk both in order, always stepping past the interval that ends first.
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        let start = a[i].0.max(b[j].0);
        let end = a[i].1.min(b[j].1);
        if end > start {
            out.push((start, end));
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// The time two unions cover together (both must be unions: sorted and disjoint).
pub fn overlap(a: &[Interval], b: &[Interval]) -> f64 {
    length(&intersection(a, b))
}

/// The time a union covers inside `[start, end)`.
pub fn covered(union: &[Interval], start: f64, end: f64) -> f64 {
    if end <= start {
        return 0.0;
    }
    overlap(union, &[(start, end)])
}

/// The gaps between consecutive intervals of a union (not before the first or after the last).
pub fn gaps(union: &[Interval]) -> Vec<Interval> {
    union.windows(2).map(|pair| (pair[0].1, pair[1].0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_union_merges_overlapping_and_touching_intervals_and_drops_empty_ones() {
        let u = union(vec![(3.0, 4.0), (0.0, 2.0), (1.0, 1.5), (2.0, 2.5), (5.0, 5.0)]);
        assert_eq!(u, [(0.0, 2.5), (3.0, 4.0)]);
        assert_eq!(length(&u), 3.5);
        assert_eq!(gaps(&u), [(2.5, 3.0)]);
        assert!(length(&[]).is_sign_positive());
    }

    #[test]
    fn overlap_counts_only_the_time_both_cover() {
        let a = union(vec![(0.0, 2.0), (3.0, 6.0)]);
        let b = union(vec![(1.0, 4.0), (5.0, 7.0)]);
        // [1, 2) + [3, 4) + [5, 6)
        assert_eq!(intersection(&a, &b), [(1.0, 2.0), (3.0, 4.0), (5.0, 6.0)]);
        assert_eq!(intersection(&b, &a), intersection(&a, &b));
        assert_eq!(overlap(&a, &b), 3.0);
        assert_eq!(overlap(&b, &a), 3.0);
        assert_eq!(covered(&a, 1.5, 3.5), 1.0);
        assert_eq!(covered(&a, 2.0, 3.0), 0.0);
        assert_eq!(covered(&a, 4.0, 4.0), 0.0);
    }
}
