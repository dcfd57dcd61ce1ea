//! CUDA graphs from stream capture: record what a function enqueues on streams into a graph,
//! instantiate it once, and replay it with one call per replay.
//!
//! | CUDA C++ (runtime)                                   | streamlab                                  |
//! |------------------------------------------------------|--------------------------------------------|
//! | `cudaStreamBeginCapture(s, mode)` ... `cudaStreamEndCapture(s, &g)` | `graph::capture(&s, mode, \|s\| ...)` |
//! | `cudaStreamIsCapturing(s, &status)`                  | `graph::capture_status(&s)`                |
//! | `cudaGraphInstantiate(&exec, g, 0)`                  | `g.instantiate()`                          |
//! | `cudaGraphInstantiateWithFlags(&exec, g, flags)`     | `g.instantiate_with(Instantiate::…)`       |
//! | `cudaGraphLaunch(exec, s)`                           | `exec.launch(&s)`                          |
//! | `cudaGraphExecUpdate(exec, g2, &info)`               | `exec.update_from(&g2)` (re-instantiates when refused) |
//! | `cudaGraphGetNodes` / `cudaGraphNodeGetType`         | `g.node_counts()`                          |
//! | `cudaGraphDestroy` / `cudaGraphExecDestroy`          | `Drop`                                     |
//!
//! A graph replays the captured copies with the captured host addresses, long after the
//! calls that enqueued them returned. So a capture remembers every buffer its copies and
//! kernels use; the graph keeps them alive, and each launch marks the host buffers in flight
//! on the launching stream, exactly as a direct copy would. That makes `launch` safe.
//!
//! Capture errors are the ones learners meet first: synchronizing inside a capture, touching
//! the legacy default stream while a blocking stream is captured, waiting on an event recorded
//! outside the capture, forgetting to join a forked stream. [`capture`] always ends the
//! capture (so the stream leaves capture mode and stays usable), discards the partial graph,
//! and turns the driver's code into an [`Error::Capture`] naming the call, the capture status
//! and the cause in words.
//! Those words, and the capture status, live in `capture_errors` (`graph/capture_errors.rs`).
mod capture_errors;

use std::rc::Rc;

use cudarc::driver::sys as cu;

use crate::runtime::context::Context;
use crate::runtime::driver::{self, DriverResult};
use crate::runtime::error::{cuda_error, DriverCode, Error, Named, Result};
use crate::runtime::in_flight::{self, Access, Kept, Tracked};
use crate::runtime::op::{Op, OpKind};
use crate::runtime::stream::{Stream, StreamKind};
use crate::t;

pub use self::capture_errors::{
    capture_cause, capture_code_name, is_capture_code, to_capture_error, CaptureStatus,
};

/// Which API calls other than the captured ones are refused while a capture is active
/// (`cudaStreamCaptureMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureMode {
    /// Potentially unsafe calls (ones that may synchronize implicitly, e.g. `cuMemAlloc`)
    /// are refused on every thread while this capture is active. The default, and the safest.
    Global,
    /// Unsafe calls are refused only on the thread that began this capture.
    ThreadLocal,
    /// Nothing extra is refused; the programmer promises not to race the capture.
    Relaxed,
}

impl CaptureMode {
    fn raw(self) -> cu::CUstreamCaptureMode {
        use cu::CUstreamCaptureMode as M;
        match self {
            CaptureMode::Global => M::CU_STREAM_CAPTURE_MODE_GLOBAL,
            CaptureMode::ThreadLocal => M::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            CaptureMode::Relaxed => M::CU_STREAM_CAPTURE_MODE_RELAXED,
        }
    }
}

/// Is `stream` being captured (`cuStreamIsCapturing`)?
pub fn capture_status(stream: &Stream) -> Result<CaptureStatus> {
    // SAFETY: the stream handle is live.
    let raw = unsafe { driver::stream_is_capturing(stream.as_raw()) };
    Ok(CaptureStatus::from_raw(raw.named_on("cuStreamIsCapturing", stream.name())?))
}

