//! What the numbers of allreduce-overlap mean, and the experiment behind it: probed runs
//! with an event around every bucket, so the backward and the all-reduces are each timed
//! while they overlap. Those times give a second bound beside the free one, and the gap
//! between a version and the free bound splits into SM and memory sharing and scheduling
//! (`lab::kit::contention`).
use super::{AllreduceOverlap, Reducer, ALL_REDUCE, BACKWARD, COPY_ENGINES, GREATEST, LEAST, MANY};
use crate::lab::kit::contention::Split;
use crate::lab::{fixed, t, Measured, Report, Text};
use crate::runtime::{Gpu, Result};

/// Probed runs of a version, to time each side while they overlap.
const PROBE_RUNS: usize = 5;

/// What the probed runs of a version showed (medians, ms).
pub(super) struct Probe {
    pub version: usize,
    /// The whole version, with the probe's events.
    pub total: f64,
    /// The backward's buckets on the compute stream.
    pub backward: f64,
    /// Time with some all-reduce in flight.
    pub reduce: f64,
}

impl AllreduceOverlap {
    /// The experiment behind the explanation: `version` run [`PROBE_RUNS`] times with an
    /// event around every bucket's backward and all-reduce, so each side is timed while
    /// they overlap. Medians; the probed runs' own time is kept to show what the events
    /// cost.
    pub(super) fn probe(&self, gpu: &Gpu, version: usize) -> Result<Probe> {
        let (buckets, reducer) = match version {
            COPY_ENGINES => (&self.buckets[0], Reducer::CopyEngines),
            _ => (&self.buckets[0], Reducer::Nccl),
        };
        let mut runs = Vec::new();
        for _ in 0..PROBE_RUNS {
            let total = self.bucketed(gpu, buckets, 0, reducer, true)?.ms;
            let (backward, reduce) = self.ranks.overlapped_ms(buckets.len())?;
            runs.push([total, backward, reduce]);
        }
        let median = |i: usize| {
            let mut v: Vec<f64> = runs.iter().map(|r| r[i]).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        Ok(Probe { version, total: median(0), backward: median(1), reduce: median(2) })
    }
}

/// The bound `max(C, A) + min(C, A)/B` is the longer of two chains: the whole backward, then
/// the last bucket's all-reduce (`C + A/B`), and the first bucket's backward, then every
/// all-reduce (`C/B + A`). With the times beside each other, `backward` (the backward's
/// buckets while overlapped) and `reduce` (some all-reduce in flight), in place of C and A
/// where they overlap, and the two ends that run alone at C/B and A/B:
/// `max(backward + A/B, C/B + reduce)`. With `backward` = C and `reduce` = A it is the free
/// bound.
pub(super) fn aware_bound(c: f64, a: f64, backward: f64, reduce: f64, buckets: usize) -> f64 {
    let b = buckets.max(1) as f64;
    f64::max(backward + a / b, c / b + reduce)
}

/// A probed version's two bounds, its gap split with them: figures and a line.
fn contention(probe: &Probe, measured: f64, (c, a): (f64, f64), buckets: usize, r: &mut Report) {
    let b = buckets.max(1) as f64;
    let split = Split {
        measured,
        free: c.max(a) + c.min(a) / b,
        aware: aware_bound(c, a, probe.backward, probe.reduce, buckets),
    };
    let engines = probe.version == COPY_ENGINES;
    let (aware_figure, sharing_figure, scheduling_figure) = if engines {
        (
            "bound with times beside (contention-aware, copy engines)",
            "gap: SM and memory sharing (copy engines)",
            "gap: scheduling (copy engines)",
        )
    } else {
        (
            "bound with times beside (contention-aware, NCCL, greatest priority)",
            "gap: SM and memory sharing (NCCL, greatest priority)",
            "gap: scheduling (NCCL, greatest priority)",
        )
    };
    r.figure(aware_figure, split.aware, "ms");
    r.figure(sharing_figure, split.sharing(), "ms");
    r.figure(scheduling_figure, split.scheduling(), "ms");
    let ms = |v: f64| fixed(v, 3);
    let which = if split.mostly_sharing() {
        t!("allreduce_overlap.mostly_sharing")
    } else {
        t!("allreduce_overlap.mostly_scheduling")
    };
    r.explain(t!(
        "allreduce_overlap.split",
        aware = ms(split.aware),
        free = ms(split.free),
        gap = ms(split.gap()),
        measured = ms(measured),
        sharing = ms(split.sharing()),
        sched = ms(split.scheduling()),
        which
    ));
    if engines {
        r.explain(t!("allreduce_overlap.engines_alone"));
    }
}

pub(super) fn explain(lesson: &AllreduceOverlap, m: &Measured, r: &mut Report) {
    let ms = |v: f64| fixed(v, 3);
    let percent = |v: f64, of: f64| format!("{:+.1}", (v / of - 1.0) * 100.0);
    let sequential = m.without();
    let c = sequential.part(BACKWARD);
    let a = sequential.part(ALL_REDUCE);
    let buckets = lesson.buckets[0].len();
    let bound = c.max(a) + c.min(a) / buckets as f64;
    let greatest = m.version(GREATEST);
    let least = m.version(LEAST);
    let many = m.version(MANY);
    r.figure("backward C", c, "ms");
    r.figure("all-reduce A", a, "ms");
    r.figure("bound max(C, A) + min(C, A)/B", bound, "ms");

    let gpus = lesson.ranks.local.len();
    let ranks = lesson.ranks.world();
    // The title says how many GPUs ran: "2× NVIDIA H200", or "NVIDIA H200, rank 1 of 4".
    r.device = if lesson.ranks.alone() {
        format!("{gpus}× {}", r.device)
    } else {
        format!("{}, rank {} of {ranks}", r.device, lesson.ranks.local[0].rank)
    };
    let bytes = lesson.ranks.local[0].params.len() as f64 * 4.0;
    let mib = fixed(bytes / 1048576.0, 0);
    r.explain(t!(
        "allreduce_overlap.sequential",
        gpus,
        ranks,
        c = ms(c),
        mib,
        a = ms(a),
        seq = ms(sequential.time.median)
    ));
    if ranks >= 2 {
        // NCCL's convention: algorithm bandwidth is the buffer over the time; bus
        // bandwidth scales it by 2(n-1)/n, what each link carries in a ring.
        let algorithm = bytes / (a * 1e-3) / 1e9;
        let bus = algorithm * 2.0 * (ranks as f64 - 1.0) / ranks as f64;
        r.figure("all-reduce bus bandwidth", bus, "GB/s");
        r.explain(t!(
            "allreduce_overlap.bandwidth",
            ranks,
            algorithm = fixed(algorithm, 1),
            bus = fixed(bus, 1)
        ));
    }

    let hi = greatest.time.median;
    r.explain(t!(
        "allreduce_overlap.bucketed",
        b = buckets.to_string(),
        hi = ms(hi),
        x = fixed(m.speedup(), 2),
        ratio = fixed(hi / bound, 2),
        off = percent(hi, bound),
        bound = ms(bound)
    ));
    // The experiment: each side timed on its own stream while they overlapped.
    for probe in &lesson.probes {
        let name = &lesson.names[probe.version];
        let (version_figure, backward_figure, reduce_figure) = if probe.version == COPY_ENGINES {
            (
                "probed run with events (copy engines)",
                "backward while overlapped (copy engines)",
                "all-reduces in flight (copy engines)",
            )
        } else {
            (
                "probed run with events (NCCL, greatest priority)",
                "backward while overlapped (NCCL, greatest priority)",
                "all-reduces in flight (NCCL, greatest priority)",
            )
        };
        r.figure(version_figure, probe.total, "ms");
        r.figure(backward_figure, probe.backward, "ms");
        r.figure(reduce_figure, probe.reduce, "ms");
        r.explain(t!(
            "allreduce_overlap.overlapped",
            name = Text::label(name.clone()),
            total = ms(probe.total),
            backward = ms(probe.backward),
            dc = percent(probe.backward, c),
            reduce = ms(probe.reduce),
            da = percent(probe.reduce, a)
        ));
        if probe.version == GREATEST {
            if probe.backward > c * 1.05 {
                r.explain(t!("allreduce_overlap.backward_slowed"));
            } else {
                r.explain(t!("allreduce_overlap.backward_kept_pace"));
            }
        }
        let measured = m.version(probe.version).time.median;
        contention(probe, measured, (c, a), buckets, r);
    }

    if let Some(engines) = m.versions.get(COPY_ENGINES) {
        let time = engines.time.median;
        r.explain(t!(
            "allreduce_overlap.copy_engines",
            b = buckets.to_string(),
            time = ms(time),
            ratio = fixed(time / bound, 2),
            bound = ms(bound),
            nccl = ms(hi)
        ));
    }

    let lo = least.time.median;
    let prio = if lo > hi * 1.02 {
        t!("allreduce_overlap.slower", lo = ms(lo))
    } else {
        t!("allreduce_overlap.no_slower", lo = ms(lo))
    };
    r.explain(t!("allreduce_overlap.priority", prio));
    let more = if many.time.median < hi {
        t!("allreduce_overlap.faster")
    } else {
        t!("allreduce_overlap.not_faster")
    };
    r.explain(t!(
        "allreduce_overlap.more_buckets",
        buckets = lesson.buckets[1].len(),
        many = ms(many.time.median),
        more
    ));
    if lesson.shows_order_bug() {
        r.explain(t!("allreduce_overlap.order_bug"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::Lang;

    fn probe(version: usize, backward: f64, reduce: f64) -> Probe {
        Probe { version, total: 0.0, backward, reduce }
    }

    fn told(p: &Probe, measured: f64, c: f64, a: f64, buckets: usize) -> Report {
        let mut r = Report::new("t", "t", "t");
        contention(p, measured, (c, a), buckets, &mut r);
        assert_eq!(r.messages.len(), r.interpretation.len());
        r.assert_chinese(&[], std::iter::empty());
        r
    }

    #[test]
    fn with_the_times_alone_the_aware_bound_is_the_free_one() {
        for (c, a, b) in [(0.8, 1.0, 8), (1.0, 0.8, 8), (1.0, 1.0, 1), (2.0, 0.5, 32)] {
            let free = f64::max(c, a) + f64::min(c, a) / b as f64;
            assert!((aware_bound(c, a, c, a, b) - free).abs() < 1e-12, "{c} {a} {b}");
        }
        // The all-reduces slowed more than the backward: their chain sets the bound.
        assert_eq!(aware_bound(1.0, 1.0, 1.25, 1.5, 4), 0.25 + 1.5);
        assert_eq!(aware_bound(1.0, 1.0, 1.75, 1.5, 4), 1.75 + 0.25);
    }

    #[test]
    fn the_gap_splits_into_sharing_and_scheduling() {
        // C = A = 1, B = 4: free bound 1.25. Beside each other the backward's buckets took
        // 1.25 and the all-reduces 1.5: the bound with times beside is 0.25 + 1.5 = 1.75.
        let r = told(&probe(GREATEST, 1.25, 1.5), 2.0, 1.0, 1.0, 4);
        let name = "bound with times beside (contention-aware, NCCL, greatest priority)";
        assert_eq!(r.value(name), Some(1.75));
        let sharing = r.value("gap: SM and memory sharing (NCCL, greatest priority)").unwrap();
        let scheduling = r.value("gap: scheduling (NCCL, greatest priority)").unwrap();
        assert_eq!((sharing, scheduling), (0.5, 0.25));
        assert_eq!(sharing + scheduling, 2.0 - 1.25, "the parts add up to measured - bound");
        let line = &r.interpretation[0];
        assert!(line.contains("a bound of 1.750 ms"), "{line}");
        assert!(line.contains("against 1.250 ms from the times alone"), "{line}");
        assert!(line.contains("Of the 0.750 ms between the measured 2.000 ms"), "{line}");
        assert!(line.contains("0.500 ms is SM and memory sharing"), "{line}");
        assert!(line.contains("0.250 ms scheduling"), "{line}");
        assert!(line.contains("Most of it is sharing"), "{line}");
        assert_eq!(r.interpretation.len(), 1, "no copy engines' note for NCCL");
        let zh = r.messages[0].render(Lang::Zh);
        assert!(zh.contains("1.750") && zh.contains("0.500") && zh.contains("共享"), "{zh}");

        // No slowdown beside: both bounds agree, all of the gap is scheduling.
        let r = told(&probe(COPY_ENGINES, 1.0, 1.0), 2.0, 1.0, 1.0, 4);
        assert_eq!(r.value("bound with times beside (contention-aware, copy engines)"), Some(1.25));
        assert_eq!(r.value("gap: SM and memory sharing (copy engines)"), Some(0.0));
        assert_eq!(r.value("gap: scheduling (copy engines)"), Some(0.75));
        assert!(r.interpretation[0].contains("Most of it is scheduling"), "{:?}", r.interpretation);
        assert!(r.interpretation[1].contains("NCCL's"), "{:?}", r.interpretation);
    }
}
