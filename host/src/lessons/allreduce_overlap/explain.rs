//! What the numbers of allreduce-overlap mean, and the experiment behind it: probed runs
//! with an event around every bucket, so the backward and the all-reduces are each timed
//! while they overlap.
use super::{AllreduceOverlap, Reducer, ALL_REDUCE, BACKWARD, COPY_ENGINES, GREATEST, LEAST, MANY};
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
