//! What one window's rules read ([`Scope`]): the process's columns, the window's records
//! and times, the host index, the thresholds in ns and the trace's origin; and the small
//! questions every rule asks of a record.
use crate::lab::record::span::Work;
use crate::trace::inspect::engines::Engine;
use crate::trace::inspect::findings::{Example, Limits};
use crate::trace::inspect::host_index::HostIndex;
use crate::trace::inspect::projection::Projection;
use crate::trace::inspect::windows::{Held, Piece};
use crate::trace::read::model::{Ns, Process};

/// What one window's rules read.
pub struct Scope<'a> {
    pub p: &'a Process,
    pub device: u32,
    pub held: &'a Held,
    pub host: &'a HostIndex,
    /// Each record's launching call and range.
    pub projection: &'a Projection,
    pub limits: Limits,
    /// The trace's origin, for the examples' times.
    pub origin: Ns,
}

impl Scope<'_> {
    pub fn kind(&self, piece: &Piece) -> Work {
        self.p.gpu.kind[piece.index as usize]
    }

    pub fn on_engine(&self, piece: &Piece) -> bool {
        Engine::of(self.kind(piece)).is_some()
    }

    pub fn example(&self, piece: &Piece) -> Example {
        Example::of(self.p, piece, self.origin)
    }

    pub fn ms(&self, ns: Ns) -> f64 {
        ns as f64 / 1e6
    }
}
