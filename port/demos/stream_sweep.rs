//! # How many streams? The overlap demo swept over K
//!
//! The concept: the `overlap` demo splits an array into K chunks on K streams. More chunks
//! shorten the pipeline's fill and drain (the bound `T(K) = (H + C + D)/K + (K-1)/K · max(H,
//! C, D)` falls towards the slowest stage), but every chunk costs its own copy set-up and
//! launch, and small chunks use the copy engines and SMs less well. Somewhere the two meet:
//! this demo runs the very same code (`crate::demos::overlap`) for K = 1, 2, 4, … up to
//! `--streams` and shows, for each K, the time, the bound and how close the one gets to the
//! other.
//!
//! The seed technique is the overlap demo's (the CUDA C++ Programming Guide's staged
//! concurrent copy and execute) with K as a parameter, the usual way to pick the number of
//! streams for a given size and GPU; in CUDA C++:
//!
//! ```text
//! for (int K = 1; K <= 64; K *= 2) {
//!   for (int i = 0; i < K; ++i) { H2D(chunk i, s[i]); kernel<<<.., s[i]>>>(chunk i); D2H(chunk i, s[i]); }
//!   cudaDeviceSynchronize();
//! }
//! ```
//!
//! Every K's output must be the one-stream output, bit for bit: chunking changes when each
//! element is computed, never what it is computed from.
use serde::Serialize;

use crate::data::ensure_bitwise_equal;
use crate::demos::compute_transfer::CLEAR_SPEEDUP;
use crate::demos::estimate::{ensure_bounded, WorkModel};
use crate::demos::overlap::{self, measure, pipeline_bound, Overlap};
use crate::demos::{buffer_bytes, ensure_host_memory, Options};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::report::Report;

pub const SUMMARY: &str =
    "the overlap demo for K = 1, 2, 4, ... 64 streams: time, bound, and the best K";
pub const FLAGS: &str =
    "--elements (16777216) --iters (100) --streams (64: the largest K) --reps (at most 5 here) --timeline";

pub const DEFAULT_MAX_STREAMS: usize = overlap::MAX_STREAMS;
/// Each K repeats the overlap demo's measurement; fewer repeats keep the sweep short.
pub const MAX_REPS: usize = 5;

/// The stream counts of a sweep up to `max`: the powers of two below it, and `max` itself.
pub fn stream_counts(max: usize) -> Vec<usize> {
    let mut counts: Vec<usize> = std::iter::successors(Some(1usize), |k| k.checked_mul(2))
        .take_while(|&k| k < max)
        .collect();
    if max >= 1 {
        counts.push(max);
    }
    counts
}

/// One K of the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct SweepRow {
    pub streams: usize,
    /// Median GPU time of the K-stream version.
    pub ms: f64,
    /// The pipeline bound from the one-stream phases measured alongside.
    pub bound_ms: f64,
    pub measured_over_bound: f64,
    /// The one-stream time measured alongside (the same for every K, up to noise).
    pub one_stream_ms: f64,
}

/// What a sweep found.
pub struct Sweep {
    pub rows: Vec<SweepRow>,
    /// Every K's output vs the first one-stream output (and each K's own one-stream output).
    pub bitwise: Result<String>,
    /// The one-stream output against the CPU.
    pub vs_cpu: Result<String>,
}

/// The row with the smallest time.
pub fn best(rows: &[SweepRow]) -> Option<&SweepRow> {
    rows.iter().min_by(|a, b| a.ms.total_cmp(&b.ms))
}

/// Checks the flags without a GPU: the overlap demo's own checks for the largest K (element
/// and stream counts, its host memory), host memory for the reference output kept across
/// the sweep, and the work of one repeat under `model`: for every K, a one-stream and a
/// K-stream run of the whole array.
pub fn check_sizes(n: usize, max: usize, iters: u32, model: &WorkModel) -> Result<()> {
    overlap::check_sizes(n, max)?;
    let one_run = 2.0 * model.copy_ms(n) + model.compute_ms(n, iters);
    ensure_bounded(
        "stream-sweep",
        2.0 * stream_counts(max).len() as f64 * one_run,
        &format!("--elements {n} x --iters {iters} over K = 1 to {max}"),
    )?;
    // The overlap demo's four arrays plus the reference output.
    ensure_host_memory(
        buffer_bytes::<f32>(n, 5)?,
        &format!("a sweep over {n} floats"),
    )
}

