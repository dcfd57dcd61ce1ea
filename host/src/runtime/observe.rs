//! What a stream tells an observer about each operation it enqueues. The runtime knows
//! nothing of timelines or traces: a [`Stream`](crate::runtime::stream::Stream) calls the
//! observer attached to it, and the lab's timeline is one such observer.
use serde::Serialize;

use crate::runtime::error::Result;
use crate::runtime::launch::LaunchConfig;
use crate::runtime::stream::Stream;

/// The kind of an enqueued operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    CopyToDevice,
    Kernel,
    CopyToHost,
    CopyOnDevice,
    HostFn,
    Graph,
}

/// One operation as it is enqueued.
#[derive(Debug, Clone)]
pub struct Op<'a> {
    pub kind: OpKind,
    /// The kernel's name, or what the copy is.
    pub label: &'a str,
    /// Bytes moved, for copies.
    pub bytes: usize,
    /// Grid and block, for kernels.
    pub launch: Option<LaunchConfig>,
}

/// Watches a stream's operations. `enqueue` performs the driver call; an observer runs it
/// exactly once, and may record events or stamps around it.
pub trait Observer {
    fn observe(
        &self,
        stream: &Stream,
        op: &Op<'_>,
        enqueue: &mut dyn FnMut() -> Result<()>,
    ) -> Result<()>;
}
