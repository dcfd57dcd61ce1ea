//! Why the side-stream version stays above its bound: an experiment beside the lesson's timed
//! runs, never inside them (`benches/mixed_precision.rs` prints it; `scripts/gpu-mp-check.sh`
//! runs it; the lesson runs it after its checks).
//!
//! The bound `c + (B-1) max(c, u) + u` takes c and u from the one-stream version, where each
//! kernel has the GPU to itself. In the side-stream version layer step i and the update and
//! cast of gradient i-1 both become ready when step i-1 ends (step i waits for the cast of
//! gradient i-2, which ran beside step i-1), so they run together on the same SMs and the
//! same memory. The probe times every kernel of that schedule with its own pair of events:
//! how long each took beside the other, against alone, and how long the compute stream sat
//! idle between steps (waiting for a cast, or for the events that link the streams).
//!
//! The lesson runs it too, after its checks ([`LESSON_ROUNDS`] rounds): its report sets the
//! bound from the times beside (each kernel stretched as the probe saw it) beside the free
//! one, and splits the side stream's gap with them ([`Overlap::split`]).
use crate::lab::harness::stats::Stats;
use crate::lab::kit::contention::{stretch, Split};
use crate::runtime::{Event, Gpu, Result, Stream};

use super::MixedPrecision;

/// Rounds of the probe the lesson runs after its checks (each about 1 ms at the defaults).
pub const LESSON_ROUNDS: usize = 5;

/// Per-step medians over the probe's rounds, in ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Overlap {
    /// One layer step with nothing beside it (B steps in a row on the compute stream).
    pub layer_alone: f64,
    /// One update and cast with nothing beside it (B in a row on the side stream).
    pub update_alone: f64,
    /// A layer step while an update and cast run beside it (steps 1 to B-1 of the schedule).
    pub layer_beside: f64,
    /// An update and cast while a layer step runs beside it (gradients 0 to B-2).
    pub update_beside: f64,
    /// The compute stream's idle time between layer steps, summed over the run.
    pub idle: f64,
    /// The probed side-stream run, first event to last.
    pub total: f64,
    /// Steps (B).
    pub steps: usize,
}

impl Overlap {
    /// The lesson's bound from the times alone: `c + (B-1) max(c, u) + u`.
    pub fn bound_alone(&self) -> f64 {
        bound(self.layer_alone, self.update_alone, self.layer_alone, self.update_alone, self.steps)
    }

    /// The same bound with the times beside each other for the B-1 steps that overlap.
    pub fn bound_beside(&self) -> f64 {
        bound(
            self.layer_alone,
            self.update_alone,
            self.layer_beside,
            self.update_beside,
            self.steps,
        )
    }

    /// How much slower a layer step ran beside an update and cast than alone.
    pub fn layer_stretch(&self) -> f64 {
        stretch(self.layer_beside, self.layer_alone)
    }

    /// How much slower an update and cast ran beside a layer step than alone.
    pub fn update_stretch(&self) -> f64 {
        stretch(self.update_beside, self.update_alone)
    }

    /// The side stream's time `measured` against the lesson's bound from `c` and `u` (one
    /// layer step and one update and cast, timed alone on one stream) and against the same
    /// bound with the B-1 overlapped steps' kernels stretched as the probe saw them:
    /// `c + (B-1) max(c·sc, u·su) + u`. The stretches, not the probe's own times, so that
    /// both bounds start from the same c and u and differ only by the slowdown beside.
    pub fn split(&self, c: f64, u: f64, measured: f64) -> Split {
        let (layer, update) = (c * self.layer_stretch(), u * self.update_stretch());
        Split {
            measured,
            free: bound(c, u, c, u, self.steps),
            aware: bound(c, u, layer, update, self.steps),
        }
    }