/// Records everything `enqueue` puts on `stream` (and on streams that join the capture by
/// waiting on an event recorded on it) into a graph, without running any of it.
///
/// The capture always ends, success or not: on an error inside `enqueue` or at the end, the
/// partial graph is destroyed and the stream is out of capture mode, ready for normal work.
/// Capture-rule violations come back as [`Error::Capture`]. Side streams must be joined back
/// (`stream::join`) before `enqueue` returns.
pub fn capture(
    stream: &Stream,
    mode: CaptureMode,
    enqueue: impl FnOnce(&Stream) -> Result<()>,
) -> Result<Graph> {
    if stream.kind() == StreamKind::LegacyDefault {
        let op = "cuStreamBeginCapture";
        return Err(Error::Capture {
            cause: Box::new(capture_cause(
                op,
                Some(stream.name()),
                DriverCode::STREAM_CAPTURE_UNSUPPORTED,
            )),
            status: CaptureStatus::None.to_string(),
            op: op.into(),
            stream: Some(stream.name().to_string()),
        });
    }
    // SAFETY: the stream handle is live and `mode` is a valid enum value.
    let began = unsafe { driver::stream_begin_capture(stream.as_raw(), mode.raw()) };
    began
        .named_on("cuStreamBeginCapture", stream.name())
        .map_err(|e| to_capture_error(e, CaptureStatus::None))?;

    if let Err(e) = in_flight::begin_capture() {
        let _ = end_capture(stream);
        return Err(e);
    }
    // Should `enqueue` panic, the guard still ends the capture while unwinding.
    let mut guard = EndOnUnwind { stream, armed: true };
    let enqueued = enqueue(stream);
    guard.armed = false;
    let kept = in_flight::end_capture();
    // Read the status before ending: "invalidated" tells the learner the capture was broken.
    let status_before_end = capture_status(stream).unwrap_or(CaptureStatus::Unknown(u32::MAX));
    let (ended, graph) = end_capture(stream);
    let graph = graph.map(|mut g| {
        g.kept = Rc::new(kept);
        g
    });

    if let Err(e) = enqueued {
        // The first error is the one to report; the end of an invalidated capture fails too.
        drop(graph);
        return Err(to_capture_error(e, status_before_end));
    }
    let end = ended
        .named_on("cuStreamEndCapture", stream.name())
        .map_err(|e| to_capture_error(e, status_before_end));
    match (end, graph) {
        (Ok(()), Some(graph)) => Ok(graph),
        (Err(e), _) => Err(e),
        (Ok(()), None) => Err(Error::Capture {
            op: "cuStreamEndCapture".into(),
            stream: Some(stream.name().to_string()),
            status: status_before_end.to_string(),
            cause: Box::new(t!("error.capture.no_graph")),
        }),
    }
}

/// Ends a capture that `capture` began if its closure panicked, so that a caught panic does
/// not leave the stream in capture mode.
struct EndOnUnwind<'a> {
    stream: &'a Stream,
    armed: bool,
}

impl Drop for EndOnUnwind<'_> {
    fn drop(&mut self) {
        if self.armed {
            // The graph, if any, is dropped (destroyed) at once.
            in_flight::end_capture();
            let _ = end_capture(self.stream);
        }
    }
}

/// `cuStreamEndCapture`: what the driver said and, when there is one, the graph (owned, so it
/// is destroyed even when the call failed).
fn end_capture(stream: &Stream) -> (DriverResult<()>, Option<Graph>) {
    let mut raw: cu::CUgraph = std::ptr::null_mut();
    // SAFETY: live stream. The driver hands us ownership of the graph it writes (NULL when
    // the capture was invalidated).
    let ended = unsafe { driver::stream_end_capture(stream.as_raw(), &mut raw) };
    let graph = (!raw.is_null()).then(|| Graph {
        raw,
        kept: Rc::new(Vec::new()),
        _context: stream.context().clone(),
    });
    (ended, graph)
}

/// How many nodes of each kind a graph holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct NodeCounts {
    pub kernels: usize,
    pub memcpys: usize,
    pub memsets: usize,
    pub host_fns: usize,
    pub empty: usize,
    pub events: usize,
    pub other: usize,
}