/// Checks the flags this demo reads, before the GPU is touched.
pub fn check_options(opts: &Options) -> Result<()> {
    check_sizes(
        opts.elements.unwrap_or(overlap::DEFAULT_ELEMENTS),
        opts.streams.unwrap_or(DEFAULT_MAX_STREAMS),
        opts.iters.unwrap_or(overlap::DEFAULT_ITERS),
        &WorkModel::H100,
    )
}

/// The same checks for the GPU present, plus its free device memory (the overlap demo's
/// one array).
pub fn validate(gpu: &Gpu, n: usize, max: usize, iters: u32) -> Result<()> {
    check_sizes(n, max, iters, &WorkModel::for_gpu(gpu))?;
    gpu.ensure_device_memory(
        buffer_bytes::<f32>(n, 1)?,
        &format!("an array of {n} floats"),
    )
}

/// The sweep: for each K a fresh [`Overlap`] (same seed, so the same input; its streams and
/// chunks are fixed at creation, so it is not reused across K), measured with the overlap
/// demo's own `measure`, each K's output compared bit for bit with the first one-stream
/// output.
pub fn sweep(gpu: &Gpu, n: usize, max: usize, iters: u32, reps: usize, seed: u64) -> Result<Sweep> {
    validate(gpu, n, max, iters)?;
    let mut rows = Vec::new();
    let mut reference: Option<Vec<f32>> = None;
    let mut bitwise = Ok(String::new());
    let mut vs_cpu = Ok(String::new());
    for k in stream_counts(max) {
        let mut o = Overlap::new(gpu, n, k, iters, seed)?;
        let m = measure(gpu, &mut o, reps)?;
        let bound = pipeline_bound(m.phases.h, m.phases.c, m.phases.d, k);
        rows.push(SweepRow {
            streams: k,
            ms: m.multi.median,
            bound_ms: bound,
            measured_over_bound: m.multi.median / bound,
            one_stream_ms: m.one.median,
        });
        if reference.is_none() {
            // The first K: its own one-stream output is the reference, checked once
            // against the CPU.
            vs_cpu = o.check_reference(4096);
            reference = Some(o.out_one.to_vec());
        }
        if bitwise.is_ok() {
            let one = reference.as_deref().unwrap_or(&[]);
            bitwise = ensure_bitwise_equal(
                &format!("{k}-stream output vs one-stream output"),
                &o.out_multi,
                one,
            )
            .and_then(|_| o.check_bitwise());
        }
    }
    let bitwise = bitwise.map(|_| {
        format!(
            "{} stream counts, all {n} elements identical to the one-stream output",
            rows.len()
        )
    });
    Ok(Sweep {
        rows,
        bitwise,
        vs_cpu,
    })
}

