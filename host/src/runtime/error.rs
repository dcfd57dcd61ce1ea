//! One error type for the whole crate, and the exit codes the CLI maps it to.
//!
//! Every failed driver call is named with the operation and, where there is one, the stream
//! it was issued on ([`check`], or `Named` on what the driver layer returns), so an error
//! reads
//! `cuMemcpyHtoDAsync on stream "overlap-3": CUDA_ERROR_INVALID_VALUE (1): invalid argument`.
//!
//! What an error says is a sentence of the catalogs ([`Text`]), so that it is printed in the
//! language `--lang` (or the locale) picks: [`Error::render`]. Its `Display` is the English,
//! which `--json` and the tests read. Names stay as they are in every language: the driver
//! call, the stream, the driver's own name and words for its code, NCCL's words.
use std::fmt;

use cudarc::driver::sys::CUresult;

use crate::runtime::driver::{self, DriverResult};
use crate::t;
use crate::text::{Lang, Text};

/// A CUDA driver status code with its name and description, read from the driver when the
/// error is made (so a code the bindings name is printed as the driver names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverCode {
    code: u32,
    name: String,
    description: Option<String>,
}

impl DriverCode {
    pub const INVALID_VALUE: u32 = 1;
    pub const NO_DEVICE: u32 = 100;
    pub const NOT_READY: u32 = 600;
    pub const STREAM_CAPTURE_UNSUPPORTED: u32 = 900;
    pub const STREAM_CAPTURE_INVALIDATED: u32 = 901;
    pub const STREAM_CAPTURE_UNJOINED: u32 = 904;
    pub const STREAM_CAPTURE_ISOLATION: u32 = 905;
    pub const STREAM_CAPTURE_IMPLICIT: u32 = 906;

    /// A code known only by number (tests, and codes that did not come from a call).
    pub fn new(code: u32) -> DriverCode {
        DriverCode { code, name: format!("CUDA error {code}"), description: None }
    }

    /// A status returned by a driver call.
    pub fn from_status(status: CUresult) -> DriverCode {
        // The driver has no words for codes it does not know: those are printed by name.
        let text = driver::get_error_string(status).ok().flatten();
        let description = text.map(|t| t.to_string_lossy().into_owned());
        DriverCode { code: status as u32, name: format!("{status:?}"), description }
    }

    pub fn code(&self) -> u32 {
        self.code
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }
}

impl fmt::Display for DriverCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.code)?;
        if let Some(d) = &self.description {
            write!(f, ": {d}")?;
        }
        Ok(())
    }
}

#[derive(Debug)]
pub enum Error {
    /// No driver, no device, or `cuInit` failed: nothing on the GPU can run.
    NoDevice(Text),
    /// A driver call failed. `op` names the call and what it was for; `stream` the stream.
    Cuda { op: String, stream: Option<String>, code: DriverCode },
    /// Stream capture went wrong: the call that failed (and its stream), the capture status,
    /// and why (boxed: the rarest error need not make every `Result` larger).
    Capture { op: String, stream: Option<String>, status: String, cause: Box<Text> },
    /// An NCCL call failed: the call, the stream, and NCCL's own words.
    Nccl { op: String, stream: Option<String>, message: String },
    /// The lesson needs what this machine lacks (a second GPU, NCCL): the one line says what.
    /// `run all` lists such a lesson as not run and goes on.
    NotRun(Text),
    /// Bad input, found before anything was allocated.
    InvalidInput(Text),
    /// A result check failed: async differs from sync, or GPU from the CPU reference.
    Verification(Text),
    /// A broken internal invariant (a bug in streamlab, not bad input): please report it. Its
    /// detail is for the developers, in English.
    Internal(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The process exit code for this error (documented in `streamlab --help`).
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::InvalidInput(_) => 2,
            Error::NoDevice(_) | Error::NotRun(_) => 3,
            Error::Cuda { .. } | Error::Capture { .. } | Error::Nccl { .. } => 4,
            Error::Verification(_) => 5,
            Error::Internal(_) => 70,
        }
    }

    /// The driver code, when this is a driver error.
    pub fn driver_code(&self) -> Option<u32> {
        match self {
            Error::Cuda { code, .. } => Some(code.code()),
            _ => None,
        }
    }

    /// What the error says, as a sentence of the catalogs.
    pub fn text(&self) -> Text {
        let plain = |s: &String| Text::Plain(s.clone());
        let call = |op: &String, stream: &Option<String>| match stream {
            Some(s) => t!("error.call_on_stream", op = plain(op), stream = plain(s)),
            None => plain(op),
        };
        match self {
            Error::NoDevice(why) => t!("error.no_device", why),
            Error::Cuda { op, stream, code } => {
                t!("error.failed", call = call(op, stream), why = code.to_string())
            }
            Error::Capture { op, stream, status, cause } => {
                t!(
                    "error.capture",
                    call = call(op, stream),
                    status = plain(status),
                    cause = cause.as_ref()
                )
            }
            Error::Nccl { op, stream, message } => {
                t!("error.failed", call = call(op, stream), why = plain(message))
            }
            Error::NotRun(why) | Error::InvalidInput(why) => why.clone(),
            Error::Verification(why) => t!("error.verification", why),
            Error::Internal(why) => t!("error.internal", why = plain(why)),
        }
    }

    /// The error's one line in `lang`.
    pub fn render(&self, lang: Lang) -> String {
        self.text().render(lang)
    }
}

/// The English line: what `--json` and the tests read.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(Lang::En))
    }
}

impl std::error::Error for Error {}

/// Turns a raw driver status into a `Result`, naming the operation and stream.
pub fn check(status: CUresult, op: impl Into<String>, stream: Option<&str>) -> Result<()> {
    if status == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(cuda_error(status, op, stream))
    }
}

