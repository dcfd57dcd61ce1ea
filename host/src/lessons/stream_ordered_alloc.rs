//! # Stream-ordered allocation
//!
//! `cudaFree` waits until the whole device is idle, so a temporary buffer allocated and freed
//! inside a loop over K streams drains every stream at every free: the streams run one chunk
//! at a time. `cudaMallocAsync` / `cudaFreeAsync` are operations in one stream's queue, served
//! from the device's memory pool, and the streams keep overlapping.
//!
//! The seed: the CUDA C++ Programming Guide, "Stream Ordered Memory Allocator" (its loop, and
//! its release threshold), in the multi-stream loop of the overlap lesson:
//!
//! ```text
//! cudaMemPool_t pool;  cudaDeviceGetDefaultMemPool(&pool, 0);
//! uint64_t keep = UINT64_MAX;  // version 2: 0, the default
//! cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
//! for (int r = 0; r < B; ++r)
//!   for (int k = 0; k < K; ++k) {
//!     float* d;  cudaMallocAsync(&d, bytes, s[k]);          // version 0: cudaMalloc(&d, bytes)
//!     cudaMemcpyAsync(d, in + off(r, k), bytes, cudaMemcpyHostToDevice, s[k]);
//!     compute_kernel<<<grid, 256, 0, s[k]>>>(d, n, iters);
//!     cudaMemcpyAsync(out + off(r, k), d, bytes, cudaMemcpyDeviceToHost, s[k]);
//!     cudaFreeAsync(d, s[k]);                               // version 0: cudaFree(d)
//!   }
//! ```
//!
//! In Rust: `DeviceBuffer::alloc(&gpu, n)` (`cuMemAlloc`; dropped, `cuMemFree`),
//! `DeviceBuffer::alloc_async(&s, n)` and `d.free_async(&s)`, `gpu.context().default_mem_pool()`
//! and `pool.set_release_threshold(b)`. The pool keeps up to its release threshold of freed
//! memory; beyond it, the next synchronize gives memory back to the OS, and the next allocation
//! maps it again. At `u64::MAX` every run after a synchronize reuses what the last one freed.
//!
//! The bound: the K buffers allocated once in setup; the allocations cost nothing at best.
use std::time::Instant;

use kernels_gpu::math::compute_element;
use serde::Serialize;

use crate::lab::harness::budget::{CLEAR_SPEEDUP, MAX_ELEMENTS, MAX_STREAMS};
use crate::lab::harness::data::random_inputs;
use crate::lab::kit::stream_pipeline::Bracket;
use crate::lab::{args, fixed, t, Checks, Lesson, Measured, Plan, Report, Sample, Text, WorkModel};
use crate::runtime::memory::DeviceView;
use crate::runtime::{AsContext, DeviceBuffer, Error, Gpu, HostBuffer, MemPool, Result, Stream};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Floats per temporary buffer (a chunk) [1..=4294967295]. Try 16384: waits weigh more.
    #[arg(long, default_value_t = 1 << 19, value_parser = args::whole(1usize..=MAX_ELEMENTS))]
    pub elements: usize,
    /// Streams, each with its own buffer every round [1..=64]. Try 1: no overlap to lose.
    #[arg(long, default_value_t = 4, value_parser = args::whole(1usize..=MAX_STREAMS))]
    pub streams: usize,
    /// Rounds: each stream allocates, uses and frees a buffer this many times [1..=1024].
    #[arg(long, default_value_t = 8, value_parser = args::whole(1usize..=1024))]
    pub rounds: usize,
    /// sin·cos steps per element [1..=100000]: more makes the allocations matter less.
    #[arg(long, default_value_t = 100, value_parser = args::whole(1u32..=100_000))]
    pub iters: u32,
}

