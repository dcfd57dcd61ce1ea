//! The report of a traced run: its header (the program, the processes, which CUPTI, how
//! often it flushed, what was kept, dropped and could not be recorded, how each process's
//! recording ended), the overlap report of each process from `inspect`, and the same as
//! JSON for `--json FILE`. Every sentence comes from the catalogs, so `--lang zh` reads it
//! in Chinese; the JSON keeps the English.
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::runtime::cupti::trace_file::{Keep, WhenFull};
use crate::t;
use crate::text::{fixed, Text};
use crate::trace::capture::file_text::said;
use crate::trace::inspect::overlap::OverlapReport;
use crate::trace::inspect::wholeness::end_missing;
use crate::trace::read::model::{Capture, Cut, Device, Dropped, Ending, Ns, Process, Sampled};

/// How the traced program ended, as a shell reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// It exited with this code.
    Code(i32),
    /// Signal N killed it.
    Signal(i32),
}

impl Ended {
    /// The code a shell reports: the program's own, or 128 + N for signal N.
    pub fn exit_code(self) -> i32 {
        match self {
            Ended::Code(c) => c,
            Ended::Signal(n) => 128 + n,
        }
    }

    /// "the program exited 0", "the program was killed by signal 9 (SIGKILL)".
    pub fn line(self) -> Text {
        match self {
            Ended::Code(code) => t!("trace.exited", code),
            Ended::Signal(n) => t!("trace.killed", n, name = signal_name(n)),
        }
    }
}

/// What tracing cost: the program's wall time run once without the recorder and once with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub untraced_ms: f64,
    pub traced_ms: f64,
    pub untraced: Ended,
    pub traced: Ended,
}

impl Cost {
    pub fn ratio(&self) -> f64 {
        self.traced_ms / self.untraced_ms
    }

    pub fn lines(&self) -> Vec<Text> {
        let (untraced, traced) = (fixed(self.untraced_ms, 1), fixed(self.traced_ms, 1));
        let mut lines = vec![t!("trace.cost", untraced, traced, ratio = fixed(self.ratio(), 2))];
        if self.untraced != self.traced {
            let (untraced, traced) = (self.untraced.exit_code(), self.traced.exit_code());
            lines.push(t!("trace.cost_ends", untraced, traced));
        }
        lines
    }
}

/// The header's lines: the program, which CUPTI (each library once; `fallback`, the
/// injection's, where no process wrote a file), the flush interval and limit, the records,
/// then each process's devices, what it kept, drops, skipped lines, what it could not record,
/// notes, ranges without their end, and how it ended.
pub fn header(capture: &Capture, fallback: Option<(String, u32)>, command: &[String]) -> Vec<Text> {
    let mut lines = vec![t!("trace.program", command = command.join(" "))];
    let mut libraries: Vec<(String, u32)> = capture
        .processes
        .iter()
        .filter(|p| !p.cupti.is_empty())
        .map(|p| (p.cupti.clone(), p.cupti_version))
        .collect();
    // Each once, though processes of different libraries may come in any order.
    libraries.sort();
    libraries.dedup();
    if libraries.is_empty() {
        libraries.extend(fallback);
    }
    for (file, version) in libraries {
        lines.push(t!("trace.cupti", file, version));
    }
    // What the recorders were told (the same for every process: the injection's variables).
    let told = capture.processes.first();
    let flush = told.map_or(0, |p| p.flush_ms);
    let max = told.map_or(0, |p| p.max_records);
    if let Some(p) = told {
        lines.push(t!("trace.flush", flush, max));
        lines.extend(keep_line(p));
    }
    let (kept, dropped, skipped) = (capture.records(), capture.dropped(), capture.skipped());
    lines.push(t!("trace.records", kept, dropped, skipped));
    if capture.processes.is_empty() {
        lines.push(t!("trace.no_process"));
    }
    for p in &capture.processes {
        lines.extend(process_lines(capture, p));
    }
    lines
}

