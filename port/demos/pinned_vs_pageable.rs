//! # Pinned versus pageable host memory
//!
//! The concept: the GPU's copy engines move data by DMA, which needs host memory the
//! operating system will not page out or move: pinned (page-locked) memory. From ordinary
//! pageable memory (`malloc`, a `Vec`) the driver must first copy the data through a pinned
//! staging buffer of its own, with the CPU. That costs bandwidth, and it costs asynchrony:
//! `cudaMemcpyAsync` from pageable memory returns only once the driver has staged everything
//! (host to device) or once the copy is complete (device to host), so the host is held for
//! about as long as the copy takes. From pinned memory the call only enqueues the copy.
//!
//! The seed technique is the bandwidth test of every CUDA course:
//!
//! ```text
//! float* pageable = (float*)malloc(bytes);
//! float* pinned;  cudaMallocHost(&pinned, bytes);
//! cudaEventRecord(start, s);
//! cudaMemcpyAsync(d, pinned /* or pageable */, bytes, cudaMemcpyHostToDevice, s);
//! cudaEventRecord(stop, s);
//! cudaEventSynchronize(stop);  cudaEventElapsedTime(&ms, start, stop);  // GB/s = bytes / ms
//! ```
//!
//! In streamlab: `pinned_from` is `cudaMallocHost` + fill (cust's `LockedBuffer`), a `Vec<f32>`
//! is the pageable buffer, `stream.copy_to_device` / `stream.copy_to_host` are
//! `cudaMemcpyAsync` (which take either), and the events time each copy on the GPU while
//! `Instant` times the host inside the call.
use std::time::Instant;

use cust::memory::{DeviceBuffer, LockedBuffer};
use serde::Serialize;

use crate::data::{ensure_bitwise_equal, random_inputs};
use crate::demos::{buffer_bytes, check_elements, ensure_host_memory, Options, MAX_ELEMENTS};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::memory::{device, pinned, pinned_from};
use crate::report::Report;
use crate::stream::{drain_on_error, Event, Stream};
use crate::timing::Stats;

pub const SUMMARY: &str =
    "copy bandwidth from pinned and pageable memory, and how long an async copy holds the host";
pub const FLAGS: &str = "--elements (16777216 = 64 MiB) --reps";

pub const DEFAULT_ELEMENTS: usize = 16 << 20;
/// Below this size the host's call overhead (microseconds) is comparable to the copy itself,
/// and the "holds the host" claim is not asserted.
pub const MIN_BYTES_FOR_CLAIM: usize = 4 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum HostMemory {
    Pinned,
    Pageable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Direction {
    ToDevice,
    ToHost,
}

/// The four copies the demo measures, in the order it runs them.
pub const KINDS: [(HostMemory, Direction); 4] = [
    (HostMemory::Pinned, Direction::ToDevice),
    (HostMemory::Pageable, Direction::ToDevice),
    (HostMemory::Pinned, Direction::ToHost),
    (HostMemory::Pageable, Direction::ToHost),
];

pub fn label(memory: HostMemory, direction: Direction) -> &'static str {
    match (memory, direction) {
        (HostMemory::Pinned, Direction::ToDevice) => "H2D pinned",
        (HostMemory::Pageable, Direction::ToDevice) => "H2D pageable",
        (HostMemory::Pinned, Direction::ToHost) => "D2H pinned",
        (HostMemory::Pageable, Direction::ToHost) => "D2H pageable",
    }
}

/// Decimal gigabytes per second for `bytes` moved in `ms`.
pub fn gb_per_s(bytes: usize, ms: f64) -> f64 {
    bytes as f64 / (ms * 1e6)
}

/// Host memory: pinned and pageable input, pinned and pageable output.
pub const HOST_ARRAYS: usize = 4;
/// Device memory: one array per kind of host memory.
pub const DEVICE_ARRAYS: usize = 2;

/// Checks the element count and host memory, without a GPU. (The run time is bounded by the
/// size: four copies of at most 16 GiB each, a few seconds a repeat at PCIe speeds.)
pub fn check_sizes(n: usize) -> Result<()> {
    check_elements(n, MAX_ELEMENTS)?;
    ensure_host_memory(
        buffer_bytes::<f32>(n, HOST_ARRAYS)?,
        &format!("{HOST_ARRAYS} host arrays of {n} floats (half of them pinned)"),
    )
}

/// Checks the flags this demo reads, before the GPU is touched.
pub fn check_options(opts: &Options) -> Result<()> {
    check_sizes(opts.elements.unwrap_or(DEFAULT_ELEMENTS))
}

