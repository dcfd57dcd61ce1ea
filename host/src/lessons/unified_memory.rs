//! # Unified memory: page faults, prefetching, advice
//!
//! Managed memory (`cudaMallocManaged`) is one pointer for the host and the GPU: no copies to
//! write, the driver moves each page to whichever processor touches it. A kernel that touches
//! a page still on the host stalls on a page fault until the page has migrated; the host
//! reading results still on the GPU faults them back the same way. `cudaMemPrefetchAsync` on
//! the streams moves each chunk before its kernel needs it, in stream order; `cudaMemAdvise`
//! can instead leave the pages on the host, mapped for the GPU, which then reads and writes
//! them over the bus.
//!
//! The seed (002) names `cudaMallocManaged` as the simpler but slower alternative to explicit
//! copies. Here the chunked computation of the overlap lesson runs four ways:
//!
//! ```text
//! cudaMemGetInfo(&free, &total);             // never more managed memory than is free
//! float* m;  cudaMallocManaged(&m, bytes);
//! memcpy(m, input, bytes);                   // the host writes: the pages are on the host
//! for (int c = 0; c < C; ++c) {
//!   cudaStream_t s = streams[c % K];  float* p = m + c * n;
//!   cudaMemPrefetchAsync(p, n * 4, device, s);            // version 1 only
//!   compute_kernel<<<g, 256, 0, s>>>(p, n, iters);        // version 0: faults the pages in
//!   cudaMemPrefetchAsync(p, n * 4, cudaCpuDeviceId, s);   // version 1 only
//! }
//! cudaDeviceSynchronize();
//! memcpy(out, m, bytes);                     // the host reads: version 0 faults them back
//! // version 2: cudaMemcpyAsync in, kernel, cudaMemcpyAsync out per chunk, pinned memory
//! // version 3: as version 0, after cudaMemAdvise(m, bytes, SetPreferredLocation, cpu)
//! //            and cudaMemAdvise(m, bytes, SetAccessedBy, device)
//! ```
//!
//! In Rust: `ManagedBuffer::zeroed(&gpu, n)` (it checks `cuMemGetInfo` first and refuses
//! what is not free), `m.write_from_host(&input)`, `s.prefetch(&m, r, Location::Device)`,
//! `gpu.compute(&s, m.slice(r)?, iters)`, `m.advise(Advice::AccessedBy(Location::Device))`,
//! `m.read_to_host(&mut out)`.
//!
//! The bound: the explicit copies (version 2) move the same bytes with the copy engines,
//! overlapped with the kernels; migrating pages can at best match them. Every version is
//! timed on the host's clock from its first enqueue until the host has read every result;
//! its GPU part, by events.
use std::time::Instant;

use kernels_gpu::math::compute_element;
use serde::Serialize;

use crate::lab::harness::budget::{CLEAR_SPEEDUP, MAX_STREAMS};
use crate::lab::harness::data::random_inputs;
use crate::lab::kit::batches::MAX_TOTAL_ELEMENTS;
use crate::lab::kit::host_batch_log::ms_since;
use crate::lab::kit::stream_pipeline::Bracket;
use crate::lab::{
    args, fixed, t, Checks, Drawing, Lesson, Measured, Plan, Report, Sample, Text, WorkModel,
};
use crate::runtime::{Advice, DeviceBuffer, Error, Gpu, HostBuffer, Location};
use crate::runtime::{ManagedBuffer, Result, Stream};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Floats per chunk [1..=268435456]; all chunks together at most 268435456 (1 GiB of
    /// managed memory per version). Try 1000: chunks smaller than a page share pages.
    #[arg(long, default_value_t = 1 << 19, value_parser = args::whole(1usize..=MAX_TOTAL_ELEMENTS))]
    pub elements: usize,
    /// Chunks, each one kernel [1..=4096]. Try 1: nothing to overlap with.
    #[arg(long, default_value_t = 16, value_parser = args::whole(1usize..=4096))]
    pub chunks: usize,
    /// Streams the chunks take turns on [1..=64].
    #[arg(long, default_value_t = 4, value_parser = args::whole(1usize..=MAX_STREAMS))]
    pub streams: usize,
    /// sin·cos steps per element [1..=100000]: try 1000, and the migrations matter less.
    #[arg(long, default_value_t = 50, value_parser = args::whole(1u32..=100_000))]
    pub iters: u32,
}