/// What the recorder was asked to keep, where it is more than "the first records".
fn keep_line(p: &Process) -> Option<Text> {
    let keep = &p.keep;
    let mut what: Vec<Text> = Vec::new();
    if let Some(range) = &keep.capture_range {
        let range = format!("\"{range}\"");
        what.push(match keep.capture_count {
            0 => t!("trace.keep.range_all", range),
            count => t!("trace.keep.range", range, count),
        });
    }
    if keep.delay_ms > 0 {
        what.push(t!("trace.keep.delay", s = fixed(keep.delay_ms as f64 / 1e3, 3)));
    }
    if let Some(ms) = keep.duration_ms {
        what.push(t!("trace.keep.duration", s = fixed(ms as f64 / 1e3, 3)));
    }
    what.push(match keep.when_full {
        WhenFull::First => t!("trace.keep.first"),
        WhenFull::Last => t!("trace.keep.last"),
        WhenFull::Sample => t!("trace.keep.sample"),
    });
    Some(t!("trace.keep", what = Text::List(what)))
}

fn process_lines(capture: &Capture, p: &Process) -> Vec<Text> {
    let ms = |ns: Ns| fixed(capture.ms(ns), 3);
    let label = p.label();
    let devices: Vec<String> =
        p.devices.iter().map(|d| format!("GPU {} {}", d.id, d.name)).collect();
    let devices =
        if devices.is_empty() { t!("trace.no_devices") } else { devices.join(", ").into() };
    let mut lines = vec![t!("trace.process", label, devices, records = p.records)];
    for gate in &p.gates {
        let why = said(&gate.why);
        lines.push(match gate.open {
            true => t!("trace.gate_open", label, ms = ms(gate.time), why),
            false => t!("trace.gate_closed", label, ms = ms(gate.time), why),
        });
    }
    // The recorder's sentences, in the report's language where the catalogs know them.
    for d in &p.dropped {
        lines.push(t!("trace.dropped", label, count = d.count, why = said(&d.why)));
    }
    if let Some(before) = p.dropped_before {
        lines.push(t!("trace.kept_from", label, ms = ms(before)));
    }
    if p.skipped > 0 {
        lines.push(t!("trace.skipped", label, count = p.skipped));
    }
    for what in &p.missing {
        lines.push(t!("trace.missing", label, what = said(what)));
    }
    for text in &p.notes {
        lines.push(t!("trace.note", label, text = said(text)));
    }
    // A range without its end never ended only where the record is whole to the exit.
    for name in &p.unclosed {
        let name = format!("\"{name}\"");
        lines.push(match end_missing(p) {
            None => t!("trace.unclosed", label, name, ms = ms(p.last_ns)),
            Some((at, cut)) => {
                let why = match cut {
                    Cut::Gate => t!("trace.cut.gate"),
                    Cut::Limit => t!("trace.cut.limit"),
                    Cut::Ended => t!("trace.cut.ended"),
                };
                t!("trace.end_not_recorded", label, name, ms = ms(at), why)
            }
        });
    }
    lines.push(match p.ending {
        Ending::Exit { at } => t!("trace.ended_exit", label, ms = ms(at)),
        Ending::Crashed { signal, at } => {
            let name = signal_name(signal);
            t!("trace.ended_crashed", label, n = signal, name, ms = ms(at))
        }
        Ending::LastFlush { at } => t!("trace.ended_flush", label, ms = ms(at)),
        Ending::NoFlush => t!("trace.ended_none", label),
    });
    lines
}

/// `SIGSEGV`, or "unknown signal".
fn signal_name(n: i32) -> String {
    nix::sys::signal::Signal::try_from(n)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| "unknown signal".into())
}

/// How a process's recording ended, as the JSON says it: times in ms from the origin.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "how", rename_all = "snake_case")]
pub enum EndingReport {
    Exit { at_ms: f64 },
    Crashed { signal: i32, at_ms: f64 },
    LastFlush { at_ms: f64 },
    NoFlush,
}

/// A recorder's gate, its time in ms from the origin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateReport {
    pub at_ms: f64,
    pub open: bool,
    pub why: String,
}

/// One process, as the JSON says it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessReport<'a> {
    pub pid: u32,
    pub ppid: u32,
    pub args: &'a [String],
    pub files: &'a [PathBuf],
    pub cupti: &'a str,
    pub cupti_version: u32,
    pub flush_ms: u64,
    pub max_records: u64,
    pub keep: &'a Keep,
    pub missing: &'a [String],
    pub devices: &'a [Device],
    pub records: u64,
    pub dropped: &'a [Dropped],
    /// Every record from this time on was kept (older ones dropped to keep the last ones).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_from_ms: Option<f64>,
    pub gates: Vec<GateReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled: Option<&'a Sampled>,
    pub notes: &'a [String],
    pub skipped: u64,
    /// NVTX ranges whose end was not recorded.
    pub unclosed: &'a [String],
    pub ending: EndingReport,
}

