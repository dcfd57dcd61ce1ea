//! A window's tables: its top kernels (count, total, mean, share of compute), its copies by
//! direction and host memory (count, bytes, time, GB/s, beside the bandwidth the matching
//! lesson measured where a recorded run of it is on the same GPU), and its memsets.
use std::collections::HashMap;

use serde::Serialize;

use crate::lab::record::recorded_runs;
use crate::lab::record::span::Work;
use crate::trace::inspect::windows::Held;
use crate::trace::read::model::{Ns, Process};

/// A copy row's direction and host memory.
type CopyKey = (&'static str, &'static str);

/// How many kernels the JSON lists per window (the text shows the first five).
pub const TOP_KERNELS: usize = 10;

/// One kernel name's work in a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelRow {
    pub name: String,
    pub count: u64,
    pub total_ms: f64,
    pub mean_ms: f64,
    /// Its time over the window's compute busy time (kernels of one name may overlap).
    pub share_of_compute: Option<f64>,
}

/// The copies of one direction and host memory in a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CopyRow {
    /// `copy_in`, `copy_out`, `on_device` or `peer`.
    pub direction: &'static str,
    /// `pageable`, `pinned`, or empty where there is no host side.
    pub memory: &'static str,
    pub count: u64,
    pub bytes: u64,
    pub total_ms: f64,
    /// The bytes over the copies' time.
    pub gb_per_s: f64,
    /// What the matching lesson measured on this GPU, where a run of it is recorded here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measured>,
}

/// A bandwidth a lesson measured, from its recorded run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measured {
    pub gb_per_s: f64,
    pub lesson: &'static str,
    pub gpu: String,
    pub date: String,
}

/// A window's memsets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MemsetRow {
    pub count: u64,
    pub bytes: u64,
    pub total_ms: f64,
}

/// A window's tables.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tables {
    pub top_kernels: Vec<KernelRow>,
    pub copies: Vec<CopyRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memsets: Option<MemsetRow>,
}

fn ms(ns: Ns) -> f64 {
    ns as f64 / 1e6
}

fn direction(kind: Work) -> Option<&'static str> {
    match kind {
        Work::CopyToDevice => Some("copy_in"),
        Work::CopyToHost => Some("copy_out"),
        Work::CopyOnDevice => Some("on_device"),
        Work::CopyPeer => Some("peer"),
        _ => None,
    }
}

/// The lesson and the figure of its recorded run that measured a copy of this direction and
/// host memory.
fn measured_by(direction: &str, memory: &str) -> Option<(&'static str, &'static str)> {
    match (direction, memory) {
        ("copy_in", "pinned") => Some(("pinned-vs-pageable", "H2D pinned: bandwidth, median")),
        ("copy_out", "pinned") => Some(("pinned-vs-pageable", "D2H pinned: bandwidth, median")),
        ("copy_in", "pageable") => Some(("pinned-vs-pageable", "H2D pageable: bandwidth, median")),
        ("copy_out", "pageable") => Some(("pinned-vs-pageable", "D2H pageable: bandwidth, median")),
        ("peer", _) => Some(("p2p", "peer copy one way, GB/s")),
        _ => None,
    }
}

/// What the lesson measured for copies of `direction` and `memory` on the GPU `gpu`, where
/// this binary embeds a run of it recorded on a GPU of that name.
fn measured(direction: &str, memory: &str, gpu: &str) -> Option<Measured> {
    let (lesson, figure) = measured_by(direction, memory)?;
    let run = recorded_runs::find(lesson)?.ok()?;
    if run.gpu != gpu {
        return None;
    }
    let value = run.report.figures.iter().find(|f| f.name == figure)?.value;
    Some(Measured { gb_per_s: value, lesson, gpu: run.gpu, date: run.date })
}

/// The tables of `held`, records of `p`; `compute_ms` is the window's compute busy time.
pub fn tables(p: &Process, held: &Held, compute_ms: f64, device: u32) -> Tables {
    let gpu = &p.gpu;
    let mut kernels: HashMap<u32, (u64, Ns)> = HashMap::new();
    // Per (direction, memory): count, bytes, time.
    let mut copies: Vec<(CopyKey, (u64, u64, Ns))> = Vec::new();
    let mut memsets: Option<MemsetRow> = None;
    let mut memset_ns: Ns = 0;
    for piece in &held.pieces {
        let i = piece.index as usize;
        let ns = piece.end - piece.start;
        match gpu.kind[i] {
            Work::Kernel | Work::Graph => {
                let entry = kernels.entry(gpu.label[i]).or_insert((0, 0));
                *entry = (entry.0 + 1, entry.1 + ns);
            }
            Work::Memset => {
                let row = memsets.get_or_insert(MemsetRow { count: 0, bytes: 0, total_ms: 0.0 });
                row.count += 1;
                row.bytes += gpu.bytes[i];
                memset_ns += ns;
            }
            kind => {
                let Some(direction) = direction(kind) else { continue };
                let key = (direction, gpu.memory[i].name());
                let at = match copies.iter().position(|(k, _)| *k == key) {
                    Some(at) => at,
                    None => {
                        copies.push((key, (0, 0, 0)));
                        copies.len() - 1
                    }
                };
                let sums = &mut copies[at].1;
                *sums = (sums.0 + 1, sums.1 + gpu.bytes[i], sums.2 + ns);
            }
        }
    }
    if let Some(row) = &mut memsets {
        row.total_ms = ms(memset_ns);
    }
    let mut top: Vec<KernelRow> = kernels
        .into_iter()
        .map(|(label, (count, ns))| KernelRow {
            name: p.names.get(label).to_string(),
            count,
            total_ms: ms(ns),
            mean_ms: ms(ns) / count as f64,
            share_of_compute: (compute_ms > 0.0).then(|| ms(ns) / compute_ms),
        })
        .collect();
    top.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms).then(a.name.cmp(&b.name)));
    top.truncate(TOP_KERNELS);
    let gpu_name = p.devices.iter().find(|d| d.id == device).map(|d| d.name.clone());
    let copies = copies
        .into_iter()
        .map(|((direction, memory), (count, bytes, ns))| CopyRow {
            direction,
            memory,
            count,
            bytes,
            total_ms: ms(ns),
            gb_per_s: if ns > 0 { bytes as f64 / ns as f64 } else { 0.0 },
            measured: gpu_name.as_deref().and_then(|gpu| measured(direction, memory, gpu)),
        })
        .collect();
    Tables { top_kernels: top, copies, memsets }
}
