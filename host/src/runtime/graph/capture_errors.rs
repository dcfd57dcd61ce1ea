//! What a capture's state and its failures mean, in words: the capture status, the names of
//! the stream-capture driver codes (900 to 908), and the cause a learner reads for each.
use crate::runtime::error::{DriverCode, Error};

/// Whether a stream is being captured (`CUstreamCaptureStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureStatus {
    /// Not capturing: work runs when enqueued.
    None,
    /// Capturing: work is recorded into a graph, nothing runs.
    Active,
    /// Capturing, but an illegal operation broke the capture; ending it yields no graph.
    Invalidated,
    /// A value this crate does not know (a newer driver).
    Unknown(u32),
}

impl CaptureStatus {
    /// The status from the driver's raw value.
    pub fn from_raw(value: u32) -> CaptureStatus {
        match value {
            0 => CaptureStatus::None,
            1 => CaptureStatus::Active,
            2 => CaptureStatus::Invalidated,
            other => CaptureStatus::Unknown(other),
        }
    }
}

impl std::fmt::Display for CaptureStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CaptureStatus::None => write!(f, "not capturing"),
            CaptureStatus::Active => write!(f, "active"),
            CaptureStatus::Invalidated => write!(f, "invalidated"),
            CaptureStatus::Unknown(v) => write!(f, "unknown status {v}"),
        }
    }
}

/// The name of a stream-capture driver code (900 to 908), without asking the driver.
pub fn capture_code_name(code: u32) -> Option<&'static str> {
    Some(match code {
        900 => "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
        901 => "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
        902 => "CUDA_ERROR_STREAM_CAPTURE_MERGE",
        903 => "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
        904 => "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
        905 => "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
        906 => "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
        907 => "CUDA_ERROR_CAPTURED_EVENT",
        908 => "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
        _ => return None,
    })
}

/// `true` for the driver codes that mean "this broke the rules of stream capture".
pub fn is_capture_code(code: u32) -> bool {
    capture_code_name(code).is_some()
}

/// A learner-readable cause for capture code `code` returned by the call `op`, ending with
/// the code's name. `op` is the failing call as streamlab names it, e.g.
/// `cuStreamSynchronize on stream "dag-c"`.
pub fn capture_cause(op: &str, code: u32) -> String {
    let call = op.split_whitespace().next().unwrap_or(op);
    let legacy = "the legacy default stream was used while a blocking stream is being captured: the legacy stream implicitly waits for every blocking stream, and captured work cannot be waited on; use a stream that joined the capture, or capture on non-blocking streams";
    let why = match code {
        // Whatever code the driver picks for it, a legacy-stream call has one cause.
        900 | 906 if op.contains("legacy default stream") && !op.contains("BeginCapture") => {
            legacy.to_string()
        }
        DriverCode::STREAM_CAPTURE_UNSUPPORTED => {
            if op.contains("cuStreamBeginCapture") {
                "this stream cannot be captured: the legacy default stream never can (capture a stream you created), and a stream already in a capture cannot begin another".to_string()
            } else if op.contains("Synchronize") || op.contains("Query") {
                format!("{call} is not allowed while the stream is being captured: captured work does not run until the graph is launched, so there is nothing to wait for yet; synchronize after launching the graph instead")
            } else if op.contains("cuMemAlloc")
                || op.contains("cuMemFree")
                || op.contains("cuMemcpyHtoD ")
                || op.contains("cuMemcpyDtoH ")
                || op == "cuMemcpyHtoD"
                || op == "cuMemcpyDtoH"
            {
                format!("{call} may synchronize implicitly, so it is refused during a global (any thread) or thread-local (this thread) capture: do it before capturing, or capture in relaxed mode")
            } else {
                format!("{call} is not supported while a stream is being captured")
            }
        }
        901 => "the capture had already been invalidated by an earlier illegal operation in it (look for the first error); the partial graph was discarded".to_string(),
        902 => "two independent captures would be merged: a stream waited on an event captured by a different capture".to_string(),
        903 => "the capture was not begun on this stream: end a capture on the stream that began it".to_string(),
        DriverCode::STREAM_CAPTURE_UNJOINED => "a stream forked into the capture was not joined back: after its last work, record an event on every side stream and make the capturing stream wait for it before the capture ends".to_string(),
        DriverCode::STREAM_CAPTURE_ISOLATION => "a dependency would cross the capture boundary: a capturing stream waited on an event recorded outside the capture (record it inside, on a stream that joined the capture), or a stream outside the capture waited on a captured event".to_string(),
        DriverCode::STREAM_CAPTURE_IMPLICIT => legacy.to_string(),
        907 => "this event was last recorded inside a capture, so it stands for no real work: it cannot be queried, synchronized or timed until it is recorded again outside the capture".to_string(),
        908 => "a global or thread-local capture must be ended on the thread that began it (a relaxed capture may be ended anywhere)".to_string(),
        _ => "not a stream-capture error".to_string(),
    };
    match capture_code_name(code) {
        Some(name) => format!("{why} [{name} ({code})]"),
        None => format!("{why} [CUDA error {code}]"),
    }
}

