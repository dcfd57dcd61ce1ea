//! Two bounds for a two-stream run, and its gap taken apart with them.
//!
//! A lesson's bound for two streams (a pipeline's `c + (B-1) max(c, u) + u`, allreduce's
//! `max(C, A) + min(C, A)/B`) takes each stream's work as timed alone: the **free** bound.
//! It assumes each stream's kernels run as fast beside the other's as alone. Timed while the
//! other stream runs, they take longer where they share the SMs and the memory; the same
//! formula with those times is the **contention-aware** bound. The gap between the measured
//! time and the free bound then splits in two:
//!
//! - sharing = aware − free: the kernels themselves got slower beside each other (SMs and
//!   memory bandwidth shared). More overlap cannot remove it, only less or lighter work;
//! - scheduling = measured − aware: what is left (launch order, dependencies, idle gaps),
//!   which is what overlap, priorities and bucketing decide.
//!
//! The two add up to the gap by construction. Either may come out a little below zero: the
//! times beside come from probed runs, which are not the timed ones.

/// One run's time against its two bounds (ms).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Split {
    /// The version's measured time.
    pub measured: f64,
    /// The bound from the times alone.
    pub free: f64,
    /// The same bound from the times beside each other.
    pub aware: f64,
}

impl Split {
    /// Measured − free bound: all that lies above the free bound.
    pub fn gap(&self) -> f64 {
        self.measured - self.free
    }

    /// Aware − free bound: SMs and memory shared, the kernels themselves slower.
    pub fn sharing(&self) -> f64 {
        self.aware - self.free
    }

    /// Measured − aware bound: launch order, dependencies, idle gaps.
    pub fn scheduling(&self) -> f64 {
        self.measured - self.aware
    }

    /// Whether sharing is the larger part of the gap.
    pub fn mostly_sharing(&self) -> bool {
        self.sharing() >= self.scheduling()
    }
}

/// How much slower `beside` is than `alone`: 1 where there is nothing alone to compare with
/// (no time, or no overlapped step), so that nothing is stretched.
pub fn stretch(beside: f64, alone: f64) -> f64 {
    if alone > 0.0 && beside > 0.0 {
        beside / alone
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_two_parts_add_up_to_the_gap() {
        let s = Split { measured: 1.4, free: 1.0, aware: 1.3 };
        assert!((s.gap() - 0.4).abs() < 1e-12);
        assert!((s.sharing() - 0.3).abs() < 1e-12);
        assert!((s.scheduling() - 0.1).abs() < 1e-12);
        assert!((s.sharing() + s.scheduling() - s.gap()).abs() < 1e-12);
        assert!(s.mostly_sharing());
        // No slowdown beside: the two bounds agree and all of the gap is scheduling.
        let s = Split { measured: 1.4, free: 1.0, aware: 1.0 };
        assert_eq!(s.sharing(), 0.0);
        assert_eq!(s.scheduling(), s.gap());
        assert!(!s.mostly_sharing());
    }

    #[test]
    fn a_stretch_is_beside_over_alone_or_one_without_a_time() {
        assert_eq!(stretch(1.5, 1.0), 1.5);
        assert_eq!(stretch(0.0, 1.0), 1.0);
        assert_eq!(stretch(1.0, 0.0), 1.0);
    }
}