/// The versions, in order: without, with, the threshold's effect, the bound.
/// `cuMemAlloc`, the chunk's work, `cuMemFree` (which waits for the whole device).
pub const SYNC_ALLOC: usize = 0;
/// `cuMemAllocAsync` and `cuMemFreeAsync` on each stream, release threshold `u64::MAX`.
pub const POOL: usize = 1;
/// The same from the pool with release threshold 0.
pub const POOL_RELEASED: usize = 2;
/// Buffers allocated once in setup: the bound.
pub const PREALLOCATED: usize = 3;
/// The versions' names, indexed by the constants above.
pub const VERSIONS: [&str; 4] = [
    "cuMemAlloc/cuMemFree in the loop",
    "cuMemAllocAsync/cuMemFreeAsync from the pool",
    "the same, release threshold 0",
    "buffers allocated once in setup (bound)",
];
/// Parts: host time enqueueing the loop (cuMemFree's waits in it); pool memory after a run.
pub const HOST_MS: &str = "host enqueue, ms";
pub const KEPT_MIB: &str = "pool kept after the run, MiB";
/// The pool's claim is asserted only where allocating once beats cuMemAlloc/cuMemFree by
/// twice the clear margin: below that there is little for the pool to win.
pub const WORTH_ASSERTING: f64 = 1.0 + 2.0 * (CLEAR_SPEEDUP - 1.0);

pub struct StreamOrderedAlloc {
    n: usize,
    rounds: usize,
    iters: u32,
    streams: Vec<Stream>,
    input: HostBuffer<f32>,
    /// One output per version, in the versions' order (public for the tests).
    pub outputs: [HostBuffer<f32>; 4],
    preallocated: Vec<DeviceBuffer<f32>>,
    pool: MemPool,
    threshold_before: u64,
    bracket: Bracket,
}

impl StreamOrderedAlloc {
    /// Version `v`: B rounds, in each every stream allocates (or not), copies its chunk in,
    /// computes, copies out, and frees; timed across all streams.
    fn run(&self, gpu: &Gpu, v: usize) -> Result<Sample> {
        // Each pool version starts where its own loop leaves the pool at the end of a run.
        if v == POOL {
            self.pool.set_release_threshold(u64::MAX)?;
            self.fill_pool()?;
        } else if v == POOL_RELEASED {
            self.pool.set_release_threshold(0)?;
            self.streams.iter().try_for_each(Stream::synchronize)?; // every free observed
            self.pool.trim_to(0)?;
        }
        let (k, n, mut host_ms) = (self.streams.len(), self.n, 0.0);
        let ms = self.bracket.time(&self.streams, || {
            let t = Instant::now();
            for r in 0..self.rounds {
                for (i, s) in self.streams.iter().enumerate() {
                    match v {
                        SYNC_ALLOC => {
                            let d = DeviceBuffer::<f32>::alloc(gpu, n)?;
                            self.chunk(gpu, s, (&d).into(), r * k + i, v)?;
                            drop(d); // cuMemFree: waits for the whole device
                        }
                        POOL | POOL_RELEASED => {
                            let d = DeviceBuffer::<f32>::alloc_async(s, n)?;
                            self.chunk(gpu, s, (&d).into(), r * k + i, v)?;
                            d.free_async(s)?;
                        }
                        _ => self.chunk(gpu, s, (&self.preallocated[i]).into(), r * k + i, v)?,
                    }
                }
            }
            host_ms = t.elapsed().as_secs_f64() * 1e3;
            Ok(())
        })?;
        let sample = Sample::ms(ms).part(HOST_MS, host_ms);
        Ok(match v {
            POOL | POOL_RELEASED => {
                sample.part(KEPT_MIB, self.pool.reserved_bytes()? as f64 / 1048576.0)
            }
            _ => sample,
        })
    }

    /// Chunk `c` of the input through `d` on `s`, into chunk `c` of version `v`'s output.
    fn chunk(&self, gpu: &Gpu, s: &Stream, d: DeviceView<f32>, c: usize, v: usize) -> Result<()> {
        let range = c * self.n..(c + 1) * self.n;
        s.copy_to_device(self.input.slice(range.clone())?, d.clone())?;
        gpu.compute(s, d.clone(), self.iters)?;
        s.copy_to_host(d, self.outputs[v].slice(range)?)
    }