/// The versions, baseline first.
/// Kernels on managed memory: every page faults in, and back out when the host reads.
pub const FAULTS: usize = 0;
/// Each chunk prefetched to the GPU before its kernel and back to the host after it.
pub const PREFETCH: usize = 1;
/// Explicit pinned copies: the bound.
pub const EXPLICIT: usize = 2;
/// Managed memory advised to stay on the host, mapped for the GPU.
pub const ADVISED: usize = 3;
/// The versions' names, indexed by the constants above.
pub const VERSIONS: [&str; 4] = [
    "managed, migrated on demand (page faults)",
    "managed + cuMemPrefetchAsync on the streams",
    "explicit pinned copies on the streams (bound)",
    "managed + cuMemAdvise: on the host, mapped for the GPU",
];
/// Which managed buffer each version uses (the explicit copies use none): one per version,
/// since advice stays with the memory.
const MANAGED: [Option<usize>; 4] = [Some(0), Some(1), None, Some(2)];
/// The parts of a sample: the GPU's time (events), the host's time enqueueing, and reading
/// the results.
pub const GPU_MS: &str = "GPU, ms";
pub const ENQUEUE_MS: &str = "host enqueue, ms";
pub const READ_MS: &str = "host read, ms";
/// For the time estimate only: one repeat of the four versions as this many times the
/// explicit copies (migrating on demand assumed ten times slower than the copy engines).
const WORK_FACTOR: f64 = 16.0;

pub struct UnifiedMemory {
    n: usize,
    chunks: usize,
    iters: u32,
    streams: Vec<Stream>,
    input: HostBuffer<f32>,
    output: HostBuffer<f32>,
    device: DeviceBuffer<f32>,
    managed: [ManagedBuffer<f32>; 3],
    /// Where the host reads every version's results into (allocated once).
    read_back: Vec<f32>,
    bracket: Bracket,
}

impl UnifiedMemory {
    /// Version `v`: the input starts in host memory (untimed), every chunk is computed on
    /// stream c % K, then the host reads the results.
    fn run(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        let managed = MANAGED[v].map(|i| &self.managed[i]);
        if let Some(m) = managed {
            m.write_from_host(&self.input.read()?)?;
        }
        let (start, mut enqueue_ms) = (Instant::now(), 0.0);
        let gpu_ms = self.bracket.time(&self.streams, || {
            for c in 0..self.chunks {
                let (s, r) = (&self.streams[c % self.streams.len()], c * self.n..(c + 1) * self.n);
                match managed {
                    None => {
                        let d = self.device.slice(r.clone())?;
                        s.copy_to_device(self.input.slice(r.clone())?, d.clone())?;
                        gpu.compute(s, d.clone(), self.iters)?;
                        s.copy_to_host(d, self.output.slice(r)?)?;
                    }
                    Some(m) if v == PREFETCH => {
                        s.prefetch(m, r.clone(), Location::Device)?;
                        gpu.compute(s, m.slice(r.clone())?, self.iters)?;
                        s.prefetch(m, r, Location::Host)?;
                    }
                    Some(m) => gpu.compute(s, m.slice(r)?, self.iters)?,
                }
            }
            enqueue_ms = ms_since(start);
            Ok(())
        })?;
        let read = Instant::now();
        match managed {
            Some(m) => m.read_to_host(&mut self.read_back)?,
            None => self.read_back.copy_from_slice(&self.output.read()?),
        }
        let read_ms = ms_since(read);
        Ok(Sample::ms(ms_since(start))
            .part(GPU_MS, gpu_ms)
            .part(ENQUEUE_MS, enqueue_ms)
            .part(READ_MS, read_ms))
    }
}

