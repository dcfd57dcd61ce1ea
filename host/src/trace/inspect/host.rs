//! What the host did beside the GPU's spans, as a traced program's records show it: the
//! driver and runtime calls that matter to overlap, the times it blocked waiting for the
//! GPU, and the NVTX ranges it marked (the report's windows). `streamlab trace` fills these
//! from the injected recorder's files; the findings read them.
use serde::Serialize;

/// What a host call does, for the findings (the rest is `Other`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// `cuMemAlloc*`, `cudaMalloc*` (not the stream-ordered `…Async` ones).
    Alloc,
    /// `cuMemFree*`, `cudaFree*` (not the stream-ordered `…Async` ones).
    Free,
    /// A kernel launch or graph launch.
    Launch,
    /// A copy or memset call.
    Copy,
    /// A synchronization call (stream, event, context or device).
    Sync,
    Other,
}

/// One driver or runtime call, on a host thread, in ms since the trace's origin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostCall {
    pub process: u32,
    pub thread: u64,
    pub name: String,
    pub kind: CallKind,
    pub start_ms: f64,
    pub end_ms: f64,
}

/// What a host wait waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    Stream,
    Event,
    Context,
    Other,
}

/// A time the host blocked until the GPU got somewhere.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostWait {
    pub process: u32,
    pub kind: WaitKind,
    pub device: u32,
    /// The stream's row name where the wait was for one stream.
    pub stream: Option<String>,
    pub start_ms: f64,
    pub end_ms: f64,
}

/// An NVTX range the program marked (push/pop or start/end), on one process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Range {
    pub process: u32,
    pub thread: u64,
    pub name: String,
    pub start_ms: f64,
    pub end_ms: f64,
    /// 0 for a range no other range of its thread encloses.
    pub depth: u32,
}
