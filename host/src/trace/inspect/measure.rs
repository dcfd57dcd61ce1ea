//! A window's figures from the records it holds: each engine class's busy time (the union
//! of its records, so that work running at once counts once), the copy time that ran under
//! compute, the bound that perfect overlap would reach (the busiest class), the window's
//! length against it, and how many kernels, copies, memsets and collectives it holds.
use serde::{Deserialize, Serialize};

use crate::lab::record::span::Work;
use crate::trace::inspect::engines::Engine;
use crate::trace::inspect::union::Union;
use crate::trace::inspect::windows::Held;
use crate::trace::read::model::{Ns, Process};

/// The time each engine class was busy, in ms (read back by `streamlab diff`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Busy {
    pub compute_ms: f64,
    pub copy_in_ms: f64,
    pub copy_out_ms: f64,
    pub device_copy_ms: f64,
    pub collective_ms: f64,
}

impl Busy {
    pub fn of(&self, engine: Engine) -> f64 {
        match engine {
            Engine::Compute => self.compute_ms,
            Engine::CopyIn => self.copy_in_ms,
            Engine::CopyOut => self.copy_out_ms,
            Engine::DeviceCopy => self.device_copy_ms,
            Engine::Collective => self.collective_ms,
        }
    }

    fn set(&mut self, engine: Engine, ms: f64) {
        match engine {
            Engine::Compute => self.compute_ms = ms,
            Engine::CopyIn => self.copy_in_ms = ms,
            Engine::CopyOut => self.copy_out_ms = ms,
            Engine::DeviceCopy => self.device_copy_ms = ms,
            Engine::Collective => self.collective_ms = ms,
        }
    }
}

/// How many records of each sort a window holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub kernels: u64,
    pub copies: u64,
    pub memsets: u64,
    pub collectives: u64,
}

/// One set of a window's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    /// How long the window lasted: the sum of its intervals.
    pub span_ms: f64,
    pub busy: Busy,
    /// The union of all copies (in, out, device and peer).
    pub copy_ms: f64,
    /// The time copies and compute ran at once: the intersection of the two unions. It is
    /// both "copy time under compute" and "compute time under copies"; the fractions differ.
    pub copy_and_compute_ms: f64,
    /// `copy_and_compute_ms / copy_ms` (None without copies).
    pub copy_under_compute: Option<f64>,
    /// `copy_and_compute_ms / compute_ms` (None without compute).
    pub compute_under_copy: Option<f64>,
    /// The bound: the busiest engine class's time. With perfect overlap every class runs at
    /// once, each on its own engine, so the window is at least this long.
    pub bound_ms: f64,
    /// The busiest class (the first in [`Engine::ALL`]'s order on a tie); None when no
    /// record ran on an engine.
    pub bound_engine: Option<Engine>,
    /// `span_ms / bound_ms` (None when the bound is 0).
    pub measured_over_bound: Option<f64>,
    #[serde(flatten)]
    pub counts: Counts,
}

fn ms(ns: Ns) -> f64 {
    ns as f64 / 1e6
}

fn ratio(part: f64, whole: f64) -> Option<f64> {
    (whole > 0.0).then(|| part / whole)
}

/// The union of the held records whose engine class `keep` accepts.
pub fn busy_union(p: &Process, held: &Held, keep: impl Fn(Engine) -> bool) -> Union {
    let kept = held
        .pieces
        .iter()
        .filter(|piece| Engine::of(p.gpu.kind[piece.index as usize]).is_some_and(&keep));
    Union::of_sorted(kept.map(|piece| (piece.start, piece.end)))
}

/// The figures of `held`, records of `p`.
pub fn figures(p: &Process, held: &Held) -> Figures {
    let mut busy = Busy::default();
    let mut bound_ns = 0;
    let mut bound_engine = None;
    for engine in Engine::ALL {
        let ns = busy_union(p, held, |e| e == engine).length();
        busy.set(engine, ms(ns));
        if ns > bound_ns {
            (bound_ns, bound_engine) = (ns, Some(engine));
        }
    }
    let copies = busy_union(p, held, Engine::is_copy);
    let compute = busy_union(p, held, |e| e == Engine::Compute);
    let copy_ms = ms(copies.length());
    let copy_and_compute_ms = ms(copies.overlap(&compute));
    let span_ms = ms(held.length());
    let bound_ms = ms(bound_ns);
    let mut counts = Counts::default();
    for piece in &held.pieces {
        match p.gpu.kind[piece.index as usize] {
            Work::Kernel | Work::Graph => counts.kernels += 1,
            Work::Memset => counts.memsets += 1,
            Work::Collective => counts.collectives += 1,
            Work::CopyToDevice | Work::CopyToHost | Work::CopyOnDevice | Work::CopyPeer => {
                counts.copies += 1
            }
            Work::HostFn => {}
        }
    }
    Figures {
        span_ms,
        copy_ms,
        copy_and_compute_ms,
        copy_under_compute: ratio(copy_and_compute_ms, copy_ms),
        compute_under_copy: ratio(copy_and_compute_ms, busy.compute_ms),
        bound_ms,
        bound_engine,
        measured_over_bound: ratio(span_ms, bound_ms),
        busy,
        counts,
    }
}

/// Communication under computation (the share of the collectives' time that kernels hid,
/// as Holistic Trace Analysis defines it): the collectives' busy time, the part of it under
/// compute (other kernels, memsets), the part exposed, and how long the window would last with
/// every collective hidden: its time less the time collectives ran with no other work.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Comm {
    pub collective_ms: f64,
    pub hidden_ms: f64,
    pub exposed_ms: f64,
    /// `hidden_ms / collective_ms`.
    pub hidden_share: f64,
    pub window_if_hidden_ms: f64,
}

/// The window's [`Comm`], where it held collectives.
pub fn comm(p: &Process, held: &Held) -> Option<Comm> {
    let collectives = busy_union(p, held, |e| e == Engine::Collective);
    if collectives.is_empty() {
        return None;
    }
    let compute = busy_union(p, held, |e| e == Engine::Compute);
    let other_work = busy_union(p, held, |e| e != Engine::Collective);
    let collective_ns = collectives.length();
    let hidden_ns = collectives.overlap(&compute);
    // The collectives' time with nothing else running: what hiding them all would save.
    let alone_ns = collective_ns - collectives.overlap(&other_work);
    Some(Comm {
        collective_ms: ms(collective_ns),
        hidden_ms: ms(hidden_ns),
        exposed_ms: ms(collective_ns - hidden_ns),
        hidden_share: hidden_ns as f64 / collective_ns as f64,
        window_if_hidden_ms: ms(held.length().saturating_sub(alone_ns)),
    })
}
