//! What the recorder is told, through the environment the trace command sets.
use std::path::PathBuf;

/// The folder the recorder writes `<pid>.jsonl` into; without it the recorder does nothing.
pub const TRACE_DIR: &str = "STREAMLAB_TRACE_DIR";
/// How often, in ms, the recorder asks CUPTI for its completed records.
pub const FLUSH_MS: &str = "STREAMLAB_TRACE_FLUSH_MS";
/// The most records kept per process.
pub const MAX_RECORDS: &str = "STREAMLAB_TRACE_MAX_RECORDS";
/// The libcupti file to load (find.rs honours it too); unset, CUPTI is searched for.
pub const CUPTI: &str = "STREAMLAB_CUPTI";
/// Where NVTX looks for its injection: libcupti, for NVTX ranges to reach CUPTI.
pub const NVTX_INJECTION: &str = "NVTX_INJECTION64_PATH";

/// A flush every 200 ms: what a kill can lose, against one CUPTI call and a few writes per
/// flush.
pub const DEFAULT_FLUSH_MS: u64 = 200;
/// Each kept record becomes one event of the Perfetto trace, some 187 bytes of JSON (run
/// 26-E: 33,678 records, 6.31 MB). Half a million keep the trace near 94 MB (`streamlab
/// trace` asks for 250,000, about 47 MB); the Perfetto UI's JSON import grows slow and runs
/// out of memory a few times past that. A training
/// loop launches thousands of kernels a second, so this is minutes of it, not hours: the
/// limit is per process, and STREAMLAB_TRACE_MAX_RECORDS raises it.
pub const DEFAULT_MAX_RECORDS: u64 = 500_000;

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub dir: PathBuf,
    pub flush_ms: u64,
    pub max_records: u64,
    /// The libcupti file named by [`CUPTI`], if any.
    pub cupti: Option<PathBuf>,
    /// [`NVTX_INJECTION`], if set.
    pub nvtx_injection: Option<PathBuf>,
}

impl Config {
    /// The configuration `get` (an environment lookup) gives; `None` without a trace folder.
    /// A number that does not parse, or 0, falls back to its default.
    pub fn from(get: impl Fn(&str) -> Option<String>) -> Option<Config> {
        let dir = get(TRACE_DIR).filter(|d| !d.is_empty())?;
        let number = |key: &str, default: u64| {
            get(key).and_then(|v| v.trim().parse().ok()).filter(|&n| n > 0).unwrap_or(default)
        };
        let path = |key: &str| get(key).filter(|p| !p.is_empty()).map(PathBuf::from);
        Some(Config {
            dir: dir.into(),
            flush_ms: number(FLUSH_MS, DEFAULT_FLUSH_MS),
            max_records: number(MAX_RECORDS, DEFAULT_MAX_RECORDS),
            cupti: path(CUPTI),
            nvtx_injection: path(NVTX_INJECTION),
        })
    }

    pub fn from_env() -> Option<Config> {
        Config::from(|key| std::env::var(key).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Option<Config> {
        Config::from(|key| pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn no_folder_no_recorder_and_bad_numbers_fall_back() {
        assert_eq!(config(&[(FLUSH_MS, "50")]), None);
        assert_eq!(config(&[(TRACE_DIR, "")]), None);
        let c = config(&[(TRACE_DIR, "/tmp/t"), (FLUSH_MS, "50"), (CUPTI, "/x/libcupti.so.13")])
            .unwrap();
        assert_eq!((c.flush_ms, c.max_records), (50, DEFAULT_MAX_RECORDS));
        assert_eq!(c.cupti, Some(PathBuf::from("/x/libcupti.so.13")));
        assert_eq!(c.nvtx_injection, None);
        let c = config(&[(TRACE_DIR, "/tmp/t"), (FLUSH_MS, "soon"), (MAX_RECORDS, "0")]).unwrap();
        assert_eq!((c.flush_ms, c.max_records), (DEFAULT_FLUSH_MS, DEFAULT_MAX_RECORDS));
    }
}