impl<'a> ProcessReport<'a> {
    pub fn new(capture: &Capture, p: &'a Process) -> ProcessReport<'a> {
        let ms = |ns: Ns| capture.ms(ns);
        ProcessReport {
            pid: p.pid,
            ppid: p.ppid,
            args: &p.args,
            files: &p.files,
            cupti: &p.cupti,
            cupti_version: p.cupti_version,
            flush_ms: p.flush_ms,
            max_records: p.max_records,
            keep: &p.keep,
            missing: &p.missing,
            devices: &p.devices,
            records: p.records,
            dropped: &p.dropped,
            kept_from_ms: p.dropped_before.map(ms),
            gates: p
                .gates
                .iter()
                .map(|g| GateReport { at_ms: ms(g.time), open: g.open, why: g.why.clone() })
                .collect(),
            sampled: p.sampled.as_ref(),
            notes: &p.notes,
            skipped: p.skipped,
            unclosed: &p.unclosed,
            ending: match p.ending {
                Ending::Exit { at } => EndingReport::Exit { at_ms: ms(at) },
                Ending::Crashed { signal, at } => EndingReport::Crashed { signal, at_ms: ms(at) },
                Ending::LastFlush { at } => EndingReport::LastFlush { at_ms: ms(at) },
                Ending::NoFlush => EndingReport::NoFlush,
            },
        }
    }
}

/// What `--json FILE` holds.
#[derive(Debug, Serialize)]
pub struct TraceReport<'a> {
    pub command: &'a [String],
    /// How the program ended (`streamlab report` on a folder the trace command did not
    /// describe does not know).
    pub ended: Option<Ended>,
    pub exit_code: Option<i32>,
    /// The header's lines, in English.
    pub header: Vec<String>,
    pub records: u64,
    pub dropped: u64,
    pub skipped: u64,
    /// CUPTI's clock at time 0 of every `_ms` below.
    pub origin_ns: u64,
    pub processes: Vec<ProcessReport<'a>>,
    pub overlap: &'a OverlapReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
}

