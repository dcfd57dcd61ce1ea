//! What a picture shows of a recorded run, before anything is drawn: each version's panel
//! (its heading, its rows and their bars, the timed window) and the caption's words, from
//! the recording and the lesson's [`Drawing`]. [`crate::lab::record::picture`] only renders
//! these, so what a picture says is tested here without reading SVG.
//!
//! A lesson's [`Drawing`] is what the recording alone cannot say: that its story is the
//! host's (draw the host's row), which kernels to tell apart, what a row or a version is
//! called in a picture, what ran outside the timed part. Live runs and recorded runs are
//! drawn with the same one, so a recorded picture can be redrawn after a drawing fix
//! without a GPU (`streamlab run <lesson> --recorded --svg <file>`).
use crate::lab::record::report::Report;
use crate::lab::record::span::{row_name, rows, HostWork, Recording, Span, Work};
use crate::text::Text;

/// How a lesson's runs are drawn. [`Drawing::PLAIN`] draws every stream's spans as recorded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drawing {
    /// Draw the host's main thread as a row under the streams: its driver calls and waits.
    pub host_row: bool,
    /// The run is timed on the host's clock from its first driver call for the run's time:
    /// that window is shaded, and spans that start outside it are drawn faded (untimed).
    pub host_timed: bool,
    /// Kernels told apart, each in a colour of its own: (kernel function, legend name).
    pub kernels: &'static [(&'static str, &'static str)],
    /// Rows named for the picture: (stream as recorded, row name).
    pub rows: &'static [(&'static str, &'static str)],
    /// What every version's time measures, said once in the title, and the versions' short
    /// names for the title and the headings: (version as recorded, short name).
    pub measure: Option<(&'static str, &'static [(&'static str, &'static str)])>,
    /// Each heading names that measure too ("without wait_event: consumer (stream B) finished
    /// at 4.255 ms in this run"), for a run drawn well past the time it measures (a 20 ms
    /// producer beside a consumer that finished at 4 ms).
    pub measure_in_headings: bool,
    /// Work of this kind ran after the timed part: left out of the picture (the note says so).
    pub untimed: Option<Work>,
    /// The run's time is per repetition: (the flag that counts them, what one is called).
    pub repeats: Option<(&'static str, &'static str)>,
    /// One more line under the subtitle: what the picture leaves out, or where time went
    /// that no span shows.
    pub note: &'static str,
}

impl Drawing {
    pub const PLAIN: Drawing = Drawing {
        host_row: false,
        host_timed: false,
        kernels: &[],
        rows: &[],
        measure: None,
        measure_in_headings: false,
        untimed: None,
        repeats: None,
        note: "",
    };
}

impl Default for Drawing {
    fn default() -> Drawing {
        Drawing::PLAIN
    }
}

/// Where a run's files come from: the one command that made it (a picture's footer shows
/// it), and where and when ("recorded on NVIDIA H200 on 2026-11-23"), kept as a message so
/// that the footer speaks the picture's language.
#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    pub command: String,
    pub provenance: Text,
}

/// What a bar is, for its colour and the legend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Work(Work),
    /// A kernel the drawing tells apart: its index in [`Drawing::kernels`].
    Kernel(usize),
    /// The host inside a driver call (issuing work, or a blocking copy).
    HostCall,
    /// The host waiting for the GPU (a synchronize).
    HostWait,
    /// An NVTX range the traced program marked ([`crate::lab::record::nvtx_rows`]).
    Range,
}

impl Key {
    /// How the legend names it.
    pub fn describe(self, drawing: &Drawing) -> String {
        match self {
            Key::Work(w) => w.describe().into(),
            Key::Kernel(i) => drawing.kernels.get(i).map_or("kernel", |k| k.1).into(),
            Key::HostCall => "host: in a driver call".into(),
            Key::HostWait => "host: waiting for the GPU".into(),
            Key::Range => "NVTX range".into(),
        }
    }
}

