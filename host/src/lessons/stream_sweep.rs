//! # How many streams? The chunked pipeline swept over K
//!
//! `overlap` splits an array into K chunks on K streams. More chunks shorten the pipeline's
//! fill and drain, but every chunk pays its own copy set-up and launch, and small chunks use
//! the copy engines and SMs less well: somewhere the two meet. This lesson runs the same
//! pipeline for K = 1, 2, 4, ... up to `--streams` and shows, for each K, the time, the bound
//! and how close the one gets to the other.
//!
//! The seed technique is the overlap lesson's (the CUDA C++ Best Practices Guide's staged
//! concurrent copy and execute) with K as a parameter, the usual way to pick the number of
//! streams for a given size and GPU:
//!
//! ```text
//! for (int K = 1; K <= 64; K *= 2) {
//!   for (int i = 0; i < K; ++i) { H2D(chunk i, s[i]); kernel<<<.., s[i]>>>(chunk i); D2H(chunk i, s[i]); }
//!   cudaDeviceSynchronize();
//! }
//! ```
//!
//! In Rust, for each K: `s.copy_to_device(input.slice(r)?, dev.slice(r)?)`,
//! `gpu.compute_chunk(s, &dev, r, iters)` and `s.copy_to_host(dev.slice(r)?, out.slice(r)?)`
//! for chunk r on its stream s, between a `fork` from stream 0 and a `join` back into it.
//! K = 1 is the version without (one stream, its phases H, C, D timed), the largest K the
//! version with, and the K between are the other versions.
//!
//! The bound, for each K: `T(K) = (H + C + D)/K + (K-1)/K * max(H, C, D)`
//! ([`pipeline_bound`]). Every K's output must be the one-stream output, bit for bit:
//! chunking changes when each element is computed, never from what.
use std::ops::Range;

use kernels_gpu::math::compute_element;
use serde::Serialize;

use crate::lab::harness::budget::{
    ensure_a_chunk_per_stream, CLEAR_SPEEDUP, MAX_ELEMENTS, MAX_STREAMS,
};
use crate::lab::harness::data::{chunk_ranges, ensure_bitwise_equal, random_inputs};
use crate::lab::kit::stream_pipeline::pipeline_bound;
use crate::lab::record::plot::{Plot, Series};
use crate::lab::{args, fixed, t, Checks, Lesson, Measured, Plan, Report, Sample, WorkModel};
use crate::runtime::stream::{fork, join};
use crate::runtime::{DeviceBuffer, Error, Event, Gpu, HostBuffer, Result, Stream};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Array size in floats [1..=4294967295]. Try 1048576 to see where more streams stop paying.
    #[arg(long, default_value_t = 16 << 20, value_parser = args::whole(1usize..=MAX_ELEMENTS))]
    pub elements: usize,
    /// The largest K [1..=64]: K = 1, 2, 4, ... below it, then K itself. Try 6 or 16.
    #[arg(long, default_value_t = 64, value_parser = args::whole(1usize..=MAX_STREAMS))]
    pub streams: usize,
    /// sin·cos steps per element [1..=100000]: more makes compute the slowest stage.
    #[arg(long, default_value_t = 100, value_parser = args::whole(1u32..=100_000))]
    pub iters: u32,
}

pub struct StreamSweep {
    iters: u32,
    /// Version v's K chunks, one per stream.
    chunks: Vec<Vec<Range<usize>>>,
    streams: Vec<Stream>,
    input: HostBuffer<f32>,
    out_one: HostBuffer<f32>,
    /// The K-stream versions write here (the checks run each once more, comparing as they go).
    out_many: HostBuffer<f32>,
    dev: DeviceBuffer<f32>,
    marks: [Event; 4],
    fork: Event,
    joins: Vec<Event>,
}

/// K = 1 on one stream, the baseline. The largest K follows it, then the Ks between,
/// ascending: [`version_streams`] gives each version's K.
pub const ONE_STREAM: usize = 0;