/// `--chunks` x `--elements`, or a one-line refusal when over [`MAX_TOTAL_ELEMENTS`].
pub fn total_elements(chunks: usize, elements: usize) -> Result<usize> {
    chunks.checked_mul(elements).filter(|&t| t <= MAX_TOTAL_ELEMENTS).ok_or_else(|| {
        let max = MAX_TOTAL_ELEMENTS;
        Error::InvalidInput(t!("error.unified_memory.too_many_elements", chunks, elements, max))
    })
}

/// The claim: prefetching is clearly faster than faulting pages in on demand. Asserted where
/// the faults clearly cost something over the explicit copies, and more than twice what
/// enqueueing the prefetches held the host (each call costs the host time on the path).
pub fn check_prefetch_won(m: &Measured) -> Result<Text> {
    let [faults, prefetch, explicit] =
        [FAULTS, PREFETCH, EXPLICIT].map(|v| m.version(v).time.median);
    let (enqueue, ms) = (m.version(PREFETCH).part(ENQUEUE_MS), |v: f64| fixed(v, 3));
    if faults < CLEAR_SPEEDUP * explicit || faults - explicit < 2.0 * enqueue {
        let [cost, explicit, enqueue] = [faults - explicit, explicit, enqueue].map(ms);
        let why = t!("unified_memory.little_to_win", cost, explicit, enqueue);
        return Ok(t!("check.not_asserted", why));
    }
    let (speedup, [p, f]) = (faults / prefetch, [prefetch, faults].map(ms));
    if speedup >= CLEAR_SPEEDUP {
        Ok(t!("unified_memory.faster_check", prefetch = p, faults = f, x = fixed(speedup, 2)))
    } else {
        let (x, clear, explicit) = (fixed(speedup, 2), CLEAR_SPEEDUP.to_string(), ms(explicit));
        Err(Error::Verification(t!(
            "error.unified_memory.not_faster",
            prefetch = p,
            faults = f,
            x,
            clear,
            explicit
        )))
    }
}

impl Lesson for UnifiedMemory {
    const NAME: &'static str = "unified-memory";
    const SUMMARY: &'static str = "managed memory migrated by page faults, prefetched on the streams, or advised to stay on the host, against explicit pinned copies";
    const DRAWING: Drawing = Drawing {
        host_row: true,
        host_timed: true,
        note: "Before the shaded run the host wrote the inputs into managed memory: untimed, and no driver call. The run ends when the host has read the results; reading them faults the pages back (no driver call) after the last span.",
        ..Drawing::PLAIN
    };
    type Args = Args;

