//! Time as a union of intervals in ns, with the time covered before each one kept beside it,
//! so that "how much of `[a, b)` does the union cover" costs two binary searches, not a walk
//! from the start. Every rule that asks that question once per pair of records (launch gaps,
//! copy and kernel back to back) stays O(n log n) this way.
use crate::trace::read::model::Ns;

/// A sorted, disjoint set of `[start, end)` intervals (touching ones merged, empty ones
/// dropped), and the time covered before each.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Union {
    spans: Vec<(Ns, Ns)>,
    /// `before[i]`: the time `spans[..i]` cover.
    before: Vec<Ns>,
}

impl Union {
    /// The union of `intervals`, in any order.
    pub fn of(intervals: impl IntoIterator<Item = (Ns, Ns)>) -> Union {
        let mut all: Vec<(Ns, Ns)> = intervals.into_iter().filter(|(s, e)| e > s).collect();
        all.sort_unstable();
        Union::of_sorted(all)
    }

    /// The union of `intervals` sorted by start.
    pub fn of_sorted(intervals: impl IntoIterator<Item = (Ns, Ns)>) -> Union {
        let mut spans: Vec<(Ns, Ns)> = Vec::new();
        for (start, end) in intervals {
            if end <= start {
                continue;
            }
            match spans.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => spans.push((start, end)),
            }
        }
        let mut before = Vec::with_capacity(spans.len());
        let mut total = 0;
        for (start, end) in &spans {
            before.push(total);
            total += end - start;
        }
        Union { spans, before }
    }

    pub fn spans(&self) -> &[(Ns, Ns)] {
        &self.spans
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The time the union covers.
    pub fn length(&self) -> Ns {
        match (self.spans.last(), self.before.last()) {
            (Some((start, end)), Some(before)) => before + (end - start),
            _ => 0,
        }
    }

    /// The time covered before `t`.
    pub fn until(&self, t: Ns) -> Ns {
        // The intervals that start before t; the last of them may reach past it.
        let n = self.spans.partition_point(|(start, _)| *start < t);
        if n == 0 {
            return 0;
        }
        let (start, end) = self.spans[n - 1];
        self.before[n - 1] + (end.min(t) - start)
    }

    /// The time covered inside `[from, to)`.
    pub fn covered(&self, from: Ns, to: Ns) -> Ns {
        if to <= from {
            return 0;
        }
        self.until(to) - self.until(from)
    }

    /// The time both unions cover.
    pub fn overlap(&self, other: &Union) -> Ns {
        intersection(&self.spans, &other.spans).iter().map(|(s, e)| e - s).sum()
    }

    /// The gaps between consecutive intervals (not before the first or after the last).
    pub fn gaps(&self) -> impl Iterator<Item = (Ns, Ns)> + '_ {
        self.spans.windows(2).map(|pair| (pair[0].1, pair[1].0))
    }
}

/// The parts of `a` inside `b`, in order (both sorted and disjoint).
pub fn intersection(a: &[(Ns, Ns)], b: &[(Ns, Ns)]) -> Vec<(Ns, Ns)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_union_merges_touching_intervals_and_knows_what_it_covers_anywhere() {
        let u = Union::of([(30, 40), (0, 20), (10, 15), (20, 25), (50, 50)]);
        assert_eq!(u.spans(), [(0, 25), (30, 40)]);
        assert_eq!(u.length(), 35);
        assert_eq!(u.gaps().collect::<Vec<_>>(), [(25, 30)]);
        // Before, inside and after each interval.
        assert_eq!(
            (u.until(0), u.until(10), u.until(27), u.until(35), u.until(99)),
            (0, 10, 25, 30, 35)
        );
        assert_eq!(u.covered(15, 35), 15);
        assert_eq!(u.covered(25, 30), 0);
        assert_eq!(u.covered(40, 30), 0);
        // Against a plain walk over every interval, on every pair of points.
        let walk = |from: Ns, to: Ns| -> Ns {
            u.spans().iter().map(|&(s, e)| e.min(to).saturating_sub(s.max(from))).sum()
        };
        for from in 0..45 {
            for to in from..45 {
                assert_eq!(u.covered(from, to), walk(from, to), "[{from}, {to})");
            }
        }
    }

    #[test]
    fn overlap_counts_only_the_time_both_cover() {
        let a = Union::of([(0, 20), (30, 60)]);
        let b = Union::of([(10, 40), (50, 70)]);
        assert_eq!(intersection(a.spans(), b.spans()), [(10, 20), (30, 40), (50, 60)]);
        assert_eq!((a.overlap(&b), b.overlap(&a)), (30, 30));
        assert_eq!(Union::default().length(), 0);
    }
}
