//! Stream capture and CUDA graphs.
use cudarc::driver::sys as cu;

use super::{result, DriverResult};

/// `cuStreamBeginCapture`.
///
/// # Safety
/// `stream` is live.
pub(crate) unsafe fn stream_begin_capture(
    stream: cu::CUstream,
    mode: cu::CUstreamCaptureMode,
) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuStreamBeginCapture_v2(stream, mode) })
}

/// `cuStreamEndCapture`. The driver writes the graph to `graph` (NULL when the capture was
/// invalidated), and the caller owns what it writes, whatever the status.
///
/// # Safety
/// `stream` is live.
pub(crate) unsafe fn stream_end_capture(
    stream: cu::CUstream,
    graph: &mut cu::CUgraph,
) -> DriverResult<()> {
    // SAFETY: valid out-pointer; the stream is the caller's contract.
    result(unsafe { cu::cuStreamEndCapture(stream, graph) })
}

/// `cuStreamIsCapturing`: the `CUstreamCaptureStatus` as a number, so that a value newer
/// than the bindings is no undefined behaviour.
///
/// # Safety
/// `stream` is live.
pub(crate) unsafe fn stream_is_capturing(stream: cu::CUstream) -> DriverResult<u32> {
    let mut status: u32 = 0;
    let out = &mut status as *mut u32 as *mut cu::CUstreamCaptureStatus;
    // SAFETY: the driver writes one 4-byte enum value; the stream is the caller's contract.
    result(unsafe { cu::cuStreamIsCapturing(stream, out) })?;
    Ok(status)
}

/// `cuGraphGetNodes`: with `nodes`, fills it and returns how many were written; without,
/// returns how many nodes the graph has.
///
/// # Safety
/// `graph` is live.
pub(crate) unsafe fn graph_get_nodes(
    graph: cu::CUgraph,
    nodes: Option<&mut [cu::CUgraphNode]>,
) -> DriverResult<usize> {
    let (ptr, mut count) = match nodes {
        Some(nodes) => (nodes.as_mut_ptr(), nodes.len()),
        None => (std::ptr::null_mut(), 0),
    };
    // SAFETY: `ptr` is NULL or has room for `count` handles; the graph is the caller's contract.
    result(unsafe { cu::cuGraphGetNodes(graph, ptr, &mut count) })?;
    Ok(count)
}

/// `cuGraphNodeGetType`: the `CUgraphNodeType` as a number, so that node kinds newer than
/// the bindings are no undefined behaviour.
///
/// # Safety
/// `node` belongs to a live graph.
pub(crate) unsafe fn graph_node_get_type(node: cu::CUgraphNode) -> DriverResult<u32> {
    let mut node_type: u32 = 0;
    let out = &mut node_type as *mut u32 as *mut cu::CUgraphNodeType;
    // SAFETY: the driver writes one 4-byte enum value; the node is the caller's contract.
    result(unsafe { cu::cuGraphNodeGetType(node, out) })?;
    Ok(node_type)
}

/// `cuGraphInstantiateWithFlags`.
///
/// # Safety
/// `graph` is live.
pub(crate) unsafe fn graph_instantiate_with_flags(
    graph: cu::CUgraph,
    flags: u64,
) -> DriverResult<cu::CUgraphExec> {
    let mut exec = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the graph is the caller's contract.
    result(unsafe { cu::cuGraphInstantiateWithFlags(&mut exec, graph, flags) })?;
    Ok(exec)
}

/// `cuGraphDestroy`: executable graphs instantiated from it do not need it.
///
/// # Safety
/// The caller owns `graph`, a live graph, and uses it no more.
pub(crate) unsafe fn graph_destroy(graph: cu::CUgraph) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuGraphDestroy(graph) })
}

/// `cuGraphLaunch`.
///
/// # Safety
/// Both handles are live, and every allocation the graph's nodes use stays valid until
/// `stream` has passed the launch.
pub(crate) unsafe fn graph_launch(exec: cu::CUgraphExec, stream: cu::CUstream) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuGraphLaunch(exec, stream) })
}

/// `cuGraphUpload`: runs nothing.
///
/// # Safety
/// Both handles are live.
pub(crate) unsafe fn graph_upload(exec: cu::CUgraphExec, stream: cu::CUstream) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuGraphUpload(exec, stream) })
}

/// `cuGraphExecUpdate`. `update_result` gets the `CUgraphExecUpdateResult` as a number
/// (also when the update is refused: it says why).
///
/// # Safety
/// Both graphs are live.
pub(crate) unsafe fn graph_exec_update(
    exec: cu::CUgraphExec,
    graph: cu::CUgraph,
    update_result: &mut u32,
) -> DriverResult<()> {
    // `CUgraphExecUpdateResultInfo`, with the 4-byte enum read as a u32.
    #[repr(C)]
    struct ResultInfo {
        result: u32,
        error_node: cu::CUgraphNode,
        error_from_node: cu::CUgraphNode,
    }
    let null = std::ptr::null_mut();
    let mut info = ResultInfo { result: 0, error_node: null, error_from_node: null };
    let out = &mut info as *mut ResultInfo as *mut cu::CUgraphExecUpdateResultInfo;
    // SAFETY: `info` has the layout of CUgraphExecUpdateResultInfo; the graphs are the
    // caller's contract.
    let status = unsafe { cu::cuGraphExecUpdate_v2(exec, graph, out) };
    *update_result = info.result;
    result(status)
}

/// `cuGraphExecDestroy`: launches already enqueued finish.
///
/// # Safety
/// The caller owns `exec`, a live executable graph, and uses it no more.
pub(crate) unsafe fn graph_exec_destroy(exec: cu::CUgraphExec) -> DriverResult<()> {
    // SAFETY: the caller's contract.
    result(unsafe { cu::cuGraphExecDestroy(exec) })
}