impl NodeCounts {
    pub fn total(&self) -> usize {
        self.kernels
            + self.memcpys
            + self.memsets
            + self.host_fns
            + self.empty
            + self.events
            + self.other
    }

    fn add(&mut self, node_type: u32) {
        match node_type {
            0 => self.kernels += 1,
            1 => self.memcpys += 1,
            2 => self.memsets += 1,
            3 => self.host_fns += 1,
            5 => self.empty += 1,
            6 | 7 => self.events += 1,
            _ => self.other += 1,
        }
    }
}

impl std::fmt::Display for NodeCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} nodes: {} kernels, {} copies", self.total(), self.kernels, self.memcpys)?;
        let rest = self.total() - self.kernels - self.memcpys;
        if rest > 0 {
            write!(f, ", {rest} other")?;
        }
        Ok(())
    }
}

/// A graph: a DAG of GPU operations, recorded but not runnable until instantiated.
pub struct Graph {
    raw: cu::CUgraph,
    /// The buffers its nodes use, kept alive for its executable graphs.
    kept: Rc<Vec<Kept>>,
    _context: Context,
}

impl Graph {
    pub fn as_raw(&self) -> cu::CUgraph {
        self.raw
    }

    /// The graph's nodes by kind (`cuGraphGetNodes` + `cuGraphNodeGetType`).
    pub fn node_counts(&self) -> Result<NodeCounts> {
        // SAFETY: live graph; no node array asks only for the count.
        let count =
            unsafe { driver::graph_get_nodes(self.raw, None) }.named("cuGraphGetNodes (count)")?;
        let mut nodes: Vec<cu::CUgraphNode> = vec![std::ptr::null_mut(); count];
        // SAFETY: live graph.
        let count = unsafe { driver::graph_get_nodes(self.raw, Some(&mut nodes)) }
            .named("cuGraphGetNodes")?;
        let mut counts = NodeCounts::default();
        for &node in nodes.iter().take(count) {
            // SAFETY: `node` belongs to this live graph.
            let node_type =
                unsafe { driver::graph_node_get_type(node) }.named("cuGraphNodeGetType")?;
            counts.add(node_type);
        }
        Ok(counts)
    }

    /// Turns the graph into an executable graph (`cuGraphInstantiateWithFlags`, flags 0):
    /// the driver validates it and prepares the whole DAG's launch work once. The graph may
    /// be dropped afterwards; the executable graph does not depend on it.
    pub fn instantiate(&self) -> Result<GraphExec> {
        self.instantiate_with(Instantiate::Plain)
    }

    /// [`Graph::instantiate`] with one of the driver's instantiation flags.
    pub fn instantiate_with(&self, how: Instantiate) -> Result<GraphExec> {
        let flags = match how {
            Instantiate::Plain => 0,
            Instantiate::UseNodePriority => {
                cu::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY.0
            }
        };
        // SAFETY: live graph, and a documented flag (no auto-free, no upload).
        let raw = unsafe { driver::graph_instantiate_with_flags(self.raw, flags as u64) }
            .named("cuGraphInstantiateWithFlags")?;
        Ok(GraphExec { raw, kept: vec![Rc::clone(&self.kept)], _context: self._context.clone() })
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: we own `raw`; executable graphs instantiated from it do not need it.
        let _ = unsafe { driver::graph_destroy(self.raw) };
    }
}

/// How [`Graph::instantiate_with`] instantiates (`CUgraphInstantiate_flags`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instantiate {
    /// Flags 0: kernel nodes run at the priority of the stream the graph is launched on.
    Plain,
    /// `CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY`: each kernel node keeps its own
    /// priority (in a capture, the priority of the stream it was captured from).
    UseNodePriority,
}

/// How [`GraphExec::update_from`] brought the executable graph up to date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpdatePath {
    /// `cuGraphExecUpdate` patched the node parameters in place.
    InPlace,
    /// The driver refused the update (why, in words); the graph was re-instantiated.
    Reinstantiated { reason: String },
}

impl std::fmt::Display for UpdatePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpdatePath::InPlace => write!(f, "updated in place (cuGraphExecUpdate)"),
            UpdatePath::Reinstantiated { reason } => {
                write!(f, "re-instantiated: the in-place update was refused ({reason})")
            }
        }
    }
}