    /// Lines for the note: every figure the probe measured, and what they add up to.
    pub fn lines(&self, format: &str) -> Vec<String> {
        let ratio = |a: f64, b: f64| a / b;
        vec![
            format!(
                "overlap {format}: layer step alone {:.4} ms, beside update+cast {:.4} ms ({:.3}x)",
                self.layer_alone,
                self.layer_beside,
                ratio(self.layer_beside, self.layer_alone)
            ),
            format!(
                "overlap {format}: update+cast alone {:.4} ms, beside a layer step {:.4} ms ({:.3}x)",
                self.update_alone,
                self.update_beside,
                ratio(self.update_beside, self.update_alone)
            ),
            format!(
                "overlap {format}: side stream (probed) {:.4} ms; bound from times alone {:.4} ms (measured/bound {:.3}x); bound from times beside {:.4} ms ({:.3}x); compute stream idle between steps {:.4} ms",
                self.total,
                self.bound_alone(),
                ratio(self.total, self.bound_alone()),
                self.bound_beside(),
                ratio(self.total, self.bound_beside()),
                self.idle
            ),
        ]
    }
}

/// First step and last update alone, the B-1 steps between at the slower of the two kernels.
fn bound(c0: f64, u_last: f64, c: f64, u: f64, steps: usize) -> f64 {
    c0 + (steps.saturating_sub(1)) as f64 * c.max(u) + u_last
}

/// One round's events: a start and an end around every kernel launch of a kind.
struct Spans {
    start: Vec<Event>,
    end: Vec<Event>,
}

impl Spans {
    fn new(gpu: &Gpu, n: usize) -> Result<Spans> {
        let events = || (0..n).map(|_| Event::new(gpu)).collect::<Result<Vec<_>>>();
        Ok(Spans { start: events()?, end: events()? })
    }

    /// Runs `work` between a start and an end event on `s`.
    fn around(&self, s: &Stream, i: usize, work: impl FnOnce() -> Result<()>) -> Result<()> {
        self.start[i].record(s)?;
        work()?;
        self.end[i].record(s)
    }

    fn ms(&self, i: usize) -> Result<f64> {
        self.end[i].elapsed_ms(&self.start[i])
    }
}

impl MixedPrecision {
    /// The experiment above, `rounds` times after one warm-up. It keeps nothing of what it
    /// computes: the versions' results (`output`) are left as they were.
    pub fn probe_overlap(&mut self, gpu: &Gpu, rounds: usize) -> Result<Overlap> {
        let b = self.a.batches;
        let (layers, updates) = (Spans::new(gpu, b)?, Spans::new(gpu, b)?);
        let mut per_round = Vec::new();
        for _ in 0..rounds.max(1) + 1 {
            per_round.push(self.probe_round(gpu, &layers, &updates)?);
        }
        let rows = &per_round[1..];
        let median = |k: usize| Stats::of_each(rows, |r| r[k]).median;
        Ok(Overlap {
            layer_alone: median(0),
            update_alone: median(1),
            layer_beside: median(2),
            update_beside: median(3),
            idle: median(4),
            total: median(5),
            steps: b,
        })
    }