/// Names what the driver layer returns, as [`check`] does: the operation and, where there
/// is one, the stream.
pub(crate) trait Named<T> {
    fn named(self, op: impl Into<String>) -> Result<T>;
    fn named_on(self, op: impl Into<String>, stream: &str) -> Result<T>;
}

impl<T> Named<T> for DriverResult<T> {
    fn named(self, op: impl Into<String>) -> Result<T> {
        self.map_err(|status| cuda_error(status, op, None))
    }

    fn named_on(self, op: impl Into<String>, stream: &str) -> Result<T> {
        self.map_err(|status| cuda_error(status, op, Some(stream)))
    }
}

/// The error of driver call `op` that failed with `status`.
pub(crate) fn cuda_error(status: CUresult, op: impl Into<String>, stream: Option<&str>) -> Error {
    Error::Cuda {
        op: op.into(),
        stream: stream.map(str::to_owned),
        code: DriverCode::from_status(status),
    }
}

/// Returns `InvalidInput` with `message` unless `ok`.
pub fn ensure(ok: bool, message: impl FnOnce() -> Text) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidInput(message()))
    }
}

/// The longest an argument is echoed back in an error line, in characters.
pub const ECHOED: usize = 60;

/// `arg` as an error line echoes it: whole up to [`ECHOED`] characters, else its start and
/// how long it was, so that a 100 KB argument (a file's content pasted by mistake) does not
/// become a 100 KB error line. Control characters (a newline) are escaped, so the line stays
/// one line.
pub fn echoed(arg: &str) -> String {
    let count = arg.chars().count();
    let start: String = arg
        .chars()
        .take(ECHOED)
        .map(|c| match c.is_control() {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect();
    match count > ECHOED {
        true => format!("{start}… ({count} characters)"),
        false => start,
    }
}

/// [`io_words`] as a sentence of the catalogs, for an error line said in any language: the
/// kinds it names in words are translated, the system's own words stay as they are.
pub fn io_text(e: &std::io::Error) -> Text {
    use std::io::ErrorKind as K;
    let key = match e.kind() {
        K::NotFound => "error.io.not_found",
        K::PermissionDenied => "error.io.permission_denied",
        K::AlreadyExists => "error.io.already_exists",
        K::IsADirectory => "error.io.is_a_folder",
        K::NotADirectory => "error.io.not_a_folder",
        K::ReadOnlyFilesystem => "error.io.read_only",
        K::StorageFull => "error.io.disk_full",
        K::QuotaExceeded => "error.io.quota",
        K::FileTooLarge => "error.io.too_large",
        K::InvalidFilename => "error.io.bad_name",
        K::DirectoryNotEmpty => "error.io.folder_not_empty",
        K::BrokenPipe => "error.io.broken_pipe",
        K::OutOfMemory => "error.io.out_of_memory",
        _ => return Text::Plain(io_words(e)),
    };
    Text::message(key, Vec::new())
}

/// What went wrong with a file, a folder or a pipe, in words: "no such file or folder" for
/// `NotFound`, rather than the system's "No such file or directory (os error 2)". An error of
/// a kind not named here keeps the system's words, without the "(os error N)" after them.
fn io_words(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    let said = match e.kind() {
        K::NotFound => "no such file or folder",
        K::PermissionDenied => "permission denied",
        K::AlreadyExists => "it already exists",
        K::IsADirectory => "it is a folder",
        K::NotADirectory => "a part of its path is not a folder",
        K::ReadOnlyFilesystem => "the file system is read-only",
        K::StorageFull => "no space left on the disk",
        K::QuotaExceeded => "over the disk quota",
        K::FileTooLarge => "the file is too large",
        K::InvalidFilename => "the name is too long or not allowed here",
        K::DirectoryNotEmpty => "the folder is not empty",
        K::BrokenPipe => "the reader at the other end closed the pipe",
        K::OutOfMemory => "out of memory",
        _ => {
            let text = e.to_string();
            let bare = match text.rfind(" (os error ") {
                Some(at) if text.ends_with(')') => text[..at].to_string(),
                _ => text,
            };
            let mut chars = bare.chars();
            return match chars.next() {
                Some(first) => first.to_lowercase().chain(chars).collect(),
                None => "an input/output error".into(),
            };
        }
    };
    said.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The system's errors are said in words, never with "(os error N)".
    #[test]
    fn file_errors_are_said_without_the_os_error_number() {
        let os = |n| io_words(&std::io::Error::from_raw_os_error(n));
        assert_eq!(os(2), "no such file or folder");
        assert_eq!(os(13), "permission denied");
        assert_eq!(os(21), "it is a folder");
        assert_eq!(os(28), "no space left on the disk");
        assert_eq!(os(30), "the file system is read-only");
        // A kind without words of its own: the system's, lower-cased, without the number.
        assert_eq!(os(11), "resource temporarily unavailable");
        for n in 1..134 {
            assert!(!os(n).contains("os error"), "{n}: {}", os(n));
        }
        let plain = std::io::Error::other("the wait for the program ended");
        assert_eq!(io_words(&plain), "the wait for the program ended");
    }

    /// The sentence of the catalogs says in English what `io_words` says, and is Chinese
    /// under `--lang zh` for each kind it names.
    #[test]
    fn file_errors_are_sentences_of_the_catalogs() {
        for n in 1..134 {
            let e = std::io::Error::from_raw_os_error(n);
            assert_eq!(io_text(&e).en(), io_words(&e), "os error {n}");
        }
        let missing = io_text(&std::io::Error::from_raw_os_error(2));
        assert!(crate::text::has_chinese(&missing.render(Lang::Zh)));
    }
}