impl<'a> TraceReport<'a> {
    pub fn new(
        command: &'a [String],
        ended: Option<Ended>,
        header: &[Text],
        capture: &'a Capture,
        overlap: &'a OverlapReport,
        cost: Option<Cost>,
    ) -> TraceReport<'a> {
        TraceReport {
            command,
            ended,
            exit_code: ended.map(Ended::exit_code),
            header: header.iter().map(Text::en).collect(),
            records: capture.records(),
            dropped: capture.dropped(),
            skipped: capture.skipped(),
            origin_ns: capture.origin_ns,
            processes: capture.processes.iter().map(|p| ProcessReport::new(capture, p)).collect(),
            overlap,
            cost,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{english_sentence, has_chinese, Lang};
    use crate::trace::inspect::findings::{Rule, Thresholds};
    use crate::trace::inspect::overlap::overlap_report;
    use crate::trace::inspect::overlap_text::report_text;
    use crate::trace::read::reader_tests::read;

    /// The injection's CUPTI, said where no process wrote a file.
    fn injection() -> Option<(String, u32)> {
        Some(("/usr/lib/libcupti.so.13".into(), 130001))
    }

    #[test]
    fn the_header_says_what_was_kept_lost_and_how_it_ended() {
        let capture = read("one-process");
        let command = vec!["python3".to_string(), "train.py".into()];
        let lines: Vec<String> =
            header(&capture, injection(), &command).iter().map(Text::en).collect();
        let has = |want: &str| lines.iter().any(|l| l == want);
        assert!(has("== traced: python3 train.py"), "{lines:#?}");
        // The process's own CUPTI, not the injection's.
        assert!(
            has("CUPTI: /usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti.so.13, API version 130001"),
            "{lines:#?}"
        );
        assert!(has("records flushed every 200 ms and at exit; at most 250000 kept per process"));
        assert!(has("records: 19 kept, 8 dropped, 0 lines skipped"), "{lines:#?}");
        let label = "pid 4242 · python3 train.py --epochs 1";
        assert!(has(&format!("{label}: GPU 0 NVIDIA H200; 19 records")), "{lines:#?}");
        let over = "over the limit of 250000 records (STREAMLAB_TRACE_MAX_RECORDS)";
        assert!(has(&format!("{label}: 7 records dropped: {over}")), "{lines:#?}");
        assert!(has(&format!(
            "{label}: not recorded: NVTX ranges and markers: NVTX_INJECTION64_PATH is not set, so the program's NVTX calls reach no tool"
        )));
        assert!(lines.iter().any(|l| l.starts_with(&format!(
            "{label}: another CUPTI library is loaded in the process: /opt/torch/"
        ))));
        // Records past the limit were dropped from the start (the first ones kept): the
        // range's end may be among them, so it is not said to have never ended.
        assert!(has(&format!(
            "{label}: the end of the NVTX range \"eval\" was not recorded: the record limit was reached, and the first records were kept, at 0.000 ms (it is drawn up to there)"
        )), "{lines:#?}");
        assert!(has(&format!("{label}: recorded to its exit handlers, at 5.900 ms")), "{lines:#?}");
        // In Chinese, every line is Chinese, the recorder's sentences included: no English
        // sentence of ours is left (the process's label is the program's own words).
        for line in header(&capture, injection(), &command) {
            let zh = line.render(Lang::Zh);
            assert!(has_chinese(&zh) || zh.starts_with("CUPTI"), "{zh}");
            assert_eq!(english_sentence(&zh.replace(label, "")), None, "{zh}");
        }
    }

    #[test]
    fn each_cupti_library_is_named_once_whatever_the_order_of_the_processes() {
        let mut capture = read("two-processes");
        let mut third = capture.processes[0].clone();
        capture.processes[1].cupti = "/other/libcupti.so.12".into();
        third.pid = 300;
        capture.processes.push(third);
        let lines: Vec<String> =
            header(&capture, injection(), &["x".into()]).iter().map(Text::en).collect();
        let named: Vec<&String> = lines.iter().filter(|l| l.starts_with("CUPTI: ")).collect();
        assert_eq!(named.len(), 2, "{named:?}");
    }

    #[test]
    fn a_killed_process_is_said_to_end_at_its_last_flush() {
        let capture = read("killed");
        let lines: Vec<String> =
            header(&capture, injection(), &["./overlap".into()]).iter().map(Text::en).collect();
        assert!(
            lines.contains(&"pid 777 · overlap: recorded up to the last flush at 0.500 ms; the program did not reach its exit handlers".to_string()),
            "{lines:#?}"
        );
        assert!(lines
            .iter()
            .any(|l| l.starts_with("pid 777 · overlap: 1 lines skipped: cut short")));
        // Without any process, the injection's CUPTI is named and the report says why.
        let empty = Capture { processes: Vec::new(), origin_ns: 0 };
        let lines: Vec<String> =
            header(&empty, injection(), &["true".into()]).iter().map(Text::en).collect();
        assert!(lines.contains(&"CUPTI: /usr/lib/libcupti.so.13, API version 130001".to_string()));
        assert!(lines.iter().any(|l| l.starts_with("no process wrote a trace file")), "{lines:#?}");
    }

    #[test]
    fn each_process_gets_its_overlap_report_and_endings_their_lines() {
        let capture = read("one-process");
        let report = overlap_report(&capture, &Thresholds::DEFAULT);
        let windows: Vec<(u32, u32, Option<&str>)> = report
            .windows
            .iter()
            .map(|w| (w.window.process, w.window.device, w.window.range.as_deref()))
            .collect();
        assert!(windows.contains(&(4242, 0, None)), "{windows:?}");
        let rules: Vec<Rule> = report.windows[0].findings.iter().map(|f| f.rule).collect();
        assert!(rules.contains(&Rule::PageableCopy), "{rules:?}");
        assert!(report.host_calls_recorded);
        let text = report_text(&report, Lang::En);
        assert!(text.contains("pinned-vs-pageable"), "{text}");
        assert_eq!(Ended::Signal(9).exit_code(), 137);
        assert_eq!(Ended::Signal(9).line().en(), "the program was killed by signal 9 (SIGKILL)");
        assert_eq!(Ended::Code(7).line().en(), "the program exited 7");
        let cost = Cost {
            untraced_ms: 100.0,
            traced_ms: 112.0,
            untraced: Ended::Code(0),
            traced: Ended::Code(0),
        };
        let lines: Vec<String> = cost.lines().iter().map(Text::en).collect();
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].contains("100.0 ms without the recorder, 112.0 ms with it, 1.12x"),
            "{lines:?}"
        );
        let differ = Cost { traced: Ended::Signal(9), ..cost };
        assert_eq!(differ.lines().len(), 2);
    }
}
