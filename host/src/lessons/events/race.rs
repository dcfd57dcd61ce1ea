//! The race a missing cross-stream dependency causes (the `events` lesson): a producer on one
//! stream writes a buffer that a consumer on another reads. What the consumer computed is
//! compared with the CPU bit for bit (right, wrong, or exactly what the stale buffer gives),
//! and the checks read every repeat's finish times and counts from the samples' parts.
use kernels_gpu::math::{add_element, scale_element};
use serde::Serialize;

use crate::lab::harness::stats::Stats;
use crate::lab::{Measured, VersionStats};
use crate::runtime::{Error, Result};
use crate::t;
use crate::text::{fixed, Text};

/// The producer computes `input * PRODUCER_FACTOR`: a power of two, so the product is exact
/// and the GPU's bits equal the CPU's whether or not the compiler fuses it into an FMA.
pub const PRODUCER_FACTOR: f32 = 2.0;
/// What the producer's output buffer holds before the producer has run.
pub const STALE: f32 = -1.0;
/// The parts of a race run's sample (its time is when the consumer finished, after the start).
pub const PRODUCER_DONE: &str = "producer finished at, ms";
pub const CONSUMER_MINUS_PRODUCER: &str = "consumer - producer finish, ms";
pub const WRONG: &str = "wrong elements";
pub const STALE_READ: &str = "stale elements";

/// What the consumer must compute for input `x`: the producer's `x * 2` plus `x`.
pub fn expected_element(x: f32) -> f32 {
    add_element(scale_element(x, PRODUCER_FACTOR, 0.0), x)
}

/// What a consumer that read the producer's buffer before the producer wrote it computes.
pub fn stale_element(x: f32) -> f32 {
    add_element(STALE, x)
}

/// How a consumer's output compares with the right answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Mismatches {
    /// Elements whose bits differ from the right answer.
    pub wrong: usize,
    /// Of those, how many hold exactly what the stale buffer gives.
    pub stale: usize,
    pub total: usize,
    /// The first wrong element: (index, got, expected).
    pub example: Option<(usize, f32, f32)>,
}

/// Compares `got` with [`expected_element`] of `input`, bit for bit.
pub fn count_mismatches(input: &[f32], got: &[f32]) -> Mismatches {
    let mut m = Mismatches { total: got.len(), ..Mismatches::default() };
    for (i, (&x, &g)) in input.iter().zip(got).enumerate() {
        let want = expected_element(x);
        if g.to_bits() != want.to_bits() {
            m.wrong += 1;
            m.stale += usize::from(g.to_bits() == stale_element(x).to_bits());
            m.example.get_or_insert((i, g, want));
        }
    }
    m
}

fn part(v: &VersionStats, name: &str) -> Result<Stats> {
    v.part_stats(name).ok_or_else(|| Error::Internal(format!("{}: no part \"{name}\"", v.name)))
}

/// Passes when every run without the wait read stale data (the race this lesson sets up).
pub fn check_race_observed(without: &VersionStats, n: usize) -> Result<Text> {
    let wrong = part(without, WRONG)?;
    if wrong.min > 0.0 {
        return Ok(t!("events.race_observed", runs = wrong.count, min = wrong.min.to_string(), n));
    }
    Err(Error::Verification(t!("error.events.race_not_reproduced", runs = wrong.count)))
}

/// Passes when the consumer that waited matched the CPU bit for bit in every run.
pub fn check_right(with: &VersionStats, n: usize) -> Result<Text> {
    let wrong = part(with, WRONG)?;
    if wrong.max == 0.0 {
        return Ok(t!("events.race_right", n, runs = wrong.count));
    }
    Err(Error::Verification(t!("error.events.race_wrong", wrong = wrong.max.to_string(), n)))
}

/// Passes when the consumer that waited finished after the producer in every run.
pub fn check_waited(with: &VersionStats) -> Result<Text> {
    let gap = part(with, CONSUMER_MINUS_PRODUCER)?;
    if gap.min < 0.0 {
        let ms = fixed(-gap.min, 3);
        return Err(Error::Verification(t!("error.events.race_consumer_early", ms)));
    }
    Ok(t!("events.race_after", runs = gap.count, ms = fixed(gap.min, 3)))
}

/// Passes when the consumer that did not wait finished before the producer in every run: the
/// two streams ran at once.
pub fn check_overtook(without: &VersionStats) -> Result<Text> {
    let gap = part(without, CONSUMER_MINUS_PRODUCER)?;
    if gap.max >= 0.0 {
        let ms = fixed(gap.max, 3);
        return Err(Error::Verification(t!("error.events.race_consumer_late", ms)));
    }
    Ok(t!("events.race_before", runs = gap.count, ms = fixed(-gap.max, 3)))
}

/// Both orderings: the consumer finished after the producer with the wait, and before it
/// without, in every run.
pub fn check_ordering(m: &Measured) -> Result<Text> {
    check_waited(m.with())?;
    check_overtook(m.without())?;
    Ok(t!("events.race_ordering"))
}