impl StreamSweep {
    /// Version `v`: chunk i of its K on stream i. Streams 1..K fork from stream 0 and join
    /// back into it, so the two timing events on stream 0 bracket every stream's work.
    fn chunked(&self, gpu: &Gpu, v: usize) -> Result<Sample> {
        let no_version = || Error::Internal(format!("{} has no version {v}", Self::NAME));
        let chunks = self.chunks.get(v).ok_or_else(no_version)?;
        let on: Vec<&Stream> = self.streams[..chunks.len()].iter().collect();
        let (first, rest) = (on[0], &on[1..]);
        let (start, stop) = (&self.marks[0], &self.marks[3]);
        start.record(first)?;
        fork(&self.fork, first, rest)?;
        for (s, r) in on.iter().zip(chunks) {
            s.copy_to_device(self.input.slice(r.clone())?, self.dev.slice(r.clone())?)?;
            gpu.compute_chunk(s, &self.dev, r.clone(), self.iters)?;
            s.copy_to_host(self.dev.slice(r.clone())?, self.out_many.slice(r.clone())?)?;
        }
        join(&self.joins, first, rest)?;
        stop.record(first)?;
        stop.synchronize()?;
        Ok(Sample::ms(stop.elapsed_ms(start)?))
    }

    /// K = 1: the whole array on stream 0, an event between phases (H, C, D for the bound).
    fn one_stream(&mut self, gpu: &Gpu) -> Result<Sample> {
        let s = &self.streams[0];
        let [m0, m1, m2, m3] = &self.marks;
        m0.record(s)?;
        s.copy_to_device(&self.input, &self.dev)?;
        m1.record(s)?;
        gpu.compute(s, &self.dev, self.iters)?;
        m2.record(s)?;
        s.copy_to_host(&self.dev, &self.out_one)?;
        m3.record(s)?;
        m3.synchronize()?;
        let (h, c, d) = (m1.elapsed_ms(m0)?, m2.elapsed_ms(m1)?, m3.elapsed_ms(m2)?);
        Ok(Sample::ms(h + c + d).part("H", h).part("C", c).part("D", d))
    }
}

impl Lesson for StreamSweep {
    const NAME: &'static str = "stream-sweep";
    const SUMMARY: &'static str =
        "the overlap pipeline for K = 1, 2, 4, ... 64 streams: time, bound, and the best K";
    type Args = Args;

