//! # Chunked multi-stream overlap
//!
//! The concept: a GPU has copy engines and compute units that can work at the same time, but
//! one stream runs its work in order: copy in, compute, copy out, each waiting for the last.
//! Split the array into K chunks and give each chunk its own stream, and chunk 2 is copied
//! in while chunk 1 computes and chunk 0 is copied out.
//!
//! The seed technique is the "staged concurrent copy and execute" of NVIDIA's CUDA C++
//! Programming Guide and the `processChunk` example of stream tutorials:
//!
//! ```text
//! for (int i = 0; i < K; ++i) {
//!   cudaMemcpyAsync(d + off[i], h + off[i], bytes[i], cudaMemcpyHostToDevice, s[i]);
//!   processChunk<<<grid[i], 256, 0, s[i]>>>(d, off[i], len[i], iters);
//!   cudaMemcpyAsync(out + off[i], d + off[i], bytes[i], cudaMemcpyDeviceToHost, s[i]);
//! }
//! ```
//!
//! With H, C and D the whole array's copy-in, compute and copy-out times, the pipeline's best
//! is `T(K) = (H + C + D)/K + (K-1)/K * max(H, C, D)`: one chunk's full trip, then the
//! slowest stage for the remaining K-1 chunks.
use std::ops::Range;

use cust::memory::{DeviceBuffer, LockedBuffer};
use kernels_gpu::math::compute_element;

use crate::data::{ensure_bitwise_equal, ensure_close_to_reference, random_inputs};
use crate::demos::{buffer_bytes, check_elements, ensure_host_memory, Options, MAX_ELEMENTS};
use crate::error::{ensure, Result};
use crate::gpu::Gpu;
use crate::memory::{device, pinned, pinned_from};
use crate::report::Report;
use crate::stream::{drain_on_error, Event, Stream};
use crate::timeline::Timeline;
use crate::timing::{interleaved, Stats};

pub const SUMMARY: &str =
    "one stream vs K streams each copying in, computing and copying out its chunk";
pub const FLAGS: &str = "--elements (16777216) --streams (8) --iters (100) --reps --timeline";

pub const DEFAULT_ELEMENTS: usize = 16 << 20;
pub const DEFAULT_STREAMS: usize = 8;
pub const DEFAULT_ITERS: u32 = 100;
pub use crate::demos::MAX_STREAMS;

/// `k` contiguous ranges covering `0..n`, as even as possible; when `k` does not divide `n`
/// the first `n % k` chunks get one more element, so the last chunk is the shorter one.
pub fn chunk_ranges(n: usize, k: usize) -> Vec<Range<usize>> {
    let (base, extra) = (n / k, n % k);
    let mut start = 0;
    (0..k)
        .map(|i| {
            let len = base + usize::from(i < extra);
            let r = start..start + len;
            start += len;
            r
        })
        .collect()
}

/// The pipeline bound `T(K) = (H + C + D)/K + (K-1)/K * max(H, C, D)`.
pub fn pipeline_bound(h: f64, c: f64, d: f64, k: usize) -> f64 {
    let k = k as f64;
    (h + c + d) / k + (k - 1.0) / k * h.max(c).max(d)
}

/// Checks sizes without a GPU: element and stream counts, and host memory for the input and
/// the two pinned outputs.
pub fn check_sizes(n: usize, k: usize) -> Result<()> {
    check_elements(n, MAX_ELEMENTS)?;
    ensure((1..=MAX_STREAMS).contains(&k), || {
        format!("--streams must be from 1 to {MAX_STREAMS}, not {k}")
    })?;
    ensure(k <= n, || {
        format!(
            "--streams {k} is more than --elements {n}: every stream needs at least one element"
        )
    })?;
    // The input is generated in a Vec and copied to pinned memory, plus two pinned outputs.
    ensure_host_memory(
        buffer_bytes::<f32>(n, 4)?,
        &format!("an array of {n} floats"),
    )
}

