//! A capture as the lessons' writers draw it: each process a [`Recording`] (its version name
//! is the process's label, its spans and host rows its own, all on the capture's one clock),
//! written as a Perfetto trace with a process per traced process
//! ([`trace::write_processes`]), an SVG with a panel per process on one time scale, and the
//! terminal's timeline, a block per process.
use std::fmt::Write as _;

use serde_json::{json, Map};

use crate::lab::record::drawing::{plain_panels, Drawing};
use crate::lab::record::output::{today, OutputFile};
use crate::lab::record::picture::{timeline_svg, Caption};
use crate::lab::record::span::{HostSpan, HostWork, Recording, Source, Span, Work};
use crate::lab::record::timeline::render_in;
use crate::lab::record::trace::{self, Meta};
use crate::lab::text::{Lang, Text};
use crate::runtime::{Error, Result};
use crate::t;
use crate::trace::read::model::{Capture, Process, WaitKind};

/// Columns of the terminal's timeline.
const TIMELINE_WIDTH: usize = 72;

/// One recording per process, in the capture's order.
pub fn recordings(capture: &Capture) -> Vec<Recording> {
    capture.processes.iter().map(|p| recording(capture, p)).collect()
}

fn recording(capture: &Capture, p: &Process) -> Recording {
    let ms = |ns| capture.ms(ns);
    Recording {
        version: p.label(),
        source: Source::Cupti { library: p.cupti.clone(), version: p.cupti_version },
        ms: ms(p.last_ns) - ms(p.first_ns),
        parts: Vec::new(),
        spans: spans(capture, p),
        host: host_spans(capture, p),
        flows: Vec::new(),
    }
}

/// The process's GPU work as the drawing room's spans.
pub fn spans(capture: &Capture, p: &Process) -> Vec<Span> {
    let gpu = &p.gpu;
    (0..gpu.len())
        .map(|i| {
            let row = &p.rows[gpu.row[i] as usize];
            let kind = gpu.kind[i];
            let label = p.names.get(gpu.label[i]);
            let mut s =
                Span::new(&row.name, kind, label, capture.ms(gpu.start[i]), capture.ms(gpu.end[i]));
            (s.device, s.process, s.bytes) = (row.device, p.pid, gpu.bytes[i]);
            s.memory = gpu.memory[i].name().into();
            if matches!(kind, Work::Kernel | Work::Collective) {
                if let Some((grid, block)) = p.launches.get(gpu.launch[i] as usize) {
                    (s.grid, s.block) = (Some(*grid), Some(*block));
                }
            }
            s
        })
        .collect()
}

/// What a wait is called on a host row.
fn wait_name(kind: WaitKind, stream: Option<&str>) -> String {
    let what = match kind {
        WaitKind::Stream => "stream synchronize",
        WaitKind::Event => "event synchronize",
        WaitKind::Context => "context synchronize",
        WaitKind::Other => "synchronize",
    };
    match stream {
        Some(s) => format!("{what} ({s})"),
        None => what.to_string(),
    }
}

/// The host rows: each thread's calls (a call the host waited in is drawn once, as the
/// wait), waits, NVTX ranges and marks, by start.
pub fn host_spans(capture: &Capture, p: &Process) -> Vec<HostSpan> {
    let ms = |ns| capture.ms(ns);
    let mut host = Vec::new();
    let calls = &p.calls;
    for i in (0..calls.len()).filter(|&i| !calls.waited[i]) {
        host.push(HostSpan {
            thread: p.thread_name(calls.thread[i]).to_string(),
            kind: HostWork::Issue,
            name: p.names.get(calls.name[i]).to_string(),
            start_ms: ms(calls.start[i]),
            end_ms: ms(calls.end[i]),
        });
    }
    for w in &p.waits {
        host.push(HostSpan {
            thread: w
                .thread
                .map_or("synchronizations".to_string(), |t| p.thread_name(t).to_string()),
            kind: HostWork::Wait,
            name: wait_name(w.kind, w.stream.as_deref()),
            start_ms: ms(w.start),
            end_ms: ms(w.end),
        });
    }
    for r in &p.ranges {
        host.push(HostSpan {
            thread: p.thread_name(r.thread).to_string(),
            kind: HostWork::Range,
            name: p.names.get(r.name).to_string(),
            start_ms: ms(r.start),
            end_ms: ms(r.end),
        });
    }
    for m in &p.marks {
        host.push(HostSpan {
            thread: p.thread_name(m.thread).to_string(),
            kind: HostWork::Range,
            name: p.names.get(m.name).to_string(),
            start_ms: ms(m.time),
            end_ms: ms(m.time),
        });
    }
    host.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
    host
}

