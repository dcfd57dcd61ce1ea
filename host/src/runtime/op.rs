//! What an enqueued operation is: its kind, its label, its bytes or its launch geometry.
//! A stream hands this to the [`Observer`](crate::runtime::stream::Observer) attached to it.
use serde::Serialize;

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
    /// A copy from one GPU's memory to another's (`cuMemcpyPeerAsync`).
    CopyPeer,
    /// An NCCL collective (all-reduce): a kernel of NCCL's that also moves data between GPUs.
    Collective,
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

/// Launch geometry: CUDA C++'s `<<<grid, block, shared>>>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LaunchConfig {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub shared_bytes: u32,
}

impl LaunchConfig {
    /// One thread per element, 256 threads a block.
    pub fn for_elements(n: usize) -> LaunchConfig {
        let blocks = n.div_ceil(256).clamp(1, i32::MAX as usize) as u32;
        LaunchConfig::new((blocks, 1, 1), (256, 1, 1))
    }

    pub fn new(grid: (u32, u32, u32), block: (u32, u32, u32)) -> LaunchConfig {
        LaunchConfig { grid, block, shared_bytes: 0 }
    }
}
