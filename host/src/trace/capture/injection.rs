//! What a traced program needs to be recorded: the injected recorder (`inject/`, whose bytes
//! `host/build.rs` builds and this binary embeds) written out to a cache folder, the libcupti
//! to load, and the environment that makes the CUDA driver load the one and NVTX the other,
//! and tells the recorder what to keep ([`Recording`]; `inject/src/config.rs` reads it).
//!
//! The library is embedded so that an installed `streamlab` needs nothing beside it: one
//! binary, and CUPTI from the CUDA toolkit or a pip wheel. It is written at first use to
//! `$XDG_CACHE_HOME/streamlab` (else `~/.cache/streamlab`, else a folder of the user's in the
//! temp folder), under a name that carries a hash of its bytes, through a temp file renamed
//! into place: two first uses at once both succeed, and a binary of another version never
//! loads this one's library.
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::runtime::cupti;
use crate::runtime::cupti::trace_file::{Keep, WhenFull};
use crate::runtime::error::io_text;
use crate::t;
use crate::text::Text;

/// CLOCK_MONOTONIC in ns when the trace command started the program (set by
/// `program::run`, just before it starts it): the recorder counts `--delay` from it.
pub const STARTED_NS: &str = "STREAMLAB_TRACE_STARTED_NS";

/// What the recorder is asked to do, as the trace command's flags say it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recording {
    /// How often it hands CUPTI's records to its files (`--flush-ms`).
    pub flush_ms: u64,
    /// The most records each process keeps (`--max-records`).
    pub max_records: u64,
    /// The capture window and which records stay at the limit (`--capture-range`,
    /// `--capture-count`, `--delay`, `--duration`, `--when-full`).
    pub keep: Keep,
}

/// The recorder, as `host/build.rs` built it.
static LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libstreamlab_inject.so"));

/// What the trace command needs to run a program under the recorder.
#[derive(Debug, Clone)]
pub struct Injection {
    /// The recorder's library file (`CUDA_INJECTION64_PATH`).
    pub library: PathBuf,
    /// The libcupti file the recorder and NVTX load, and its API version.
    pub cupti: PathBuf,
    pub cupti_version: u32,
    /// The variables to set in the program's environment.
    pub env: Vec<(String, String)>,
}

/// Writes the recorder out (once per version of it), finds CUPTI, and returns the
/// environment that records the program into `trace_dir` (one `<pid>.jsonl` per process,
/// and its segments) as `recording` says.
pub fn prepare(trace_dir: &Path, recording: &Recording) -> Result<Injection, Text> {
    let found = cupti::load().map_err(|e| no_cupti(&e))?;
    let library = library_file()?;
    let trace_dir = std::path::absolute(trace_dir).map_err(|e| {
        t!("error.trace.trace_folder", path = trace_dir.display().to_string(), why = io_text(&e))
    })?;
    let cupti = found.path().to_path_buf();
    let env = environment(&library, &cupti, &trace_dir, recording)?;
    Ok(Injection { library, cupti, cupti_version: found.version(), env })
}

/// The one line said when no CUPTI loads: why (the finder's English), and what to install.
fn no_cupti(why: &str) -> Text {
    t!("error.trace.no_cupti", why = why.to_string())
}

/// The word `STREAMLAB_TRACE_WHEN_FULL` takes.
fn when_full_word(when_full: WhenFull) -> &'static str {
    match when_full {
        WhenFull::First => "first",
        WhenFull::Last => "last",
        WhenFull::Sample => "sample",
    }
}

/// Every variable is set, the unused ones empty or 0: a value inherited from this process's
/// own environment (a trace inside a trace) must not reach the recorder.
fn environment(
    library: &Path,
    cupti: &Path,
    trace_dir: &Path,
    recording: &Recording,
) -> Result<Vec<(String, String)>, Text> {
    let text = |p: &Path| {
        let path = p.display().to_string();
        p.to_str().map(str::to_string).ok_or_else(|| t!("error.trace.not_utf8", path))
    };
    let keep = &recording.keep;
    Ok(vec![
        ("CUDA_INJECTION64_PATH".into(), text(library)?),
        // NVTX calls reach CUPTI only through its own injection variable.
        ("NVTX_INJECTION64_PATH".into(), text(cupti)?),
        ("STREAMLAB_CUPTI".into(), text(cupti)?),
        ("STREAMLAB_TRACE_DIR".into(), text(trace_dir)?),
        ("STREAMLAB_TRACE_FLUSH_MS".into(), recording.flush_ms.to_string()),
        ("STREAMLAB_TRACE_MAX_RECORDS".into(), recording.max_records.to_string()),
        ("STREAMLAB_TRACE_WHEN_FULL".into(), when_full_word(keep.when_full).into()),
        ("STREAMLAB_TRACE_CAPTURE_RANGE".into(), keep.capture_range.clone().unwrap_or_default()),
        ("STREAMLAB_TRACE_CAPTURE_COUNT".into(), keep.capture_count.to_string()),
        ("STREAMLAB_TRACE_DELAY_MS".into(), keep.delay_ms.to_string()),
        ("STREAMLAB_TRACE_DURATION_MS".into(), keep.duration_ms.unwrap_or(0).to_string()),
    ])
}