/// The devices of every process, each name once.
fn device_names(capture: &Capture) -> String {
    let mut names: Vec<String> = Vec::new();
    for name in capture.processes.iter().flat_map(Process::device_names) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names.join(", ")
}

fn provenance() -> String {
    format!("traced {} with streamlab {}", today(), env!("CARGO_PKG_VERSION"))
}

/// What the Perfetto trace says about itself.
pub fn meta(capture: &Capture, command: &[String]) -> Meta {
    let mut parameters = Map::new();
    parameters.insert("command".into(), json!(command));
    parameters.insert("processes".into(), json!(capture.processes.len()));
    if let Some(p) = capture.processes.first() {
        parameters.insert("flush_ms".into(), json!(p.flush_ms));
        parameters.insert("max_records".into(), json!(p.max_records));
    }
    Meta {
        lesson: "trace".into(),
        title: command.join(" "),
        device: device_names(capture),
        parameters,
        provenance: provenance(),
    }
}

/// The words around the SVG.
pub fn caption(capture: &Capture, recordings: &[Recording], command: &[String]) -> Caption {
    let n = capture.processes.len();
    let processes = if n == 1 { "1 process".to_string() } else { format!("{n} processes") };
    let source = recordings.first().map(|r| r.source.describe()).unwrap_or_default();
    Caption {
        title: format!("streamlab trace -- {}", command.join(" ")),
        subtitle: format!("{processes} on {}; {source}", device_names(capture)),
        note: String::new(),
        footer: provenance(),
    }
}

/// The terminal's timeline: each process's streams under its header.
pub fn timeline_text(recordings: &[Recording], lang: Lang) -> String {
    let mut text = String::new();
    for r in recordings {
        let (version, source) = (Text::Plain(r.version.clone()), r.source.describe_text());
        let _ = writeln!(text, "{}", t!("timeline.header", version, source).render(lang));
        text.push_str(&render_in(&r.spans, TIMELINE_WIDTH, lang));
    }
    text
}

/// The Perfetto trace's text.
pub fn trace_json(
    capture: &Capture,
    recordings: &[Recording],
    command: &[String],
) -> Result<String> {
    let value = trace::write_processes(&meta(capture, command), recordings);
    serde_json::to_string(&value).map_err(|e| Error::Internal(format!("trace JSON: {e}")))
}

