//! What the lessons on the chunked copy-compute-copy pipeline share (`overlap` runs it for
//! one K, `stream-sweep` for K = 1, 2, 4, ...): its bound, its phases, and the timing of work
//! spread over several streams.
use crate::lab::harness::VersionStats;
use crate::lab::record::report::Report;
use crate::runtime::stream::{fork, join};
use crate::runtime::{AsContext, Event, Result, Stream};

/// Times work spread over several streams with two events on the first: the other streams
/// fork from it before the work and join back into it after, so the stop event waits for
/// every stream's work, and the time between the events is the whole of it.
///
/// Streams on other GPUs fork from the first stream of their own GPU, not from the first
/// stream: every GPU is idle when a timing starts, so nothing is lost, and no stream waits
/// on another GPU's event before the work (only the join crosses GPUs, after it).
pub struct Bracket {
    start: Event,
    stop: Event,
    /// Per GPU: the index of its first stream (its leader) and the fork event recorded there.
    forks: Vec<(usize, Event)>,
    joins: Vec<Event>,
}

impl Bracket {
    /// Events for up to `streams` streams, made once, outside anything timed.
    pub fn new(on: &impl AsContext, streams: usize) -> Result<Bracket> {
        Ok(Bracket {
            start: Event::new(on)?,
            stop: Event::new(on)?,
            forks: vec![(0, Event::without_timing(on)?)],
            joins: (1..streams.max(1)).map(|_| Event::without_timing(on)).collect::<Result<_>>()?,
        })
    }

    /// Events for exactly `streams`, each fork and join event made in its own stream's
    /// context, so the streams may be on different GPUs (a wait on another GPU's event is
    /// allowed; a record on another GPU's stream is not).
    pub fn for_streams(streams: &[Stream]) -> Result<Bracket> {
        let first = streams[0].context();
        let mut forks: Vec<(usize, Event)> = Vec::new();
        for (i, s) in streams.iter().enumerate() {
            let seen = forks.iter().any(|(l, _)| same_gpu(&streams[*l], s));
            if !seen {
                forks.push((i, Event::without_timing(s.context())?));
            }
        }
        Ok(Bracket {
            start: Event::new(first)?,
            stop: Event::new(first)?,
            forks,
            joins: streams[1..]
                .iter()
                .map(|s| Event::without_timing(s.context()))
                .collect::<Result<_>>()?,
        })
    }

    /// Enqueues `work` between the fork and the join of `streams`, waits for it, and
    /// returns its GPU time in ms.
    pub fn time(&self, streams: &[Stream], work: impl FnOnce() -> Result<()>) -> Result<f64> {
        let (first, rest) = (&streams[0], streams[1..].iter().collect::<Vec<_>>());
        // Each fork's leader and followers are found before the start event, so that no host
        // work but the fork calls themselves falls inside the timed window.
        let forks: Vec<(&Event, &Stream, Vec<&Stream>)> = self
            .forks
            .iter()
            .map(|(leader, event)| {
                let leader = streams.get(*leader).unwrap_or(first);
                let followers = streams
                    .iter()
                    .filter(|s| same_gpu(s, leader) && s.as_raw() != leader.as_raw())
                    .collect();
                (event, leader, followers)
            })
            .collect();
        self.start.record(first)?;
        for (event, leader, followers) in &forks {
            fork(event, leader, followers)?;
        }
        work()?;
        join(&self.joins, first, &rest)?;
        self.stop.record(first)?;
        self.stop.synchronize()?;
        self.stop.elapsed_ms(&self.start)
    }
}

fn same_gpu(a: &Stream, b: &Stream) -> bool {
    a.context().as_raw() == b.context().as_raw()
}

/// The whole array's copy-in, compute and copy-out times on one stream (medians, ms), from
/// a version whose samples have the parts "H", "C" and "D".
#[derive(Debug, Clone, Copy)]
pub struct Phases {
    pub h: f64,
    pub c: f64,
    pub d: f64,
}

impl Phases {
    pub fn of(version: &VersionStats) -> Phases {
        let p = |name| version.part(name);
        Phases { h: p("H"), c: p("C"), d: p("D") }
    }

    /// [`pipeline_bound`] for `k` streams.
    pub fn bound(&self, k: usize) -> f64 {
        pipeline_bound(self.h, self.c, self.d, k)
    }

    /// The name of the slowest stage: the one that sets the pace of the pipeline.
    pub fn slowest(&self) -> &'static str {
        let stages = [("copy-in", self.h), ("compute", self.c), ("copy-out", self.d)];
        stages.iter().max_by(|a, b| a.1.total_cmp(&b.1)).map_or("compute", |s| s.0)
    }

    /// The three phases as report figures, then the bound for `k` streams and how far
    /// `measured_ms` is from it.
    pub fn figures(&self, k: usize, measured_ms: f64, r: &mut Report) {
        let bound = self.bound(k);
        r.figure("H: copy-in, whole array", self.h, "ms")
            .figure("C: compute, whole array", self.c, "ms")
            .figure("D: copy-out, whole array", self.d, "ms")
            .figure("bound T(K)", bound, "ms")
            .figure("measured / bound", measured_ms / bound, "x");
    }
}

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
        let p = Phases { h: 1.0, c: 2.0, d: 1.0 };
        assert_eq!((p.bound(8), p.slowest()), (2.25, "compute"));
        assert_eq!(Phases { h: 3.0, ..p }.slowest(), "copy-in");
    }
}
