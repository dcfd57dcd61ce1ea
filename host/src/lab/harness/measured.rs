//! What a lesson's timed runs leave: each run's [`Sample`], and the medians and spreads of
//! every version ([`Measured`]), which the lesson's checks and explanation read.
use serde::Serialize;

use crate::lab::harness::stats::Stats;

/// One timed run of a version: its time in ms (GPU time from events, unless the lesson says
/// otherwise) and any named parts of it (phases, host times, bandwidths).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub ms: f64,
    pub parts: Vec<(&'static str, f64)>,
}

impl Sample {
    pub fn ms(ms: f64) -> Sample {
        Sample { ms, parts: Vec::new() }
    }

    /// The value of the part `name`; NaN when there is none.
    pub fn value(&self, name: &str) -> f64 {
        self.parts.iter().find(|(n, _)| *n == name).map_or(f64::NAN, |(_, v)| *v)
    }

    /// Adds a named part (all samples of a version must name the same parts).
    pub fn part(mut self, name: &'static str, value: f64) -> Sample {
        self.parts.push((name, value));
        self
    }
}

/// The statistics of one version over the repeats.
#[derive(Debug, Clone, Serialize)]
pub struct VersionStats {
    pub name: String,
    pub time: Stats,
    pub parts: Vec<(&'static str, Stats)>,
}

impl VersionStats {
    /// The median of the part `name`; NaN when the version has no such part.
    pub fn part(&self, name: &str) -> f64 {
        self.parts.iter().find(|(n, _)| *n == name).map_or(f64::NAN, |(_, s)| s.median)
    }

    /// The statistics of the part `name` over the repeats: its min and max say whether
    /// every repeat agreed (a claim that must hold each time).
    pub fn part_stats(&self, name: &str) -> Option<Stats> {
        self.parts.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
    }
}

/// Every version's statistics, baseline first.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    pub versions: Vec<VersionStats>,
}

impl Measured {
    /// The statistics of each version's samples (`runs[i]` are version i's, non-empty).
    pub fn from_samples(names: Vec<String>, runs: Vec<Vec<Sample>>) -> Measured {
        let versions = names
            .into_iter()
            .zip(runs)
            .map(|(name, samples)| {
                let parts = samples[0]
                    .parts
                    .iter()
                    .enumerate()
                    .map(|(i, (part, _))| (*part, Stats::of_each(&samples, |s| s.parts[i].1)))
                    .collect();
                VersionStats { name, time: Stats::of_each(&samples, |s| s.ms), parts }
            })
            .collect();
        Measured { versions }
    }

    /// Version `v` of the lesson's versions, by the name the lesson gives its index.
    pub fn version(&self, v: usize) -> &VersionStats {
        &self.versions[v]
    }

    /// The version without the technique.
    pub fn without(&self) -> &VersionStats {
        &self.versions[0]
    }

    /// The version with it.
    pub fn with(&self) -> &VersionStats {
        &self.versions[1]
    }

    /// Median time without the technique over median time with it.
    pub fn speedup(&self) -> f64 {
        self.without().time.median / self.with().time.median
    }
}
