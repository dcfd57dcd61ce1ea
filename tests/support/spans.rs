//! What a GPU test may assert of a recorded run: the shape of its spans (what ran at once,
//! on which stream, which engine) and the order of its events on one clock. CUPTI stamps
//! the host's driver calls and the GPU's work on one clock, so "the host's wait returned
//! after the kernel ended" is an order, not a duration.
//!
//! Each shape is held to the recorded runs in `docs/recorded/` (real CUPTI recordings) by
//! tests/span_shapes.rs, which needs no GPU: it holds for the version with the technique and
//! fails for the version without, so it is not true of any run.
use streamlab::lab::record::span::{HostSpan, HostWork, Recording, Source, Span, Work};

/// One ns, in ms: CUPTI's resolution, the tolerance of an order between two GPU spans.
pub const NS: f64 = 1e-6;

/// How far apart a host call and GPU work stamped at the same moment may lie on CUPTI's one
/// clock, ms: the driver's return after the GPU finished took 4 to 5 µs in the recorded runs.
/// Far below any gap that an order below tells apart (the short kernel's end against the
/// long one's is 0.9 of the long sleep apart).
pub const CLOCKS_MS: f64 = 0.05;

/// Panics unless `r` came from CUPTI activity records, naming the recorder it came from.
pub fn assert_cupti(r: &Recording) {
    assert!(
        matches!(r.source, Source::Cupti { .. }),
        "{}: recorded without CUPTI, so its spans include queueing: {}",
        r.version,
        r.source.describe()
    );
}

/// Whether `a` and `b` ran at once: each started before the other ended.
pub fn at_once(a: &Span, b: &Span) -> bool {
    a.start_ms < b.end_ms && b.start_ms < a.end_ms
}

/// Whether a span that `first` picks and one that `second` picks, on different rows (another
/// stream, or another GPU), ran at once, at least once in `r`.
pub fn ran_at_once(
    r: &Recording,
    first: impl Fn(&Span) -> bool,
    second: impl Fn(&Span) -> bool,
) -> bool {
    let row = |s: &Span| (s.device, s.stream.clone());
    r.spans
        .iter()
        .filter(|a| first(a))
        .any(|a| r.spans.iter().filter(|b| second(b)).any(|b| row(a) != row(b) && at_once(a, b)))
}

/// A copy between host and device.
pub fn is_copy(s: &Span) -> bool {
    matches!(s.kind, Work::CopyToDevice | Work::CopyToHost)
}

pub fn is_kernel(s: &Span) -> bool {
    s.kind == Work::Kernel
}

pub fn any_span(_: &Span) -> bool {
    true
}

/// A copy ran while a kernel of another stream did: the copy engine and the SMs worked at
/// once, which is what overlapping copies with compute means.
pub fn copy_beside_kernel(r: &Recording) -> bool {
    ran_at_once(r, is_copy, is_kernel)
}

/// The first span of `r` not on the stream its kind belongs to when each direction has a stream
/// of its own (compute-transfer's third version): uploads on "upload", downloads on
/// "download", the rest on "compute". None when every span is where it belongs.
pub fn off_its_direction_stream(r: &Recording) -> Option<&Span> {
    let belongs = |s: &Span| match s.kind {
        Work::CopyToDevice => "upload",
        Work::CopyToHost => "download",
        _ => "compute",
    };
    r.spans.iter().find(|s| s.stream != belongs(s))
}

/// The end of the last span on `stream`, or a panic naming the streams there are.
pub fn stream_end(r: &Recording, stream: &str) -> f64 {
    let ends = r.spans.iter().filter(|s| s.stream == stream).map(|s| s.end_ms);
    let end = ends.fold(f64::NAN, f64::max);
    assert!(!end.is_nan(), "{}: no span on stream {stream:?}: {:?}", r.version, streams(r));
    end
}

/// The end of the last kernel of `r`.
pub fn last_kernel_end(r: &Recording) -> f64 {
    let end = r.spans.iter().filter(|s| is_kernel(s)).map(|s| s.end_ms).fold(f64::NAN, f64::max);
    assert!(!end.is_nan(), "{}: no kernel recorded", r.version);
    end
}