    /// One round: [layer alone, update alone, layer beside, update beside, idle, total].
    fn probe_round(&self, gpu: &Gpu, layers: &Spans, updates: &Spans) -> Result<[f64; 6]> {
        let (compute, side, b) = (&self.compute, &self.side, self.a.batches);
        let median = |s: &Spans, range: std::ops::Range<usize>| -> Result<f64> {
            let ms = range.map(|i| s.ms(i)).collect::<Result<Vec<_>>>()?;
            Ok(if ms.is_empty() { 0.0 } else { Stats::of(&ms).median })
        };
        // Alone: the layer steps in a row, then the updates and casts in a row.
        self.compute.copy_on_device(&self.initial, &self.master)?;
        gpu.cast_to_half(compute, &self.master, &self.w16[0], self.a.format)?;
        for i in 0..b {
            layers.around(compute, i, || self.layer(gpu, i))?;
        }
        compute.synchronize()?;
        let layer_alone = median(layers, 0..b)?;
        for k in 0..b {
            updates.around(side, k, || self.update_and_cast(gpu, side, k))?;
        }
        side.synchronize()?;
        let update_alone = median(updates, 0..b)?;

        // Beside: the side-stream version's schedule, each kernel pair in its events.
        let (start, stop) = (&self.marks[0], &self.marks[2 * b + 1]);
        self.compute.copy_on_device(&self.initial, &self.master)?;
        gpu.cast_to_half(compute, &self.master, &self.w16[0], self.a.format)?;
        start.record(compute)?;
        side.wait_event(start)?;
        for i in 0..b {
            if i >= 2 {
                compute.wait_event(&self.cast_done[(i - 1) % 2])?;
            }
            layers.around(compute, i, || self.layer(gpu, i))?;
            self.computed[i % 2].record(compute)?;
            if i >= 1 {
                side.wait_event(&self.computed[(i - 1) % 2])?;
                updates.around(side, i - 1, || self.update_and_cast(gpu, side, i - 1))?;
                self.cast_done[i % 2].record(side)?;
            }
        }
        side.wait_event(&self.computed[(b - 1) % 2])?;
        updates.around(side, b - 1, || self.update_and_cast(gpu, side, b - 1))?;
        self.cast_done[b % 2].record(side)?;
        compute.wait_event(&self.cast_done[b % 2])?;
        stop.record(compute)?;
        stop.synchronize()?;
        let mut idle = 0.0;
        for i in 1..b {
            idle += layers.start[i].elapsed_ms(&layers.end[i - 1])?;
        }
        Ok([
            layer_alone,
            update_alone,
            median(layers, 1..b)?,
            median(updates, 0..b - 1)?,
            idle,
            stop.elapsed_ms(start)?,
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_take_the_slower_kernel_of_each_overlapped_step() {
        let o = Overlap {
            layer_alone: 1.0,
            update_alone: 0.5,
            layer_beside: 1.25,
            update_beside: 1.5,
            idle: 0.0,
            total: 12.0,
            steps: 8,
        };
        assert_eq!(o.bound_alone(), 1.0 + 7.0 * 1.0 + 0.5);
        assert_eq!(o.bound_beside(), 1.0 + 7.0 * 1.5 + 0.5);
        let lines = o.lines("bf16");
        assert!(lines[0].contains("1.0000 ms, beside update+cast 1.2500 ms (1.250x)"), "{lines:?}");
        assert!(lines[2].contains("measured/bound 1.412x"), "{lines:?}");
        // One step: nothing overlaps, the bound is the two kernels in turn.
        assert_eq!(Overlap { steps: 1, ..o }.bound_beside(), 1.5);
    }

    #[test]
    fn the_split_stretches_the_lessons_own_c_and_u() {
        let o = Overlap {
            layer_alone: 0.5,
            update_alone: 0.25,
            layer_beside: 0.625,
            update_beside: 0.5,
            idle: 0.0,
            total: 0.0,
            steps: 8,
        };
        assert_eq!((o.layer_stretch(), o.update_stretch()), (1.25, 2.0));
        // The lesson's c = 1 and u = 0.75 stretched to 1.25 and 1.5: the update now sets the pace.
        let s = o.split(1.0, 0.75, 14.0);
        assert_eq!(s.free, 1.0 + 7.0 * 1.0 + 0.75);
        assert_eq!(s.aware, 1.0 + 7.0 * 1.5 + 0.75);
        assert_eq!(s.sharing(), 7.0 * 0.5);
        assert_eq!(s.scheduling(), 14.0 - 12.25);
        assert_eq!(s.sharing() + s.scheduling(), s.gap());
        // No slowdown beside: the two bounds are one, all of the gap is scheduling.
        let calm = Overlap { layer_beside: 0.5, update_beside: 0.25, ..o };
        let s = calm.split(1.0, 0.75, 14.0);
        assert_eq!((s.aware, s.sharing()), (s.free, 0.0));
        assert_eq!(s.scheduling(), 14.0 - 8.75);
        // One step: nothing was timed beside (the probe's medians of no step are 0), nothing
        // is stretched.
        let one = Overlap { steps: 1, layer_beside: 0.0, update_beside: 0.0, ..o };
        assert_eq!(one.split(1.0, 0.75, 2.0).sharing(), 0.0);
    }
}
