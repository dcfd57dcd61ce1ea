//! A capture as the lessons' writers draw it: each process a [`Recording`] (its version name
//! is the process's label, its spans and host rows its own, all on the capture's one clock),
//! written as a Perfetto trace with a process per traced process
//! ([`trace::write_processes`]), an SVG with a panel per process on one time scale, and the
//! terminal's timeline, a block per process.
//!
//! The Perfetto trace holds the whole run, with an arrow from each launch call to the work it
//! put on a stream ([`launch_flows`]: at most [`MAX_LAUNCH_FLOWS`] a process, spread evenly).
//! The SVG draws the time [`svg_range`] chose, and only what it draws is made into spans
//! ([`picture_recordings`]): each process's GPU work and NVTX ranges in that time; a process
//! with nothing there is one line of the caption, not an empty panel.
use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{json, Map};

use crate::lab::record::drawing::Drawing;
use crate::lab::record::nvtx_rows::LIBRARY_ROWS;
use crate::lab::record::nvtx_rows::{plain_panels, RANGE_LEVELS};
use crate::lab::record::output::today;
use crate::lab::record::picture::{timeline_svg_over, Caption};
use crate::lab::record::span::{Flow, HostSpan, HostWork, Recording, Source, Span, Track, Work};
use crate::lab::record::timeline::render_in;
use crate::lab::record::trace::{self, Meta};
use crate::runtime::{Error, Result};
use crate::t;
use crate::text::{Lang, Text};
use crate::trace::capture::svg_range::{self, Drawn, SvgRange};
use crate::trace::read::model::{Capture, Process, WaitKind};

/// Columns of the terminal's timeline.
const TIMELINE_WIDTH: usize = 72;

/// The most arrows from a launch call to its work that a process gets in the Perfetto trace.
/// An arrow is two events, some 380 bytes of JSON together, about as much as the kernel's
/// slice and its call's: one per kernel would nearly double the file the UI has to open (a
/// process keeps up to `--max-records` records, 250,000 by default). This many add some
/// 8 MB a process at most. Past it, every Nth launch gets its arrow, N the smallest that
/// keeps within it, so arrows are spread over the whole run.
pub const MAX_LAUNCH_FLOWS: usize = 20_000;

/// One recording per process, in the capture's order: everything recorded, with the launch
/// arrows (the Perfetto trace's and the timeline's).
pub fn recordings(capture: &Capture) -> Vec<Recording> {
    capture.processes.iter().map(|p| recording(capture, p)).collect()
}

fn recording(capture: &Capture, p: &Process) -> Recording {
    Recording {
        spans: spans(capture, p),
        host: host_spans(capture, p),
        flows: launch_flows(capture, p),
        ..recording_head(capture, p)
    }
}

/// GPU record `i` of `p` as the drawing room's span.
fn span(capture: &Capture, p: &Process, i: usize) -> Span {
    let gpu = &p.gpu;
    let row = &p.rows[gpu.row[i] as usize];
    let kind = gpu.kind[i];
    let label = p.names.get(gpu.label[i]);
    let mut s = Span::new(&row.name, kind, label, capture.ms(gpu.start[i]), capture.ms(gpu.end[i]));
    (s.device, s.process, s.bytes) = (row.device, p.pid, gpu.bytes[i]);
    s.memory = gpu.memory[i].name().into();
    if matches!(kind, Work::Kernel | Work::Collective) {
        if let Some((grid, block)) = p.launches.get(gpu.launch[i] as usize) {
            (s.grid, s.block) = (Some(*grid), Some(*block));
        }
    }
    s
}

/// The process's GPU work as the drawing room's spans.
pub fn spans(capture: &Capture, p: &Process) -> Vec<Span> {
    (0..p.gpu.len()).map(|i| span(capture, p, i)).collect()
}