/// The host's first wait in `r` that started after its first issue (a run's own wait, not
/// the idle wait a version may begin with), or a panic listing the host spans.
pub fn first_wait(r: &Recording) -> &HostSpan {
    let first_issue = r.host.iter().find(|h| h.kind == HostWork::Issue).map(|h| h.start_ms);
    let after = first_issue.unwrap_or(f64::NEG_INFINITY);
    r.host.iter().find(|h| h.kind == HostWork::Wait && h.start_ms >= after).unwrap_or_else(|| {
        panic!("{}: no host wait after the first issue: {:?}", r.version, r.host)
    })
}

/// The host's driver calls whose name starts with `prefix` ("cuMemcpyDtoH"), in order.
pub fn calls<'a>(r: &'a Recording, prefix: &str) -> Vec<&'a HostSpan> {
    let found: Vec<&HostSpan> =
        r.host.iter().filter(|h| h.kind == HostWork::Issue && h.name.starts_with(prefix)).collect();
    assert!(!found.is_empty(), "{}: no call {prefix}*: {:?}", r.version, r.host);
    found
}

/// How many driver calls whose name starts with `prefix` the host issued in `r`.
pub fn issued(r: &Recording, prefix: &str) -> usize {
    r.host.iter().filter(|h| h.kind == HostWork::Issue && h.name.starts_with(prefix)).count()
}

/// The last of the host's issuing calls to return.
pub fn last_issue_end(r: &Recording) -> f64 {
    let ends = r.host.iter().filter(|h| h.kind == HostWork::Issue).map(|h| h.end_ms);
    let end = ends.fold(f64::NAN, f64::max);
    assert!(!end.is_nan(), "{}: no driver call recorded on the host", r.version);
    end
}

/// The (device, stream) rows of `r`, for messages.
pub fn streams(r: &Recording) -> Vec<(u32, String)> {
    streamlab::lab::record::span::rows(&r.spans)
}

/// How many spans of `kind` `r` holds.
pub fn count(r: &Recording, kind: Work) -> usize {
    r.spans.iter().filter(|s| s.kind == kind).count()
}

/// Whether the host's first wait in `r` returned only once `stream`'s work had ended.
pub fn waited_for(r: &Recording, stream: &str) -> bool {
    first_wait(r).end_ms >= stream_end(r, stream) - CLOCKS_MS
}

/// Whether every driver call the host made in `r` returned before the GPU's last kernel
/// ended: the host was free while the GPU worked (asynchronous calls), where a blocking copy
/// back returns only after the kernel before it.
pub fn host_free_before_the_kernel_ended(r: &Recording) -> bool {
    last_issue_end(r) < last_kernel_end(r)
}

/// The first copy to the device in `r`, and the host's call that issued it (the first
/// `cuMemcpyHtoD*`).
fn copy_in_and_call(r: &Recording) -> (&Span, &HostSpan) {
    let copy = r.spans.iter().find(|s| s.kind == Work::CopyToDevice);
    let copy =
        copy.unwrap_or_else(|| panic!("{}: no copy to the device: {:?}", r.version, r.spans));
    (copy, calls(r, "cuMemcpyHtoD")[0])
}

/// Whether the call that issued the copy to the device returned before the copy ended: the
/// host went on while the copy engine worked.
pub fn copy_call_returned_before_the_copy_ended(r: &Recording) -> bool {
    let (copy, call) = copy_in_and_call(r);
    call.end_ms < copy.end_ms
}

/// Whether the call that issued the copy to the device returned only after the copy engine
/// had started on it: the host was held while the copy ran (a pageable copy, staged by the
/// driver through a pinned buffer of its own, chunk by chunk).
pub fn copy_call_held_the_host_into_the_copy(r: &Recording) -> bool {
    let (copy, call) = copy_in_and_call(r);
    call.end_ms > copy.start_ms
}