/// FNV-1a, 64 bits: a name for these bytes, the same in every run of this binary.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// The user's id, as the owner of this process's `/proc` entry.
fn own_uid() -> Option<u32> {
    fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// Where the library may be written, best first.
fn cache_dirs(
    xdg_cache: Option<PathBuf>,
    home: Option<PathBuf>,
    temp: PathBuf,
    uid: Option<u32>,
) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    // The XDG rule: a relative value is ignored.
    if let Some(xdg) = xdg_cache.filter(|p| p.is_absolute()) {
        dirs.push(xdg.join("streamlab"));
    }
    if let Some(home) = home.filter(|p| p.is_absolute()) {
        dirs.push(home.join(".cache/streamlab"));
    }
    dirs.push(temp.join(format!("streamlab-{}", uid.map_or("user".into(), |u| u.to_string()))));
    dirs
}

/// The library's file in the first cache folder that takes it.
fn library_file() -> Result<PathBuf, Text> {
    let env = |k: &str| std::env::var_os(k).map(PathBuf::from);
    let dirs = cache_dirs(env("XDG_CACHE_HOME"), env("HOME"), std::env::temp_dir(), own_uid());
    let mut reasons: Option<Text> = None;
    for dir in dirs {
        match write_into(&dir, LIBRARY) {
            Ok(file) => return Ok(file),
            Err(e) => {
                let path = dir.display().to_string();
                let reason = t!("error.trace.path_why", path, why = io_text(&e));
                // One after the other, "; " between them.
                reasons = Some(match reasons {
                    Some(why) => t!("error.then", why, then = reason),
                    None => reason,
                });
            }
        }
    }
    let reasons = reasons.unwrap_or(Text::Plain(String::new()));
    Err(t!("error.trace.no_library", reasons))
}

