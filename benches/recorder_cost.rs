//! What recording a run with CUPTI costs the GPU, taken apart: the experiments behind
//! docs/measurements.md's answer to "why does recording slow some lessons by more than 2%?".
//! Each prints its figures as lines of text; not a criterion bench, since each round turns
//! CUPTI on and off again, as `run --timeline` does.
//!
//! - `copies`: 64 host-to-device copies queued back to back on one stream, for three sizes.
//!   GPU time between two events with the recorder off and on (10 interleaved rounds), the
//!   cost per copy, and from the recording itself the idle time the copy engine left between
//!   one copy's end and the next one's start (the next was already queued).
//! - `waves`: a sleeping kernel of 4 waves of blocks that all sleep 100 µs, for three block
//!   sizes (so the same waves hold 4x fewer or more blocks). If the cost is per block, the
//!   cost per wave follows the blocks in it.
//!
//! Both use the recorder the lessons use, as they measure its cost ([`off_then_on`]): `STREAMLAB_RECORDER=events` compares
//! the events recorder, `cupti-gpu` CUPTI without driver-call tracing.
use streamlab::lab::harness::stats::Stats;
use streamlab::lab::record::recorder::off_then_on;
use streamlab::lab::record::span::{Recording, Source, Work};
use streamlab::lessons::graph::replay::Rounds;
use streamlab::runtime::{DeviceBuffer, Error, Gpu, HostBuffer, LaunchConfig, Result, Stream};

/// Interleaved rounds of each measurement, as the lessons' recording cost uses at most.
const ROUNDS: usize = 10;
/// Copies per round in `copies`.
const COPIES: usize = 64;
/// Waves per kernel in `waves`, and each block's sleep.
const WAVES: usize = 4;
const SLEEP_US: f64 = 100.0;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let Ok(gpu) = Gpu::new(0) else {
        println!("recorder_cost: no CUDA GPU, nothing run");
        return;
    };
    let outcome = match args.first().map(String::as_str) {
        Some("copies") => copies(&gpu),
        Some("waves") => waves(&gpu),
        _ => {
            println!("usage: recorder_cost copies | waves");
            Ok(())
        }
    };
    if let Err(e) = outcome {
        eprintln!("recorder_cost: {e}");
        std::process::exit(1);
    }
}

/// GPU ms of `issue` on `s` with the recorder off and on, `ROUNDS` interleaved rounds of
/// [`off_then_on`] (as `run --timeline` measures its cost). Returns the two medians and the
/// last recording.
fn off_and_on(
    gpu: &Gpu,
    s: &Stream,
    issue: &mut dyn FnMut() -> Result<()>,
) -> Result<(f64, f64, Recording)> {
    let rounds = Rounds::new(gpu)?;
    let (mut off, mut on, mut last) = (Vec::new(), Vec::new(), None);
    for _ in 0..ROUNDS {
        let (o, n, recording) = off_then_on(gpu, &[s], &mut || rounds.run(1, s, &mut *issue))?;
        off.push(o.value("gpu"));
        on.push(n.value("gpu"));
        last = Some(recording);
    }
    let last = last.ok_or_else(|| Error::Internal("recorder_cost: no round ran".into()))?;
    Ok((Stats::of(&off).median, Stats::of(&on).median, last))
}

fn copies(gpu: &Gpu) -> Result<()> {
    let s = Stream::new(gpu, "copies")?;
    println!("{COPIES} host-to-device copies back to back on one stream, GPU time, medians of {ROUNDS} rounds");
    for kib in [64usize, 1024, 4096] {
        let n = kib * 1024 / 4;
        let host = HostBuffer::<f32>::pinned(gpu, n)?;
        let dev: Vec<DeviceBuffer<f32>> =
            (0..COPIES).map(|_| DeviceBuffer::zeroed(gpu, n)).collect::<Result<_>>()?;
        let mut issue = || dev.iter().try_for_each(|d| s.copy_to_device(&host, d));
        issue()?;
        s.synchronize()?;
        let (off, on, recording) = off_and_on(gpu, &s, &mut issue)?;
        let mut spans: Vec<_> =
            recording.spans.iter().filter(|x| x.kind == Work::CopyToDevice).collect();
        spans.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
        let gaps: Vec<f64> =
            spans.windows(2).map(|w| (w[1].start_ms - w[0].end_ms) * 1e3).collect();
        let busy: Vec<f64> = spans.iter().map(|x| (x.end_ms - x.start_ms) * 1e3).collect();
        let gap = if gaps.is_empty() { f64::NAN } else { Stats::of(&gaps).median };
        let copy = if busy.is_empty() { f64::NAN } else { Stats::of(&busy).median };
        println!(
            "{kib:>5} KiB: off {:.1} µs, on {:.1} µs ({:+.1}%), {:+.2} µs per copy; recorded ({}): {} copies of {copy:.2} µs, engine idle between two of them {gap:.2} µs (median)",
            off * 1e3,
            on * 1e3,
            (on / off - 1.0) * 100.0,
            (on - off) * 1e3 / COPIES as f64,
            recorder(&recording),
            spans.len(),
        );
    }
    Ok(())
}

fn waves(gpu: &Gpu) -> Result<()> {
    let s = Stream::new(gpu, "waves")?;
    let cycles = gpu.info.cycles_for_micros(SLEEP_US);
    let sms = u32::try_from(gpu.info.multiprocessors).unwrap_or(1);
    println!(
        "a sleeping kernel of {WAVES} waves of {SLEEP_US} µs, GPU time, medians of {ROUNDS} rounds"
    );
    for threads in [64u32, 256, 1024] {
        let per_wave = sms * gpu.info.resident_blocks_per_sm(threads);
        let blocks = per_wave * WAVES as u32;
        let config = LaunchConfig::new((blocks, 1, 1), (threads, 1, 1));
        let mut issue = || gpu.sleep(&s, config, cycles);
        issue()?;
        s.synchronize()?;
        let (off, on, recording) = off_and_on(gpu, &s, &mut issue)?;
        let extra_us = (on - off) * 1e3;
        println!(
            "{threads:>4} threads a block, {per_wave} blocks a wave: off {:.1} µs, on {:.1} µs ({:+.1}%), {:+.1} µs per wave, {:+.1} ns per block ({})",
            off * 1e3,
            on * 1e3,
            (on / off - 1.0) * 100.0,
            extra_us / WAVES as f64,
            extra_us * 1e3 / f64::from(blocks),
            recorder(&recording),
        );
    }
    Ok(())
}

/// Which recorder made `r`, in a word.
fn recorder(r: &Recording) -> &'static str {
    match r.source {
        Source::Cupti { .. } => "CUPTI",
        _ => "events",
    }
}