/// One bar, in ms from the panel's origin.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub start_ms: f64,
    pub end_ms: f64,
    pub key: Key,
    /// Started after the timed window: drawn faded.
    pub untimed: bool,
    /// Written on the bar where it fits (the host's calls: `cuStreamSynchronize`).
    pub text: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub name: String,
    pub bars: Vec<Bar>,
    pub host: bool,
}

/// One version's panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    pub heading: String,
    pub rows: Vec<Row>,
    /// The timed window, in the panel's ms ([`Drawing::host_timed`]).
    pub timed: Option<(f64, f64)>,
}

impl Panel {
    /// Where the panel's drawing ends: its last bar, or its timed window.
    pub fn end_ms(&self) -> f64 {
        let bars = self.rows.iter().flat_map(|r| r.bars.iter().map(|b| b.end_ms));
        bars.chain(self.timed.map(|t| t.1)).fold(0.0, f64::max)
    }

    pub fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.rows.iter().flat_map(|r| r.bars.iter().map(|b| b.key))
    }

    pub fn has_untimed(&self) -> bool {
        self.rows.iter().any(|r| r.bars.iter().any(|b| b.untimed))
    }
}

/// The host thread the host row shows.
const MAIN_THREAD: &str = "main thread";
/// The host row's name.
pub const HOST_ROW: &str = "host (main thread)";
/// How close to the end of the timed window a span may start and still count as timed, in
/// ms: the window is the host's clock laid from its first recorded call, which comes a few
/// microseconds after the clock started, and the untimed call after the timing follows the
/// last timed one within microseconds.
const TIMED_SLACK_MS: f64 = 0.005;

/// A version's short name, for the title and its heading.
pub fn short_name<'a>(drawing: &Drawing, version: &'a str) -> &'a str {
    drawing
        .measure
        .and_then(|(_, names)| names.iter().find(|(v, _)| *v == version).map(|(_, s)| *s))
        .unwrap_or(version)
}

/// How many repetitions one run holds ([`Drawing::repeats`]), from the report's parameters.
pub fn repeats(drawing: &Drawing, report: &Report) -> Option<(u64, &'static str)> {
    let (flag, what) = drawing.repeats?;
    Some((report.parameters.get(flag)?.as_u64()?, what))
}

/// The panels of `recordings`, drawn as `drawing` says.
pub fn panels(recordings: &[Recording], drawing: &Drawing, report: &Report) -> Vec<Panel> {
    let several_gpus = recordings.iter().flat_map(|r| &r.spans).any(|s| s.device != 0);
    recordings
        .iter()
        .map(|r| panel(r, drawing, heading(r, drawing, report), several_gpus))
        .collect()
}

/// One recording's panel, drawn as `drawing` says, headed `heading`; its streams named with
/// their GPU where `several_gpus`.
pub fn panel(r: &Recording, drawing: &Drawing, heading: String, several_gpus: bool) -> Panel {
    let main = || r.host.iter().filter(|h| h.thread == MAIN_THREAD);
    // A host-timed run's window starts at its first driver call that issues work.
    let timed = match drawing.host_timed {
        true => main().filter(|h| h.kind == HostWork::Issue).map(|h| h.start_ms).reduce(f64::min),
        false => None,
    }
    .map(|from| (from, from + r.ms));
    let untimed = |start: f64| {
        timed.is_some_and(|(from, to)| start < from - TIMED_SLACK_MS || start > to - TIMED_SLACK_MS)
    };
    let spans: Vec<&Span> = r.spans.iter().filter(|s| Some(s.kind) != drawing.untimed).collect();
    let owned: Vec<Span> = spans.iter().map(|s| (*s).clone()).collect();
    let mut out: Vec<Row> = rows(&owned)
        .into_iter()
        .map(|(device, stream)| {
            let bars = spans
                .iter()
                .filter(|s| s.device == device && s.stream == stream)
                .map(|s| Bar {
                    start_ms: s.start_ms,
                    end_ms: s.end_ms,
                    key: key_of(s, drawing),
                    untimed: untimed(s.start_ms),
                    text: String::new(),
                })
                .collect();
            let name = drawing.rows.iter().find(|(from, _)| *from == stream).map(|(_, to)| *to);
            Row { name: row_name(device, name.unwrap_or(&stream), several_gpus), bars, host: false }
        })
        .collect();
    if drawing.host_row {
        let bars = main()
            .filter(|h| h.kind != HostWork::HostFn)
            .map(|h| Bar {
                start_ms: h.start_ms,
                end_ms: h.end_ms,
                key: if h.kind == HostWork::Wait { Key::HostWait } else { Key::HostCall },
                untimed: untimed(h.start_ms),
                // "cuLaunchKernel (compute_kernel)": the call is enough on a bar.
                text: h.name.split(" (").next().unwrap_or_default().to_string(),
            })
            .collect();
        out.push(Row { name: HOST_ROW.into(), bars, host: true });
    }
    Panel { heading, rows: out, timed }
}

