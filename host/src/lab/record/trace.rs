//! `--trace FILE.json`: recordings as a Chrome Trace Event file, which ui.perfetto.dev and
//! chrome://tracing open.
//!
//! - One process per device ("GPU 0: NVIDIA H200"), one track (thread) per stream, named
//!   and sorted in the order the lesson issued work; the host is a process of its own, with
//!   a "versions" track (one slice per recorded version) and one track per host thread.
//!   Process and thread ids are small positive numbers (Perfetto merges tid 0).
//! - The recorded versions follow each other on the same tracks, a small gap between them.
//! - An `X` slice per kernel, copy, memset and host function, with args: the lesson's
//!   label, the runtime's, bytes and GB/s, grid and block, pinned or pageable.
//! - Host slices: the issue of each driver call, synchronize waits, host functions running;
//!   a traced program's NVTX ranges on a track of their own per thread (`main · NVTX`).
//! - Flow arrows (`s`/`f`, bound to the enclosing slices) from an event record to the waits
//!   it releases, and in a traced program's trace from a launch call to its work.
//! - Metadata (top-level `metadata`, and process labels): lesson, parameters, device, and
//!   where the timeline came from.
//!
//! [`write_processes`] lays out a traced program's processes instead (`streamlab trace`): all
//! on one clock, each a Perfetto process of its own with its streams and host threads.
//!
//! [`read`] turns either file back into recordings: `--recorded` draws pictures from an
//! embedded trace, and the tests check that nothing is lost on the way.
use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::lab::record::span::{Flow, HostSpan, HostWork, Recording, Source, Span, Track, Work};
use crate::lab::record::trace_tracks::{host_track, process_tracks, version_tracks, Layout};

/// What a trace says about where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    pub lesson: String,
    pub title: String,
    pub device: String,
    pub parameters: Map<String, Value>,
    /// "measured with streamlab 0.1.0 on …" or "recorded …": said in the trace as it is.
    pub provenance: String,
}

const NS: f64 = 1e-3; // one nanosecond in µs

fn work_name(kind: Work) -> String {
    serde_json::to_value(kind).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

fn host_cat(kind: HostWork) -> &'static str {
    match kind {
        HostWork::Issue => "host issue",
        HostWork::Wait => "host wait",
        HostWork::HostFn => "host function run",
        HostWork::Range => "nvtx range",
    }
}

/// A flow's category: a host call to the work it put on a stream is a launch; the rest are
/// an event record to the waits it releases.
fn flow_cat(f: &Flow) -> &'static str {
    match (&f.from, &f.to) {
        (Track::Host { .. }, Track::Stream { .. }) => "launch",
        _ => "event",
    }
}

/// Where each recording starts on the shared time axis (ms): one after the other, with a
/// gap of a tenth of the longest.
pub fn offsets(recordings: &[Recording]) -> Vec<f64> {
    let longest = recordings.iter().map(Recording::end_ms).fold(0.0, f64::max);
    let gap = (longest * 0.1).max(0.01);
    let mut at = 0.0;
    recordings
        .iter()
        .map(|r| {
            let start = at;
            at += r.end_ms() + gap;
            start
        })
        .collect()
}

/// The trace of `recordings` (one per version, in order) as a JSON value.
pub fn write(meta: &Meta, recordings: &[Recording]) -> Value {
    write_in(Layout::Versions, meta, recordings)
}

/// The trace of a traced program: `recordings` are its processes, on one clock (their spans
/// share an origin), each a Perfetto process of its own. [`read`] reads it back the same way.
pub fn write_processes(meta: &Meta, recordings: &[Recording]) -> Value {
    write_in(Layout::Processes, meta, recordings)
}