    fn versions(a: &Args) -> Vec<String> {
        let rest = version_streams(a.streams).into_iter().skip(1);
        let rest = rest.map(|k| format!("K = {k}"));
        std::iter::once("K = 1, one stream".into()).chain(rest).collect()
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        ensure_a_chunk_per_stream(a.streams, a.elements)?;
        // Every version copies the whole array in and out and computes it once.
        let one_run = 2.0 * model.copy_ms(a.elements) + model.compute_ms(a.elements, a.iters);
        let runs = version_streams(a.streams).len() as f64;
        Ok(Plan::new()
            // The generated input, its pinned copy and the two pinned outputs.
            .host::<f32>(a.elements, 4)?
            .device::<f32>(a.elements, 1)?
            .work(runs * one_run, "--elements x --iters x --streams"))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<StreamSweep> {
        let n = a.elements;
        let (timed, event) = (|| Event::new(gpu), || Event::without_timing(gpu));
        Ok(StreamSweep {
            iters: a.iters,
            chunks: (version_streams(a.streams).into_iter()).map(|k| chunk_ranges(n, k)).collect(),
            streams: (0..a.streams)
                .map(|i| Stream::new(gpu, format!("sweep-{i}")))
                .collect::<Result<_>>()?,
            input: HostBuffer::pinned_from(gpu, &random_inputs(n, seed))?,
            out_one: HostBuffer::pinned(gpu, n)?,
            out_many: HostBuffer::pinned(gpu, n)?,
            dev: DeviceBuffer::zeroed(gpu, n)?,
            marks: [timed()?, timed()?, timed()?, timed()?],
            fork: event()?,
            joins: (1..a.streams).map(|_| event()).collect::<Result<_>>()?,
        })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        match v {
            ONE_STREAM => self.one_stream(gpu),
            // The largest K, then the K between 1 and it, ascending.
            _ => self.chunked(gpu, v),
        }
    }

    fn streams(&self) -> Vec<&Stream> {
        self.streams.iter().collect()
    }

    fn verify(&mut self, gpu: &Gpu, _m: &Measured, checks: &mut Checks) -> Result<()> {
        // The K-stream versions share one output: run each once more and compare it at once.
        let mut same = Ok(());
        for v in 1..self.chunks.len() {
            self.chunked(gpu, v)?;
            let what = format!("K = {} output vs one-stream output", self.chunks[v].len());
            same = same.and_then(|()| {
                ensure_bitwise_equal(&what, &self.out_many.read()?, &self.out_one.read()?)
            });
        }
        let (k_versions, n) = (self.chunks.len() - 1, self.input.len());
        let detail = t!("stream_sweep.same", k_versions, n);
        checks.record("every K == one stream, bit for bit", same.map(|()| detail));
        let (one, input) = (self.out_one.read()?, self.input.read()?);
        checks.approx("GPU vs CPU reference (approx)", &one, 4096, |i| {
            compute_element(input[i], self.iters)
        });
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        let ks: Vec<usize> = self.chunks.iter().map(Vec::len).collect();
        interpret(&ks, self.input.len(), m, r);
    }

    fn plot(&self, m: &Measured) -> Option<Plot> {
        sweep_plot(&self.chunks.iter().map(Vec::len).collect::<Vec<_>>(), m)
    }
}

/// The K of each version: 1 (one stream), the largest K, then the powers of two between.
/// With `max` 1 the second version is the K-stream code with K = 1.
pub fn version_streams(max: usize) -> Vec<usize> {
    let between = (1..).map(|p| 1usize << p).take_while(|&k| k < max);
    [1, max.max(1)].into_iter().chain(between).collect()
}

/// One K of the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    pub streams: usize,
    /// Median GPU time, and the bound from the one-stream phases.
    pub ms: f64,
    pub bound_ms: f64,
    pub measured_over_bound: f64,
}

/// One row per K, ascending, from the versions of `ks` (K = 1 from the one-stream version).
pub fn rows(ks: &[usize], m: &Measured) -> Vec<SweepRow> {
    let one = m.without();
    let (h, c, d) = (one.part("H"), one.part("C"), one.part("D"));
    let mut rows: Vec<SweepRow> = (ks.iter().zip(&m.versions).enumerate())
        // With --streams 1 the second version is K = 1 again: one row per K.
        .filter(|&(i, (&k, _))| i == 0 || k > 1)
        .map(|(_, (&k, v))| {
            let (ms, bound_ms) = (v.time.median, pipeline_bound(h, c, d, k));
            SweepRow { streams: k, ms, bound_ms, measured_over_bound: ms / bound_ms }
        })
        .collect();
    rows.sort_by_key(|r| r.streams);
    rows
}

/// The row with the smallest time.
pub fn best(rows: &[SweepRow]) -> Option<&SweepRow> {
    rows.iter().min_by(|a, b| a.ms.total_cmp(&b.ms))
}

/// Median time and bound against K, K on a log axis; None with one K (no sweep to draw).
pub fn sweep_plot(ks: &[usize], m: &Measured) -> Option<Plot> {
    let rows = rows(ks, m);
    let line = |y: fn(&SweepRow) -> f64| rows.iter().map(|r| (r.streams as f64, y(r))).collect();
    let measured = Series::measured("measured", line(|r| r.ms));
    let series = vec![measured, Series::model("bound T(K)", line(|r| r.bound_ms))];
    let title = "stream-sweep: time and bound against K";
    (rows.len() > 1).then(|| Plot::lines(title, "streams K", "ms", true, series))
}

