//! One line of a recorder's file, parsed flat: every field any kind of line has, each
//! optional, its strings borrowed from the line where they hold no escapes. serde reads a
//! flat struct straight from the bytes; the file format's own `Line` enum is tagged by its
//! `type` field, which makes serde buffer each line first (a third of the reading time on a
//! large trace). [`FlatLine::kind`] says which `Line` it was.
use std::borrow::Cow;

use serde::Deserialize;

use crate::runtime::cupti::trace_file::{Direction, Keep, MarkerPhase, Memory, SyncKind};

/// The fields of every kind of `trace_file::Line`, by name.
#[derive(Debug, Default, Deserialize)]
pub struct FlatLine<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Cow<'a, str>,
    // Process
    pub format: Option<u32>,
    pub pid: Option<u32>,
    pub ppid: Option<u32>,
    pub args: Option<Vec<String>>,
    pub cupti: Option<String>,
    pub cupti_version: Option<u32>,
    pub flush_ms: Option<u64>,
    pub max_records: Option<u64>,
    pub start_ns: Option<u64>,
    pub missing: Option<Vec<String>>,
    pub keep: Option<Keep>,
    // Device, Context, Stream, Name
    pub id: Option<u32>,
    #[serde(borrow)]
    pub name: Option<Cow<'a, str>>,
    pub compute_capability: Option<[u32; 2]>,
    pub multiprocessors: Option<u32>,
    pub copy_engines: Option<u32>,
    pub null_stream: Option<u32>,
    pub non_blocking: Option<bool>,
    #[serde(borrow)]
    pub object: Option<Cow<'a, str>>,
    // Work and calls
    pub device: Option<u32>,
    pub context: Option<u32>,
    pub stream: Option<u32>,
    pub start: Option<u64>,
    pub end: Option<u64>,
    pub correlation: Option<u32>,
    pub grid: Option<[u32; 3]>,
    pub block: Option<[u32; 3]>,
    pub bytes: Option<u64>,
    pub direction: Option<Direction>,
    pub src: Option<Memory>,
    pub dst: Option<Memory>,
    pub src_device: Option<u32>,
    pub dst_device: Option<u32>,
    /// A synchronization's kind (`Sync` lines).
    #[serde(rename = "kind")]
    pub sync_kind: Option<SyncKind>,
    pub thread: Option<u64>,
    /// An Api line's `driver`/`runtime`, a Marker line's NVTX domain.
    #[serde(borrow)]
    pub domain: Option<Cow<'a, str>>,
    // Markers
    pub phase: Option<MarkerPhase>,
    pub time: Option<u64>,
    // Dropped, Note, Gate, Sampled, Crashed
    pub count: Option<u64>,
    pub why: Option<String>,
    pub before: Option<u64>,
    pub text: Option<String>,
    pub open: Option<bool>,
    pub range: Option<String>,
    pub every: Option<u64>,
    pub total: Option<u64>,
    pub kept: Option<Vec<u64>>,
    pub signal: Option<i32>,
}

impl<'a> FlatLine<'a> {
    /// One line's bytes (without its newline); `None` for a line cut short or not JSON.
    pub fn parse(bytes: &'a [u8]) -> Option<FlatLine<'a>> {
        serde_json::from_slice(bytes).ok()
    }

    /// A record's start and end (an NVTX marker's time twice); `None` for lines that are no
    /// record.
    pub fn times(&self) -> Option<(u64, u64)> {
        match self.kind.as_ref() {
            "kernel" | "copy" | "peer" | "memset" | "sync" | "api" => {
                Some((self.start.unwrap_or(0), self.end.unwrap_or(0)))
            }
            "marker" => self.time.map(|t| (t, t)),
            _ => None,
        }
    }

    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::cupti::trace_file::Line;

    /// Every kind of line the recorder writes reads back flat with the same values.
    #[test]
    fn every_kind_of_line_reads_flat() {
        let kernel = Line::Kernel {
            device: 1,
            context: 2,
            stream: 13,
            start: 100,
            end: 250,
            correlation: 9,
            name: "_Z1kv \"quoted\"".into(),
            grid: [4, 1, 1],
            block: [256, 1, 1],
        };
        let text = kernel.to_json_line();
        let flat = FlatLine::parse(text.trim_end().as_bytes()).unwrap();
        assert_eq!(flat.kind, "kernel");
        assert_eq!((flat.device, flat.context, flat.stream), (Some(1), Some(2), Some(13)));
        assert_eq!(flat.times(), Some((100, 250)));
        assert_eq!(flat.name(), "_Z1kv \"quoted\"");
        assert_eq!((flat.grid, flat.correlation), (Some([4, 1, 1]), Some(9)));
        let sync = Line::Sync {
            kind: SyncKind::Stream,
            context: 1,
            stream: None,
            start: 5,
            end: 6,
            correlation: 3,
        };
        let flat_sync = sync.to_json_line();
        let flat = FlatLine::parse(flat_sync.trim_end().as_bytes()).unwrap();
        assert_eq!((flat.sync_kind, flat.stream), (Some(SyncKind::Stream), None));
        let marker = Line::Marker {
            phase: MarkerPhase::Start,
            id: 4,
            thread: 11,
            time: 77,
            name: "step".into(),
            domain: "NCCL".into(),
        };
        let text = marker.to_json_line();
        let flat = FlatLine::parse(text.trim_end().as_bytes()).unwrap();
        assert_eq!((flat.phase, flat.times()), (Some(MarkerPhase::Start), Some((77, 77))));
        assert_eq!(flat.domain.as_deref(), Some("NCCL"));
        let dropped =
            Line::Dropped { count: 3, why: "over".into(), before: Some(9) }.to_json_line();
        let flat = FlatLine::parse(dropped.trim_end().as_bytes()).unwrap();
        assert_eq!((flat.count, flat.before, flat.times()), (Some(3), Some(9), None));
        // A line cut short is no line.
        assert!(FlatLine::parse(&text.as_bytes()[..text.len() / 2]).is_none());
    }
}