/// An arrow from each launch call of `p` to the work it put on a stream (matched by CUPTI's
/// correlation id), at most [`MAX_LAUNCH_FLOWS`]: every Nth where there are more. Each starts
/// where the call starts, on its thread's track, and ends where the work starts.
pub fn launch_flows(capture: &Capture, p: &Process) -> Vec<Flow> {
    let (calls, gpu) = (&p.calls, &p.gpu);
    // The calls drawn as calls (a call the host waited in is drawn as its wait), by id; 0 is
    // CUPTI's "none".
    let mut call_of: HashMap<u32, usize> = HashMap::with_capacity(calls.len());
    for i in (0..calls.len()).filter(|&i| !calls.waited[i] && calls.correlation[i] != 0) {
        call_of.entry(calls.correlation[i]).or_insert(i);
    }
    let launched: Vec<(usize, usize)> = (0..gpu.len())
        .filter_map(|i| call_of.get(&gpu.correlation[i]).map(|&call| (i, call)))
        .collect();
    let every = launched.len().div_ceil(MAX_LAUNCH_FLOWS).max(1);
    launched
        .into_iter()
        .step_by(every)
        .map(|(i, call)| {
            let row = &p.rows[gpu.row[i] as usize];
            Flow {
                name: p.names.get(calls.name[call]).to_string(),
                from: Track::Host { thread: p.thread_name(calls.thread[call]).to_string() },
                from_ms: capture.ms(calls.start[call]),
                to: Track::Stream { device: row.device, stream: row.name.clone() },
                to_ms: capture.ms(gpu.start[i]),
            }
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
    host.extend(marked(capture, p, &Drawn::whole()));
    host.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
    host
}

/// The NVTX ranges and marks of `p` that show in `drawn`, as host spans (a mark is a range
/// of no length). A library's ranges (NCCL's communicator set-up spans the whole run) get
/// rows of their own, `<thread> · libraries`, so that the program's own ranges keep the top
/// rows.
fn marked<'a>(
    capture: &'a Capture,
    p: &'a Process,
    drawn: &'a Drawn,
) -> impl Iterator<Item = HostSpan> + 'a {
    let ms = |ns| capture.ms(ns);
    let ranges = p.ranges.iter().map(|r| (r.thread, r.name, r.start, r.end, r.library));
    let marks = p.marks.iter().map(|m| (m.thread, m.name, m.time, m.time, false));
    ranges.chain(marks).filter(|&(_, _, start, end, _)| drawn.shows(start, end)).map(
        move |(thread, name, start, end, library)| HostSpan {
            thread: match library {
                true => format!("{}{LIBRARY_ROWS}", p.thread_name(thread)),
                false => p.thread_name(thread).to_string(),
            },
            kind: HostWork::Range,
            name: p.names.get(name).to_string(),
            start_ms: ms(start),
            end_ms: ms(end),
        },
    )
}

/// What the picture draws of each process in `drawn`: its GPU work and its NVTX ranges and
/// marks there (its calls and waits are not drawn), made into spans only where they show;
/// and, for each process with nothing there, the line the caption says instead of a panel.
pub fn picture_recordings(capture: &Capture, drawn: &Drawn) -> (Vec<Recording>, Vec<String>) {
    let mut recordings = Vec::new();
    let mut without = Vec::new();
    for p in &capture.processes {
        let gpu = &p.gpu;
        let shown = (0..gpu.len()).filter(|&i| drawn.shows(gpu.start[i], gpu.end[i]));
        let spans: Vec<Span> = shown.map(|i| span(capture, p, i)).collect();
        let mut host: Vec<HostSpan> = marked(capture, p, drawn).collect();
        if spans.is_empty() && host.is_empty() {
            let why = if gpu.is_empty() { "recorded" } else { "in the time drawn" };
            without.push(format!("{}: no GPU work {why}", p.label()));
            continue;
        }
        host.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
        recordings.push(Recording { spans, host, flows: Vec::new(), ..recording_head(capture, p) });
    }
    (recordings, without)
}

