//! # SleepKernel on one stream versus one stream each
//!
//! Kernels on different streams may run at the same time, but only where the GPU has room:
//! a grid that fills every SM leaves another stream's kernel only the last wave's gaps,
//! while K one-block kernels on K streams run side by side, close to K times faster.
//!
//! The seed technique is the SleepKernel experiment of stream tutorials, each launch with
//! its own copy in before and copy out after:
//!
//! ```text
//! for (int i = 0; i < K; ++i) {            // one stream: s[i] = s[0]; K streams: s[i]
//!   cudaMemcpyAsync(d + off[i], h + off[i], bytes, cudaMemcpyHostToDevice, s[i]);
//!   SleepKernel<<<grid, block, 0, s[i]>>>(cycles);   // grid 64x64 of 16x16, or 1 of 1
//!   cudaMemcpyAsync(out + off[i], d + off[i], bytes, cudaMemcpyDeviceToHost, s[i]);
//! }
//! ```
//!
//! In Rust: `Stream::new` is `cudaStreamCreate`, `gpu.sleep(&s, LaunchConfig::new(grid,
//! block), cycles)` the launch, `s.copy_to_device` / `s.copy_to_host` the `cudaMemcpyAsync`s,
//! and `fork` / `join` (`cudaEventRecord` + `cudaStreamWaitEvent`) let two events on stream 0
//! time every stream.
//!
//! The bound: the one-block grid gains at most min(K, hardware queues) times; the claim is
//! half of that (at least 1.3x), and more than the full grid gains.
use std::ops::Range;

use serde::Serialize;

use crate::lab::harness::budget::{ensure_a_chunk_per_stream, MAX_ELEMENTS, MAX_STREAMS};
use crate::lab::harness::data::{chunk_ranges, ensure_bitwise_equal, random_inputs};
use crate::lab::kit::sleep::{connections, serial_ms, sleep_share, waves};
use crate::lab::{args, fixed, t, Checks, Lesson, Measured, Plan, Report, Sample, Text, WorkModel};
use crate::runtime::stream::{fork, join};
use crate::runtime::{DeviceBuffer, Error, Event, Gpu, HostBuffer, LaunchConfig, Result, Stream};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Floats copied, split over the launches [1..=4294967295]. More makes the copies weigh.
    #[arg(long, default_value_t = 1 << 20, value_parser = args::whole(1usize..=MAX_ELEMENTS))]
    pub elements: usize,
    /// Streams, one launch each [1..=64]. Try 8, then 16 (past the 8 hardware queues).
    #[arg(long, default_value_t = 4, value_parser = args::whole(1usize..=MAX_STREAMS))]
    pub streams: usize,
    /// Sleep of every block, µs [10..=10000000]. Try 20 to let the copies dominate.
    #[arg(long, default_value_t = 2000.0, value_parser = args::number(10.0..=1e7))]
    pub sleep_us: f64,
}

/// Blocks in the full grid (64 x 64), of 16 x 16 threads each.
pub const FULL_GRID_BLOCKS: usize = 64 * 64;
/// Below this share of sleeping in the one-stream time the copies set the pace: no claim.
pub const MIN_SLEEP_SHARE: f64 = 0.8;

/// The grids, in the versions' order (each on one stream, then on K): one block of one
/// thread leaves all SMs but one idle; 4,096 blocks of 256 take several waves on any GPU.
#[rustfmt::skip]
pub const GRIDS: [(&str, Dim3, Dim3); 2] = [
    ("small grid (1 block)", (1, 1, 1), (1, 1, 1)),
    ("full grid (64x64 blocks of 16x16)", (64, 64, 1), (16, 16, 1)),
];
type Dim3 = (u32, u32, u32);
pub const SMALL: usize = 0;
pub const FULL: usize = 1;

/// What the explanation needs of the run: flags and this GPU's facts.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Shape {
    pub streams: usize,
    pub sleep_ms: f64,
    pub cycles: u64,
    pub connections: usize,
    pub multiprocessors: i32,
    pub blocks_per_sm: u32,
}

pub struct SleepStreams {
    shape: Shape,
    chunks: Vec<Range<usize>>,
    streams: Vec<Stream>,
    input: HostBuffer<f32>,
    // Per version, so no version's copies can hide a missing copy of another.
    buffers: Vec<(HostBuffer<f32>, DeviceBuffer<f32>)>,
    marks: [Event; 2],
    fork: Event,
    joins: Vec<Event>,
}