/// The same checks, plus device memory.
pub fn validate(gpu: &Gpu, n: usize) -> Result<()> {
    check_sizes(n)?;
    gpu.ensure_device_memory(
        buffer_bytes::<f32>(n, DEVICE_ARRAYS)?,
        &format!("{DEVICE_ARRAYS} device arrays of {n} floats"),
    )
}

/// One copy: its GPU time (events) and the host time inside the call that issued it.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CopyTiming {
    pub gpu_ms: f64,
    pub host_in_call_ms: f64,
}

/// Pinned and pageable buffers of the same data, and one device buffer per kind of host
/// memory, so a pageable copy that did nothing cannot pass on the pinned copy's data.
pub struct PinnedVsPageable {
    pub n: usize,
    pub pinned_in: LockedBuffer<f32>,
    pub pinned_out: LockedBuffer<f32>,
    pub pageable_in: Vec<f32>,
    pub pageable_out: Vec<f32>,
    dev_pinned: DeviceBuffer<f32>,
    dev_pageable: DeviceBuffer<f32>,
    stream: Stream,
    start: Event,
    stop: Event,
}

impl PinnedVsPageable {
    pub fn new(gpu: &Gpu, n: usize, seed: u64) -> Result<PinnedVsPageable> {
        validate(gpu, n)?;
        let pageable_in = random_inputs(n, seed);
        Ok(PinnedVsPageable {
            n,
            pinned_in: pinned_from(&pageable_in)?,
            pinned_out: pinned(n)?,
            pageable_in,
            pageable_out: vec![0.0; n],
            dev_pinned: device(n)?,
            dev_pageable: device(n)?,
            stream: Stream::new("copies")?,
            start: Event::new()?,
            stop: Event::new()?,
        })
    }

    pub fn bytes(&self) -> usize {
        self.n * std::mem::size_of::<f32>()
    }

    /// One `cudaMemcpyAsync` of the whole buffer, timed on the GPU and on the host.
    pub fn copy(&mut self, memory: HostMemory, direction: Direction) -> Result<CopyTiming> {
        let s = &self.stream;
        let host_in_call_ms = drain_on_error(|| {
            self.start.record(s)?;
            let t = Instant::now();
            // SAFETY: every host buffer belongs to `self`, held mutably by this call, which
            // returns only after the stop event (recorded after the copy) has completed, or,
            // on an error, after `drain_on_error` has synchronized the context.
            unsafe {
                match (memory, direction) {
                    (HostMemory::Pinned, Direction::ToDevice) => {
                        s.copy_to_device(&self.pinned_in, &self.dev_pinned)?
                    }
                    (HostMemory::Pageable, Direction::ToDevice) => {
                        s.copy_to_device(&self.pageable_in, &self.dev_pageable)?
                    }
                    (HostMemory::Pinned, Direction::ToHost) => {
                        s.copy_to_host(&self.dev_pinned, &mut self.pinned_out)?
                    }
                    (HostMemory::Pageable, Direction::ToHost) => {
                        s.copy_to_host(&self.dev_pageable, &mut self.pageable_out)?
                    }
                }
            }
            let host_in_call_ms = t.elapsed().as_secs_f64() * 1e3;
            self.stop.record(s)?;
            self.stop.synchronize()?;
            Ok(host_in_call_ms)
        })?;
        Ok(CopyTiming {
            gpu_ms: self.stop.elapsed_ms(&self.start)?,
            host_in_call_ms,
        })
    }

    /// Pinned in -> device -> pinned out, and pageable in -> device -> pageable out, are
    /// both the input, bit for bit: all four copies moved the data intact.
    pub fn check_round_trips(&self) -> Result<String> {
        ensure_bitwise_equal(
            "pinned H2D then D2H vs input",
            &self.pinned_out,
            &self.pinned_in,
        )?;
        ensure_bitwise_equal(
            "pageable H2D then D2H vs input",
            &self.pageable_out,
            &self.pageable_in,
        )?;
        Ok(format!(
            "all {} elements intact through all four copies",
            self.n
        ))
    }
}

/// Medians of one kind of copy.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct KindStats {
    pub memory: HostMemory,
    pub direction: Direction,
    pub gpu_ms: Stats,
    pub host_in_call_ms: f64,
    pub gb_per_s: f64,
}

impl KindStats {
    /// Host time inside the call as a fraction of the copy's GPU time.
    pub fn held_fraction(&self) -> f64 {
        self.host_in_call_ms / self.gpu_ms.median
    }
}

