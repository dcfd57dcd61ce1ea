//! # Pinned versus pageable host memory
//!
//! The copy engines move data by DMA, which needs host memory the OS will neither page out
//! nor move: pinned memory. From pageable memory (`malloc`, a `Vec`) the driver first copies
//! the data through a pinned staging buffer of its own with the CPU, which costs bandwidth
//! and asynchrony: `cudaMemcpyAsync` then returns only once the data is staged (host to
//! device) or the copy is done (device to host), while from pinned memory it only enqueues.
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
//! In Rust: `HostBuffer::pinned_from(&gpu, &values)` is `cudaMallocHost` and a fill,
//! `HostBuffer::pageable_from_vec(&gpu, values)` the `malloc`ed buffer, `s.copy_to_device` /
//! `s.copy_to_host` the `cudaMemcpyAsync` (either memory), and events time each copy on the
//! GPU while `Instant` times the host inside the call.
//!
//! The bound: a copy moves at most at the link's bandwidth, pinned; the claim is that a
//! pinned call holds the host under half the copy's time and a pageable one over half.
//!
//! A buffer that already exists (a `Vec` from a file, a NumPy array) need not be copied into
//! new pinned memory: `cudaHostRegister(ptr, bytes, flags)` page-locks it in place, and
//! `cudaHostUnregister(ptr)` releases it. In Rust, `HostBuffer::registered_from_vec(&gpu,
//! values)`, unregistered when the buffer drops. The last two versions copy from and to such
//! buffers, and the report says what registering cost.
use std::time::Instant;

use serde::Serialize;

use crate::lab::harness::budget::MAX_ELEMENTS;
use crate::lab::harness::data::{ensure_bitwise_equal, random_inputs};
use crate::lab::record::plot::{Bar, Plot};
use crate::lab::{
    args, fixed, t, Checks, Drawing, Lesson, Measured, Plan, Report, Sample, Text, WorkModel,
};
use crate::runtime::{DeviceBuffer, Error, Event, Gpu, HostBuffer, Result, Stream};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Floats per copy [1..=4294967295]. Try 1048576 (4 MiB), or 1 for the call's fixed cost.
    #[arg(long, default_value_t = 16 << 20, value_parser = args::whole(1usize..=MAX_ELEMENTS))]
    pub elements: usize,
}

/// Which host memory a copy reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    /// A `Vec`: the driver stages the copy through its own pinned buffer.
    Pageable,
    /// `cudaMallocHost`: page-locked from the start.
    Pinned,
    /// A `Vec` page-locked in place with `cudaHostRegister`.
    Registered,
}

/// The six copies, baseline (pageable) first in each direction, the registered buffers last:
/// (name, memory, to device).
pub const KINDS: [(&str, Memory, bool); 6] = [
    ("H2D pageable", Memory::Pageable, true),
    ("H2D pinned", Memory::Pinned, true),
    ("D2H pageable", Memory::Pageable, false),
    ("D2H pinned", Memory::Pinned, false),
    ("H2D registered", Memory::Registered, true),
    ("D2H registered", Memory::Registered, false),
];
/// Host to device from pageable memory: the driver stages it first.
pub const H2D_PAGEABLE: usize = 0;
/// Host to device from pinned memory: the copy engine reads it directly.
pub const H2D_PINNED: usize = 1;
/// Device to host into pageable memory, after the copies in.
pub const D2H_PAGEABLE: usize = 2;
/// Device to host into pinned memory.
pub const D2H_PINNED: usize = 3;
/// Host to device from a `Vec` registered with `cudaHostRegister`.
pub const H2D_REGISTERED: usize = 4;
/// Device to host into a registered `Vec`.
pub const D2H_REGISTERED: usize = 5;
/// The part of each sample: host time inside the `cudaMemcpyAsync` call, ms.
pub const IN_CALL: &str = "host ms inside the call";
/// Below this size the call's fixed cost (microseconds) is comparable to the copy itself,
/// and the "holds the host" claim is not asserted.
pub const MIN_BYTES_FOR_CLAIM: usize = 4 << 20;
/// A pinned/pageable bandwidth ratio at least this far from 1 is called faster or slower.
pub const FASTER: f64 = 1.1;
/// For the estimate only: pageable copies are assumed at most this many times slower.
const PAGEABLE_SLOWER: f64 = 4.0;

