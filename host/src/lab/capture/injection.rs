//! STAND-IN, for building and testing `streamlab trace` before the real file lands: the lead
//! replaces this file at merge with the real one (branch `inject`), which writes the
//! embedded recorder library to a cache folder, finds libcupti and returns the variables to
//! set on the traced program. This stand-in has no recorder: it looks for libcupti the way
//! the real one does (without loading it) and then refuses, so `streamlab trace` exits 3
//! before starting the program, saying what to install where libcupti is missing.
use std::path::{Path, PathBuf};

use crate::runtime::cupti;

/// What the traced program needs to load the recorder.
#[derive(Debug, Clone, PartialEq)]
pub struct Injection {
    /// The recorder library (`CUDA_INJECTION64_PATH`).
    pub library: PathBuf,
    /// The libcupti file the recorder will load, and its API version.
    pub cupti: PathBuf,
    pub cupti_version: u32,
    /// The variables to set on the traced program (and, through it, its children).
    pub env: Vec<(String, String)>,
}

/// The stand-in of the real `prepare`: the recorder would write `<trace_dir>/<pid>.jsonl`,
/// flushing every `flush_ms` and keeping at most `max_records` records a process.
pub fn prepare(trace_dir: &Path, flush_ms: u64, max_records: u64) -> Result<Injection, String> {
    let _ = (trace_dir, flush_ms, max_records);
    let found = cupti::candidates().into_iter().find(|p| p.is_absolute() && p.is_file());
    match found {
        None => Err("libcupti not found: install CUPTI (the CUDA toolkit's libcupti.so, or `pip install nvidia-cuda-cupti-cu12`), or name the file in STREAMLAB_CUPTI".into()),
        Some(path) => Err(format!(
            "found {} but this build has no recorder to inject (host/src/lab/capture/injection.rs is a stand-in)",
            path.display()
        )),
    }
}