/// Checks the flags this demo reads, before the GPU is touched.
pub fn check_options(opts: &Options) -> Result<()> {
    check_sizes(
        opts.elements.unwrap_or(DEFAULT_ELEMENTS),
        opts.streams.unwrap_or(DEFAULT_STREAMS),
    )
}

/// Validates sizes before anything is allocated, device memory included.
pub fn validate(gpu: &Gpu, n: usize, k: usize) -> Result<()> {
    check_sizes(n, k)?;
    gpu.ensure_device_memory(
        buffer_bytes::<f32>(n, 1)?,
        &format!("an array of {n} floats"),
    )
}

/// The copy-in, compute and copy-out times of the one-stream version, in ms.
#[derive(Debug, Clone, Copy)]
pub struct Phases {
    pub h: f64,
    pub c: f64,
    pub d: f64,
}

impl Phases {
    pub fn total(&self) -> f64 {
        self.h + self.c + self.d
    }
}

/// Everything both versions need, allocated once so that no allocation (which synchronizes
/// the device) happens inside a timed region.
pub struct Overlap {
    pub n: usize,
    pub iters: u32,
    pub chunks: Vec<Range<usize>>,
    pub streams: Vec<Stream>,
    pub input: LockedBuffer<f32>,
    /// Result of the one-stream version.
    pub out_one: LockedBuffer<f32>,
    /// Result of the K-stream version.
    pub out_multi: LockedBuffer<f32>,
    dev: DeviceBuffer<f32>,
    marks: [Event; 4],
    fork: Event,
    joins: Vec<Event>,
}

impl Overlap {
    pub fn new(gpu: &Gpu, n: usize, k: usize, iters: u32, seed: u64) -> Result<Overlap> {
        validate(gpu, n, k)?;
        let streams = (0..k)
            .map(|i| Stream::new(format!("overlap-{i}")))
            .collect::<Result<Vec<_>>>()?;
        Ok(Overlap {
            n,
            iters,
            chunks: chunk_ranges(n, k),
            input: pinned_from(&random_inputs(n, seed))?,
            out_one: pinned(n)?,
            out_multi: pinned(n)?,
            dev: device(n)?,
            marks: [Event::new()?, Event::new()?, Event::new()?, Event::new()?],
            fork: Event::without_timing()?,
            joins: (1..k)
                .map(|_| Event::without_timing())
                .collect::<Result<Vec<_>>>()?,
            streams,
        })
    }

    /// The whole array on stream 0: copy in, compute, copy out, with an event between phases.
    pub fn run_one_stream(&mut self, gpu: &Gpu) -> Result<Phases> {
        let s = &self.streams[0];
        let [m0, m1, m2, m3] = &self.marks;
        let (input, out, dev) = (&self.input, &mut self.out_one, &self.dev);
        drain_on_error(|| {
            m0.record(s)?;
            // SAFETY: `input` and `out_one` are owned by `self`, held by this `&mut self`
            // call until the synchronize below (or, on an error, drain_on_error's) returns.
            unsafe { s.copy_to_device(input, dev)? };
            m1.record(s)?;
            gpu.compute(s, dev, self.iters)?;
            m2.record(s)?;
            // SAFETY: as above.
            unsafe { s.copy_to_host(dev, out)? };
            m3.record(s)?;
            m3.synchronize()
        })?;
        Ok(Phases {
            h: m1.elapsed_ms(m0)?,
            c: m2.elapsed_ms(m1)?,
            d: m3.elapsed_ms(m2)?,
        })
    }