/// Passes when the events around the producer measured at least its spin in every run: the
/// spin counts ticks at the rated clock, so it never takes less than `--sleep-us`; 5% is left
/// for the events' resolution. Events recorded in the wrong place, or timing the host
/// instead of the GPU, would measure less.
pub fn check_producer_timing(with: &VersionStats, sleep_us: f64) -> Result<Text> {
    let producer = part(with, PRODUCER_DONE)?;
    let spin = sleep_us / 1e3;
    if producer.min < 0.95 * spin {
        let (end, spin) = (fixed(producer.min, 3), fixed(spin, 3));
        return Err(Error::Verification(t!("error.events.race_producer_early", end, spin)));
    }
    let (runs, min, spin) = (producer.count, fixed(producer.min, 3), fixed(spin, 3));
    Ok(t!("events.race_producer_timing", runs, min, spin))
}

/// Made-up race runs, for the tests of the checks here and of the `events` lesson's text.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;
    use crate::lab::Sample;

    /// A race run: (producer done, consumer done, wrong elements), in ms; every wrong
    /// element stale.
    pub type Run = (f64, f64, usize);

    /// The consumer finished 19.9 ms before the producer and read 10 stale elements.
    pub const RACED: Run = (20.0, 0.1, 10);
    /// The consumer finished 0.1 ms after the producer, right.
    pub const WAITED: Run = (20.0, 20.1, 0);

    /// A run's sample, with the parts the race versions record.
    pub fn sample((producer, consumer, wrong): Run) -> Sample {
        Sample::ms(consumer)
            .part(PRODUCER_DONE, producer)
            .part(CONSUMER_MINUS_PRODUCER, consumer - producer)
            .part(WRONG, wrong as f64)
            .part(STALE_READ, wrong as f64)
    }

    /// The versions `names`: the runs without the wait, those with it, then `kernel` once.
    pub fn measured(names: Vec<String>, without: &[Run], with: &[Run], kernel: Sample) -> Measured {
        let runs = |r: &[Run]| r.iter().copied().map(sample).collect();
        Measured::from_samples(names, vec![runs(without), runs(with), vec![kernel]])
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{Run, RACED, WAITED};
    use super::*;
    use crate::lab::Sample;

    fn measured(without: &[Run], with: &[Run]) -> Measured {
        let names = vec!["without".into(), "with".into(), "kernel".into()];
        fixtures::measured(names, without, with, Sample::ms(0.3))
    }

    #[test]
    fn stale_and_right_answers_differ() {
        for x in [-3.0f32, -0.25, 0.0, 0.7, 3.1] {
            assert_ne!(expected_element(x), stale_element(x), "x = {x}");
        }
        assert_eq!(expected_element(1.5), 4.5);
        assert_eq!(stale_element(1.5), 0.5);
    }

    #[test]
    fn mismatches_count_wrong_and_stale_elements() {
        let input = [1.0f32, 2.0, 3.0, 4.0];
        let right: Vec<f32> = input.iter().map(|&x| expected_element(x)).collect();
        let m = count_mismatches(&input, &right);
        assert_eq!((m.wrong, m.stale, m.example), (0, 0, None));
        let mut got = right.clone();
        got[1] = stale_element(2.0);
        got[3] = 99.0;
        let m = count_mismatches(&input, &got);
        assert_eq!((m.wrong, m.stale, m.total), (2, 1, 4));
        assert_eq!(m.example, Some((1, 1.0, 6.0)));
    }

    #[test]
    fn race_check_needs_every_run_wrong_and_the_right_check_none() {
        let m = measured(&[RACED, (20.0, 0.1, 3)], &[WAITED]);
        assert!(check_race_observed(m.without(), 10).is_ok());
        let m = measured(&[RACED, (20.0, 0.1, 0)], &[WAITED]);
        assert!(check_race_observed(m.without(), 10).is_err());
        assert!(check_right(m.with(), 10).is_ok());
        let m = measured(&[RACED], &[WAITED, (20.0, 20.1, 1)]);
        assert!(check_right(m.with(), 10).is_err());
    }

    #[test]
    fn ordering_check() {
        // Each half fails on its own: one run out of order is enough.
        let m = measured(&[RACED, (20.0, 20.1, 10)], &[WAITED, (20.0, 0.1, 0)]);
        let e = check_waited(m.with()).unwrap_err().to_string();
        assert!(e.contains("19.900 ms before the producer"), "{e}");
        let e = check_overtook(m.without()).unwrap_err().to_string();
        assert!(e.contains("0.100 ms after the producer"), "{e}");
        let m = measured(&[RACED], &[WAITED]);
        assert!(check_waited(m.with()).unwrap().en().contains("at least 0.100 ms after"));
        assert!(check_overtook(m.without()).unwrap().en().contains("19.900 ms before"));
        assert!(check_ordering(&measured(&[RACED], &[WAITED])).is_ok());
        assert!(check_ordering(&measured(&[RACED], &[WAITED, (20.0, 0.1, 0)])).is_err());
        assert!(check_ordering(&measured(&[RACED, (20.0, 20.1, 10)], &[WAITED])).is_err());
    }

    #[test]
    fn producer_timing_must_cover_the_spin() {
        let m = measured(&[RACED], &[(20.1, 20.2, 0), WAITED]);
        assert!(check_producer_timing(m.with(), 20_000.0).is_ok());
        let m = measured(&[RACED], &[(20.1, 20.2, 0), (5.0, 5.1, 0)]);
        assert!(check_producer_timing(m.with(), 20_000.0).is_err());
        // A version without the part is the lesson's bug, not the GPU's.
        let m = measured(&[RACED], &[WAITED]);
        let kernel = m.version(crate::lessons::events::TIMED_KERNEL);
        assert!(matches!(check_producer_timing(kernel, 20_000.0), Err(Error::Internal(_))));
    }
}