impl SleepStreams {
    /// Version `v` (see [`GRIDS`]): K times copy in, sleep, copy out, all on stream 0
    /// ([`one_stream_version`]), or launch i with its copies on stream i
    /// ([`k_streams_version`]).
    /// Streams 1..K fork from and join into stream 0 (none with one stream): its two events
    /// bracket all the work.
    fn run(&self, gpu: &Gpu, v: usize) -> Result<Sample> {
        let g = v / 2; // two versions per grid: see `one_stream_version`
        let Some(&(_, grid, block)) = GRIDS.get(g) else {
            return Err(Error::Internal(format!("sleep-streams has no version {v}")));
        };
        let ((out, dev), [start, stop]) = (&self.buffers[v], &self.marks);
        let all: Vec<&Stream> = self.streams.iter().collect();
        let (first, k) = (all[0], all.len());
        let (on, rest) = match v == k_streams_version(g) {
            true => (all.clone(), &all[1..]),
            false => (vec![first; k], &all[..0]),
        };
        start.record(first)?;
        fork(&self.fork, first, rest)?;
        for (s, r) in on.iter().zip(&self.chunks) {
            s.copy_to_device(self.input.slice(r.clone())?, dev.slice(r.clone())?)?;
            gpu.sleep(s, LaunchConfig::new(grid, block), self.shape.cycles)?;
            s.copy_to_host(dev.slice(r.clone())?, out.slice(r.clone())?)?;
        }
        join(&self.joins, first, rest)?;
        stop.record(first)?;
        stop.synchronize()?;
        Ok(Sample::ms(stop.elapsed_ms(start)?))
    }
}

/// The speed-up the small grid must beat with `k` streams on `connections` hardware queues
/// (none with one stream): half the ideal min(k, connections), for launch and copy costs.
pub fn small_grid_claim(k: usize, connections: usize) -> Option<f64> {
    (k >= 2).then(|| (k.min(connections) as f64 / 2.0).max(1.3))
}

/// Grid `g`'s version with all K launches on stream 0: each grid has two versions, in
/// [`GRIDS`]' order.
pub fn one_stream_version(g: usize) -> usize {
    2 * g
}

/// Grid `g`'s version with launch i on stream i.
pub fn k_streams_version(g: usize) -> usize {
    2 * g + 1
}

/// Grid `g`'s median time on one stream, and that over its median on K streams.
pub fn one_stream_ms(m: &Measured, g: usize) -> f64 {
    m.version(one_stream_version(g)).time.median
}
pub fn speedup(m: &Measured, g: usize) -> f64 {
    one_stream_ms(m, g) / m.version(k_streams_version(g)).time.median
}

impl Lesson for SleepStreams {
    const NAME: &'static str = "sleep-streams";
    const SUMMARY: &'static str = "SleepKernel 4x on one stream vs once on each of 4 streams, with a full grid and with one block";
    type Args = Args;

    fn versions(a: &Args) -> Vec<String> {
        let (k, mut names) = (a.streams, Vec::new());
        for (label, ..) in GRIDS {
            names.push(format!("{label}: {k}x on one stream"));
            names.push(format!("{label}: {k} streams"));
        }
        names
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        ensure_a_chunk_per_stream(a.streams, a.elements)?;
        // Worst case, nothing overlaps: K sleeps a small-grid version, K x waves a full one.
        let versions = 2 * GRIDS.len();
        let sleeps = 2.0 * a.streams as f64 * (model.waves(FULL_GRID_BLOCKS) as f64 + 1.0);
        let copies = 2.0 * versions as f64 * model.copy_ms(a.elements);
        Ok(Plan::new()
            // The generated input, its pinned copy and one pinned output per version.
            .host::<f32>(a.elements, 2 + versions)?
            .device::<f32>(a.elements, versions)?
            .work(serial_ms(sleeps, a.sleep_us), "--streams x --sleep-us")
            .work(copies, "--elements"))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<SleepStreams> {
        let (n, versions) = (a.elements, 2 * GRIDS.len());
        Ok(SleepStreams {
            shape: Shape {
                streams: a.streams,
                sleep_ms: a.sleep_us / 1e3,
                cycles: gpu.info.cycles_for_micros(a.sleep_us),
                connections: connections(),
                multiprocessors: gpu.info.multiprocessors,
                blocks_per_sm: gpu.info.resident_blocks_per_sm(16 * 16),
            },
            chunks: chunk_ranges(n, a.streams),
            streams: (0..a.streams)
                .map(|i| Stream::new(gpu, format!("sleep-{i}")))
                .collect::<Result<_>>()?,
            input: HostBuffer::pinned_from(gpu, &random_inputs(n, seed))?,
            buffers: (0..versions)
                .map(|_| Ok((HostBuffer::pinned(gpu, n)?, DeviceBuffer::zeroed(gpu, n)?)))
                .collect::<Result<_>>()?,
            marks: [Event::new(gpu)?, Event::new(gpu)?],
            fork: Event::without_timing(gpu)?,
            joins: (1..a.streams).map(|_| Event::without_timing(gpu)).collect::<Result<_>>()?,
        })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        self.run(gpu, v)
    }

    fn streams(&self) -> Vec<&Stream> {
        self.streams.iter().collect()
    }

    fn verify(&mut self, _gpu: &Gpu, m: &Measured, checks: &mut Checks) -> Result<()> {
        let input = self.input.read()?;
        let outs = self.buffers.iter().map(|(out, _)| out);
        let round_trips = outs.zip(&m.versions).try_for_each(|(out, v)| {
            ensure_bitwise_equal(&format!("{} output vs input", v.name), &out.read()?, &input)
        });
        let all = t!("sleep_streams.round_trip", n = input.len());
        checks.record("copies round-trip bit for bit", round_trips.map(|()| all));
        let claim = self.shape.check_claim(m);
        checks.concurrency("small grid overlaps across streams", claim);
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        self.shape.interpret(m, r);
    }
}

impl Shape {
    /// Why the small-grid claim cannot be asserted for these measurements, if it cannot.
    pub fn claim_not_asserted(&self, m: &Measured) -> Option<Text> {
        if self.streams < 2 {
            return Some(t!("sleep_streams.one_stream"));
        }
        let pct = 100.0 * sleep_share(self.streams as f64, self.sleep_ms, one_stream_ms(m, SMALL));
        let why = t!("sleep_streams.copies_dominate", pct = fixed(pct, 0));
        (pct < 100.0 * MIN_SLEEP_SHARE).then_some(why)
    }