/// Writes the trace and the picture that were asked for, from the capture's recordings
/// ([`recordings`], made once by the caller).
pub fn write(
    capture: &Capture,
    recordings: &[Recording],
    command: &[String],
    trace_to: Option<&OutputFile>,
    svg_to: Option<&OutputFile>,
) -> Result<()> {
    if let Some(file) = trace_to {
        file.write(&trace_json(capture, recordings, command)?)?;
    }
    if let Some(file) = svg_to {
        let c = caption(capture, recordings, command);
        file.write(
            &timeline_svg(&c, &plain_panels(recordings), &Drawing::PLAIN)
                .map_err(Error::Internal)?,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::record::span::{HostWork, Work};
    use crate::trace::read::reader_tests::read;

    /// The issue's round trip: records -> spans -> Perfetto trace -> spans, nothing lost.
    #[test]
    fn records_to_trace_to_spans_and_back() {
        for folder in ["one-process", "two-processes", "killed", "no-exit"] {
            let capture = read(folder);
            let recordings = recordings(&capture);
            let command = vec!["prog".to_string()];
            let text = trace_json(&capture, &recordings, &command).unwrap();
            let (meta_back, back) = trace::read(&serde_json::from_str(&text).unwrap()).unwrap();
            assert_eq!(meta_back, meta(&capture, &command), "{folder}");
            assert_eq!(back, recordings, "{folder}");
            for (r, p) in back.iter().zip(&capture.processes) {
                assert_eq!(r.spans, spans(&capture, p), "{folder}");
            }
        }
    }

    #[test]
    fn each_process_is_a_perfetto_process_with_its_gpu_streams_and_host_rows() {
        let capture = read("two-processes");
        let recordings = recordings(&capture);
        assert_eq!(recordings.len(), 2);
        let trace: serde_json::Value =
            serde_json::from_str(&trace_json(&capture, &recordings, &["x".into()]).unwrap())
                .unwrap();
        let events = trace["traceEvents"].as_array().unwrap();
        let names: Vec<(u64, &str)> = events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
            .map(|e| (e["pid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap()))
            .collect();
        assert_eq!(
            names,
            [
                (1, "pid 100 · streamlab run allreduce-overlap --device 0"),
                (2, "pid 200 · streamlab run allreduce-overlap --device 1")
            ]
        );
        let tracks: Vec<(u64, &str)> = events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
            .map(|e| (e["pid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap()))
            .collect();
        assert!(tracks.contains(&(1, "GPU 0 · stream 13")), "{tracks:?}");
        assert!(tracks.contains(&(2, "GPU 1 · stream 13")), "{tracks:?}");
        // One clock: the second process's kernel, the earliest record, is at time 0.
        let kernel = events.iter().find(|e| e["cat"] == "kernel" && e["pid"] == 2).unwrap();
        assert_eq!(kernel["ts"], 0.0);
        assert_eq!(trace["metadata"]["lesson"], "trace");
    }

    #[test]
    fn the_picture_and_the_timeline_show_every_stream_of_every_process() {
        let capture = read("one-process");
        let recordings = recordings(&capture);
        let svg = timeline_svg(
            &caption(&capture, &recordings, &["python3".into()]),
            &plain_panels(&recordings),
            &Drawing::PLAIN,
        )
        .unwrap();
        let texts = crate::lab::record::picture::tests::texts(&svg);
        for row in ["legacy default stream", "stream 14", "copy stream", "stream 15"] {
            assert!(texts.iter().any(|t| t == row), "{row}: {texts:?}");
        }
        assert!(texts.iter().any(|t| t == "streamlab trace -- python3"), "{texts:?}");
        // To look at it: STREAMLAB_PICTURES=dir cargo test -p streamlab --lib trace::capture
        if let Some(dir) = std::env::var_os("STREAMLAB_PICTURES") {
            std::fs::write(std::path::Path::new(&dir).join("trace-test.svg"), &svg).unwrap();
        }
        let text = timeline_text(&recordings, Lang::En);
        assert!(
            text.starts_with("timeline, pid 4242 · python3 train.py --epochs 1 (one run;"),
            "{text}"
        );
        assert!(text.lines().any(|l| l.trim_start().starts_with("copy stream |")), "{text}");
        assert!(text.contains("H copy to device, K kernel"), "{text}");
        // In Chinese, the legend too (the drawing and the rows' names stay as they are).
        let zh = timeline_text(&recordings, Lang::Zh);
        assert!(zh.contains("H 拷贝到设备") && !zh.contains("H copy to device"), "{zh}");
        assert!(zh.lines().any(|l| l.trim_start().starts_with("copy stream |")), "{zh}");
        // Host rows carry the waits, the calls and the NVTX ranges.
        let kinds: Vec<HostWork> = recordings[0].host.iter().map(|h| h.kind).collect();
        for kind in [HostWork::Wait, HostWork::Issue, HostWork::Range] {
            assert!(kinds.contains(&kind), "{kind:?}: {kinds:?}");
        }
        assert!(recordings[0].spans.iter().any(|s| s.kind == Work::Collective));
    }
}