/// Writes `bytes` as `dir/libstreamlab_inject-<hash>.so` unless that file already holds
/// them. The folder must be the user's own: a library another user could replace would run
/// inside every traced program.
fn write_into(dir: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let meta = fs::metadata(dir)?;
    if own_uid().is_some_and(|uid| meta.uid() != uid) || meta.mode() & 0o022 != 0 {
        let why = "the folder is not the user's own, or others may write in it";
        return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, why));
    }
    let file = dir.join(format!("libstreamlab_inject-{:016x}.so", fnv1a(bytes)));
    if fs::read(&file).is_ok_and(|existing| existing == bytes) {
        return Ok(file);
    }
    // A temp name no other writer uses: other processes have other ids, other threads of
    // this one other counts.
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let count = WRITES.fetch_add(1, Ordering::Relaxed);
    let temp = dir.join(format!(".libstreamlab_inject.{}.{count}.tmp", std::process::id()));
    let written = (|| {
        let mut out = fs::File::create(&temp)?;
        out.write_all(bytes)?;
        out.set_permissions(fs::Permissions::from_mode(0o755))?;
        out.sync_all()?;
        fs::rename(&temp, &file)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written.map(|()| file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("streamlab-injection-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_embedded_library_is_a_shared_object_with_the_entry_point() {
        assert!(LIBRARY.starts_with(b"\x7fELF"), "not an ELF file");
        // e_type at 16: 3 is ET_DYN, a shared object.
        assert_eq!(u16::from_le_bytes([LIBRARY[16], LIBRARY[17]]), 3);
        let entry = b"InitializeInjection\0";
        assert!(LIBRARY.windows(entry.len()).any(|w| w == entry), "no InitializeInjection");
    }

    #[test]
    fn the_library_is_written_once_by_concurrent_first_uses_and_mended_when_changed() {
        let dir = folder("write");
        let bytes: &'static [u8] = b"\x7fELF made up";
        let written: Vec<PathBuf> = (0..4)
            .map(|_| {
                let dir = dir.clone();
                std::thread::spawn(move || write_into(&dir, bytes))
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap().unwrap())
            .collect();
        let name = format!("libstreamlab_inject-{:016x}.so", fnv1a(bytes));
        assert!(written.iter().all(|f| *f == dir.join(&name)), "{written:?}");
        // One file, no temp file left, executable, the bytes.
        let files: Vec<_> = fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(files, [std::ffi::OsString::from(&name)]);
        assert_eq!(fs::read(&written[0]).unwrap(), bytes);
        assert_eq!(fs::metadata(&written[0]).unwrap().mode() & 0o777, 0o755);
        // A file of that name with other bytes is replaced.
        fs::write(&written[0], b"not it").unwrap();
        assert_eq!(write_into(&dir, bytes).unwrap(), written[0]);
        assert_eq!(fs::read(&written[0]).unwrap(), bytes);
        // Other bytes, another name.
        assert_ne!(write_into(&dir, b"\x7fELF other").unwrap(), written[0]);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_folder_others_may_write_in_is_refused() {
        let dir = folder("shared");
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        assert!(write_into(&dir, b"x").is_err());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_cache_folder_follows_xdg_then_home_then_the_temp_folder() {
        let temp = PathBuf::from("/tmp");
        let all =
            cache_dirs(Some("/x/cache".into()), Some("/home/u".into()), temp.clone(), Some(7));
        let expected = ["/x/cache/streamlab", "/home/u/.cache/streamlab", "/tmp/streamlab-7"];
        assert_eq!(all, expected.map(PathBuf::from));
        let relative = cache_dirs(Some("cache".into()), None, temp, None);
        assert_eq!(relative, [PathBuf::from("/tmp/streamlab-user")]);
    }

    #[test]
    fn the_environment_names_the_library_cupti_twice_the_folder_and_what_to_keep() {
        let environment_of = |keep: Keep| {
            let recording = Recording { flush_ms: 200, max_records: 500_000, keep };
            let library = Path::new("/c/libstreamlab_inject-1.so");
            let cupti = Path::new("/cuda/lib/libcupti.so.13");
            environment(library, cupti, Path::new("/t/trace"), &recording).unwrap()
        };
        let keep = Keep {
            when_full: WhenFull::Sample,
            capture_range: Some("step".into()),
            capture_count: 10,
            delay_ms: 2500,
            duration_ms: Some(5000),
        };
        let env = environment_of(keep);
        let get = |k: &str| env.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("CUDA_INJECTION64_PATH"), Some("/c/libstreamlab_inject-1.so"));
        assert_eq!(get("NVTX_INJECTION64_PATH"), Some("/cuda/lib/libcupti.so.13"));
        assert_eq!(get("STREAMLAB_CUPTI"), Some("/cuda/lib/libcupti.so.13"));
        assert_eq!(get("STREAMLAB_TRACE_DIR"), Some("/t/trace"));
        assert_eq!(get("STREAMLAB_TRACE_FLUSH_MS"), Some("200"));
        assert_eq!(get("STREAMLAB_TRACE_MAX_RECORDS"), Some("500000"));
        assert_eq!(get("STREAMLAB_TRACE_WHEN_FULL"), Some("sample"));
        assert_eq!(get("STREAMLAB_TRACE_CAPTURE_RANGE"), Some("step"));
        assert_eq!(get("STREAMLAB_TRACE_CAPTURE_COUNT"), Some("10"));
        assert_eq!(get("STREAMLAB_TRACE_DELAY_MS"), Some("2500"));
        assert_eq!(get("STREAMLAB_TRACE_DURATION_MS"), Some("5000"));
        assert_eq!(env.len(), 11);
        // Nothing asked: each still set, to nothing (an inherited value must not count).
        let env = environment_of(Keep { when_full: WhenFull::Last, ..Keep::default() });
        let unset: Vec<&str> = env[6..].iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(unset, ["last", "", "0", "0", "0"]);
        let said = no_cupti("libcupti not found").en();
        assert!(said.contains("libcupti") && said.contains("nvidia-cuda-cupti"), "{said}");
    }
}