fn write_in(layout: Layout, meta: &Meta, recordings: &[Recording]) -> Value {
    let sources: Vec<String> = recordings.iter().map(|r| r.source.describe()).collect();
    let mut source_line = sources.first().cloned().unwrap_or_default();
    if sources.iter().any(|s| *s != source_line) {
        source_line = sources.join(" / ");
    }
    let mut tracks = match layout {
        Layout::Versions => version_tracks(&meta.device, recordings, &source_line),
        Layout::Processes => process_tracks(recordings, &source_line),
    };
    let at = match layout {
        Layout::Versions => offsets(recordings),
        Layout::Processes => vec![0.0; recordings.len()],
    };
    let mut events = std::mem::take(&mut tracks.named);

    let us = |offset: f64, t: f64| (offset + t) * 1e3;
    let mut flow_id = 0u64;
    for (i, (r, offset)) in recordings.iter().zip(at).enumerate() {
        let (run_pid, run_tid) = tracks.run[i];
        // A version's slice starts at its origin; a process's where its first span starts.
        let first = r.spans.iter().map(|s| s.start_ms).chain(r.host.iter().map(|h| h.start_ms));
        let from = match layout {
            Layout::Versions => 0.0,
            Layout::Processes => first.fold(f64::INFINITY, f64::min).min(r.end_ms()),
        };
        events.push(json!({
            "ph": "X", "cat": "version", "name": r.version,
            "pid": run_pid, "tid": run_tid,
            "ts": us(offset, from), "dur": (r.end_ms() - from) * 1e3,
            "args": {
                "version": r.version,
                "source": r.source,
                "timeline": r.source.describe(),
                "ms": r.ms,
                "parts": r.parts,
                "offset_ms": offset,
            },
        }));
        for s in &r.spans {
            let mut args = json!({
                "version": r.version,
                "stream": s.stream,
                "device": s.device,
                "label": s.label,
                "start_ms": s.start_ms,
                "end_ms": s.end_ms,
            });
            if !s.name.is_empty() {
                args["name"] = json!(s.name);
            }
            if s.bytes > 0 {
                args["bytes"] = json!(s.bytes);
                args["GB/s"] = json!((s.gb_per_s() * 1e3).round() / 1e3);
            }
            if let (Some(g), Some(b)) = (s.grid, s.block) {
                args["grid"] = json!(g);
                args["block"] = json!(b);
            }
            if !s.memory.is_empty() {
                args["memory"] = json!(s.memory);
            }
            if s.process != 0 {
                args["process"] = json!(s.process);
            }
            let (pid, tid) = tracks.stream(i, s.device, &s.stream);
            events.push(json!({
                "ph": "X", "cat": work_name(s.kind), "name": s.title(),
                "pid": pid, "tid": tid,
                "ts": us(offset, s.start_ms), "dur": s.ms() * 1e3, "args": args,
            }));
        }
        for h in &r.host {
            let (pid, tid) = tracks.thread(i, &host_track(h));
            let mut args =
                json!({"version": r.version, "start_ms": h.start_ms, "end_ms": h.end_ms});
            // A range's track is not its thread's: the thread is said.
            if h.kind == HostWork::Range {
                args["thread"] = json!(h.thread);
            }
            events.push(json!({
                "ph": "X", "cat": host_cat(h.kind), "name": h.name,
                "pid": pid, "tid": tid,
                "ts": us(offset, h.start_ms), "dur": (h.end_ms - h.start_ms) * 1e3,
                "args": args,
            }));
        }
        for f in &r.flows {
            flow_id += 1;
            let place = |t: &Track| match t {
                Track::Stream { device, stream } => tracks.stream(i, *device, stream),
                Track::Host { thread } => tracks.thread(i, thread),
            };
            let ((fp, ft), (tp, tt)) = (place(&f.from), place(&f.to));
            // One ns inside the slice each end binds to: a stream's slice ends where the
            // arrow starts and starts where it ends; a host call is the other way round.
            let (from_nudge, to_nudge) = (
                if matches!(f.from, Track::Stream { .. }) { -NS } else { NS },
                if matches!(f.to, Track::Stream { .. }) { NS } else { -NS },
            );
            let cat = flow_cat(f);
            events.push(json!({
                "ph": "s", "cat": cat, "name": f.name, "id": flow_id,
                "pid": fp, "tid": ft, "ts": us(offset, f.from_ms) + from_nudge,
                "args": {"version": r.version, "from": f.from, "from_ms": f.from_ms, "to": f.to, "to_ms": f.to_ms},
            }));
            events.push(json!({
                "ph": "f", "bp": "e", "cat": cat, "name": f.name, "id": flow_id,
                "pid": tp, "tid": tt, "ts": us(offset, f.to_ms) + to_nudge,
            }));
        }
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "metadata": {
            "lesson": meta.lesson,
            "title": meta.title,
            "device": meta.device,
            "parameters": meta.parameters,
            "timeline": source_line,
            "provenance": meta.provenance,
            "versions": recordings.iter().map(|r| r.version.clone()).collect::<Vec<_>>(),
        },
    })
}

