//! What a capture's state and its failures mean, in words: the capture status, the names of
//! the stream-capture driver codes (900 to 908), and the cause a learner reads for each.
use crate::runtime::error::{DriverCode, Error};
use crate::t;
use crate::text::Text;

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

/// The name [`Stream::legacy`](crate::runtime::stream::Stream) gives the legacy default
/// stream, which a capture error names.
const LEGACY: &str = "legacy default stream";

/// A learner-readable cause for capture code `code` returned by the call `op` (as
/// streamlab names it, e.g. `cuStreamSynchronize`) on `stream`, ending with the code's name.
pub fn capture_cause(op: &str, stream: Option<&str>, code: u32) -> Text {
    let call = op.split_whitespace().next().unwrap_or(op).to_string();
    let on_legacy = stream == Some(LEGACY) || op.contains(LEGACY);
    let why = match code {
        // Whatever code the driver picks for it, a legacy-stream call has one cause.
        900 | 906 if on_legacy && !op.contains("BeginCapture") => t!("error.capture.legacy"),
        DriverCode::STREAM_CAPTURE_UNSUPPORTED => {
            if op.contains("cuStreamBeginCapture") {
                t!("error.capture.cannot_begin")
            } else if op.contains("Synchronize") || op.contains("Query") {
                t!("error.capture.no_waiting", call)
            } else if ["cuMemAlloc", "cuMemFree"].iter().any(|c| op.contains(c))
                || ["cuMemcpyHtoD", "cuMemcpyDtoH"].contains(&call.as_str())
            {
                t!("error.capture.may_synchronize", call)
            } else {
                t!("error.capture.unsupported", call)
            }
        }
        901 => t!("error.capture.invalidated"),
        902 => t!("error.capture.merge"),
        903 => t!("error.capture.unmatched"),
        DriverCode::STREAM_CAPTURE_UNJOINED => t!("error.capture.unjoined"),
        DriverCode::STREAM_CAPTURE_ISOLATION => t!("error.capture.isolation"),
        DriverCode::STREAM_CAPTURE_IMPLICIT => t!("error.capture.legacy"),
        907 => t!("error.capture.captured_event"),
        908 => t!("error.capture.wrong_thread"),
        _ => t!("error.capture.not_a_capture_code"),
    };
    let name = match capture_code_name(code) {
        Some(name) => format!("{name} ({code})"),
        None => format!("CUDA error {code}"),
    };
    t!("error.capture.cause", why, code = name)
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
            let cause = if is_capture_code(code.code()) {
                capture_cause(&op, stream.as_deref(), code.code())
            } else {
                let call = op.split_whitespace().next().unwrap_or(&op).to_string();
                t!("error.capture.failed_inside", call, code = code.code())
            };
            Error::Capture { op, stream, status: status.to_string(), cause: Box::new(cause) }
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
        let cause = capture_cause("cuStreamSynchronize", Some("c"), 900).en();
        assert!(
            cause.starts_with(
                "cuStreamSynchronize is not allowed while the stream is being captured"
            ),
            "{cause}"
        );
        assert!(cause.ends_with("[CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (900)]"));
        let ctx = capture_cause("cuCtxSynchronize", None, 900).en();
        assert!(ctx.starts_with("cuCtxSynchronize is not allowed"), "{ctx}");
        let query = capture_cause("cuEventQuery", None, 900).en();
        assert!(query.starts_with("cuEventQuery is not allowed"), "{query}");
    }

    #[test]
    fn each_capture_code_has_its_own_cause() {
        let legacy = capture_cause("cuLaunchKernel(empty_kernel)", Some("x"), 906).en();
        assert!(legacy.contains("legacy default stream"), "{legacy}");
        for code in [900, 906] {
            let cause = capture_cause("cuLaunchKernel(empty_kernel)", Some(LEGACY), code).en();
            assert!(cause.starts_with("the legacy default stream was used"), "{cause}");
        }
        let outside = capture_cause("cuStreamWaitEvent", Some("x"), 905).en();
        assert!(outside.contains("outside the capture"), "{outside}");
        let unjoined = capture_cause("cuStreamEndCapture", Some("x"), 904).en();
        assert!(unjoined.contains("not joined back"), "{unjoined}");
        let alloc = capture_cause("cuMemAlloc", None, 900).en();
        assert!(alloc.contains("relaxed mode"), "{alloc}");
        let begin = capture_cause("cuStreamBeginCapture", Some("legacy"), 900).en();
        assert!(begin.contains("cannot be captured"), "{begin}");
        // Every code 900..=908 has a distinct explanation.
        let causes: std::collections::HashSet<String> =
            (900..=908).map(|c| capture_cause("cuSomething", None, c).en()).collect();
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
            Error::Capture { op, stream, status, cause } => {
                assert_eq!(
                    (op.as_str(), stream.as_deref()),
                    ("cuStreamSynchronize", Some("dag-c"))
                );
                assert_eq!(status, "invalidated");
                assert!(cause.en().contains("not allowed while the stream is being captured"));
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
                let cause = cause.en();
                assert!(cause.starts_with("cuCtxSynchronize failed (CUDA error 999)"), "{cause}");
            }
            other => panic!("expected a capture error, got {other:?}"),
        }
        let input = to_capture_error(Error::InvalidInput("x".into()), CaptureStatus::Active);
        assert!(matches!(input, Error::InvalidInput(_)));
    }
}
