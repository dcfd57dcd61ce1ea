//! Trace lines for the inspect room's tests, written the way the recorder writes them and
//! read back by the real reader: kernels, copies, calls, waits and NVTX ranges at times given
//! in ms (from a base of 1 s on CUPTI's clock, so that no time is 0).
use crate::runtime::cupti::trace_file::{
    ApiDomain, Direction, Line, MarkerPhase, Memory, SyncKind,
};
use crate::trace::inspect::findings::Thresholds;
use crate::trace::inspect::overlap::{overlap_report, OverlapReport};
use crate::trace::read::model::{Capture, Ns};
use crate::trace::read::reader::capture;
use crate::trace::read::reader_tests::process_of;

/// CUPTI's clock at 0 ms.
pub const BASE: Ns = 1_000_000_000;

/// `ms` after the base, in ns.
pub fn at(ms: f64) -> Ns {
    BASE + (ms * 1e6).round() as Ns
}

/// The context every line is in, its legacy stream 7; stream 14 created blocking, 13 not;
/// and a mark at 0 ms, so that 0 ms is the trace's origin.
pub fn context() -> Vec<Line> {
    vec![
        Line::Marker {
            phase: MarkerPhase::Instant,
            id: 0,
            thread: 1,
            time: BASE,
            name: "origin".into(),
            domain: String::new(),
        },
        Line::Context { context: 1, device: 0, null_stream: 7 },
        Line::Stream { context: 1, stream: 13, priority: 0, non_blocking: true },
        Line::Stream { context: 1, stream: 14, priority: 0, non_blocking: false },
    ]
}

pub fn kernel(stream: u32, from: f64, to: f64, correlation: u32) -> Line {
    Line::Kernel {
        device: 0,
        context: 1,
        stream,
        start: at(from),
        end: at(to),
        correlation,
        name: "k".into(),
        grid: [1, 1, 1],
        block: [32, 1, 1],
    }
}

pub fn nccl(stream: u32, from: f64, to: f64, correlation: u32) -> Line {
    let Line::Kernel { device, context, start, end, grid, block, .. } =
        kernel(stream, from, to, correlation)
    else {
        unreachable!()
    };
    let name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL".into();
    Line::Kernel { device, context, stream, start, end, correlation, name, grid, block }
}

pub fn copy(stream: u32, direction: Direction, host: Memory, from: f64, to: f64) -> Line {
    let (src, dst) = match direction {
        Direction::DeviceToHost => (Memory::Device, host),
        _ => (host, Memory::Device),
    };
    Line::Copy {
        device: 0,
        context: 1,
        stream,
        start: at(from),
        end: at(to),
        correlation: 0,
        bytes: 1 << 20,
        direction,
        src,
        dst,
    }
}

pub fn call(name: &str, thread: u64, from: f64, to: f64, correlation: u32) -> Line {
    Line::Api {
        domain: ApiDomain::Runtime,
        name: name.into(),
        thread,
        start: at(from),
        end: at(to),
        correlation,
        status: 0,
    }
}

/// A host wait on stream 14 (its synchronize call and its record).
pub fn wait(from: f64, to: f64, correlation: u32) -> Vec<Line> {
    vec![
        call("cudaStreamSynchronize", 1, from, to, correlation),
        Line::Sync {
            kind: SyncKind::Stream,
            context: 1,
            stream: Some(14),
            start: at(from),
            end: at(to),
            correlation,
        },
    ]
}

/// An NVTX range `name` (marker `id`) on `thread`.
pub fn range(id: u32, name: &str, thread: u64, from: f64, to: f64) -> Vec<Line> {
    let marker = |phase, time, name: &str| Line::Marker {
        phase,
        id,
        thread,
        time,
        name: name.into(),
        domain: String::new(),
    };
    vec![marker(MarkerPhase::Start, at(from), name), marker(MarkerPhase::End, at(to), "")]
}

/// One process (pid 1) of `lines`, after the context's lines.
pub fn capture_of(lines: &[Line]) -> Capture {
    let mut all = context();
    all.extend_from_slice(lines);
    capture(vec![process_of(1, &all)])
}

/// The report of one process of `lines` at the default thresholds.
pub fn report_of(lines: &[Line]) -> OverlapReport {
    overlap_report(&capture_of(lines), &Thresholds::DEFAULT)
}

/// Equal to within a ns (ms figures are f64).
pub fn assert_ms(actual: f64, expected: f64) {
    assert!((actual - expected).abs() < 1e-6, "{actual} ms, expected {expected} ms");
}