/// A recording of `p` with its name, source and time and nothing drawn yet.
fn recording_head(capture: &Capture, p: &Process) -> Recording {
    Recording {
        version: p.label(),
        source: Source::Cupti { library: p.cupti.clone(), version: p.cupti_version },
        ms: capture.ms(p.last_ns) - capture.ms(p.first_ns),
        parts: Vec::new(),
        spans: Vec::new(),
        host: Vec::new(),
        flows: Vec::new(),
    }
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

/// The words around the SVG; `note` says what the picture leaves out, a line each.
pub fn caption(
    capture: &Capture,
    recordings: &[Recording],
    command: &[String],
    note: String,
) -> Caption {
    let n = capture.processes.len();
    let processes = if n == 1 { "1 process".to_string() } else { format!("{n} processes") };
    let source = recordings.first().map(|r| r.source.describe()).unwrap_or_default();
    Caption {
        title: format!("streamlab trace -- {}", command.join(" ")),
        subtitle: match device_names(capture) {
            devices if devices.is_empty() => format!("{processes}; {source}"),
            devices => format!("{processes} on {devices}; {source}"),
        },
        note,
        footer: provenance(),
    }
}

/// The terminal's timeline: each process's streams under its header.
pub fn timeline_text(recordings: &[Recording], lang: Lang) -> String {
    let mut text = String::new();
    for r in recordings {
        let version = Text::Plain(r.version.clone());
        if r.spans.is_empty() {
            let _ = writeln!(text, "{}", t!("timeline.no_work", version).render(lang));
            continue;
        }
        let source = r.source.describe_text();
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

/// The SVG of the time `range` chooses ([`svg_range::drawn`]) of `capture`: its words, a
/// panel per process with something there. An error where `range` names a range or an
/// occurrence the capture does not hold.
pub fn picture(capture: &Capture, command: &[String], range: &SvgRange) -> Result<String> {
    let drawn = svg_range::drawn(capture, range)?;
    let (recordings, without) = picture_recordings(capture, &drawn);
    let (panels, too_deep) = plain_panels(&recordings);
    let mut notes = vec![drawn.words.clone()];
    if too_deep > 0 {
        notes.push(format!(
            "{too_deep} NVTX ranges nested more than {RANGE_LEVELS} deep are not drawn (the Perfetto trace has them)"
        ));
    }
    notes.extend(without);
    notes.retain(|n| !n.is_empty());
    let c = caption(capture, &recordings, command, notes.join("\n"));
    let axis = drawn.cropped.then(|| (capture.ms(drawn.from), capture.ms(drawn.to)));
    timeline_svg_over(&c, &panels, &Drawing::PLAIN, axis).map_err(Error::Internal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::record::picture::tests::texts;
    use crate::lab::record::span::{HostWork, Work};
    use crate::runtime::cupti::trace_file::{Keep, Line};
    use crate::trace::capture::svg_range::tests::training_run;
    use crate::trace::inspect::test_lines::{call, capture_of, context, kernel};
    use crate::trace::read::reader::capture as capture_from;
    use crate::trace::read::reader_tests::{process_of, read};

    /// Every text of `svg` on one line: a caption's words whatever its wrapping.
    fn words(svg: &str) -> String {
        texts(svg).join(" ")
    }

    /// The numbers of the time axis.
    fn ticks(svg: &str) -> Vec<f64> {
        texts(svg).iter().filter_map(|t| t.parse::<f64>().ok()).collect()
    }

    /// Bars in a colour (the legend's swatch among them).
    fn bars(svg: &str, fill: &str) -> usize {
        let doc = roxmltree::Document::parse(svg).unwrap();
        doc.descendants()
            .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some(fill))
            .count()
    }

    const KERNEL_GREEN: &str = "#2CA02C";

    #[test]
    fn the_picture_leaves_out_the_start_up_and_says_so() {
        let capture = capture_of(&training_run());
        let command = ["python3".to_string(), "train.py".into()];
        let svg = picture(&capture, &command, &SvgRange::Steady).unwrap();
        let said = words(&svg);
        assert!(
            said.contains("the start-up, 4.000 s, and the 660.500 ms after, not drawn"),
            "{said}"
        );
        // The three steps' kernels and the legend's swatch; not the start-up's kernel.
        assert_eq!(bars(&svg, KERNEL_GREEN), 3 + 1);
        let axis = ticks(&svg);
        let low = axis.iter().copied().fold(f64::INFINITY, f64::min);
        assert!((4000.0..4100.0).contains(&low), "the axis starts at the first step: {axis:?}");
        assert!(texts(&svg).iter().any(|t| t == "NVTX · thread 1"), "{said}");
        // The whole run: every kernel, from 0.
        let whole = picture(&capture, &command, &SvgRange::All).unwrap();
        assert_eq!(bars(&whole, KERNEL_GREEN), 4 + 1);
        assert!(ticks(&whole).contains(&0.0), "{:?}", ticks(&whole));
        assert!(!words(&whole).contains("not drawn"));
        // To look at them: STREAMLAB_PICTURES=dir cargo test -p streamlab --lib trace::capture
        if let Some(dir) = std::env::var_os("STREAMLAB_PICTURES") {
            let dir = std::path::Path::new(&dir);
            std::fs::write(dir.join("trace-steady.svg"), &svg).unwrap();
            std::fs::write(dir.join("trace-whole.svg"), &whole).unwrap();
        }
    }

    #[test]
    fn a_chosen_occurrence_draws_only_its_time() {
        let capture = capture_of(&training_run());
        let step_2 = SvgRange::parse("step:2").unwrap();
        let svg = picture(&capture, &["x".into()], &step_2).unwrap();
        // 4,100 to 4,240 ms: the end of step 1's kernel, step 2's, not step 3's (at 4,250).
        let axis = ticks(&svg);
        assert!(axis.iter().all(|t| (4100.0..=4243.0).contains(t)), "{axis:?}");
        assert_eq!(bars(&svg, KERNEL_GREEN), 2 + 1);
        let drawn = svg_range::drawn(&capture, &step_2).unwrap();
        let (recordings, _) = picture_recordings(&capture, &drawn);
        let starts: Vec<f64> = recordings[0].spans.iter().map(|s| s.start_ms).collect();
        assert_eq!(starts, [4050.0, 4150.0]);
        // Step 1 ends where step 2 begins: it touches the window, and is not drawn.
        let ranges: Vec<(f64, f64)> = recordings[0]
            .host
            .iter()
            .filter(|h| h.name == "step")
            .map(|h| (h.start_ms, h.end_ms))
            .collect();
        assert_eq!(ranges, [(4100.0, 4200.0), (4200.0, 4300.0)]);
        assert!(words(&svg).contains("occurrence 2 of 3"));
        if let Some(dir) = std::env::var_os("STREAMLAB_PICTURES") {
            std::fs::write(std::path::Path::new(&dir).join("trace-step-2.svg"), &svg).unwrap();
        }
    }

    #[test]
    fn a_process_without_records_is_one_line_not_a_panel() {
        let mut lines = context();
        lines.extend(training_run());
        let launcher = Line::Process {
            format: 2,
            pid: 2,
            ppid: 1,
            args: vec!["/usr/bin/torchrun".into(), "--nproc-per-node".into(), "1".into()],
            cupti: "c".into(),
            cupti_version: 1,
            flush_ms: 200,
            max_records: 10,
            start_ns: 0,
            keep: Keep::default(),
            missing: Vec::new(),
        };
        let capture = capture_from(vec![process_of(1, &lines), process_of(2, &[launcher])]);
        let svg = picture(&capture, &["torchrun".into()], &SvgRange::Steady).unwrap();
        let line = "pid 2 · torchrun --nproc-per-node 1: no GPU work recorded";
        assert!(words(&svg).contains(line), "{}", words(&svg));
        let headings: Vec<String> = texts(&svg)
            .into_iter()
            .filter(|t| t.starts_with("pid ") && t.ends_with(" ms"))
            .collect();
        assert_eq!(headings, ["pid 1: 5000.500 ms"]);
        if let Some(dir) = std::env::var_os("STREAMLAB_PICTURES") {
            std::fs::write(std::path::Path::new(&dir).join("trace-launcher.svg"), &svg).unwrap();
        }
        let timeline = timeline_text(&recordings(&capture), Lang::En);
        assert!(
            timeline.contains(&format!("timeline, {}", line.replace("recorded", "recorded\n"))),
            "{timeline}"
        );
    }

    #[test]
    fn each_launch_has_an_arrow_to_its_kernel_in_the_perfetto_trace() {
        let capture = capture_of(&training_run());
        let recordings = recordings(&capture);
        let text = trace_json(&capture, &recordings, &["x".into()]).unwrap();
        let trace: serde_json::Value = serde_json::from_str(&text).unwrap();
        let events = trace["traceEvents"].as_array().unwrap();
        let track = |tid: &serde_json::Value| {
            let named = events.iter().find(|e| e["name"] == "thread_name" && e["tid"] == *tid);
            named.unwrap()["args"]["name"].as_str().unwrap().to_string()
        };
        let starts: Vec<&serde_json::Value> =
            events.iter().filter(|e| e["ph"] == "s" && e["cat"] == "launch").collect();
        assert_eq!(starts.len(), 4, "the start-up's launch and each step's");
        // Step 2's launch call, at 4,101 ms on thread 1, to its kernel at 4,150 ms on stream 14.
        let start = starts.iter().find(|e| e["args"]["from_ms"] == 4101.0).unwrap();
        let end = events.iter().find(|e| e["ph"] == "f" && e["id"] == start["id"]).unwrap();
        assert_eq!(
            (track(&start["tid"]), start["name"].as_str()),
            ("thread 1".into(), Some("cudaLaunchKernel"))
        );
        assert_eq!(track(&end["tid"]), "GPU 0 · stream 14");
        assert!((end["ts"].as_f64().unwrap() - 4_150_000.0).abs() < 0.01, "{end}");
        // The ranges have a track of their own, above the thread's calls.
        let step = events.iter().find(|e| e["cat"] == "nvtx range" && e["name"] == "step").unwrap();
        assert_eq!(track(&step["tid"]), "thread 1 · NVTX");
        assert!(step["tid"].as_u64() < start["tid"].as_u64());
        // And all of it reads back.
        let (_, back) = trace::read(&trace).unwrap();
        assert_eq!(back, recordings);
    }

    #[test]
    fn launch_arrows_are_spread_over_the_run_past_the_cap() {
        let n = MAX_LAUNCH_FLOWS + 1;
        let mut lines = Vec::with_capacity(2 * n);
        for i in 0..n {
            let (at, id) = (i as f64 * 0.01, i as u32 + 1);
            lines.push(call("cudaLaunchKernel", 1, at, at + 0.001, id));
            lines.push(kernel(14, at + 0.002, at + 0.005, id));
        }
        let capture = capture_of(&lines);
        let flows = launch_flows(&capture, &capture.processes[0]);
        // Every second launch: the first, the third, ..., the last.
        assert_eq!(flows.len(), n.div_ceil(2));
        assert!(flows.len() <= MAX_LAUNCH_FLOWS);
        let from: Vec<f64> = flows.iter().take(2).map(|f| f.from_ms).collect();
        assert_eq!(from, [0.0, 0.02]);
        assert!((flows.last().unwrap().to_ms - ((n - 1) as f64 * 0.01 + 0.002)).abs() < 1e-6);
    }

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
        let svg = picture(&capture, &["python3".into()], &SvgRange::All).unwrap();
        let texts = texts(&svg);
        // The streams, and above them the NVTX ranges of the thread "main": "step" inside
        // "epoch", a row lower, each name on its bar.
        let rows = ["legacy default stream", "stream 14", "copy stream", "stream 15"];
        for row in rows.iter().chain(&["NVTX · main", "NVTX · main · level 2", "epoch", "step"])
        {
            assert!(texts.iter().any(|t| t == row), "{row}: {texts:?}");
        }
        let at = |want: &str| texts.iter().position(|t| t == want).unwrap();
        assert!(at("NVTX · main") < at("NVTX · main · level 2"));
        assert!(at("NVTX · main · level 2") < at("legacy default stream"));
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