fn key_of(s: &Span, drawing: &Drawing) -> Key {
    let told = (s.kind == Work::Kernel)
        .then(|| drawing.kernels.iter().position(|(name, _)| s.label.starts_with(name)))
        .flatten();
    told.map_or(Key::Work(s.kind), Key::Kernel)
}

/// "graph: this run 0.055 ms per replay, 20 replays drawn".
fn heading(r: &Recording, drawing: &Drawing, report: &Report) -> String {
    let name = short_name(drawing, &r.version);
    match (repeats(drawing, report), drawing.measure) {
        (Some((n, what)), _) => {
            format!("{name}: this run {:.3} ms per {what}, {n} {what}s drawn", r.ms)
        }
        (None, Some((measure, _))) if drawing.measure_in_headings => {
            format!("{name}: {measure} {:.3} ms in this run", r.ms)
        }
        (None, _) => format!("{name}: this run {:.3} ms", r.ms),
    }
}

/// The run of a recorded stream id that no operation named (`stream 7`) is the legacy
/// default stream where each of its spans started inside a synchronous copy or memset call
/// of the host (only the legacy stream runs those). Names such rows in recordings made
/// before the recorder named the legacy stream itself.
pub fn name_the_legacy_stream(r: &mut Recording) {
    let unnamed = |stream: &str| {
        stream.strip_prefix("stream ").is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
    };
    let in_sync_call = |s: &Span| {
        r.host.iter().any(|h| {
            let call = h.name.split(" (").next().unwrap_or_default();
            h.kind == HostWork::Issue
                && SYNCHRONOUS_CALLS.contains(&call)
                && (h.start_ms..=h.end_ms).contains(&s.start_ms)
        })
    };
    let legacy: Vec<String> = rows(&r.spans)
        .into_iter()
        .map(|(_, stream)| stream)
        .filter(|stream| unnamed(stream))
        .filter(|stream| r.spans.iter().filter(|s| s.stream == *stream).all(in_sync_call))
        .collect();
    for s in r.spans.iter_mut().filter(|s| legacy.contains(&s.stream)) {
        s.stream = LEGACY_STREAM.into();
    }
}

/// The name the runtime gives the legacy default stream.
pub const LEGACY_STREAM: &str = "legacy default stream";

