//! One error type for the whole host crate, and the exit codes the CLI maps it to.
//!
//! Every driver call goes through [`check`] with the name of the operation and, where there
//! is one, the stream it was issued on, so an error reads
//! `cuMemcpyHtoDAsync (copy-in, chunk 3) on stream "overlap-3": CUDA_ERROR_INVALID_VALUE (1): invalid argument`.
use std::ffi::{c_char, CStr};
use std::fmt;

use cust::sys::CUresult;

// The driver's own lookup functions, declared here with the status as a plain integer: the
// bindings take `CUresult`, a Rust enum from CUDA 11.4 headers, and building one from a code
// that enum lacks (newer drivers have many) would be undefined behaviour.
extern "C" {
    #[link_name = "cuGetErrorName"]
    fn get_error_name(status: u32, name: *mut *const c_char) -> u32;
    #[link_name = "cuGetErrorString"]
    fn get_error_string(status: u32, text: *mut *const c_char) -> u32;
}

/// A CUDA driver status code with its name and description, read from the driver itself
/// (so codes newer than the bindings still print correctly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverCode(u32);

impl DriverCode {
    pub const INVALID_VALUE: u32 = 1;
    pub const NO_DEVICE: u32 = 100;
    pub const NOT_READY: u32 = 600;
    pub const STREAM_CAPTURE_UNSUPPORTED: u32 = 900;
    pub const STREAM_CAPTURE_INVALIDATED: u32 = 901;
    pub const STREAM_CAPTURE_UNJOINED: u32 = 904;
    pub const STREAM_CAPTURE_ISOLATION: u32 = 905;
    pub const STREAM_CAPTURE_IMPLICIT: u32 = 906;

    pub fn new(code: u32) -> DriverCode {
        DriverCode(code)
    }

    /// A status returned by a `cust::sys` call.
    pub fn from_status(status: CUresult) -> DriverCode {
        DriverCode(status as u32)
    }

    pub fn code(self) -> u32 {
        self.0
    }

    pub fn name(self) -> String {
        let mut ptr = std::ptr::null();
        // SAFETY: cuGetErrorName takes any integer, writes a pointer to a static
        // NUL-terminated string or returns an error for unknown codes; it needs no context.
        let ok = unsafe { get_error_name(self.0, &mut ptr) } == 0 && !ptr.is_null();
        if ok {
            // SAFETY: checked non-null above; the driver owns a static string.
            unsafe { CStr::from_ptr(ptr) }
                .to_string_lossy()
                .into_owned()
        } else {
            format!("CUDA error {}", self.0)
        }
    }

    pub fn description(self) -> Option<String> {
        let mut ptr = std::ptr::null();
        // SAFETY: as in `name`.
        let ok = unsafe { get_error_string(self.0, &mut ptr) } == 0 && !ptr.is_null();
        // SAFETY: checked non-null; static string owned by the driver.
        ok.then(|| {
            unsafe { CStr::from_ptr(ptr) }
                .to_string_lossy()
                .into_owned()
        })
    }
}

impl fmt::Display for DriverCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)?;
        if let Some(d) = self.description() {
            write!(f, ": {d}")?;
        }
        Ok(())
    }
}

#[derive(Debug)]
pub enum Error {
    /// No driver, no device, or `cuInit` failed: nothing on the GPU can run.
    NoDevice(String),
    /// A driver call failed. `op` names the call and what it was for; `stream` the stream.
    Cuda {
        op: String,
        stream: Option<String>,
        code: DriverCode,
    },
    /// Stream capture went wrong: the call that failed, the capture status, and why.
    Capture {
        op: String,
        status: String,
        cause: String,
    },
    /// Bad input, found before anything was allocated.
    InvalidInput(String),
    /// A result check failed: async differs from sync, or GPU from the CPU reference.
    Verification(String),
    /// A broken internal invariant (a bug in streamlab, not bad input): please report it.
    Internal(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The process exit code for this error (documented in `streamlab --help`).
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::InvalidInput(_) => 2,
            Error::NoDevice(_) => 3,
            Error::Cuda { .. } | Error::Capture { .. } => 4,
            Error::Verification(_) => 5,
            Error::Internal(_) => 70,
        }
    }

    /// The driver code, when this is a driver error.
    pub fn driver_code(&self) -> Option<u32> {
        match self {
            Error::Cuda { code, .. } => Some(code.0),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoDevice(why) => write!(f, "no CUDA device available ({why})"),
            Error::Cuda {
                op,
                stream: Some(s),
                code,
            } => write!(f, "{op} on stream \"{s}\": {code}"),
            Error::Cuda {
                op,
                stream: None,
                code,
            } => write!(f, "{op}: {code}"),
            Error::Capture { op, status, cause } => {
                write!(
                    f,
                    "{op} during stream capture (capture status: {status}): {cause}"
                )
            }
            Error::InvalidInput(why) => write!(f, "invalid input: {why}"),
            Error::Verification(why) => write!(f, "verification failed: {why}"),
            Error::Internal(why) => write!(f, "internal error (a bug in streamlab): {why}"),
        }
    }
}

impl std::error::Error for Error {}

/// Turns a raw driver status into a `Result`, naming the operation and stream.
pub fn check(status: CUresult, op: impl Into<String>, stream: Option<&str>) -> Result<()> {
    let code = DriverCode::from_status(status);
    if code.code() == 0 {
        Ok(())
    } else {
        Err(Error::Cuda {
            op: op.into(),
            stream: stream.map(str::to_owned),
            code,
        })
    }
}

/// Adds context to cust's own results.
pub trait Context<T> {
    fn context(self, op: &str) -> Result<T>;
}

impl<T> Context<T> for cust::error::CudaResult<T> {
    fn context(self, op: &str) -> Result<T> {
        self.map_err(|e| Error::Cuda {
            op: op.to_owned(),
            stream: None,
            code: DriverCode::new(e as u32),
        })
    }
}

/// Returns `InvalidInput` with `message` unless `ok`.
pub fn ensure(ok: bool, message: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidInput(message()))
    }
}