fn field<'a>(v: &'a Value, key: &str) -> Result<&'a Value, String> {
    v.get(key).ok_or_else(|| format!("trace event without \"{key}\": {v}"))
}

fn number(v: &Value, key: &str) -> Result<f64, String> {
    field(v, key)?.as_f64().ok_or_else(|| format!("\"{key}\" is not a number in {v}"))
}

fn text(v: &Value, key: &str) -> Result<String, String> {
    Ok(field(v, key)?.as_str().unwrap_or_default().to_owned())
}

fn typed<T: serde::de::DeserializeOwned>(v: &Value, key: &str) -> Result<T, String> {
    serde_json::from_value(field(v, key)?.clone()).map_err(|e| format!("\"{key}\": {e}"))
}

/// The metadata and recordings of a trace [`write()`] made.
pub fn read(trace: &Value) -> Result<(Meta, Vec<Recording>), String> {
    let meta = field(trace, "metadata")?;
    let events = field(trace, "traceEvents")?.as_array().ok_or("traceEvents is not a list")?;
    let info = Meta {
        lesson: text(meta, "lesson")?,
        title: text(meta, "title")?,
        device: text(meta, "device")?,
        parameters: meta.get("parameters").and_then(Value::as_object).cloned().unwrap_or_default(),
        provenance: text(meta, "provenance")?,
    };
    let mut threads: BTreeMap<(u64, u64), String> = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] == "M" && e["name"] == "thread_name") {
        let key = (number(e, "pid")? as u64, number(e, "tid")? as u64);
        threads.insert(key, text(&e["args"], "name")?);
    }
    let mut recordings: Vec<Recording> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] == "X" && e["cat"] == "version") {
        let a = field(e, "args")?;
        index.insert(text(a, "version")?, recordings.len());
        recordings.push(Recording {
            version: text(a, "version")?,
            source: typed::<Source>(a, "source")?,
            ms: a["ms"].as_f64().unwrap_or(f64::NAN),
            parts: typed(a, "parts")?,
            spans: Vec::new(),
            host: Vec::new(),
            flows: Vec::new(),
        });
    }
    let of = |a: &Value| -> Result<usize, String> {
        let v = text(a, "version")?;
        index.get(&v).copied().ok_or(format!("unknown version {v}"))
    };
    for e in events {
        let (ph, cat) = (e["ph"].as_str().unwrap_or(""), e["cat"].as_str().unwrap_or(""));
        if ph == "s" {
            let a = field(e, "args")?;
            let flow = Flow {
                name: text(e, "name")?,
                from: typed(a, "from")?,
                from_ms: number(a, "from_ms")?,
                to: typed(a, "to")?,
                to_ms: number(a, "to_ms")?,
            };
            recordings[of(a)?].flows.push(flow);
            continue;
        }
        if ph != "X" || cat == "version" {
            continue;
        }
        let a = field(e, "args")?;
        let host = match cat {
            "host issue" => Some(HostWork::Issue),
            "host wait" => Some(HostWork::Wait),
            "host function run" => Some(HostWork::HostFn),
            "nvtx range" => Some(HostWork::Range),
            _ => None,
        };
        if let Some(kind) = host {
            let key = (number(e, "pid")? as u64, number(e, "tid")? as u64);
            let track = || threads.get(&key).cloned().unwrap_or_default();
            let span = HostSpan {
                thread: a["thread"].as_str().map_or_else(track, str::to_owned),
                kind,
                name: text(e, "name")?,
                start_ms: number(a, "start_ms")?,
                end_ms: number(a, "end_ms")?,
            };
            recordings[of(a)?].host.push(span);
            continue;
        }
        let kind: Work = serde_json::from_value(json!(cat))
            .map_err(|_| format!("unknown slice category {cat}"))?;
        let span = Span {
            stream: text(a, "stream")?,
            kind,
            label: text(a, "label")?,
            start_ms: number(a, "start_ms")?,
            end_ms: number(a, "end_ms")?,
            name: a["name"].as_str().unwrap_or_default().to_owned(),
            device: a["device"].as_u64().unwrap_or(0) as u32,
            process: a["process"].as_u64().unwrap_or(0) as u32,
            bytes: a["bytes"].as_u64().unwrap_or(0),
            grid: a.get("grid").map(|_| typed(a, "grid")).transpose()?,
            block: a.get("block").map(|_| typed(a, "block")).transpose()?,
            memory: a["memory"].as_str().unwrap_or_default().to_owned(),
        };
        recordings[of(a)?].spans.push(span);
    }
    Ok((info, recordings))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small run: one stream copying and computing, then two streams overlapping, a wait
    /// between them, host spans and a host function.
    pub(crate) fn small() -> (Meta, Vec<Recording>) {
        let source = Source::Cupti {
            library: "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti.so.13".into(),
            version: 130001,
        };
        let copy = |stream: &str, kind: Work, a: f64, b: f64, name: &str| {
            let label = if kind == Work::CopyToHost { "copy to host" } else { "copy to device" };
            let mut s = Span::new(stream, kind, label, a, b);
            s.name = name.into();
            s.bytes = 4 << 20;
            s.memory = "pinned".into();
            s
        };
        let kernel = |stream: &str, a: f64, b: f64| {
            let mut s = Span::new(stream, Work::Kernel, "compute_kernel", a, b);
            s.grid = Some([4096, 1, 1]);
            s.block = Some([256, 1, 1]);
            s
        };
        let sync = Recording {
            version: "one stream".into(),
            source: source.clone(),
            ms: 0.5,
            parts: vec![("H".into(), 0.125), ("C".into(), 0.25), ("D".into(), 0.125)],
            spans: vec![
                copy("s0", Work::CopyToDevice, 0.0, 0.125, ""),
                kernel("s0", 0.125, 0.375),
                copy("s0", Work::CopyToHost, 0.375, 0.5, ""),
            ],
            host: vec![HostSpan {
                thread: "main thread".into(),
                kind: HostWork::Wait,
                name: "cuEventSynchronize".into(),
                start_ms: 0.01,
                end_ms: 0.5,
            }],
            flows: Vec::new(),
        };
        let mut f = Span::new("s1", Work::HostFn, "host function", 0.5, 0.52);
        f.name = "chunk 1 done".into();
        let overlapped = Recording {
            version: "2 streams".into(),
            source,
            ms: 0.375,
            parts: Vec::new(),
            spans: vec![
                copy("s0", Work::CopyToDevice, 0.0, 0.0625, "chunk 0 copy-in"),
                kernel("s0", 0.0625, 0.1875),
                copy("s0", Work::CopyToHost, 0.1875, 0.25, "chunk 0 copy-out"),
                copy("s1", Work::CopyToDevice, 0.0625, 0.125, "chunk 1 copy-in"),
                kernel("s1", 0.1875, 0.3125),
                copy("s1", Work::CopyToHost, 0.3125, 0.375, "chunk 1 copy-out"),
                f,
            ],
            host: vec![
                HostSpan {
                    thread: "main thread".into(),
                    kind: HostWork::Issue,
                    name: "cuLaunchKernel (chunk 1 kernel)".into(),
                    start_ms: 0.002,
                    end_ms: 0.006,
                },
                HostSpan {
                    thread: "host functions (driver thread)".into(),
                    kind: HostWork::HostFn,
                    name: "chunk 1 done".into(),
                    start_ms: 0.5,
                    end_ms: 0.52,
                },
            ],
            flows: vec![Flow {
                name: "event 1".into(),
                from: Track::Stream { device: 0, stream: "s0".into() },
                from_ms: 0.1875,
                to: Track::Stream { device: 0, stream: "s1".into() },
                to_ms: 0.1875,
            }],
        };
        let mut parameters = Map::new();
        parameters.insert("streams".into(), json!(2));
        let meta = Meta {
            lesson: "overlap".into(),
            title: "one stream vs K streams".into(),
            device: "NVIDIA H200".into(),
            parameters,
            provenance: "test data".into(),
        };
        (meta, vec![sync, overlapped])
    }

    const GOLDEN: &str = include_str!("testdata/trace-small.json");

    #[test]
    fn the_small_trace_matches_the_golden_file() {
        let (meta, recordings) = small();
        let written = write(&meta, &recordings);
        let golden: Value = serde_json::from_str(GOLDEN).unwrap();
        if written != golden && std::env::var_os("STREAMLAB_BLESS").is_some() {
            let path =
                concat!(env!("CARGO_MANIFEST_DIR"), "/src/lab/record/testdata/trace-small.json");
            std::fs::write(path, serde_json::to_string_pretty(&written).unwrap()).unwrap();
            return;
        }
        assert_eq!(
            written, golden,
            "the trace format changed: check it in Perfetto, then run with STREAMLAB_BLESS=1"
        );
    }

    #[test]
    fn the_golden_trace_has_what_perfetto_needs() {
        let trace: Value = serde_json::from_str(GOLDEN).unwrap();
        let events = trace["traceEvents"].as_array().unwrap();
        let mut named = std::collections::BTreeSet::new();
        let mut processes = std::collections::BTreeSet::new();
        for e in events {
            let ph = e["ph"].as_str().unwrap();
            let pid = e["pid"].as_u64().unwrap();
            assert!(pid > 0, "{e}");
            if ph == "M" {
                match e["name"].as_str().unwrap() {
                    "thread_name" => {
                        let tid = e["tid"].as_u64().unwrap();
                        assert!(tid > 0, "tid 0 is merged by Perfetto: {e}");
                        named.insert((pid, tid));
                    }
                    "process_name" => {
                        processes.insert(pid);
                    }
                    _ => {}
                }
                continue;
            }
            let tid = e["tid"].as_u64().unwrap();
            assert!(named.contains(&(pid, tid)), "unnamed track: {e}");
            assert!(processes.contains(&pid), "unnamed process: {e}");
            assert!(e["ts"].as_f64().unwrap() >= 0.0, "{e}");
            assert!(e["name"].is_string(), "{e}");
            match ph {
                "X" => assert!(e["dur"].as_f64().unwrap() >= 0.0, "{e}"),
                "s" | "f" => assert!(e["id"].is_u64(), "{e}"),
                other => panic!("unexpected phase {other}"),
            }
        }
        // One GPU process and the host; two streams; the flow has both ends.
        assert_eq!(processes.len(), 2);
        let flows = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
        assert_eq!((flows("s"), flows("f")), (1, 1));
        assert_eq!(trace["metadata"]["lesson"], "overlap");
        assert!(trace["metadata"]["timeline"].as_str().unwrap().contains("CUPTI"));
        let copy = events.iter().find(|e| e["name"] == "chunk 1 copy-in").unwrap();
        assert_eq!(copy["args"]["bytes"], 4 << 20);
        assert!(copy["args"]["GB/s"].as_f64().unwrap() > 60.0);
    }

    #[test]
    fn spans_survive_a_round_trip() {
        let (meta, recordings) = small();
        let trace = write(&meta, &recordings);
        let text = serde_json::to_string(&trace).unwrap();
        let (meta_back, back) = read(&serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(meta_back, meta);
        assert_eq!(back, recordings);
    }

    /// A traced program's processes share one clock, each a Perfetto process of its own
    /// whose tracks name their GPU, and read back as they were written.
    #[test]
    fn processes_share_the_clock_and_read_back() {
        let (meta, mut recordings) = small();
        recordings[1].spans.iter_mut().for_each(|s| s.device = 1);
        let trace = write_processes(&meta, &recordings);
        let events = trace["traceEvents"].as_array().unwrap();
        let first = |name: &str| events.iter().find(|e| e["name"] == name).unwrap().clone();
        // The second process's first copy starts at its own time, not after the first's run.
        assert_eq!(first("chunk 0 copy-in")["ts"], 0.0);
        let named = |what: &str| -> Vec<(u64, String)> {
            events
                .iter()
                .filter(|e| e["ph"] == "M" && e["name"] == what)
                .map(|e| (e["pid"].as_u64().unwrap(), e["args"]["name"].to_string()))
                .collect()
        };
        assert_eq!(
            named("process_name"),
            [(1, "\"one stream\"".to_string()), (2, "\"2 streams\"".into())]
        );
        let threads = named("thread_name");
        assert!(threads.contains(&(1, "\"GPU 0 · s0\"".into())), "{threads:?}");
        assert!(threads.contains(&(2, "\"GPU 1 · s1\"".into())), "{threads:?}");
        assert!(threads.contains(&(2, "\"main thread\"".into())), "{threads:?}");
        let (_, back) = read(&trace).unwrap();
        assert_eq!(back, recordings);
    }

    #[test]
    fn versions_follow_each_other_on_one_axis() {
        let (_, recordings) = small();
        let at = offsets(&recordings);
        assert_eq!(at[0], 0.0);
        assert!(at[1] > recordings[0].end_ms());
    }
}
