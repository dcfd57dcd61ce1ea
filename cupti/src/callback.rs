//! The callback subscription on the driver API: which calls are traced, and what the
//! callback notes of each as it enters and exits (correlation id, host-side span, op tag,
//! thread, and the stream and event it names).
use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::activity::{lock, RECORDING};
use crate::find::CUPTI;

/// One driver call seen by the callback subscription.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiCall {
    /// The driver function, as CUPTI names it (`cuMemcpyHtoDAsync_v2`).
    pub function: &'static str,
    pub correlation: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The tag set with [`with_op_tag`] around the call, if any.
    pub tag: Option<u64>,
    /// A small number per host thread, 1 for the first thread that made a traced call.
    pub thread: u64,
    /// The `CUstream` and `CUevent` arguments of record, wait and synchronize calls
    /// (0 where the call has none).
    pub stream: usize,
    pub event: usize,
}

/// The driver calls the subscription traces, by CUPTI callback id
/// (`CUpti_driver_api_trace_cbid`, an append-only enum), and which handles their parameter
/// structs start with.
const TRACED: &[(u32, Handles)] = &[
    (17, Handles::None),         // cuCtxSynchronize
    (38, Handles::None),         // cuMemFreeHost
    (39, Handles::None),         // cuMemHostAlloc
    (119, Handles::EventStream), // cuEventRecord
    (121, Handles::Event),       // cuEventSynchronize
    (126, Handles::Stream),      // cuStreamSynchronize
    (216, Handles::None),        // cuMemsetD8Async
    (220, Handles::None),        // cuMemsetD32Async
    (243, Handles::None),        // cuMemAlloc_v2
    (245, Handles::None),        // cuMemFree_v2
    (249, Handles::None),        // cuMemsetD8_v2
    (251, Handles::None),        // cuMemsetD32_v2
    (276, Handles::None),        // cuMemcpyHtoD_v2
    (277, Handles::None),        // cuMemcpyHtoDAsync_v2
    (278, Handles::None),        // cuMemcpyDtoH_v2
    (279, Handles::None),        // cuMemcpyDtoHAsync_v2
    (281, Handles::None),        // cuMemcpyDtoDAsync_v2
    (295, Handles::StreamEvent), // cuStreamWaitEvent
    (305, Handles::None),        // cuMemcpy
    (306, Handles::None),        // cuMemcpyAsync
    (307, Handles::None),        // cuLaunchKernel
    (318, Handles::None),        // cuMemcpyPeer
    (319, Handles::None),        // cuMemcpyPeerAsync
    (514, Handles::None),        // cuGraphLaunch
    (527, Handles::None),        // cuLaunchHostFunc
    (587, Handles::EventStream), // cuEventRecordWithFlags
    (598, Handles::None),        // cuMemAllocAsync
    (600, Handles::None),        // cuMemFreeAsync
    (652, Handles::None),        // cuLaunchKernelEx
];

/// The callback ids of the traced calls.
pub(super) fn traced_ids() -> impl Iterator<Item = u32> {
    TRACED.iter().map(|(id, _)| *id)
}

/// The leading pointer-sized fields of a traced call's parameter struct
/// (`cuEventRecord_params { hEvent, hStream }`, `cuStreamWaitEvent_params { hStream, hEvent,
/// Flags }`, `cuStreamSynchronize_params { hStream }`, `cuEventSynchronize_params { hEvent }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handles {
    None,
    Stream,
    Event,
    EventStream,
    StreamEvent,
}

/// `CUpti_CallbackDomain` of the driver API.
pub(super) const DOMAIN_DRIVER_API: u32 = 1;
/// `CUPTI_API_ENTER`: the callback site as a call enters.
const API_ENTER: u32 = 0;

/// `CUpti_CallbackData` (the same in CUPTI 12 and 13).
#[repr(C)]
struct CallbackData {
    callback_site: u32,
    function_name: *const c_char,
    function_params: *const c_void,
    function_return_value: *mut c_void,
    symbol_name: *const c_char,
    context: *mut c_void,
    context_uid: u32,
    correlation_data: *mut u64,
    correlation_id: u32,
}

/// The calls noted while recording.
pub(super) static CALLS: Mutex<Vec<ApiCall>> = Mutex::new(Vec::new());
static THREADS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static OP_TAG: Cell<Option<u64>> = const { Cell::new(None) };
    static THREAD: Cell<u64> = const { Cell::new(0) };
}

/// Runs `f` with `tag` as this thread's current op tag: the driver calls `f` makes are
/// noted with it, so their activity records can be named by the tag's owner.
pub fn with_op_tag<T>(tag: u64, f: impl FnOnce() -> T) -> T {
    let previous = OP_TAG.with(|t| t.replace(Some(tag)));
    let out = f();
    OP_TAG.with(|t| t.set(previous));
    out
}

fn thread_number() -> u64 {
    THREAD.with(|t| {
        if t.get() == 0 {
            t.set(THREADS.fetch_add(1, Ordering::Relaxed) + 1);
        }
        t.get()
    })
}

/// CUPTI calls this on the calling thread as a traced driver call enters and exits.
pub(super) unsafe extern "C" fn on_driver_call(
    _userdata: *mut c_void,
    domain: u32,
    cbid: u32,
    data: *const c_void,
) {
    // Enabled but idle costs the traced call only this load.
    if !RECORDING.load(Ordering::Relaxed) {
        return;
    }
    let Some(Ok(cupti)) = CUPTI.get() else { return };
    if domain != DOMAIN_DRIVER_API || data.is_null() {
        return;
    }
    let now = cupti.now_ns();
    // SAFETY: for the driver API domain CUPTI passes a CUpti_CallbackData.
    let data = unsafe { &*(data as *const CallbackData) };
    if data.callback_site != API_ENTER {
        let mut calls = lock(&CALLS);
        if let Some(call) = calls.iter_mut().rev().find(|c| c.correlation == data.correlation_id) {
            call.end_ns = now;
        }
        return;
    }
    let handles = TRACED.iter().find(|(id, _)| *id == cbid).map_or(Handles::None, |(_, h)| *h);
    let params = data.function_params as *const usize;
    let field = |i: usize| {
        if params.is_null() {
            0
        } else {
            // SAFETY: the parameter struct of these calls starts with `i + 1` handles
            // (see `Handles`).
            unsafe { params.add(i).read_unaligned() }
        }
    };
    let (stream, event) = match handles {
        Handles::None => (0, 0),
        Handles::Stream => (field(0), 0),
        Handles::Event => (0, field(0)),
        Handles::EventStream => (field(1), field(0)),
        Handles::StreamEvent => (field(0), field(1)),
    };
    // Borrowed, not copied: this runs inside every traced call while the run is timed.
    let function = if data.function_name.is_null() {
        "driver call"
    } else {
        // SAFETY: CUPTI passes the function's NUL-terminated name, "a global constant and so
        // may be accessed outside of the callback" (`CUpti_CallbackData::functionName`).
        let name: &'static CStr = unsafe { CStr::from_ptr(data.function_name) };
        name.to_str().unwrap_or("driver call")
    };
    let call = ApiCall {
        function,
        correlation: data.correlation_id,
        start_ns: now,
        end_ns: now,
        tag: OP_TAG.with(Cell::get),
        thread: thread_number(),
        stream,
        event,
    };
    lock(&CALLS).push(call);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traced_calls_are_listed_once() {
        let mut ids: Vec<u32> = TRACED.iter().map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), TRACED.len());
    }
}