/// Each kind of copy `reps` times, interleaved, after one warm-up of each (which also faults
/// in the pageable output's pages).
pub fn measure(p: &mut PinnedVsPageable, reps: usize) -> Result<Vec<KindStats>> {
    for (memory, direction) in KINDS {
        p.copy(memory, direction)?;
    }
    let mut runs: Vec<Vec<CopyTiming>> = vec![Vec::new(); KINDS.len()];
    for _ in 0..reps.max(1) {
        for (i, (memory, direction)) in KINDS.into_iter().enumerate() {
            runs[i].push(p.copy(memory, direction)?);
        }
    }
    let bytes = p.bytes();
    Ok(KINDS
        .into_iter()
        .zip(runs)
        .map(|((memory, direction), r)| {
            let gpu_ms = Stats::of(&r.iter().map(|c| c.gpu_ms).collect::<Vec<_>>());
            KindStats {
                memory,
                direction,
                gpu_ms,
                host_in_call_ms: Stats::of(
                    &r.iter().map(|c| c.host_in_call_ms).collect::<Vec<_>>(),
                )
                .median,
                gb_per_s: gb_per_s(bytes, gpu_ms.median),
            }
        })
        .collect())
}

/// The demo's claim: a pinned async copy returns at once (under half its GPU time inside the
/// call), a pageable one holds the host (over half). Asserted from `MIN_BYTES_FOR_CLAIM` up.
pub fn check_claim(stats: &[KindStats], bytes: usize) -> Result<String> {
    if bytes < MIN_BYTES_FOR_CLAIM {
        return Ok(format!(
            "not asserted: {bytes} bytes is too small for call overhead not to matter (>= {MIN_BYTES_FOR_CLAIM} needed)"
        ));
    }
    let wrong: Vec<String> = stats
        .iter()
        .filter(|k| match k.memory {
            HostMemory::Pinned => k.held_fraction() >= 0.5,
            HostMemory::Pageable => k.held_fraction() <= 0.5,
        })
        .map(|k| {
            format!(
                "{}: {:.3} ms in the call for {:.3} ms of copy",
                label(k.memory, k.direction),
                k.host_in_call_ms,
                k.gpu_ms.median
            )
        })
        .collect();
    if wrong.is_empty() {
        let held: Vec<String> = stats
            .iter()
            .map(|k| {
                format!(
                    "{} {:.0}%",
                    label(k.memory, k.direction),
                    k.held_fraction() * 100.0
                )
            })
            .collect();
        Ok(format!("host held for: {}", held.join(", ")))
    } else {
        Err(Error::Verification(format!(
            "expected pinned calls to return at once and pageable ones to hold the host; {}",
            wrong.join("; ")
        )))
    }
}

pub fn run(gpu: &Gpu, opts: &Options) -> Result<Report> {
    let n = opts.elements.unwrap_or(DEFAULT_ELEMENTS);
    let mut p = PinnedVsPageable::new(gpu, n, opts.seed)?;
    let stats = measure(&mut p, opts.reps)?;
    let bytes = p.bytes();

    let mut r = Report::new(
        "pinned-vs-pageable",
        "copies from pinned and from pageable host memory",
        &gpu.info.name,
    );
    r.param("elements", n)
        .param("bytes", bytes)
        .param("reps", opts.reps);
    for k in &stats {
        let l = label(k.memory, k.direction);
        r.figure(&format!("{l}: bandwidth, median"), k.gb_per_s, "GB/s")
            .figure(&format!("{l}: copy GPU time"), k.gpu_ms.median, "ms")
            .figure(
                &format!("{l}: host time inside the call"),
                k.host_in_call_ms,
                "ms",
            );
    }
    let find = |m, d| stats.iter().find(|k| k.memory == m && k.direction == d);
    let bw = |m, d| find(m, d).map_or(f64::NAN, |k| k.gb_per_s);
    let h2d_ratio =
        bw(HostMemory::Pinned, Direction::ToDevice) / bw(HostMemory::Pageable, Direction::ToDevice);
    let d2h_ratio =
        bw(HostMemory::Pinned, Direction::ToHost) / bw(HostMemory::Pageable, Direction::ToHost);
    r.figure("H2D pinned / pageable bandwidth", h2d_ratio, "x")
        .figure("D2H pinned / pageable bandwidth", d2h_ratio, "x");
    r.detail("copies", &stats);
    r.check(
        "data intact in all four copies, bit for bit",
        p.check_round_trips(),
    );
    let claim = check_claim(&stats, bytes);
    let claim_held = claim.is_ok();
    r.check("pinned returns at once, pageable holds the host", claim);

    let big_enough = bytes >= MIN_BYTES_FOR_CLAIM;
    if big_enough {
        let pinned_faster = h2d_ratio >= FASTER || d2h_ratio >= FASTER;
        r.explain(format!(
            "Pinned memory is {} host-to-device and {} device-to-host{}",
            compare(h2d_ratio),
            compare(d2h_ratio),
            if pinned_faster {
                ": the copy engine reads and writes it by DMA, while pageable data goes through the driver's staging buffer with a CPU memcpy."
            } else {
                ": here the CPU's staging through the driver's pinned buffer kept up with the copy engine."
            }
        ));
    } else {
        r.explain(format!(
            "At {bytes} bytes a copy's fixed set-up cost (microseconds) outweighs the transfer, so the bandwidths (pinned/pageable {h2d_ratio:.1}x H2D, {d2h_ratio:.1}x D2H) say little; bandwidth shows from about {} MiB up (--elements {}).",
            MIN_BYTES_FOR_CLAIM >> 20,
            MIN_BYTES_FOR_CLAIM / std::mem::size_of::<f32>()
        ));
    }
    let held = |m| {
        find(m, Direction::ToDevice).map_or(String::from("?"), |k| {
            format!(
                "{:.3} ms inside the call for a {:.3} ms copy",
                k.host_in_call_ms, k.gpu_ms.median
            )
        })
    };
    let (pinned_held, pageable_held) = (held(HostMemory::Pinned), held(HostMemory::Pageable));
    r.explain(if !big_enough {
        format!("Host time for the H2D copies: pinned {pinned_held}, pageable {pageable_held}; at this size the call overhead dominates, so whether a call holds the host is not asserted.")
    } else if claim_held {
        format!("From pinned memory cudaMemcpyAsync only enqueues (H2D: {pinned_held}); from pageable memory it returns only after staging (H2D) or completion (D2H) (H2D: {pageable_held}), so it is not asynchronous at all.")
    } else {
        format!("Expected pinned calls to only enqueue and pageable ones to hold the host, but not here (H2D pinned: {pinned_held}; pageable: {pageable_held}): see the failed check.")
    });
    r.explain("So overlap needs pinned buffers, but pinning is slow to allocate and takes RAM from the OS: pin the buffers you stream through and reuse them.");
    Ok(r)
}