/// The driver calls the recorder traces that run on the legacy default stream whatever the
/// program does: the synchronous copies and memsets (their per-thread-stream twins end in
/// `_ptds` and are not traced).
pub const SYNCHRONOUS_CALLS: [&str; 6] = [
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
    "cuMemcpy",
    "cuMemcpyPeer",
    "cuMemsetD8_v2",
    "cuMemsetD32_v2",
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::record::span::{HostSpan, Source};

    fn host(kind: HostWork, name: &str, start_ms: f64, end_ms: f64) -> HostSpan {
        HostSpan { thread: MAIN_THREAD.into(), kind, name: name.into(), start_ms, end_ms }
    }

    fn recording(version: &str, ms: f64, spans: Vec<Span>, host: Vec<HostSpan>) -> Recording {
        Recording {
            version: version.into(),
            source: Source::Events { why: "test".into() },
            ms,
            parts: Vec::new(),
            spans,
            host,
            flows: Vec::new(),
        }
    }

    /// sync-methods' second version: the stream B wait is timed, the device synchronize
    /// after it (leaving the device idle for the next run) is not.
    fn stream_b_wait() -> Recording {
        recording(
            "stream B synchronize",
            1.03,
            vec![
                Span::new("A (long)", Work::Kernel, "sleep_kernel", 0.01, 10.0),
                Span::new("B (short)", Work::Kernel, "sleep_kernel", 0.02, 1.02),
            ],
            vec![
                host(HostWork::Issue, "cuLaunchKernel (sleep_kernel)", 0.0, 0.01),
                host(HostWork::Wait, "cuStreamSynchronize", 0.03, 1.027),
                // Right after the timed wait returned: as recorded, 1 µs before the window's end.
                host(HostWork::Wait, "cuCtxSynchronize", 1.029, 10.01),
            ],
        )
    }

    const HOST_TIMED: Drawing = Drawing { host_row: true, host_timed: true, ..Drawing::PLAIN };

    #[test]
    fn the_host_row_shows_calls_and_waits_and_fades_what_is_untimed() {
        let report = Report::new("sync-methods", "t", "GPU");
        let plain = panels(&[stream_b_wait()], &Drawing::PLAIN, &report);
        assert_eq!(plain[0].rows.len(), 2, "no host row unless the lesson asks");
        let p = &panels(&[stream_b_wait()], &HOST_TIMED, &report)[0];
        let names: Vec<&str> = p.rows.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["A (long)", "B (short)", HOST_ROW]);
        let host = &p.rows[2];
        assert!(host.host);
        let keys: Vec<Key> = host.bars.iter().map(|b| b.key).collect();
        assert_eq!(keys, [Key::HostCall, Key::HostWait, Key::HostWait]);
        assert_eq!(host.bars[1].text, "cuStreamSynchronize");
        assert_eq!(host.bars[0].text, "cuLaunchKernel", "the call, without its argument");
        // Timed: the launch and the stream wait; not the device synchronize after.
        let untimed: Vec<bool> = host.bars.iter().map(|b| b.untimed).collect();
        assert_eq!(untimed, [false, false, true]);
        assert!(!p.rows[0].bars[0].untimed, "A's kernel started inside the window");
        assert_eq!(p.timed, Some((0.0, 1.03)));
        assert!(p.has_untimed());
        assert_eq!(p.heading, "stream B synchronize: this run 1.030 ms");
    }

    /// unified-memory: the host writes the inputs into managed memory before the timing
    /// starts, and reads the results after the last span: the window says where the timed
    /// run lies, and what ran before it is faded.
    #[test]
    fn a_host_timed_run_is_shaded_from_its_first_driver_call() {
        let r = recording(
            "managed",
            3.0,
            vec![Span::new("unified-0", Work::Kernel, "compute_kernel", 2.8, 3.9)],
            vec![
                host(HostWork::Wait, "cuCtxSynchronize", 0.0, 0.005),
                host(HostWork::Issue, "cuEventRecord", 2.744, 2.75),
                host(HostWork::Wait, "cuEventSynchronize", 2.8, 4.0),
            ],
        );
        let p = &panels(&[r], &HOST_TIMED, &Report::new("unified-memory", "t", "GPU"))[0];
        assert_eq!(p.timed, Some((2.744, 5.744)));
        assert!(!p.rows[0].bars[0].untimed);
        let untimed: Vec<bool> = p.rows[1].bars.iter().map(|b| b.untimed).collect();
        assert_eq!(untimed, [true, false, false], "the wait before the timing is untimed");
        assert!((p.end_ms() - 5.744).abs() < 1e-9, "the window reaches past the spans");
        assert_eq!(p.heading, "managed: this run 3.000 ms");
    }

    #[test]
    fn kernels_rows_and_versions_are_named_as_the_drawing_says() {
        const DRAWING: Drawing = Drawing {
            kernels: &[("half_layer_kernel", "layer step"), ("cast_to_half_kernel", "cast")],
            rows: &[("equal priority 1", "long kernel")],
            measure: Some(("short kernel done at", &[("equal priority: done at", "equal")])),
            untimed: Some(Work::CopyToHost),
            ..Drawing::PLAIN
        };
        let r = recording(
            "equal priority: done at",
            0.7,
            vec![
                Span::new("equal priority 1", Work::Kernel, "half_layer_kernel", 0.0, 0.1),
                Span::new("equal priority 1", Work::Kernel, "cast_to_half_kernel", 0.1, 0.2),
                Span::new("equal priority 1", Work::Kernel, "compute_kernel", 0.2, 0.3),
                Span::new("equal priority 1", Work::CopyToHost, "copy to host", 0.8, 1.2),
            ],
            Vec::new(),
        );
        let p = &panels(&[r], &DRAWING, &Report::new("x", "t", "GPU"))[0];
        assert_eq!(p.rows[0].name, "long kernel");
        let keys: Vec<Key> = p.rows[0].bars.iter().map(|b| b.key).collect();
        assert_eq!(keys, [Key::Kernel(0), Key::Kernel(1), Key::Work(Work::Kernel)]);
        assert_eq!(Key::Kernel(1).describe(&DRAWING), "cast");
        // The untimed copy-out neither shows nor stretches the row past the run's time.
        assert!((p.end_ms() - 0.3).abs() < 1e-9, "{}", p.end_ms());
        assert_eq!(p.heading, "equal: this run 0.700 ms");
    }

    #[test]
    fn a_run_of_repetitions_says_its_time_is_per_repetition() {
        const DRAWING: Drawing = Drawing { repeats: Some(("iters", "replay")), ..Drawing::PLAIN };
        let mut report = Report::new("graph", "t", "GPU");
        report.param("iters", 20);
        let r =
            recording("graph", 0.055, vec![Span::new("c", Work::Kernel, "k", 0.0, 1.1)], vec![]);
        let p = &panels(&[r], &DRAWING, &report)[0];
        assert_eq!(p.heading, "graph: this run 0.055 ms per replay, 20 replays drawn");
    }

    #[test]
    fn an_unnamed_stream_of_synchronous_copies_is_the_legacy_one() {
        let mut r = recording(
            "8 streams",
            1.0,
            vec![
                Span::new("stream 7", Work::CopyToDevice, "memcpy HtoD", 0.017, 0.019),
                Span::new("order-0", Work::Kernel, "sleep_kernel", 0.03, 1.0),
                Span::new("stream 7", Work::CopyToHost, "memcpy DtoH", 1.05, 1.06),
                Span::new("stream 9", Work::CopyToHost, "memcpy DtoH", 1.2, 1.3),
            ],
            vec![
                host(HostWork::Issue, "cuMemcpyHtoD_v2", 0.0, 0.018),
                host(HostWork::Issue, "cuMemcpyDtoH_v2", 1.04, 1.07),
                host(HostWork::Issue, "cuMemcpyDtoHAsync_v2 (copy to host)", 1.19, 1.25),
            ],
        );
        name_the_legacy_stream(&mut r);
        let streams: Vec<&str> = r.spans.iter().map(|s| s.stream.as_str()).collect();
        // stream 9's copy was issued by an asynchronous call: it stays unnamed.
        assert_eq!(streams, [LEGACY_STREAM, "order-0", LEGACY_STREAM, "stream 9"]);
    }
}