    /// Chunk i on stream i: copy in, `chunk_kernel`, copy out. Streams 1..K wait for a fork
    /// event on stream 0 and stream 0 joins them all, so the two timing events on stream 0
    /// bracket every stream's work. Returns the GPU time in ms.
    pub fn run_multi_stream(&mut self, gpu: &Gpu) -> Result<f64> {
        let first = &self.streams[0];
        let (start, stop) = (&self.marks[0], &self.marks[3]);
        let (input, out, dev) = (&self.input, &mut self.out_multi, &self.dev);
        drain_on_error(|| {
            start.record(first)?;
            self.fork.record(first)?;
            for s in &self.streams[1..] {
                s.wait_event(&self.fork)?;
            }
            for (s, range) in self.streams.iter().zip(&self.chunks) {
                // SAFETY: the chunks are disjoint ranges of `input`/`out_multi`, owned by
                // `self` and held by this `&mut self` call until the synchronize below (or,
                // on an error, drain_on_error's) returns.
                unsafe { s.copy_to_device(&input[range.clone()], &dev.index(range.clone()))? };
                gpu.compute_chunk(s, dev, range.clone(), self.iters)?;
                // SAFETY: as above.
                unsafe { s.copy_to_host(&dev.index(range.clone()), &mut out[range.clone()])? };
            }
            for (s, join) in self.streams[1..].iter().zip(&self.joins) {
                join.record(s)?;
                first.wait_event(join)?;
            }
            stop.record(first)?;
            stop.synchronize()
        })?;
        stop.elapsed_ms(start)
    }

    /// Bit-for-bit equality of the two versions' outputs.
    pub fn check_bitwise(&self) -> Result<String> {
        ensure_bitwise_equal(
            "K-stream vs one-stream output",
            &self.out_multi,
            &self.out_one,
        )?;
        Ok(format!("all {} elements identical", self.n))
    }

    /// The K-stream output against the CPU running the same `compute_element`.
    pub fn check_reference(&self, samples: usize) -> Result<String> {
        let checked =
            ensure_close_to_reference("K-stream output vs CPU", &self.out_multi, samples, |i| {
                compute_element(self.input[i], self.iters)
            })?;
        Ok(format!("{checked} sampled elements within tolerance"))
    }

    /// One more K-stream run with a timeline attached to every stream.
    pub fn timeline(&mut self, gpu: &Gpu) -> Result<String> {
        let timeline = Timeline::attach(&self.streams.iter().collect::<Vec<_>>());
        let run = self.run_multi_stream(gpu).map(drop);
        timeline.finish(
            &self.streams.iter().collect::<Vec<_>>(),
            run,
            &self.marks[0],
        )
    }
}

/// Measurements of both versions, `reps` times each after one warm-up, interleaved so that
/// clock or thermal drift affects both alike.
pub struct Measured {
    pub one: Stats,
    pub multi: Stats,
    pub phases: Phases,
}

pub fn measure(gpu: &Gpu, o: &mut Overlap, reps: usize) -> Result<Measured> {
    let (one, multi) = interleaved(
        o,
        reps,
        |o| o.run_one_stream(gpu),
        |o| o.run_multi_stream(gpu),
    )?;
    Ok(Measured {
        one: Stats::of_each(&one, Phases::total),
        multi: Stats::of(&multi),
        phases: Phases {
            h: Stats::of_each(&one, |p| p.h).median,
            c: Stats::of_each(&one, |p| p.c).median,
            d: Stats::of_each(&one, |p| p.d).median,
        },
    })
}

