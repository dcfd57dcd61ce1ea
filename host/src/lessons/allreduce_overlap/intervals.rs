//! Time as a union of intervals, in ms: what the lesson's probed runs need to tell how long
//! the backward's buckets, and the all-reduces, had some work running (two spans at once
//! count once).

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_union_merges_overlapping_and_touching_intervals_and_drops_empty_ones() {
        let u = union(vec![(3.0, 4.0), (0.0, 2.0), (1.0, 1.5), (2.0, 2.5), (5.0, 5.0)]);
        assert_eq!(u, [(0.0, 2.5), (3.0, 4.0)]);
        assert_eq!(length(&u), 3.5);
        assert!(length(&[]).is_sign_positive());
    }
}