/// Pinned, pageable and registered buffers of the same data, and one device buffer per kind
/// of host memory, so a copy that did nothing cannot pass on another copy's data.
pub struct PinnedVsPageable {
    bytes: usize,
    pinned: [HostBuffer<f32>; 2],
    pageable: [HostBuffer<f32>; 2],
    registered: [HostBuffer<f32>; 2],
    /// How long `cudaHostRegister` of the input held the host, once, in setup.
    register_ms: f64,
    dev: [DeviceBuffer<f32>; 3],
    stream: Stream,
    marks: [Event; 2],
}

impl PinnedVsPageable {
    /// Copy `v` of [`KINDS`]: one `cudaMemcpyAsync` of the whole buffer, timed on the GPU
    /// (events) and on the host (inside the call).
    fn copy(&self, v: usize) -> Result<Sample> {
        let Some(&(_, memory, to_device)) = KINDS.get(v) else {
            return Err(Error::Internal(format!("pinned-vs-pageable has no version {v}")));
        };
        let ([input, output], dev) = match memory {
            Memory::Pinned => (&self.pinned, &self.dev[0]),
            Memory::Pageable => (&self.pageable, &self.dev[1]),
            Memory::Registered => (&self.registered, &self.dev[2]),
        };
        let (s, [start, stop]) = (&self.stream, &self.marks);
        start.record(s)?;
        let t = Instant::now();
        if to_device {
            s.copy_to_device(input, dev)?;
        } else {
            s.copy_to_host(dev, output)?;
        }
        let in_call = t.elapsed().as_secs_f64() * 1e3;
        stop.record(s)?;
        stop.synchronize()?;
        Ok(Sample::ms(stop.elapsed_ms(start)?).part(IN_CALL, in_call))
    }

    /// The input and what came back, pinned, pageable, then registered, for tests.
    pub fn round_trips(&self) -> Result<[(Vec<f32>, Vec<f32>); 3]> {
        let pair = |[a, b]: &[HostBuffer<f32>; 2]| Ok((a.to_vec()?, b.to_vec()?));
        Ok([pair(&self.pinned)?, pair(&self.pageable)?, pair(&self.registered)?])
    }

    /// Whether each registered buffer is page-locked, for tests.
    pub fn registered_are_page_locked(&self) -> bool {
        self.registered.iter().all(HostBuffer::is_pinned)
    }
}

/// Decimal gigabytes per second for `bytes` moved in `ms`.
pub fn gb_per_s(bytes: usize, ms: f64) -> f64 {
    bytes as f64 / (ms * 1e6)
}

/// "2.3x faster", "1.5x slower" or "about as fast", for a pinned/pageable bandwidth ratio.
pub fn compare(ratio: f64) -> Text {
    if ratio >= FASTER {
        t!("pinned_vs_pageable.faster", x = fixed(ratio, 1))
    } else if ratio > 0.0 && ratio <= 1.0 / FASTER {
        t!("pinned_vs_pageable.slower", x = fixed(1.0 / ratio, 1))
    } else {
        t!("pinned_vs_pageable.as_fast", x = fixed(ratio, 2))
    }
}

impl Lesson for PinnedVsPageable {
    const NAME: &'static str = "pinned-vs-pageable";
    const SUMMARY: &'static str =
        "copy bandwidth from pinned and pageable memory, and how long an async copy holds the host";
    const DRAWING: Drawing = Drawing { host_row: true, ..Drawing::PLAIN };
    type Args = Args;