/// A pinned/pageable bandwidth ratio at least this far from 1 is called faster or slower.
pub const FASTER: f64 = 1.1;

/// "2.3x faster", "1.5x slower" or "about as fast", for a pinned/pageable bandwidth ratio.
pub fn compare(ratio: f64) -> String {
    if ratio >= FASTER {
        format!("{ratio:.1}x faster")
    } else if ratio > 0.0 && ratio <= 1.0 / FASTER {
        format!("{:.1}x slower", 1.0 / ratio)
    } else {
        format!("about as fast ({ratio:.2}x)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons_follow_the_ratio() {
        assert_eq!(compare(2.34), "2.3x faster");
        assert_eq!(compare(0.2), "5.0x slower");
        assert!(compare(1.0).starts_with("about as fast"));
        assert!(compare(f64::NAN).starts_with("about as fast"));
    }

    #[test]
    fn sizes_and_host_memory_are_checked() {
        assert!(check_sizes(1).is_ok());
        assert!(check_sizes(0).is_err());
        assert!(check_sizes(MAX_ELEMENTS + 1).is_err());
        // 2^62 floats (whose byte count would wrap to 0) are refused, not wrapped.
        assert!(matches!(check_sizes(1 << 62), Err(Error::InvalidInput(_))));
    }

    #[test]
    fn bandwidth_is_decimal_gigabytes_per_second() {
        assert!((gb_per_s(1_000_000_000, 1000.0) - 1.0).abs() < 1e-12);
        assert!((gb_per_s(64 << 20, 1.2) - 55.924).abs() < 1e-3);
    }

    fn kind(memory: HostMemory, host: f64, gpu: f64) -> KindStats {
        KindStats {
            memory,
            direction: Direction::ToDevice,
            gpu_ms: Stats::of(&[gpu]),
            host_in_call_ms: host,
            gb_per_s: 1.0,
        }
    }

    #[test]
    fn claim_needs_pinned_quick_and_pageable_held() {
        let good = [
            kind(HostMemory::Pinned, 0.01, 1.2),
            kind(HostMemory::Pageable, 6.0, 6.5),
        ];
        assert!(check_claim(&good, 64 << 20).is_ok());
        let pinned_blocked = [kind(HostMemory::Pinned, 1.1, 1.2), good[1]];
        assert!(check_claim(&pinned_blocked, 64 << 20).is_err());
        let pageable_free = [good[0], kind(HostMemory::Pageable, 0.1, 6.5)];
        assert!(check_claim(&pageable_free, 64 << 20).is_err());
        // Too small to assert anything: passes with a note.
        let note = check_claim(&pinned_blocked, 1024).unwrap();
        assert!(note.starts_with("not asserted"), "{note}");
    }
}