    fn versions(_: &Args) -> Vec<String> {
        VERSIONS.iter().map(|v| v.to_string()).collect()
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        let total = total_elements(a.chunks, a.elements)?;
        let chunk_ms = 2.0 * model.copy_ms(a.elements) + model.compute_ms(a.elements, a.iters);
        // Host: the generated input, pinned input and output, the read-back, and the three
        // managed buffers while their pages are on the host. Device: the explicit version's
        // buffer and the managed buffers, all resident at once at worst.
        Ok(Plan::new()
            .host::<f32>(total, 7)?
            .device::<f32>(total, 4)?
            .work(WORK_FACTOR * a.chunks as f64 * chunk_ms, "--elements x --chunks x --iters"))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<UnifiedMemory> {
        let total = a.elements * a.chunks;
        let managed = || ManagedBuffer::zeroed(gpu, total);
        let managed = [managed()?, managed()?, managed()?];
        // Version 3: the pages stay on the host, and the GPU keeps them mapped.
        managed[2].advise(Advice::PreferredLocation(Location::Host))?;
        managed[2].advise(Advice::AccessedBy(Location::Device))?;
        Ok(UnifiedMemory {
            n: a.elements,
            chunks: a.chunks,
            iters: a.iters,
            streams: (0..a.streams)
                .map(|i| Stream::new(gpu, format!("unified-{i}")))
                .collect::<Result<_>>()?,
            input: HostBuffer::pinned_from(gpu, &random_inputs(total, seed))?,
            output: HostBuffer::pinned(gpu, total)?,
            device: DeviceBuffer::zeroed(gpu, total)?,
            managed,
            read_back: vec![0.0; total],
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
        let (explicit, input) = (self.output.read()?, self.input.read()?);
        for (v, slot) in MANAGED.iter().enumerate() {
            if let Some(i) = slot {
                let name = format!("{} == explicit copies, bit for bit", VERSIONS[v]);
                checks.bitwise(&name, &self.managed[*i].to_vec()?, &explicit);
            }
        }
        let reference = |i: usize| compute_element(input[i], self.iters);
        checks.approx("GPU vs CPU reference (approx)", &explicit, 4096, reference);
        checks.concurrency("prefetching beat the page faults", check_prefetch_won(m));
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        interpret(m, r);
    }
}

/// The figures and what they mean, from the measurements alone.
pub fn interpret(m: &Measured, r: &mut Report) {
    let [faults, prefetch, explicit, advised] =
        [FAULTS, PREFETCH, EXPLICIT, ADVISED].map(|v| m.version(v).time.median);
    let (gpu, read) = (|v: usize| m.version(v).part(GPU_MS), |v: usize| m.version(v).part(READ_MS));
    let (cost, won) = (faults - explicit, faults - prefetch);
    let (enqueue, ms) = (m.version(PREFETCH).part(ENQUEUE_MS), |v: f64| fixed(v, 3));
    r.figure("bound: explicit copies, enqueue to results read", explicit, "ms")
        .figure(
            "page faults' cost on the GPU (over explicit copies)",
            gpu(FAULTS) - gpu(EXPLICIT),
            "ms",
        )
        .figure("page faults' cost reading the results", read(FAULTS) - read(EXPLICIT), "ms")
        .figure("prefetching won back", won, "ms")
        .figure("prefetch / bound", prefetch / explicit, "x")
        .figure("advised / bound", advised / explicit, "x");
    let [f, p, e, a] = [faults, prefetch, explicit, advised].map(ms);
    r.explain(if faults >= CLEAR_SPEEDUP * explicit {
        let [stall, read, pinned] =
            [gpu(FAULTS) - gpu(EXPLICIT), read(FAULTS), read(EXPLICIT)].map(ms);
        t!("unified_memory.faults_cost", faults = f, explicit = e, stall, read, pinned)
    } else {
        t!("unified_memory.faults_cheap", faults = f, explicit = e)
    });
    r.explain(if won < (CLEAR_SPEEDUP - 1.0) * faults {
        t!("unified_memory.no_clear_win", prefetch = p, faults = f, explicit = e)
    } else if prefetch <= explicit * CLEAR_SPEEDUP {
        let pct = fixed((prefetch / explicit - 1.0).abs() * 100.0, 0);
        t!("unified_memory.as_copies", won = ms(won), prefetch = p, pct)
    } else {
        let (pct, x) = (fixed(100.0 * won / cost, 0), fixed(prefetch / explicit, 2));
        t!("unified_memory.won_back", won = ms(won), cost = ms(cost), pct, prefetch = p, x)
    });
    if enqueue >= 0.5 * gpu(PREFETCH) {
        let [enqueue, gpu, copies] =
            [enqueue, gpu(PREFETCH), m.version(EXPLICIT).part(ENQUEUE_MS)].map(ms);
        r.explain(t!("unified_memory.enqueue", enqueue, gpu, copies));
    }
    let advice = t!("unified_memory.advice", advised = a, gpu = ms(gpu(ADVISED)));
    r.explain(if advised * CLEAR_SPEEDUP <= prefetch {
        t!("unified_memory.advice_fastest", advice, prefetch = p)
    } else if advised * CLEAR_SPEEDUP <= faults {
        t!("unified_memory.advice_between", advice, faults = f, prefetch = p)
    } else {
        t!("unified_memory.advice_no_better", advice, faults = f)
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

    /// What the flag checks refuse is tested in tests/unified_memory.rs.
    #[test]
    fn the_plan_counts_every_buffer() {
        let a = args_from::<UnifiedMemory>(&[]).unwrap();
        let p = UnifiedMemory::plan(&a, &WorkModel::H100).unwrap();
        assert!(p.admit(None).is_ok());
        // 16 chunks of 2^19 floats: 32 MiB a buffer, 7 on the host, 4 on the device.
        assert_eq!((p.host_bytes, p.device_bytes), (7 << 25, 4 << 25));
    }

    /// One sample per version: total, GPU and read times, and the host's enqueue time.
    fn measured(times: [f64; 4], gpu: [f64; 4], read: [f64; 4], enqueue: f64) -> Measured {
        let runs = (0..4)
            .map(|v| {
                let host = if v == 1 { enqueue } else { 0.05 };
                let s = Sample::ms(times[v]).part(GPU_MS, gpu[v]).part(ENQUEUE_MS, host);
                vec![s.part(READ_MS, read[v])]
            })
            .collect();
        Measured::from_samples(VERSIONS.iter().map(|v| v.to_string()).collect(), runs)
    }

    fn told(m: &Measured) -> (String, Report) {
        let mut r = Report::new("unified-memory", "", "");
        interpret(m, &mut r);
        let check: Vec<Text> = check_prefetch_won(m).into_iter().collect();
        r.assert_chinese(&check, m.versions.iter().map(|v| v.name.as_str()));
        (r.interpretation.join("\n"), r)
    }

    #[test]
    fn checks_and_interpretation_follow_the_data() {
        // Faults cost 8 ms (5 on the GPU, 3 reading back); prefetch wins back 6 of them.
        let usual =
            measured([11.0, 5.0, 3.0, 6.0], [8.0, 3.5, 2.5, 5.5], [3.5, 0.6, 0.5, 0.5], 0.1);
        assert!(check_prefetch_won(&usual).unwrap().en().contains("2.20x faster"));
        let (text, r) = told(&usual);
        assert!(text.contains("stalled on page faults for 5.500 ms more"), "{text}");
        assert!(text.contains("won back 6.000 of the 8.000 ms the faults cost (75%)"), "{text}");
        assert!(
            text.contains("better than faulting on demand")
                && !text.contains("more than an enqueue")
        );
        assert_eq!(r.value("prefetching won back"), Some(6.0));
        // Prefetch as fast as the copies, its enqueue holding the host, the advice best.
        let close =
            measured([11.0, 3.1, 3.0, 2.5], [8.0, 2.6, 2.5, 2.0], [3.5, 0.5, 0.5, 0.5], 2.0);
        let (text, _) = told(&close);
        assert!(text.contains("within 3% of the explicit copies"), "{text}");
        assert!(
            text.contains("held the host 2.000 ms") && text.contains("faster than prefetching")
        );
        // Faults that cost little: the claim is not asserted, and nothing is claimed won.
        let cheap = measured([3.2, 3.1, 3.0, 3.3], [2.6, 2.5, 2.5, 2.8], [0.6, 0.6, 0.5, 0.5], 0.1);
        assert!(check_prefetch_won(&cheap).unwrap().en().starts_with("not asserted"));
        let (text, _) = told(&cheap);
        assert!(text.contains("cost little") && text.contains("did not clearly win"), "{text}");
        assert!(text.contains("no better than faulting on demand"), "{text}");
        // Faults that cost a lot, and a prefetch that did not help: the claim fails.
        let lost =
            measured([11.0, 10.5, 3.0, 12.0], [8.0, 8.0, 2.5, 9.0], [3.0, 2.5, 0.5, 3.0], 0.1);
        assert!(check_prefetch_won(&lost).is_err());
        let (text, _) = told(&lost);
        assert!(text.contains("did not clearly win") && text.contains("no better than"), "{text}");
        // Chunks so small that the prefetch calls cost the host about what the faults cost:
        // prefetching lost, but that is not asserted, and the text says it did not win.
        let tiny =
            measured([0.40, 0.50, 0.20, 0.25], [0.2, 0.3, 0.1, 0.1], [0.1, 0.05, 0.05, 0.05], 0.15);
        let why = check_prefetch_won(&tiny).unwrap().en();
        assert!(why.starts_with("not asserted") && why.contains("0.150 ms enqueueing"), "{why}");
        let (text, _) = told(&tiny);
        assert!(text.contains("did not clearly win") && text.contains("more than an enqueue"));
    }
}