/// The figures and what they mean, for the versions of `ks` over `n` elements.
pub fn interpret(ks: &[usize], n: usize, m: &Measured, r: &mut Report) {
    let rows = rows(ks, m);
    let (Some(top), Some(first), Some(last)) = (best(&rows), rows.first(), rows.last()) else {
        return;
    };
    for row in &rows {
        let k = row.streams;
        r.figure(&format!("K = {k}: bound"), row.bound_ms, "ms").figure(
            &format!("K = {k}: measured / bound"),
            row.measured_over_bound,
            "x",
        );
    }
    r.figure("best K", top.streams as f64, "streams")
        .figure("best time", top.ms, "ms")
        .detail("rows", &rows);
    let (one, gain) = (first.ms, first.ms / top.ms);
    let clear = top.streams > 1 && gain >= CLEAR_SPEEDUP;
    let (best, last_k, best_x, last_x) = (
        top.streams,
        last.streams,
        fixed(top.measured_over_bound, 2),
        fixed(last.measured_over_bound, 2),
    );
    let [one, best_ms, last_ms, last_bound, k_code] =
        [one, top.ms, last.ms, last.bound_ms, m.with().time.median].map(|v| fixed(v, 3));
    if rows.len() == 1 {
        r.explain(t!("stream_sweep.no_sweep", one, x = best_x, k_code));
    } else if !clear {
        r.explain(t!("stream_sweep.no_help", one, best, best_ms, last_bound, last_k));
        r.explain(t!("stream_sweep.no_best", pct = fixed((CLEAR_SPEEDUP - 1.0) * 100.0, 0)));
    } else {
        r.explain(t!(
            "stream_sweep.fastest",
            best,
            best_ms,
            one,
            gain = fixed(gain, 2),
            x = best_x
        ));
        r.explain(if top.streams == last.streams {
            t!("stream_sweep.still_falling", last_k, chunk = n / last.streams)
        } else {
            t!("stream_sweep.turned", best, last_k, last_ms, best_ms, x = last_x)
        });
    }
    r.explain(t!("stream_sweep.depends"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

    #[test]
    fn versions_are_one_stream_the_largest_k_then_the_powers_of_two_between() {
        assert_eq!(version_streams(64), vec![1, 64, 2, 4, 8, 16, 32]);
        assert_eq!(version_streams(6), vec![1, 6, 2, 4]);
        assert_eq!(version_streams(2), vec![1, 2]);
        // One stream still has two versions: the one-stream code and the K-stream code.
        assert_eq!(version_streams(1), vec![1, 1]);
        let names = StreamSweep::versions(&args_from::<StreamSweep>(&["--streams", "6"]).unwrap());
        assert_eq!(names, ["K = 1, one stream", "K = 6", "K = 2", "K = 4"]);
    }

    // What the flag checks refuse is tested in tests/stream_sweep.rs.

    /// Versions of `ks` timed `ms`; the one-stream phases are H = 1, C = 2, D = 1 ms.
    fn measured(ks: &[usize], ms: &[f64]) -> Measured {
        let runs = (ms.iter().enumerate())
            .map(|(i, &t)| match i {
                0 => vec![Sample::ms(t).part("H", 1.0).part("C", 2.0).part("D", 1.0)],
                _ => vec![Sample::ms(t)],
            })
            .collect();
        Measured::from_samples(ks.iter().map(|k| format!("K = {k}")).collect(), runs)
    }

    fn report(ks: &[usize], ms: &[f64]) -> Report {
        let mut r = Report::new("stream-sweep", "", "");
        interpret(ks, 1 << 20, &measured(ks, ms), &mut r);
        r
    }

    #[test]
    fn rows_are_ascending_with_their_bounds_and_the_best_is_the_fastest() {
        let m = measured(&[1, 8, 2, 4], &[4.0, 2.5, 3.0, 2.4]);
        let sorted = rows(&[1, 8, 2, 4], &m);
        let ks: Vec<usize> = sorted.iter().map(|r| r.streams).collect();
        assert_eq!(ks, [1, 2, 4, 8]);
        assert_eq!(sorted[0].bound_ms, 4.0);
        assert!((sorted[3].bound_ms - 2.25).abs() < 1e-12);
        assert_eq!(best(&sorted).map(|r| r.streams), Some(4));
        assert!(best(&[]).is_none());
        // --streams 1: the second version is K = 1 again, one row.
        assert_eq!(rows(&[1, 1], &measured(&[1, 1], &[4.0, 4.1])).len(), 1);
    }

    #[test]
    fn the_interpretation_follows_the_measured_times() {
        let one = report(&[1, 1], &[4.0, 4.1]);
        assert!(one.interpretation[0].contains("no sweep"), "{one:?}");
        assert!(one.interpretation[0].contains("4.100 ms through the K-stream code"));
        assert_eq!(one.value("best K"), Some(1.0));

        let none = report(&[1, 4, 2], &[4.0, 3.9, 3.8]);
        assert!(none.interpretation[0].starts_with("More streams did not help"));
        assert!(none.interpretation[1].contains("no best K is claimed"));

        let falling = report(&[1, 8, 2, 4], &[4.0, 2.3, 3.0, 2.5]);
        assert!(falling.interpretation[0].contains("K = 8 was fastest"));
        assert!(falling.interpretation[1].starts_with("The time was still falling"));
        assert_eq!(falling.value("K = 8: measured / bound"), Some(2.3 / 2.25));

        let turned = report(&[1, 8, 2, 4], &[4.0, 3.0, 3.0, 2.4]);
        assert!(turned.interpretation[1].starts_with("Beyond K = 4 more streams did not pay"));
        assert!(!turned.interpretation.iter().any(|l| l.contains("still falling")));
        assert_eq!(turned.value("best time"), Some(2.4));
    }

    #[test]
    fn the_plot_is_the_median_time_and_the_bound_against_k() {
        let ks = [1, 8, 2, 4];
        let plot = sweep_plot(&ks, &measured(&ks, &[4.0, 2.5, 3.0, 2.4])).unwrap();
        let Plot::Lines { log_x: true, log_y: false, series, .. } = &plot else {
            panic!("not lines against a log K axis: {plot:?}")
        };
        let at_k = |ms: [f64; 4]| [1.0, 2.0, 4.0, 8.0].into_iter().zip(ms).collect();
        assert_eq!(series[0], Series::measured("measured", at_k([4.0, 3.0, 2.4, 2.5])));
        // T(K) with H = 1, C = 2, D = 1: 4/K + (K-1)/K * 2.
        assert_eq!(series[1], Series::model("bound T(K)", at_k([4.0, 3.0, 2.5, 2.25])));
        assert_eq!(series.len(), 2);
        // --streams 1: one K, nothing to plot.
        assert_eq!(sweep_plot(&[1, 1], &measured(&[1, 1], &[4.0, 4.1])), None);
    }

    #[test]
    fn the_plot_draws_as_well_formed_svg() {
        let ks = [1, 8, 2, 4];
        let plot = sweep_plot(&ks, &measured(&ks, &[4.0, 2.5, 3.0, 2.4])).unwrap();
        let svg = crate::lab::record::plot::svg(&plot, "footer").unwrap();
        let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
        let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).map(str::trim).collect();
        for want in ["stream-sweep: time and bound against K", "measured", "bound T(K)", "footer"] {
            assert!(texts.contains(&want), "{want} missing in {texts:?}");
        }
        // A marker per measured K and the legend's measured line, none on the bound.
        assert_eq!(svg.matches("<circle").count(), 4 + 1);
    }
}