    fn versions(_: &Args) -> Vec<String> {
        KINDS.iter().map(|k| k.0.to_string()).collect()
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        let pinned = 2.0 * model.copy_ms(a.elements);
        Ok(Plan::new()
            // Pinned, pageable and registered, each an input and an output.
            .host::<f32>(a.elements, 6)?
            .device::<f32>(a.elements, 3)?
            .work(pinned * (2.0 + PAGEABLE_SLOWER), "--elements"))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<PinnedVsPageable> {
        let (n, input) = (a.elements, random_inputs(a.elements, seed));
        let t = Instant::now();
        let registered_input = HostBuffer::registered_from_vec(gpu, input.clone())?;
        let register_ms = t.elapsed().as_secs_f64() * 1e3;
        let registered_output = HostBuffer::registered_from_vec(gpu, vec![0.0; n])?;
        Ok(PinnedVsPageable {
            bytes: n * std::mem::size_of::<f32>(),
            pinned: [HostBuffer::pinned_from(gpu, &input)?, HostBuffer::pinned(gpu, n)?],
            pageable: [HostBuffer::pageable_from_vec(gpu, input)?, HostBuffer::pageable(gpu, n)?],
            registered: [registered_input, registered_output],
            register_ms,
            dev: [
                DeviceBuffer::zeroed(gpu, n)?,
                DeviceBuffer::zeroed(gpu, n)?,
                DeviceBuffer::zeroed(gpu, n)?,
            ],
            stream: Stream::new(gpu, "copies")?,
            marks: [Event::new(gpu)?, Event::new(gpu)?],
        })
    }

    fn version(&mut self, _gpu: &Gpu, v: usize) -> Result<Sample> {
        self.copy(v)
    }

    fn streams(&self) -> Vec<&Stream> {
        vec![&self.stream]
    }

    /// The three copies in: from pageable, pinned and registered memory.
    fn drawn(&self) -> Vec<usize> {
        vec![H2D_PAGEABLE, H2D_PINNED, H2D_REGISTERED]
    }

    /// Pinned in -> device -> pinned out, and pageable in -> device -> pageable out, are
    /// both the input, bit for bit: all four copies moved the data intact.
    fn verify(&mut self, _gpu: &Gpu, m: &Measured, checks: &mut Checks) -> Result<()> {
        let intact = |[input, output]: &[HostBuffer<f32>; 2], what: &str| {
            ensure_bitwise_equal(what, &output.read()?, &input.read()?)
        };
        let outcome = intact(&self.pinned, "pinned H2D then D2H vs input")
            .and_then(|()| intact(&self.pageable, "pageable H2D then D2H vs input"))
            .map(|()| t!("pinned_vs_pageable.intact", bytes = self.bytes));
        checks.record("data intact in all four copies, bit for bit", outcome);
        let registered = intact(&self.registered, "registered H2D then D2H vs input")
            .map(|()| t!("pinned_vs_pageable.registered_intact", bytes = self.bytes));
        checks
            .record("registered buffers: data intact through both copies, bit for bit", registered);
        let claim = check_claim(m, self.bytes);
        checks.concurrency("pinned returns at once, pageable holds the host", claim);
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        interpret(m, self.bytes, r);
        explain_registered(m, self.bytes, self.register_ms, r);
    }

    fn plot(&self, m: &Measured) -> Option<Plot> {
        Some(bandwidth_plot(m, self.bytes))
    }
}

/// The median bandwidth of each copy: a group per direction, pageable beside pinned (and
/// registered).
pub fn bandwidth_plot(m: &Measured, bytes: usize) -> Plot {
    // A group per direction: its bars in KINDS' order, the registered one last.
    let kinds = KINDS.iter().zip(&m.versions);
    let in_groups = kinds.clone().filter(|k| k.0 .2).chain(kinds.filter(|k| !k.0 .2));
    let bars = in_groups.map(|(&(_, memory, to_device), v)| {
        let group = if to_device { "host to device" } else { "device to host" };
        let name = match memory {
            Memory::Pageable => "pageable",
            Memory::Pinned => "pinned",
            Memory::Registered => "registered",
        };
        Bar::new(group, name, gb_per_s(bytes, v.time.median))
    });
    Plot::bars("pinned-vs-pageable: median copy bandwidth", "GB/s", bars.collect())
}

/// Host time inside the call over the copy's GPU time, for version `v`.
pub fn held_fraction(m: &Measured, v: usize) -> f64 {
    m.version(v).part(IN_CALL) / m.version(v).time.median
}

/// The lesson's claim: a pinned async copy returns at once (under half its GPU time inside
/// the call), a pageable one holds the host (over half). Asserted from
/// [`MIN_BYTES_FOR_CLAIM`] up.
pub fn check_claim(m: &Measured, bytes: usize) -> Result<Text> {
    if bytes < MIN_BYTES_FOR_CLAIM {
        let why = t!("pinned_vs_pageable.too_small", bytes, min = MIN_BYTES_FOR_CLAIM);
        return Ok(t!("check.not_asserted", why));
    }
    let held = |v: usize| held_fraction(m, v);
    // Registered memory is page-locked: its calls only enqueue, as pinned ones do.
    let kinds = KINDS.len().min(m.versions.len());
    // The versions that held the host when they should not have, or did not when they
    // should, one after the other (separated by semicolons).
    let wrong = (0..kinds)
        .filter(|&v| match KINDS[v].1 {
            Memory::Pageable => held(v) <= 0.5,
            Memory::Pinned | Memory::Registered => held(v) >= 0.5,
        })
        .map(|v| {
            let k = m.version(v);
            let (kind, in_call, ms) =
                (Text::label(k.name.clone()), fixed(k.part(IN_CALL), 3), fixed(k.time.median, 3));
            t!("error.pinned_vs_pageable.held_wrong_item", kind, in_call, ms)
        })
        .reduce(|first, rest| t!("error.pinned_vs_pageable.and_then", first, rest));
    if let Some(wrong) = wrong {
        Err(Error::Verification(t!("error.pinned_vs_pageable.held_wrong", wrong)))
    } else {
        let each = (0..kinds).map(|v| (KINDS[v].0, fixed(held(v) * 100.0, 0)));
        let each = Text::List(
            each.map(|(kind, pct)| t!("pinned_vs_pageable.held_item", kind, pct)).collect(),
        );
        Ok(t!("pinned_vs_pageable.held_for", each))
    }
}

/// What registering an existing buffer cost, and how its copies compare with pinned ones.
pub fn explain_registered(m: &Measured, bytes: usize, register_ms: f64, r: &mut Report) {
    if m.versions.len() <= D2H_REGISTERED {
        return;
    }
    let bw = |v: usize| gb_per_s(bytes, m.version(v).time.median);
    let (h2d, d2h) = (bw(H2D_REGISTERED) / bw(H2D_PINNED), bw(D2H_REGISTERED) / bw(D2H_PINNED));
    r.figure("H2D registered / pinned bandwidth", h2d, "x")
        .figure("D2H registered / pinned bandwidth", d2h, "x")
        .figure("cudaHostRegister of the input, host time (once, in setup)", register_ms, "ms");
    let call = fixed(m.version(H2D_REGISTERED).part(IN_CALL), 3);
    let copy = fixed(m.version(H2D_REGISTERED).time.median, 3);
    let [h2d, d2h] = [h2d, d2h].map(|x| fixed(x, 2));
    let register = fixed(register_ms, 3);
    r.explain(t!("pinned_vs_pageable.registered", register, h2d, d2h, call, copy));
}

/// The figures and what they mean (a free function, so tests can feed it made-up data).
pub fn interpret(m: &Measured, bytes: usize, r: &mut Report) {
    r.param("bytes", bytes);
    let bw = |v: usize| gb_per_s(bytes, m.version(v).time.median);
    for (v, k) in m.versions.iter().enumerate() {
        r.figure(&format!("{}: bandwidth, median", k.name), bw(v), "GB/s").figure(
            &format!("{}: host time inside the call", k.name),
            k.part(IN_CALL),
            "ms",
        );
    }
    let h2d = bw(H2D_PINNED) / bw(H2D_PAGEABLE);
    let d2h = bw(D2H_PINNED) / bw(D2H_PAGEABLE);
    r.figure("H2D pinned / pageable bandwidth", h2d, "x").figure(
        "D2H pinned / pageable bandwidth",
        d2h,
        "x",
    );
    let big_enough = bytes >= MIN_BYTES_FOR_CLAIM;
    if big_enough {
        let faster = h2d >= FASTER || d2h >= FASTER;
        let (h2d, d2h) = (compare(h2d), compare(d2h));
        r.explain(if faster {
            t!("pinned_vs_pageable.dma", h2d, d2h)
        } else {
            t!("pinned_vs_pageable.kept_up", h2d, d2h)
        });
    } else {
        let (h2d, d2h, mib) = (fixed(h2d, 1), fixed(d2h, 1), MIN_BYTES_FOR_CLAIM >> 20);
        let elements = MIN_BYTES_FOR_CLAIM / std::mem::size_of::<f32>();
        r.explain(t!("pinned_vs_pageable.tiny", bytes, h2d, d2h, mib, elements));
    }
    let held = |v: usize| {
        let k = m.version(v);
        let (call, copy) = (fixed(k.part(IN_CALL), 3), fixed(k.time.median, 3));
        t!("pinned_vs_pageable.held", call, copy)
    };
    let pinned = held(H2D_PINNED);
    let pageable = held(H2D_PAGEABLE);
    r.explain(if !big_enough {
        t!("pinned_vs_pageable.not_asserted", pinned, pageable)
    } else if check_claim(m, bytes).is_ok() {
        t!("pinned_vs_pageable.claim", pinned, pageable)
    } else {
        t!("pinned_vs_pageable.claim_failed", pinned, pageable)
    });
    r.explain(t!("pinned_vs_pageable.reuse"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

    fn plan(flags: &[&str]) -> Result<()> {
        PinnedVsPageable::plan(&args_from::<PinnedVsPageable>(flags)?, &WorkModel::H100)?
            .admit(None)
    }

    #[test]
    fn sizes_and_host_memory_are_checked_before_the_gpu() {
        assert!(plan(&[]).is_ok());
        assert!(plan(&["--elements", "1"]).is_ok());
        for n in ["0", "4294967296", "4611686018427387904"] {
            let e = plan(&["--elements", n]).unwrap_err().to_string();
            assert!(e.contains("whole number from 1 to 4294967295"), "{n}: {e}");
        }
        // The largest copy (16 GiB) stays far under a minute even from pageable memory.
        let args = args_from::<PinnedVsPageable>(&["--elements", "4294967295"]).unwrap();
        let p = PinnedVsPageable::plan(&args, &WorkModel::H100).unwrap();
        assert!(p.ms_per_repeat < 10e3 && p.host_bytes == 24 * 4294967295, "{p:?}");
    }

    #[test]
    fn comparisons_follow_the_ratio() {
        assert_eq!(compare(2.34).en(), "2.3x faster");
        assert_eq!(compare(0.2).en(), "5.0x slower");
        assert!(compare(1.0).en().starts_with("about as fast"));
        assert!(compare(f64::NAN).en().starts_with("about as fast"));
    }

    #[test]
    fn bandwidth_is_decimal_gigabytes_per_second() {
        assert!((gb_per_s(1_000_000_000, 1000.0) - 1.0).abs() < 1e-12);
        assert!((gb_per_s(64 << 20, 1.2) - 55.924).abs() < 1e-3);
    }

    /// (host ms inside the call, GPU ms) of each kind, in [`KINDS`]' order.
    fn measured(kinds: [(f64, f64); 6]) -> Measured {
        let names = PinnedVsPageable::versions(&args_from::<PinnedVsPageable>(&[]).unwrap());
        let runs = kinds.map(|(host, gpu)| vec![Sample::ms(gpu).part(IN_CALL, host)]);
        Measured::from_samples(names, runs.to_vec())
    }

    const GOOD: [(f64, f64); 6] =
        [(6.0, 6.5), (0.01, 1.2), (6.4, 6.5), (0.01, 1.2), (0.01, 1.25), (0.01, 1.2)];

    #[test]
    fn the_claim_needs_pinned_quick_and_pageable_held() {
        assert!(check_claim(&measured(GOOD), 64 << 20).is_ok());
        let mut pinned_blocked = GOOD;
        pinned_blocked[H2D_PINNED] = (1.1, 1.2);
        let e = check_claim(&measured(pinned_blocked), 64 << 20).unwrap_err();
        assert!(e.to_string().contains("H2D pinned: 1.100 ms"), "{e}");
        let mut pageable_free = GOOD;
        pageable_free[D2H_PAGEABLE] = (0.1, 6.5);
        assert!(check_claim(&measured(pageable_free), 64 << 20).is_err());
        // A registered buffer is page-locked: a call that holds the host fails the claim too.
        let mut registered_blocked = GOOD;
        registered_blocked[D2H_REGISTERED] = (1.0, 1.2);
        let e = check_claim(&measured(registered_blocked), 64 << 20).unwrap_err();
        assert!(e.to_string().contains("D2H registered: 1.000 ms"), "{e}");
        // Too small to assert anything: passes with a note.
        let note = check_claim(&measured(pinned_blocked), 1024).unwrap().en();
        assert!(note.starts_with("not asserted"), "{note}");
    }

    fn told(kinds: [(f64, f64); 6], bytes: usize) -> String {
        let mut r = Report::new("pinned-vs-pageable", "", "");
        interpret(&measured(kinds), bytes, &mut r);
        r.interpretation.join("\n")
    }

    #[test]
    fn interpretation_follows_the_data() {
        let good = told(GOOD, 64 << 20);
        assert!(good.contains("5.4x faster") && good.contains("not asynchronous"), "{good}");
        let even = [(6.0, 1.2), (1.1, 1.2), (6.4, 1.2), (0.01, 1.2), (0.01, 1.2), (0.01, 1.2)];
        let even = told(even, 64 << 20);
        assert!(even.contains("kept up") && even.contains("but not here"), "{even}");
        let tiny = told(GOOD, 4);
        assert!(!tiny.contains("faster") && !tiny.contains("not asynchronous"), "{tiny}");
        assert!(tiny.contains("is not asserted"), "{tiny}");
    }

    /// GPU times that differ by kind, so a swapped group or bar shows.
    const DISTINCT: [(f64, f64); 6] =
        [(6.0, 6.5), (0.01, 1.2), (6.4, 4.0), (0.01, 1.6), (0.01, 1.3), (0.01, 1.7)];

    #[test]
    fn the_plot_is_bandwidth_by_direction_pageable_beside_pinned() {
        let bytes = 64 << 20;
        let plot = bandwidth_plot(&measured(DISTINCT), bytes);
        let Plot::Bars { bars, .. } = &plot else { panic!("not bars: {plot:?}") };
        let gb = |ms| gb_per_s(bytes, ms);
        let expected = [
            Bar::new("host to device", "pageable", gb(6.5)),
            Bar::new("host to device", "pinned", gb(1.2)),
            Bar::new("host to device", "registered", gb(1.3)),
            Bar::new("device to host", "pageable", gb(4.0)),
            Bar::new("device to host", "pinned", gb(1.6)),
            Bar::new("device to host", "registered", gb(1.7)),
        ];
        assert_eq!(bars, &expected);
    }

    #[test]
    fn registering_is_set_beside_pinned_memory() {
        let mut r = Report::new("pinned-vs-pageable", "", "");
        explain_registered(&measured(DISTINCT), 64 << 20, 12.5, &mut r);
        // Bandwidth ratios are time ratios inverted: pinned 1.2 ms against registered 1.3 ms.
        let h2d = r.value("H2D registered / pinned bandwidth").unwrap();
        assert!((h2d - 1.2 / 1.3).abs() < 1e-12, "{h2d}");
        let d2h = r.value("D2H registered / pinned bandwidth").unwrap();
        assert!((d2h - 1.6 / 1.7).abs() < 1e-12, "{d2h}");
        let setup = r.value("cudaHostRegister of the input, host time (once, in setup)");
        assert_eq!(setup, Some(12.5));
        let line = r.interpretation.join("\n");
        assert!(line.contains("took 12.500 ms") && line.contains("0.92x"), "{line}");
        // A run recorded with the four versions of before says nothing of registering.
        let mut old = Report::new("pinned-vs-pageable", "", "");
        let names = KINDS[..4].iter().map(|k| k.0.to_string()).collect();
        let four = GOOD[..4].iter().map(|&(h, g)| vec![Sample::ms(g).part(IN_CALL, h)]);
        explain_registered(&Measured::from_samples(names, four.collect()), 64 << 20, 1.0, &mut old);
        assert!(old.figures.is_empty() && old.interpretation.is_empty());
    }

    #[test]
    fn the_plot_draws_as_well_formed_svg() {
        let svg =
            crate::lab::record::plot::svg(&bandwidth_plot(&measured(DISTINCT), 64 << 20), "footer");
        let svg = svg.unwrap();
        let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
        let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).map(str::trim).collect();
        for want in ["host to device", "device to host", "pageable", "pinned", "footer"] {
            assert!(texts.contains(&want), "{want} missing in {texts:?}");
        }
        // Each bar is labelled with its GB/s: 64 MiB in 1.2 ms.
        assert!(texts.contains(&"55.9"), "{texts:?}");
    }
}