/// `CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE`: what `cuGraphExecUpdate` returns when it refuses
/// an update because the new graph changes something an instantiated graph cannot take.
pub const GRAPH_EXEC_UPDATE_FAILURE: u32 = 910;

/// Why `cuGraphExecUpdate` refused an update, from its `CUgraphExecUpdateResult`
/// (`CU_GRAPH_EXEC_UPDATE_ERROR*`, 1 and up).
pub fn update_refusal_reason(result: u32) -> &'static str {
    match result {
        0 => "no refusal reported",
        1 => "a change that an instantiated graph cannot take (no more specific reason given)",
        2 => "the topology changed: nodes or edges were added or removed",
        3 => "a node's type changed",
        4 => "a kernel node's function changed",
        5 => "a node's parameters changed in a way that cannot be updated",
        6 => "something in the graph does not support updates",
        7 => "a kernel node's function changed in an unsupported way",
        8 => "a node's attributes changed in a way that cannot be updated",
        _ => "a reason newer than these bindings",
    }
}

/// What one `cuGraphExecUpdate` call did, from its return code and its update result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateOutcome {
    /// Success: the executable graph now has the new parameters.
    Applied,
    /// A documented refusal: the return was `CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE` and the
    /// update result a `CU_GRAPH_EXEC_UPDATE_ERROR*` value (the reason). Re-instantiating is
    /// the documented remedy.
    Refused(&'static str),
    /// Anything else (a bad handle, a sticky context error, ...): a real error, which
    /// re-instantiating would only hide.
    Failed,
}

/// Classifies a `cuGraphExecUpdate` return code and update result (pure, so it is tested
/// without a GPU).
pub fn classify_update(code: u32, result: u32) -> UpdateOutcome {
    match (code, result) {
        (0, _) => UpdateOutcome::Applied,
        (GRAPH_EXEC_UPDATE_FAILURE, r) if r != 0 => {
            UpdateOutcome::Refused(update_refusal_reason(r))
        }
        _ => UpdateOutcome::Failed,
    }
}

/// An executable graph: instantiated once, launched any number of times.
pub struct GraphExec {
    raw: cu::CUgraphExec,
    /// What the graphs it was made or updated from use: their nodes may still point there.
    kept: Vec<Rc<Vec<Kept>>>,
    _context: Context,
}

impl GraphExec {
    pub fn as_raw(&self) -> cu::CUgraphExec {
        self.raw
    }

