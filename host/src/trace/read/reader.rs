//! Reading a trace folder as a stream: every process's files (`<pid>.jsonl`, then its
//! segments `<pid>.<seq>.jsonl`; see `cupti::trace_file`), line by line, into the columns of
//! a [`Capture`]. A line is parsed flat ([`FlatLine`]) from a reused buffer and goes straight
//! into its process's columns ([`ProcessBuilder`]): the whole file is never held.
//!
//! A line that does not parse is counted and skipped: the last line of a process killed
//! mid-write is cut short, and a newer recorder may write kinds this streamlab does not know.
//! Records are placed on one clock: CUPTI's timestamps are one clock for every process of a
//! host, so every time stays CUPTI's ns and the origin is the earliest record of any process.
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::runtime::cupti::trace_file;
use crate::runtime::error::io_text;
use crate::t;
use crate::text::Text;
use crate::trace::read::builder::ProcessBuilder;
use crate::trace::read::flat_line::FlatLine;
use crate::trace::read::model::{Capture, Process};

/// Bytes read from a file at a time.
const READ_CHUNK: usize = 4 << 20;

/// The files of one process: its main file (if any), then its segments in order.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProcessFiles {
    pub main: Option<PathBuf>,
    pub segments: Vec<(u64, PathBuf)>,
}

impl ProcessFiles {
    fn all(&self) -> Vec<PathBuf> {
        let main = self.main.iter().cloned();
        main.chain(self.segments.iter().map(|(_, p)| p.clone())).collect()
    }
}

/// Every recorder file of `dir`, by process: `<pid>.jsonl` and `<pid>.<seq>.jsonl` by their
/// pid; any other `*.jsonl` is a process of its own (keyed by its name).
pub fn trace_files(dir: &Path) -> Result<BTreeMap<String, ProcessFiles>, Text> {
    let entries = std::fs::read_dir(dir).map_err(|e| reading(dir, &e))?;
    let mut by_process: BTreeMap<String, ProcessFiles> = BTreeMap::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_string) else {
            continue;
        };
        if !name.ends_with(".jsonl") || !path.is_file() {
            continue;
        }
        match trace_file::file_name(&name) {
            Some((pid, None)) => by_process.entry(pid.to_string()).or_default().main = Some(path),
            Some((pid, Some(seq))) => {
                by_process.entry(pid.to_string()).or_default().segments.push((seq, path))
            }
            None => by_process.entry(name).or_default().main = Some(path),
        }
    }
    for files in by_process.values_mut() {
        files.segments.sort();
    }
    Ok(by_process)
}

/// Every process of `dir`, read into one capture.
pub fn read_dir(dir: &Path) -> Result<Capture, Text> {
    let mut processes = Vec::new();
    for (key, files) in trace_files(dir)? {
        let all = files.all();
        let pid = key.parse().unwrap_or(0);
        let mut builder = ProcessBuilder::new(pid, all.clone());
        for path in &all {
            read_file(path, &mut builder)?;
        }
        processes.push(builder.finish());
    }
    Ok(capture(processes))
}

/// Feeds one file's lines to `builder`. Read as bytes: a line cut mid-character is skipped
/// like any cut line.
pub fn read_file(path: &Path, builder: &mut ProcessBuilder) -> Result<(), Text> {
    let file = std::fs::File::open(path).map_err(|e| reading(path, &e))?;
    let mut reader = BufReader::with_capacity(READ_CHUNK, file);
    let mut line = Vec::with_capacity(1024);
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(|e| reading(path, &e))?;
        if n == 0 {
            return Ok(());
        }
        let bytes = line.strip_suffix(b"\n").unwrap_or(&line);
        if bytes.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match FlatLine::parse(bytes) {
            Some(flat) => builder.line(&flat),
            None => builder.skip(),
        }
    }
}

/// Reading `path` failed with `e`.
fn reading(path: &Path, e: &std::io::Error) -> Text {
    t!("error.trace.reading", path = path.display().to_string(), why = io_text(e))
}

/// The capture of `processes`, on one clock: the origin is the earliest record of any
/// process, else the earliest time any of them names (so that no time is said as CUPTI's raw
/// clock); processes in the order they started, then by pid.
pub fn capture(mut processes: Vec<Process>) -> Capture {
    let with_records = processes.iter().filter(|p| p.records > 0).map(|p| p.first_ns);
    let origin_ns = with_records.min().unwrap_or_else(|| {
        let named = processes.iter().flat_map(|p| [p.start_ns, p.last_ns]);
        named.filter(|t| *t > 0).min().unwrap_or(0)
    });
    let key = |p: &Process| {
        let began = [p.start_ns, p.first_ns].into_iter().find(|t| *t > 0);
        (began.unwrap_or(u64::MAX), p.pid)
    };
    processes.sort_by_key(key);
    Capture { processes, origin_ns }
}
