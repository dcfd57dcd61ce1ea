//! What the recorder is told, through the environment the trace command sets.
use std::path::PathBuf;

use streamlab_cupti::trace_file::{Keep, WhenFull};

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
/// Which records to keep once `max_records` are kept: `first`, `last` or `sample` (unset or
/// another word: `first`, the recorder's own default; the trace command asks for `last`).
pub const WHEN_FULL: &str = "STREAMLAB_TRACE_WHEN_FULL";
/// The NVTX range whose first start opens the capture window.
pub const CAPTURE_RANGE: &str = "STREAMLAB_TRACE_CAPTURE_RANGE";
/// How many ranges of that name end before the window closes (0 or unset: none, it stays
/// open to the end of the run).
pub const CAPTURE_COUNT: &str = "STREAMLAB_TRACE_CAPTURE_COUNT";
/// The window opens this many ms after the program was started.
pub const DELAY_MS: &str = "STREAMLAB_TRACE_DELAY_MS";
/// The window closes this many ms after the delay (0 or unset: at the end of the run).
pub const DURATION_MS: &str = "STREAMLAB_TRACE_DURATION_MS";
/// CLOCK_MONOTONIC, in ns, when the trace command started the program: the delay counts
/// from it (unset: from the recorder's start, at the program's first `cuInit`).
pub const STARTED_NS: &str = "STREAMLAB_TRACE_STARTED_NS";

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
    /// What to keep, as the `Process` line says it.
    pub keep: Keep,
    /// [`STARTED_NS`], if set.
    pub started_ns: Option<u64>,
}

impl Config {
    /// The configuration `get` (an environment lookup) gives; `None` without a trace folder.
    /// A number that does not parse falls back to its default, and so does a 0 where 0
    /// means nothing (the flush interval, the limit, the duration).
    pub fn from(get: impl Fn(&str) -> Option<String>) -> Option<Config> {
        let dir = get(TRACE_DIR).filter(|d| !d.is_empty())?;
        let value = |key: &str| get(key).and_then(|v| v.trim().parse::<u64>().ok());
        let positive = |key: &str| value(key).filter(|&n| n > 0);
        let path = |key: &str| get(key).filter(|p| !p.is_empty()).map(PathBuf::from);
        let when_full = match get(WHEN_FULL).as_deref().map(str::trim) {
            Some("last") => WhenFull::Last,
            Some("sample") => WhenFull::Sample,
            _ => WhenFull::First,
        };
        let keep = Keep {
            when_full,
            capture_range: get(CAPTURE_RANGE).filter(|r| !r.is_empty()),
            capture_count: value(CAPTURE_COUNT).unwrap_or(0),
            delay_ms: value(DELAY_MS).unwrap_or(0),
            duration_ms: positive(DURATION_MS),
        };
        Some(Config {
            dir: dir.into(),
            flush_ms: positive(FLUSH_MS).unwrap_or(DEFAULT_FLUSH_MS),
            max_records: positive(MAX_RECORDS).unwrap_or(DEFAULT_MAX_RECORDS),
            cupti: path(CUPTI),
            nvtx_injection: path(NVTX_INJECTION),
            // A count without a range means nothing: the Process line says what was used.
            keep: Keep {
                capture_count: keep.capture_range.as_ref().map_or(0, |_| keep.capture_count),
                ..keep
            },
            started_ns: positive(STARTED_NS),
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
        assert_eq!((c.keep, c.started_ns), (Keep::default(), None));
        let c = config(&[(TRACE_DIR, "/tmp/t"), (FLUSH_MS, "soon"), (MAX_RECORDS, "0")]).unwrap();
        assert_eq!((c.flush_ms, c.max_records), (DEFAULT_FLUSH_MS, DEFAULT_MAX_RECORDS));
    }

    #[test]
    fn what_to_keep_is_read_back_as_the_process_line_says_it() {
        let c = config(&[
            (TRACE_DIR, "/tmp/t"),
            (WHEN_FULL, "sample"),
            (CAPTURE_RANGE, "step"),
            (CAPTURE_COUNT, "10"),
            (DELAY_MS, "2000"),
            (DURATION_MS, "5000"),
            (STARTED_NS, "123456789"),
        ])
        .unwrap();
        let keep = Keep {
            when_full: WhenFull::Sample,
            capture_range: Some("step".into()),
            capture_count: 10,
            delay_ms: 2000,
            duration_ms: Some(5000),
        };
        assert_eq!((c.keep, c.started_ns), (keep, Some(123_456_789)));
        // `last`; a duration of 0 is none; a count without a range is dropped; an unknown
        // word keeps the first records.
        let c = config(&[
            (TRACE_DIR, "/t"),
            (WHEN_FULL, "last"),
            (DURATION_MS, "0"),
            (CAPTURE_COUNT, "3"),
        ])
        .unwrap();
        assert_eq!(c.keep, Keep { when_full: WhenFull::Last, ..Keep::default() });
        let c = config(&[(TRACE_DIR, "/t"), (WHEN_FULL, "newest"), (CAPTURE_RANGE, "")]).unwrap();
        assert_eq!(c.keep, Keep::default());
    }
}