    /// Leaves one buffer per stream in the pool, freed: what the previous run left there
    /// when the threshold keeps freed memory (another version may have trimmed it since).
    fn fill_pool(&self) -> Result<()> {
        let held = self.streams.iter().map(|s| DeviceBuffer::<f32>::alloc_async(s, self.n));
        let held = held.collect::<Result<Vec<_>>>()?;
        held.into_iter().zip(&self.streams).try_for_each(|(d, s)| d.free_async(s))?;
        self.streams.iter().try_for_each(Stream::synchronize)
    }
}

impl Drop for StreamOrderedAlloc {
    /// Gives the pool back as it was: later lessons should find the memory free.
    fn drop(&mut self) {
        let _ = self.pool.set_release_threshold(self.threshold_before);
        let _ = self.pool.trim_to(0);
    }
}

/// The claim: with the pool the streams overlap, so version 1 is clearly faster than
/// version 0. Asserted where the bound shows the allocations in the loop cost something.
pub fn check_pool_faster(m: &Measured) -> Result<Text> {
    let t = |v: usize| m.version(v).time.median;
    let ([sync, pool, bound], ms) = ([SYNC_ALLOC, POOL, PREALLOCATED].map(t), |v: f64| fixed(v, 3));
    if sync / bound < WORTH_ASSERTING {
        let (pct, [bound, sync]) =
            (fixed((WORTH_ASSERTING - 1.0) * 100.0, 0), [bound, sync].map(ms));
        return Ok(t!(
            "check.not_asserted",
            why = t!("stream_ordered_alloc.little_to_win", bound, pct, sync)
        ));
    }
    let speedup = sync / pool;
    if speedup >= CLEAR_SPEEDUP {
        Ok(t!(
            "stream_ordered_alloc.faster_check",
            pool = ms(pool),
            sync = ms(sync),
            x = fixed(speedup, 2)
        ))
    } else {
        let [pool, sync, bound] = [pool, sync, bound].map(ms);
        let (x, clear) = (fixed(speedup, 2), CLEAR_SPEEDUP.to_string());
        Err(Error::Verification(t!(
            "error.stream_ordered_alloc.not_faster",
            pool,
            sync,
            x,
            clear,
            bound
        )))
    }
}

/// With the threshold at `u64::MAX`, every run ends with at least one buffer of `bytes`
/// still in the pool: the synchronize gave nothing back.
pub fn check_pool_kept(m: &Measured, bytes: usize) -> Result<Text> {
    let kept = m.version(POOL).part_stats(KEPT_MIB).map_or(f64::NAN, |s| s.min);
    let need = bytes as f64 / 1048576.0;
    if kept >= need {
        Ok(t!("stream_ordered_alloc.kept_check", kept = fixed(kept, 2), need = fixed(need, 2)))
    } else {
        let (kept, need) = (fixed(kept, 2), fixed(need, 2));
        Err(Error::Verification(t!("error.stream_ordered_alloc.pool_gave_back", kept, need)))
    }
}

impl Lesson for StreamOrderedAlloc {
    const NAME: &'static str = "stream-ordered-alloc";
    const SUMMARY: &'static str = "cuMemAlloc/cuMemFree in a multi-stream loop serialize the streams; cuMemAllocAsync/cuMemFreeAsync from a pool keep the overlap";
    type Args = Args;