    /// Enqueues the whole graph on `stream` (`cuGraphLaunch`): one call, however many nodes.
    /// Later work on `stream` waits for the entire graph. Refused (with an error) while the
    /// host borrows a buffer the graph's copies would race with.
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        let host = self.host_buffers();
        for (buffer, access) in &host {
            buffer.admit(*access)?;
        }
        let op = Op { kind: OpKind::Graph, label: "graph launch", bytes: 0, launch: None };
        stream.enqueue(op, || {
            // SAFETY: live handles; every buffer the graph's nodes use is kept alive by
            // `self.kept`, and the host buffers admitted the access above.
            let launched = unsafe { driver::graph_launch(self.raw, stream.as_raw()) };
            launched.named_on("cuGraphLaunch", stream.name())
        })?;
        for (buffer, access) in host {
            buffer.in_flight_on(stream.share(), access);
        }
        Ok(())
    }

    /// The host buffers the graph's nodes use, each once (a capture lists a buffer at every
    /// copy of it, and an update adds its capture's list): a device write where any node
    /// writes it. Each records one event per launch.
    fn host_buffers(&self) -> Vec<(&Rc<dyn Tracked>, Access)> {
        let mut host: Vec<(&Rc<dyn Tracked>, Access)> = Vec::new();
        for kept in self.kept.iter().flat_map(|k| k.iter()) {
            let Kept::Host(buffer, access) = kept else { continue };
            match host.iter_mut().find(|(seen, _)| Rc::ptr_eq(seen, buffer)) {
                Some((_, seen_access)) if *access == Access::DeviceWrites => {
                    *seen_access = Access::DeviceWrites;
                }
                Some(_) => {}
                None => host.push((buffer, *access)),
            }
        }
        host
    }

    /// Brings this executable graph up to date with `graph`, a graph of the same shape whose
    /// node parameters (kernel arguments, copy addresses) differ, typically a re-capture.
    /// Tries `cuGraphExecUpdate` (no new instantiation: cheap); if the driver refuses it (it
    /// returns `CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE` with a `CU_GRAPH_EXEC_UPDATE_ERROR*`
    /// reason: the topology or a kernel function changed, ...), instantiates `graph` instead
    /// and replaces this one. Any other failure is returned as the error it is, and this
    /// executable graph is left as it was. Returns which path was taken. Launches already
    /// enqueued keep the old parameters; the next launch uses the new ones.
    pub fn update_from(&mut self, graph: &Graph) -> Result<UpdatePath> {
        let mut result = 0;
        // SAFETY: live handles.
        let updated = unsafe { driver::graph_exec_update(self.raw, graph.raw, &mut result) };
        // The classification reads the code, success included.
        let status = updated.err().unwrap_or(cu::CUresult::CUDA_SUCCESS);
        match classify_update(status as u32, result) {
            UpdateOutcome::Applied => {
                self.kept.push(Rc::clone(&graph.kept));
                Ok(UpdatePath::InPlace)
            }
            UpdateOutcome::Refused(reason) => {
                *self = graph.instantiate()?;
                Ok(UpdatePath::Reinstantiated { reason: reason.to_string() })
            }
            UpdateOutcome::Failed => {
                Err(cuda_error(status, format!("cuGraphExecUpdate (update result {result})"), None))
            }
        }
    }

    /// Uploads the graph's work to the device ahead of its first launch (`cuGraphUpload`),
    /// so that the first launch costs what every later one does.
    pub fn upload(&self, stream: &Stream) -> Result<()> {
        // SAFETY: live handles; an upload runs nothing.
        let uploaded = unsafe { driver::graph_upload(self.raw, stream.as_raw()) };
        uploaded.named_on("cuGraphUpload", stream.name())
    }
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        // SAFETY: we own `raw`; the driver lets launches already enqueued finish.
        let _ = unsafe { driver::graph_exec_destroy(self.raw) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_refusals_are_explained() {
        assert!(update_refusal_reason(2).contains("topology"));
        assert!(update_refusal_reason(4).contains("function"));
        assert!(update_refusal_reason(99).contains("newer"));
        let path = UpdatePath::Reinstantiated { reason: update_refusal_reason(2).into() };
        assert!(path.to_string().starts_with("re-instantiated"));
    }

    #[test]
    fn only_documented_refusals_fall_back_to_reinstantiation() {
        assert_eq!(classify_update(0, 0), UpdateOutcome::Applied);
        for result in 1..=8 {
            assert_eq!(
                classify_update(GRAPH_EXEC_UPDATE_FAILURE, result),
                UpdateOutcome::Refused(update_refusal_reason(result))
            );
        }
        assert!(matches!(
            classify_update(GRAPH_EXEC_UPDATE_FAILURE, 2),
            UpdateOutcome::Refused(r) if r.contains("topology")
        ));
        // The refusal code without a reason, or a reason with another code, is no refusal.
        assert_eq!(classify_update(GRAPH_EXEC_UPDATE_FAILURE, 0), UpdateOutcome::Failed);
        // Real errors: invalid value, a sticky launch failure, an illegal address, an
        // invalid handle, whatever the update result says.
        for code in [1, 719, 700, 400] {
            for result in [0, 1, 2] {
                assert_eq!(classify_update(code, result), UpdateOutcome::Failed, "{code}");
            }
        }
    }

    #[test]
    fn node_counts_sort_kinds() {
        let mut c = NodeCounts::default();
        for t in [0, 0, 0, 1, 1, 1, 6, 13] {
            c.add(t);
        }
        assert_eq!((c.kernels, c.memcpys, c.events, c.other), (3, 3, 1, 1));
        assert_eq!(c.total(), 8);
        assert_eq!(c.to_string(), "8 nodes: 3 kernels, 3 copies, 2 other");
    }
}