    /// The lesson's claim: one-block kernels on K streams run side by side (above
    /// [`small_grid_claim`]) and gain more than full-grid ones, where it can be asserted.
    pub fn check_claim(&self, m: &Measured) -> Result<Text> {
        if let Some(why) = self.claim_not_asserted(m) {
            return Ok(t!("check.not_asserted", why));
        }
        let threshold = small_grid_claim(self.streams, self.connections).unwrap_or(1.0);
        let (small, full) = (speedup(m, SMALL), speedup(m, FULL));
        if small > threshold && small > full {
            Ok(t!(
                "sleep_streams.claim",
                small = fixed(small, 2),
                threshold = fixed(threshold, 2),
                full = fixed(full, 2)
            ))
        } else {
            let [threshold, small, full] = [threshold, small, full].map(|x| fixed(x, 2));
            Err(Error::Verification(t!(
                "error.sleep_streams.small_not_ahead",
                threshold,
                small,
                full
            )))
        }
    }

    /// The figures and what they mean.
    pub fn interpret(&self, m: &Measured, r: &mut Report) {
        let (k, connections, sms) = (self.streams, self.connections, self.multiprocessors);
        let waves = waves(FULL_GRID_BLOCKS, sms, self.blocks_per_sm);
        let (small, full) = (speedup(m, SMALL), speedup(m, FULL));
        r.param("cycles", self.cycles);
        r.param("hardware_queues", connections);
        r.figure(&format!("{}: speed-up", GRIDS[SMALL].0), small, "x")
            .figure(&format!("{}: speed-up", GRIDS[FULL].0), full, "x")
            .figure("full grid: waves of resident blocks", waves, "waves");
        let sleeps = k as f64 * waves.ceil();
        let full_share = sleep_share(sleeps, self.sleep_ms, one_stream_ms(m, FULL));
        let (per_sm, all) = (self.blocks_per_sm, sms.max(1) as u32 * self.blocks_per_sm);
        let resident = t!("sleep_streams.resident", all, sms, per_sm);
        let (waves_n, full_n, pct) = (waves, full, fixed(full_share * 100.0, 0));
        let [waves, small, full] = [(waves, 1), (small, 2), (full, 2)].map(|(v, d)| fixed(v, d));
        r.explain(if k < 2 {
            t!("sleep_streams.full_one_stream", waves, resident)
        } else if full_share < MIN_SLEEP_SHARE {
            t!("sleep_streams.full_copies", pct, full)
        } else if waves_n < 1.0 {
            t!("sleep_streams.full_fits", resident, full)
        } else if full_n < 1.25 {
            t!("sleep_streams.full_busy", waves, resident, full)
        } else {
            t!("sleep_streams.full_gained", waves, resident, full)
        });
        let (ideal, idle) = (k.min(connections), sms - 1);
        r.explain(match self.claim_not_asserted(m) {
            Some(why) => t!("sleep_streams.small_no_claim", small, why),
            None if self.check_claim(m).is_ok() => t!("sleep_streams.small", idle, k, small, ideal),
            None => t!("sleep_streams.small_failed", k, ideal, small, full),
        });
        r.explain(if k > connections {
            t!("sleep_streams.shared_queues", k, connections)
        } else {
            t!("sleep_streams.queues", connections)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

    #[test]
    fn claims_scale_with_streams_up_to_the_connection_count() {
        assert_eq!(small_grid_claim(1, 8), None);
        assert_eq!(small_grid_claim(2, 8), Some(1.3));
        assert_eq!(small_grid_claim(4, 8), Some(2.0));
        assert_eq!(small_grid_claim(8, 8), Some(4.0));
        assert_eq!(small_grid_claim(64, 8), Some(4.0));
        // CUDA_DEVICE_MAX_CONNECTIONS=32: 32 queues.
        assert_eq!(small_grid_claim(64, 32), Some(16.0));
        assert_eq!(small_grid_claim(8, 2), Some(1.3));
    }

    // What the flag checks refuse is tested in tests/sleep_streams.rs.

    #[test]
    fn grids_are_the_tutorials() {
        assert_eq!((GRIDS[FULL].1, GRIDS[FULL].2), ((64, 64, 1), (16, 16, 1)));
        assert_eq!((GRIDS[SMALL].1, GRIDS[SMALL].2), ((1, 1, 1), (1, 1, 1)));
        assert_eq!(FULL_GRID_BLOCKS, 64 * 64);
    }

    fn shape(streams: usize, sleep_us: f64) -> Shape {
        Shape {
            streams,
            sleep_ms: sleep_us / 1e3,
            cycles: 0,
            connections: 8,
            multiprocessors: 132,
            blocks_per_sm: 8,
        }
    }

    /// Medians in versions' order: small one, small K, full one, full K.
    fn measured(small: (f64, f64), full: (f64, f64)) -> Measured {
        let names = SleepStreams::versions(&args_from::<SleepStreams>(&[]).unwrap());
        let one = |ms| vec![Sample::ms(ms)];
        Measured::from_samples(names, vec![one(small.0), one(small.1), one(full.0), one(full.1)])
    }

    fn told(s: &Shape, m: &Measured) -> String {
        let mut r = Report::new("sleep-streams", "", "");
        s.interpret(m, &mut r);
        r.interpretation.join("\n")
    }

    #[test]
    fn the_claim_is_asserted_only_with_streams_and_sleeps_to_overlap() {
        let good = measured((8.1, 2.1), (32.0, 31.0));
        assert!(shape(4, 2000.0).check_claim(&good).is_ok());
        let no_overlap = measured((8.1, 7.9), (32.0, 31.0));
        assert!(shape(4, 2000.0).check_claim(&no_overlap).is_err());
        // 4 sleeps of 0.01 ms in 8 ms: the copies dominate, nothing is claimed.
        let note = shape(4, 10.0).check_claim(&no_overlap).unwrap().en();
        assert!(note.starts_with("not asserted"), "{note}");
        let one = shape(1, 2000.0).check_claim(&no_overlap).unwrap().en();
        assert!(one.starts_with("not asserted"), "{one}");
    }

    #[test]
    fn interpretation_follows_the_data() {
        let s = shape(4, 2000.0);
        let good = told(&s, &measured((8.1, 2.1), (32.0, 31.0)));
        assert!(good.contains("run side by side:") && good.contains("last wave's gaps"), "{good}");
        let bad = told(&s, &measured((8.1, 7.9), (32.0, 31.0)));
        assert!(bad.contains("gained only") && !bad.contains("run side by side:"), "{bad}");
        let gained = told(&s, &measured((8.1, 2.1), (32.0, 16.0)));
        assert!(gained.contains("yet streams gained 2.00x"), "{gained}");
        let one = told(&shape(1, 2000.0), &measured((2.1, 2.1), (8.0, 8.0)));
        assert!(one.contains("not a claim here") && !one.contains("run side by side:"), "{one}");
        let copies = told(&shape(4, 10.0), &measured((8.1, 7.9), (8.2, 8.0)));
        assert!(
            copies.contains("raise --sleep-us") && copies.contains("copies dominate"),
            "{copies}"
        );
        let queues = told(&shape(16, 2000.0), &measured((32.1, 4.2), (128.0, 127.0)));
        assert!(queues.contains("share 8 hardware queues"), "{queues}");
    }
}