    fn versions(_: &Args) -> Vec<String> {
        VERSIONS.iter().map(|v| v.to_string()).collect()
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        // Below 2^48 within the flags' ranges; the plan refuses what memory cannot hold.
        let (chunks, total) = (a.streams * a.rounds, a.elements * a.streams * a.rounds);
        let chunk_ms = 2.0 * model.copy_ms(a.elements) + model.compute_ms(a.elements, a.iters);
        Ok(Plan::new()
            .host::<f32>(total, 6)? // the generated input, the pinned input, four outputs
            .device::<f32>(a.elements, 3 * a.streams)? // setup's, the pool's, cuMemAlloc's
            .work(4.0 * chunks as f64 * chunk_ms, "--elements x --streams x --rounds x --iters"))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<StreamOrderedAlloc> {
        let total = a.elements * a.streams * a.rounds;
        let pool = gpu.context().default_mem_pool()?;
        let pinned = || HostBuffer::pinned(gpu, total);
        Ok(StreamOrderedAlloc {
            n: a.elements,
            rounds: a.rounds,
            iters: a.iters,
            streams: (0..a.streams)
                .map(|i| Stream::new(gpu, format!("alloc-{i}")))
                .collect::<Result<_>>()?,
            input: HostBuffer::pinned_from(gpu, &random_inputs(total, seed))?,
            outputs: [pinned()?, pinned()?, pinned()?, pinned()?],
            preallocated: (0..a.streams)
                .map(|_| DeviceBuffer::zeroed(gpu, a.elements))
                .collect::<Result<_>>()?,
            threshold_before: pool.release_threshold()?,
            pool,
            bracket: Bracket::new(gpu, a.streams)?,
        })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        self.run(gpu, v)
    }

    fn streams(&self) -> Vec<&Stream> {
        self.streams.iter().collect()
    }

    fn verify(&mut self, _gpu: &Gpu, m: &Measured, checks: &mut Checks) -> Result<()> {
        let (input, sync) = (self.input.read()?, self.outputs[0].read()?);
        for (out, name) in self.outputs[1..].iter().zip(&VERSIONS[1..]) {
            let name = format!("{name} == cuMemAlloc/cuMemFree, bit for bit");
            checks.bitwise(&name, &out.read()?, &sync);
        }
        let pool = self.outputs[1].read()?;
        let reference = |i: usize| compute_element(input[i], self.iters);
        checks.approx("GPU vs CPU reference (approx)", &pool, 4096, reference);
        checks.record("threshold u64::MAX kept the pool's memory", check_pool_kept(m, self.n * 4));
        checks.concurrency("cuMemAllocAsync kept the streams overlapping", check_pool_faster(m));
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        interpret(self.streams.len(), m, r);
    }
}

/// The figures and what they mean for `k` streams, from the measurements alone.
pub fn interpret(k: usize, m: &Measured, r: &mut Report) {
    let [sync, pool, zero, bound] =
        [SYNC_ALLOC, POOL, POOL_RELEASED, PREALLOCATED].map(|v| m.version(v).time.median);
    let (ms, off) = (|v: f64| fixed(v, 3), format!("{:+.1}", (pool / bound - 1.0) * 100.0));
    let (held, kept, kept_zero) = (
        m.version(SYNC_ALLOC).part(HOST_MS),
        m.version(POOL).part(KEPT_MIB),
        m.version(POOL_RELEASED).part(KEPT_MIB),
    );
    r.figure("allocations' cost, cuMemAlloc/cuMemFree", sync - bound, "ms")
        .figure("allocations' cost, pool", pool - bound, "ms")
        .figure("threshold 0 over u64::MAX", zero - pool, "ms")
        .figure("pool kept after a run, threshold u64::MAX", kept, "MiB")
        .figure("pool kept after a run, threshold 0", kept_zero, "MiB")
        .figure("host enqueueing, cuMemAlloc/cuMemFree", held, "ms");
    r.explain(if held >= 0.5 * sync {
        t!("stream_ordered_alloc.held", held = ms(held), sync = ms(sync), k)
    } else {
        t!("stream_ordered_alloc.held_briefly", held = ms(held), sync = ms(sync))
    });
    r.explain(if m.speedup() >= CLEAR_SPEEDUP {
        t!(
            "stream_ordered_alloc.faster",
            pool = ms(pool),
            x = fixed(m.speedup(), 2),
            off,
            bound = ms(bound)
        )
    } else if sync / bound < WORTH_ASSERTING {
        t!("stream_ordered_alloc.little", pool = ms(pool), sync = ms(sync), bound = ms(bound))
    } else {
        t!("stream_ordered_alloc.not_faster", pool = ms(pool), sync = ms(sync), bound = ms(bound))
    });
    let threshold = t!(
        "stream_ordered_alloc.threshold",
        kept = fixed(kept, 1),
        kept_zero = fixed(kept_zero, 1)
    );
    r.explain(if kept_zero >= kept {
        t!("stream_ordered_alloc.nothing_back", threshold, zero = ms(zero), pool = ms(pool))
    } else if zero > pool {
        t!(
            "stream_ordered_alloc.map_again",
            threshold,
            zero = ms(zero),
            pool = ms(pool),
            more = ms(zero - pool)
        )
    } else {
        t!("stream_ordered_alloc.map_hidden", threshold, zero = ms(zero), pool = ms(pool))
    });
    r.explain(t!("stream_ordered_alloc.reuse"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

    /// What the flag checks refuse is tested in tests/stream_ordered_alloc.rs.
    #[test]
    fn the_plan_counts_every_buffer_and_the_work_of_every_chunk() {
        let p = StreamOrderedAlloc::plan(
            &args_from::<StreamOrderedAlloc>(&[]).unwrap(),
            &WorkModel::H100,
        )
        .unwrap();
        assert!(p.admit(None).is_ok());
        // 2^19 floats x 4 streams x 8 rounds, six times over; 12 device buffers of 2^19.
        assert_eq!((p.host_bytes, p.device_bytes), (6 * 4 * (1 << 19) * 32, 12 * 4 * (1 << 19)));
        // Four versions of 32 chunks, each two copies and a compute.
        let chunk =
            2.0 * WorkModel::H100.copy_ms(1 << 19) + WorkModel::H100.compute_ms(1 << 19, 100);
        assert!((p.ms_per_repeat - 128.0 * chunk).abs() < 1e-9);
    }

    /// One sample per version: times, the host part, and the pool's kept MiB (v1, v2).
    fn measured(times: [f64; 4], held: f64, kept: [f64; 2]) -> Measured {
        let s = |v: usize| Sample::ms(times[v]).part(HOST_MS, if v == 0 { held } else { 0.1 });
        let runs = vec![
            vec![s(0)],
            vec![s(1).part(KEPT_MIB, kept[0])],
            vec![s(2).part(KEPT_MIB, kept[1])],
            vec![s(3)],
        ];
        Measured::from_samples(VERSIONS.iter().map(|v| v.to_string()).collect(), runs)
    }

    fn told(m: &Measured) -> String {
        let mut r = Report::new("stream-ordered-alloc", "", "");
        interpret(4, m, &mut r);
        r.interpretation.join("\n")
    }

    #[test]
    fn checks_and_interpretation_follow_the_data() {
        let good = measured([10.0, 4.2, 4.5, 4.0], 9.5, [8.0, 0.0]);
        assert!(check_pool_faster(&good).unwrap().en().contains("2.38x faster"));
        assert!(check_pool_kept(&good, 2 << 20).is_ok());
        let text = told(&good);
        assert!(text.contains("could not overlap") && text.contains("2.38x faster"), "{text}");
        assert!(text.contains("kept 8.0 MiB") && text.contains("0.300 ms more"), "{text}");

        // The pool lost where allocating once won: the claim fails, and the text says so.
        let slow = measured([10.0, 9.8, 9.9, 4.0], 2.0, [0.0, 0.0]);
        assert!(check_pool_faster(&slow).is_err());
        assert!(check_pool_kept(&slow, 4).is_err());
        let text = told(&slow);
        assert!(text.contains("only 2.000") && text.contains("see the check"), "{text}");
        assert!(text.contains("threshold 0 gave nothing back"), "{text}");

        // Nothing to win: not asserted, and not claimed.
        let flat = measured([5.0, 4.9, 4.9, 4.8], 1.0, [8.0, 0.0]);
        assert!(check_pool_faster(&flat).unwrap().en().starts_with("not asserted"));
        let text = told(&flat);
        assert!(text.contains("the allocations cost little") && text.contains("did not show"));
    }
}