pub fn run(gpu: &Gpu, opts: &Options) -> Result<Report> {
    let n = opts.elements.unwrap_or(overlap::DEFAULT_ELEMENTS);
    let iters = opts.iters.unwrap_or(overlap::DEFAULT_ITERS);
    let max = opts.streams.unwrap_or(DEFAULT_MAX_STREAMS);
    let reps = opts.reps.clamp(1, MAX_REPS);
    let Sweep {
        rows,
        bitwise,
        vs_cpu,
    } = sweep(gpu, n, max, iters, reps, opts.seed)?;
    let top = best(&rows)
        .cloned()
        // `stream_counts` always holds K = 1.
        .ok_or_else(|| Error::Internal("the sweep measured no stream count".into()))?;

    let mut r = Report::new(
        "stream-sweep",
        "the overlap demo swept over the number of streams",
        &gpu.info.name,
    );
    r.param("elements", n)
        .param("iters", iters)
        .param("max_streams", max)
        .param("reps", reps);
    if let Some(first) = rows.first() {
        r.figure("one stream (H + C + D), median", first.one_stream_ms, "ms");
    }
    for row in &rows {
        let k = row.streams;
        r.figure(&format!("K = {k}: time"), row.ms, "ms")
            .figure(&format!("K = {k}: bound"), row.bound_ms, "ms")
            .figure(
                &format!("K = {k}: measured / bound"),
                row.measured_over_bound,
                "x",
            );
    }
    r.figure("best K", top.streams as f64, "streams")
        .figure("best time", top.ms, "ms");
    r.detail("rows", &rows);
    if opts.timeline {
        let mut o = Overlap::new(gpu, n, top.streams, iters, opts.seed)?;
        r.timeline = Some(o.timeline(gpu)?);
    }
    r.check("every K == one stream, bit for bit", bitwise);
    r.check("GPU vs CPU reference (approx)", vs_cpu);
    let last = rows.last().unwrap_or(&top);
    let one = rows.first().map_or(top.ms, |row| row.ms);
    let gain = one / top.ms;
    let clear = top.streams > 1 && gain >= CLEAR_SPEEDUP;
    if rows.len() == 1 {
        r.explain(format!(
            "With --streams 1 there is no sweep: only K = 1 ran ({one:.3} ms, {:.2}x its bound, the plain sum H + C + D). Use --streams 2 or more (default {DEFAULT_MAX_STREAMS}) to compare stream counts.",
            top.measured_over_bound
        ));
    } else {
        r.explain(if !clear {
            format!(
                "More streams did not help here: one stream took {one:.3} ms and the fastest K ({}) {:.3} ms, although the bound falls to {:.3} ms at K = {}: what the bound leaves out (each chunk's fixed copy and launch costs, or copies that do not overlap kernels on this GPU) outweighs the overlap at this size.",
                top.streams, top.ms, last.bound_ms, last.streams
            )
        } else {
            format!(
                "The bound falls with K towards the slowest stage; measured, K = {} was fastest: {:.3} ms against {one:.3} ms on one stream ({gain:.2}x), {:.2}x its bound.",
                top.streams, top.ms, top.measured_over_bound
            )
        });
        r.explain(if !clear {
            format!(
                "No K beat one stream by {:.0}% or more, so no best K is claimed at this size (the best figure above may be noise).",
                (CLEAR_SPEEDUP - 1.0) * 100.0
            )
        } else if top.streams == last.streams {
            format!(
                "The time was still falling at the largest K tried ({}): chunks of {} elements are still large enough that each copy's and launch's fixed cost stays small; smaller --elements or more streams show where it turns.",
                last.streams,
                n / last.streams
            )
        } else {
            format!(
                "Beyond K = {} more streams did not pay: at K = {} the time is {:.3} ms (best {:.3} ms), {:.2}x its bound; smaller chunks pay each copy's and launch's fixed cost more often.",
                top.streams, last.streams, last.ms, top.ms, last.measured_over_bound
            )
        });
    }
    r.explain("The best K depends on the size, the iteration count and the GPU: rerun with other --elements and --iters to see it move.");
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demos::testing::refusal;

    #[test]
    fn counts_are_powers_of_two_then_the_maximum() {
        assert_eq!(stream_counts(64), vec![1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(stream_counts(1), vec![1]);
        assert_eq!(stream_counts(6), vec![1, 2, 4, 6]);
        assert_eq!(stream_counts(2), vec![1, 2]);
    }

    #[test]
    fn best_is_the_fastest_row() {
        let row = |k, ms| SweepRow {
            streams: k,
            ms,
            bound_ms: 1.0,
            measured_over_bound: ms,
            one_stream_ms: 9.0,
        };
        let rows = [row(1, 9.0), row(8, 4.0), row(64, 5.0)];
        assert_eq!(best(&rows).map(|r| r.streams), Some(8));
        assert!(best(&[]).is_none());
    }

    fn opts(elements: usize, streams: usize, iters: u32) -> Options {
        Options {
            elements: Some(elements),
            streams: Some(streams),
            iters: Some(iters),
            ..Options::default()
        }
    }

    #[test]
    fn options_accept_the_defaults_and_refuse_hostile_flags() {
        check_options(&Options::default()).unwrap();
        // One stream is allowed: the report says there is no sweep.
        check_options(&opts(1, 1, 0)).unwrap();
        assert!(refusal(check_options, &opts(1 << 20, 0, 100)).contains("--streams"));
        assert!(refusal(check_options, &opts(1 << 20, 65, 100)).contains("--streams"));
        assert!(refusal(check_options, &opts(4, 8, 100))
            .contains("--streams 8 is more than --elements 4"));
        assert!(refusal(check_options, &opts(0, 8, 100)).contains("--elements"));
        assert!(refusal(check_options, &opts(usize::MAX, 8, 100)).contains("--elements"));
        // 16M elements x 2^32 iterations, seven times over.
        assert!(refusal(check_options, &opts(1 << 24, 64, u32::MAX)).contains("estimated"));
    }
}