/// Turns a driver error from inside a capture into `Error::Capture` when its code is a
/// capture code, or when the capture ended up invalidated (cust maps codes it does not know,
/// such as the capture codes, to 999, so its calls are recognised this way); other errors
/// pass through unchanged.
pub fn to_capture_error(error: Error, status: CaptureStatus) -> Error {
    match error {
        Error::Cuda { op, stream, code }
            if is_capture_code(code.code()) || status == CaptureStatus::Invalidated =>
        {
            let op = match stream {
                Some(s) => format!("{op} on stream \"{s}\""),
                None => op,
            };
            let cause = if is_capture_code(code.code()) {
                capture_cause(&op, code.code())
            } else {
                let call = op.split_whitespace().next().unwrap_or(&op);
                format!(
                    "{call} failed (CUDA error {}) while the stream was being captured and invalidated the capture: most calls that wait for or query GPU work are not allowed during a capture; the partial graph was discarded",
                    code.code()
                )
            };
            Error::Capture { cause, status: status.to_string(), op }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_status_from_raw_values() {
        assert_eq!(CaptureStatus::from_raw(0), CaptureStatus::None);
        assert_eq!(CaptureStatus::from_raw(1), CaptureStatus::Active);
        assert_eq!(CaptureStatus::from_raw(2), CaptureStatus::Invalidated);
        assert_eq!(CaptureStatus::from_raw(7), CaptureStatus::Unknown(7));
        assert_eq!(CaptureStatus::Invalidated.to_string(), "invalidated");
    }

    #[test]
    fn synchronize_inside_capture_names_the_call() {
        let cause = capture_cause("cuStreamSynchronize on stream \"c\"", 900);
        assert!(
            cause.starts_with(
                "cuStreamSynchronize is not allowed while the stream is being captured"
            ),
            "{cause}"
        );
        assert!(cause.ends_with("[CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900)]"));
        let ctx = capture_cause("cuCtxSynchronize", 900);
        assert!(ctx.starts_with("cuCtxSynchronize is not allowed"), "{ctx}");
        let query = capture_cause("cuEventQuery", 900);
        assert!(query.starts_with("cuEventQuery is not allowed"), "{query}");
    }

    #[test]
    fn each_capture_code_has_its_own_cause() {
        let legacy = capture_cause("cuLaunchKernel(empty_kernel) on stream \"x\"", 906);
        assert!(legacy.contains("legacy default stream"), "{legacy}");
        let on_legacy = "cuLaunchKernel(empty_kernel) on stream \"legacy default stream\"";
        for code in [900, 906] {
            let cause = capture_cause(on_legacy, code);
            assert!(cause.starts_with("the legacy default stream was used"), "{cause}");
        }
        let outside = capture_cause("cuStreamWaitEvent on stream \"x\"", 905);
        assert!(outside.contains("outside the capture"), "{outside}");
        let unjoined = capture_cause("cuStreamEndCapture on stream \"x\"", 904);
        assert!(unjoined.contains("not joined back"), "{unjoined}");
        let alloc = capture_cause("cuMemAlloc", 900);
        assert!(alloc.contains("relaxed mode"), "{alloc}");
        let begin = capture_cause("cuStreamBeginCapture on stream \"legacy\"", 900);
        assert!(begin.contains("cannot be captured"), "{begin}");
        // Every code 900..=908 has a distinct explanation.
        let causes: std::collections::HashSet<String> =
            (900..=908).map(|c| capture_cause("cuSomething", c)).collect();
        assert_eq!(causes.len(), 9);
        assert!((900..=908).all(is_capture_code));
        assert!(!is_capture_code(1) && !is_capture_code(909));
    }

    #[test]
    fn only_capture_codes_become_capture_errors() {
        let capture = to_capture_error(
            Error::Cuda {
                op: "cuStreamSynchronize".into(),
                stream: Some("dag-c".into()),
                code: DriverCode::new(900),
            },
            CaptureStatus::Invalidated,
        );
        match capture {
            Error::Capture { op, status, cause } => {
                assert_eq!(op, "cuStreamSynchronize on stream \"dag-c\"");
                assert_eq!(status, "invalidated");
                assert!(cause.contains("not allowed while the stream is being captured"));
            }
            other => panic!("expected a capture error, got {other:?}"),
        }
        let plain = to_capture_error(
            Error::Cuda { op: "cuLaunchKernel".into(), stream: None, code: DriverCode::new(1) },
            CaptureStatus::Active,
        );
        assert!(matches!(plain, Error::Cuda { .. }));
        // A code cust could not name (999) that broke the capture is still a capture error.
        let unknown = to_capture_error(
            Error::Cuda { op: "cuCtxSynchronize".into(), stream: None, code: DriverCode::new(999) },
            CaptureStatus::Invalidated,
        );
        match unknown {
            Error::Capture { op, cause, .. } => {
                assert_eq!(op, "cuCtxSynchronize");
                assert!(cause.starts_with("cuCtxSynchronize failed (CUDA error 999)"), "{cause}");
            }
            other => panic!("expected a capture error, got {other:?}"),
        }
        let input = to_capture_error(Error::InvalidInput("x".into()), CaptureStatus::Active);
        assert!(matches!(input, Error::InvalidInput(_)));
    }
}
