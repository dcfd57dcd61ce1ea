//! What `streamlab trace` and `streamlab report DIR` show once a trace folder is analysed,
//! the same way for both: the header, the timeline if asked, the overlap report on stderr,
//! then the files asked for (the Perfetto trace, the SVG, the JSON report), each said where
//! it was written. The trace command also leaves a description of the run in the folder
//! ([`RunFile`]: the program, how it ended, what tracing cost), so that `streamlab report` on
//! a kept folder says the same as the trace did.
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::lab::record::output::OutputFile;
use crate::runtime::{Error, Result};
use crate::t;
use crate::text::{Lang, Text};
use crate::trace::capture::analysis::Analysis;
use crate::trace::capture::recordings::{self, timeline_text, trace_json};
use crate::trace::capture::summary::{header, Cost, Ended, TraceReport};
use crate::trace::capture::svg_range::SvgRange;
use crate::trace::inspect::overlap_text::report_text;

/// The files and views asked for.
#[derive(Debug, Clone, Default)]
pub struct Output {
    pub trace: Option<OutputFile>,
    pub svg: Option<OutputFile>,
    /// What the SVG draws (`--svg-range`).
    pub svg_range: SvgRange,
    pub json: Option<OutputFile>,
    pub timeline: bool,
    pub lang: Lang,
}

/// The run a trace folder holds, as the trace command describes it beside the recorder's
/// files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFile {
    pub command: Vec<String>,
    pub ended: Ended,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// The libcupti the trace command prepared, and its version: named where no process
    /// wrote a file.
    pub cupti: String,
    pub cupti_version: u32,
}

/// The file's name in a trace folder (not `*.jsonl`: the reader skips it).
pub const RUN_FILE: &str = "streamlab-trace.json";

impl RunFile {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join(RUN_FILE)
    }

    /// Writes it into `dir`.
    pub fn write(&self, dir: &Path) -> std::result::Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(RunFile::path(dir), text).map_err(|e| e.to_string())
    }

    /// The one in `dir`, if there is one that reads.
    pub fn read(dir: &Path) -> Option<RunFile> {
        let text = std::fs::read_to_string(RunFile::path(dir)).ok()?;
        serde_json::from_str(&text).ok()
    }
}

/// A line of the report, on stderr (stdout is the program's).
pub fn say(line: &Text, lang: Lang) {
    eprintln!("{}", line.render(lang));
}

/// Shows `analysis` of a run of `command` as `output` asks. `ended` and `cost` are known
/// when the program was just run (or the folder's run file says them); `fallback_cupti` is
/// named where no process wrote a file.
pub fn present(
    analysis: &Analysis,
    command: &[String],
    ended: Option<Ended>,
    cost: Option<Cost>,
    fallback_cupti: Option<(String, u32)>,
    output: &Output,
) -> Result<()> {
    let lang = output.lang;
    let (capture, report) = (&analysis.capture, &analysis.report);
    let mut lines = header(capture, fallback_cupti, command);
    lines.extend(ended.map(Ended::line));
    lines.extend(cost.iter().flat_map(Cost::lines));
    for line in &lines {
        say(line, lang);
    }
    // Recordings are made only when a drawing asks for them (a capture can hold millions of
    // records): the whole run's, once, for the timeline and the trace; the picture's, of the
    // time it draws only, after those are gone.
    let whole = output.timeline || output.trace.is_some();
    let drawn = if whole { recordings::recordings(capture) } else { Vec::new() };
    if output.timeline {
        eprint!("{}", timeline_text(&drawn, lang));
    }
    eprint!("{}", report_text(report, lang));
    if let Some(file) = &output.trace {
        file.write(&trace_json(capture, &drawn, command)?)?;
    }
    drop(drawn);
    // A range the capture does not hold is said after everything else was written.
    let picture = match &output.svg {
        Some(file) => recordings::picture(capture, command, &output.svg_range)
            .and_then(|svg| file.write(&svg))
            .map(|()| Some(file)),
        None => Ok(None),
    };
    if let Some(file) = &output.json {
        let json = TraceReport::new(command, ended, &lines, capture, report, cost);
        let text = serde_json::to_string_pretty(&json)
            .map_err(|e| Error::Internal(format!("report JSON: {e}")))?;
        file.write(&text)?;
    }
    let shown = |f: &OutputFile| f.path().display().to_string();
    let written = [
        output.trace.as_ref().map(|f| t!("trace.wrote_trace", path = shown(f))),
        picture.as_ref().ok().copied().flatten().map(|f| t!("trace.wrote_svg", path = shown(f))),
        output.json.as_ref().map(|f| t!("trace.wrote_json", path = shown(f))),
    ];
    for line in written.iter().flatten() {
        say(line, lang);
    }
    picture.map(|_| ())
}