pub fn run(gpu: &Gpu, opts: &Options) -> Result<Report> {
    let n = opts.elements.unwrap_or(DEFAULT_ELEMENTS);
    let k = opts.streams.unwrap_or(DEFAULT_STREAMS);
    let iters = opts.iters.unwrap_or(DEFAULT_ITERS);
    let mut o = Overlap::new(gpu, n, k, iters, opts.seed)?;
    let m = measure(gpu, &mut o, opts.reps)?;
    let bound = pipeline_bound(m.phases.h, m.phases.c, m.phases.d, k);

    let mut r = Report::new("overlap", "chunked multi-stream overlap", &gpu.info.name);
    r.param("elements", n)
        .param("streams", k)
        .param("iters", iters)
        .param("reps", opts.reps);
    r.figure("H: copy-in, whole array, one stream", m.phases.h, "ms")
        .figure("C: compute, whole array, one stream", m.phases.c, "ms")
        .figure("D: copy-out, whole array, one stream", m.phases.d, "ms")
        .figure("one stream (H + C + D), median", m.one.median, "ms")
        .figure(&format!("{k} streams, median"), m.multi.median, "ms")
        .figure("speed-up", m.one.median / m.multi.median, "x")
        .figure("bound T(K)", bound, "ms")
        .figure("measured / bound", m.multi.median / bound, "x");
    r.detail("one_stream_ms", m.one)
        .detail("multi_stream_ms", m.multi);
    if opts.timeline {
        r.timeline = Some(o.timeline(gpu)?);
    }
    r.check("async == sync, bit for bit", o.check_bitwise());
    r.check("GPU vs CPU reference (approx)", o.check_reference(4096));
    let slowest = [
        ("copy-in", m.phases.h),
        ("compute", m.phases.c),
        ("copy-out", m.phases.d),
    ]
    .into_iter()
    .max_by(|a, b| a.1.total_cmp(&b.1))
    .map(|(name, _)| name)
    .unwrap_or("compute");
    let speedup = m.one.median / m.multi.median;
    r.explain(format!(
        "One stream runs H, C and D back to back ({:.3} ms): each stage waits for the one before.",
        m.one.median
    ));
    if k == 1 {
        r.explain("With --streams 1 there is nothing to overlap: both versions do the same work in the same order, and the bound is the plain sum. Try --streams 8.");
    } else if speedup > 1.0 {
        r.explain(format!(
            "With {k} streams the copy engines move chunk i+1 in and chunk i-1 out while chunk i computes: {:.3} ms, {speedup:.2}x faster.",
            m.multi.median
        ));
        r.explain(format!(
            "The slowest stage ({slowest}) sets the pace: the bound is one chunk's full trip plus {}/{k} of the slowest stage, {bound:.3} ms; the measured time is {:+.1}% from it.",
            k - 1,
            (m.multi.median / bound - 1.0) * 100.0
        ));
    } else {
        r.explain(format!(
            "Here {k} streams were not faster ({:.3} ms against {:.3}): with chunks of about {} elements, each copy's and launch's fixed cost outweighs what overlap hides (bound {bound:.3} ms). Try more --elements or fewer --streams.",
            m.multi.median,
            m.one.median,
            n / k
        ));
    }
    r.explain(
        "`streamlab run stream-sweep` measures this for K = 1, 2, 4, ... 64 and finds the best K.",
    );
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_everything_once_with_the_last_shorter() {
        for (n, k) in [(10, 4), (16, 8), (7, 7), (1, 1), (1000, 64), (65, 64)] {
            let c = chunk_ranges(n, k);
            assert_eq!(c.len(), k);
            assert_eq!(c[0].start, 0);
            assert_eq!(c[k - 1].end, n);
            assert!(c.windows(2).all(|w| w[0].end == w[1].start));
            assert!(c.iter().all(|r| !r.is_empty()));
            assert!(c.iter().all(|r| r.len() >= c[k - 1].len()));
        }
        assert_eq!(chunk_ranges(10, 4), vec![0..3, 3..6, 6..8, 8..10]);
    }

    #[test]
    fn bound_matches_the_formula() {
        // One stream: the bound is the plain sum.
        assert_eq!(pipeline_bound(1.0, 2.0, 1.0, 1), 4.0);
        // 8 streams: 4/8 + 7/8 * 2.
        assert!((pipeline_bound(1.0, 2.0, 1.0, 8) - 2.25).abs() < 1e-12);
        // Many streams approach the slowest stage.
        assert!((pipeline_bound(1.0, 2.0, 1.0, 1_000_000) - 2.0).abs() < 1e-5);
    }
}
