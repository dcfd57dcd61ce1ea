//! What the harness does with recorded runs: the report's timeline text, source and
//! recorder cost, and the `--trace` and `--svg` files. The same code draws a recorded run
//! embedded in the binary (`--recorded`), so the two cannot drift apart.
//!
//! The files arrive as [`OutputFile`]s: named by the common flags (`lab::harness::common`),
//! tagged per lesson and per rank there, and checked there before any GPU work, so what is
//! written here is what was decided and checked.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::lab::record::drawing::{panels, Drawing, Origin};
use crate::lab::record::picture::{caption, timeline_svg_in};
use crate::lab::record::plot::{self, Plot};
use crate::lab::record::report::Report;
use crate::lab::record::span::Recording;
use crate::lab::record::timeline::render;
use crate::lab::record::trace::{self, Meta};
use crate::runtime::error::{echoed, io_text};
use crate::runtime::{Error, Result};
use crate::t;
use crate::text::{fixed, Lang, Text};

/// What recording costs: the version with the technique, run with the recorder off and on,
/// interleaved, in the same process.
#[derive(Debug, Clone, Serialize)]
pub struct Cost {
    pub version: String,
    pub recorder: String,
    pub off_ms: f64,
    pub on_ms: f64,
    pub rounds: usize,
}

/// What recording may cost a run, in percent, before the timeline says why it costs more.
pub const COST_TARGET_PERCENT: f64 = 2.0;

impl Cost {
    /// On against off, in percent.
    pub fn percent(&self) -> f64 {
        (self.on_ms / self.off_ms - 1.0) * 100.0
    }
}

/// Puts the recordings in `report`: the cost figure, the ASCII timeline when `timeline`
/// (the terminal's view), and everything in `details` (`recording`, `recorder_cost`), from
/// which `--recorded` draws again.
pub fn report(report: &mut Report, recordings: &[Recording], cost: Option<&Cost>, timeline: bool) {
    if let Some(c) = cost {
        report.figure(&format!("recording cost ({}), {}", c.recorder, c.version), c.percent(), "%");
        report.detail("recorder_cost", c);
    }
    if recordings.is_empty() {
        return;
    }
    if timeline {
        let mut text = String::new();
        for r in recordings {
            let (version, source) = (Text::label(&r.version), r.source.describe_text());
            let _ = writeln!(text, "{}", t!("timeline.header", version, source).en());
            text.push_str(&render(&r.spans, 72));
        }
        if let Some(c) = cost {
            let (version, off, on) =
                (Text::label(&c.version), fixed(c.off_ms, 3), fixed(c.on_ms, 3));
            let (pct, rounds) = (format!("{:+.1}", c.percent()), c.rounds);
            let _ = writeln!(text, "{}", t!("timeline.cost", version, off, on, pct, rounds).en());
            if c.recorder == "CUPTI" && c.percent() > COST_TARGET_PERCENT {
                let target = fixed(COST_TARGET_PERCENT, 0);
                let _ = writeln!(text, "{}", t!("timeline.cost_why", target).en());
            }
        }
        report.timeline = Some(text);
    }
    report.detail("recording", recordings);
}

/// The recordings a report carries (`details.recording`), e.g. an embedded recorded run's.
pub fn recordings_of(report: &Report) -> Vec<Recording> {
    report
        .details
        .get("recording")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}

/// The plot a report carries (`details.plot`), if its lesson drew one: how a recorded run,
/// which holds only its report, gets its plot back. A live run passes the lesson's plot as
/// it is.
pub fn plot_of(report: &Report) -> Option<Plot> {
    report.details.get("plot").and_then(|v| serde_json::from_value(v.clone()).ok())
}

/// `path` with `-<tag>` before its extension: `run all` writes `trace-overlap.json`, and a
/// lesson's plot goes beside its picture as `overlap-plot.svg`.
pub fn tagged(path: &Path, tag: &str) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{tag}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{tag}"),
    };
    path.with_file_name(name)
}

/// A file that `--trace`, `--svg` or `--json` names, for one lesson and one rank. Only
/// [`OutputFile::checked`] makes one, so a file that reaches [`write()`] had its folder found
/// and its name checked before the run; tagging it keeps it in that folder, and keeps its
/// extension.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputFile {
    /// The flag that named it (`--trace`, `--svg`), for the error line if writing fails.
    flag: &'static str,
    path: PathBuf,
}

/// What a flag that names a file writes, and the extension its file must have: a file
/// named otherwise (`--svg pic.png`) would hold a format its name denies, so it is refused
/// rather than written.
fn writes(flag: &str) -> Option<(Text, &'static str)> {
    match flag {
        "--svg" => Some((t!("error.output.an_svg_picture"), "svg")),
        "--trace" => Some((t!("error.output.a_json_trace"), "json")),
        "--json" => Some((t!("error.output.a_json_report"), "json")),
        _ => None,
    }
}

impl OutputFile {
    /// `path` as `flag` names it, if it can be written: not a folder, in a folder that
    /// exists (the file itself is written after the run), and named for what it will hold
    /// (`.svg` for `--svg`, `.json` for `--trace` and `--json`). A path that exists and is
    /// not a regular file (a pipe, `/dev/stdout`) is written as it is named.
    pub fn checked(flag: &'static str, path: &Path) -> Result<OutputFile> {
        let (f, p) = (flag.to_string(), shown(path));
        if path.is_dir() {
            let why = t!("error.output.a_folder", flag = f, path = p);
            return Err(Error::InvalidInput(why));
        }
        if let Some(folder) = path.parent() {
            if !folder.as_os_str().is_empty() && !folder.is_dir() {
                let folder = shown(folder);
                let why = t!("error.output.no_folder", flag = f, path = p, folder);
                return Err(Error::InvalidInput(why));
            }
        }
        let special = path.metadata().is_ok_and(|m| !m.is_file());
        if let Some((what, ext)) = writes(flag) {
            let named = path.extension().is_some_and(|e| e.eq_ignore_ascii_case(ext));
            if !named && !special {
                let renamed = shown(&path.with_extension(ext));
                let why = t!(
                    "error.output.wrong_extension",
                    flag = f,
                    path = p,
                    what,
                    ext = ext.to_string(),
                    named = renamed
                );
                return Err(Error::InvalidInput(why));
            }
        }
        Ok(OutputFile { flag, path: path.to_path_buf() })
    }

    /// Refuses two of `files` that name one file (`--svg a.svg --trace a.svg`, or
    /// `--trace t.json --json ./t.json`): the second written would replace the first.
    /// Paths are compared by their folder as it really is and their name.
    pub fn apart(files: &[Option<&OutputFile>]) -> Result<()> {
        let files: Vec<&OutputFile> = files.iter().flatten().copied().collect();
        for (i, a) in files.iter().enumerate() {
            if let Some(b) = files[i + 1..].iter().find(|b| a.same_file(b)) {
                let (flag, path) = (a.flag.to_string(), shown(&a.path));
                let (other_flag, other_path) = (b.flag.to_string(), shown(&b.path));
                let why = t!("error.output.one_file", flag, path, other_flag, other_path);
                return Err(Error::InvalidInput(why));
            }
        }
        Ok(())
    }

    /// Whether `self` and `other` are one file: the same name in the same folder (links
    /// followed; the folder exists, [`OutputFile::checked`] saw to it).
    fn same_file(&self, other: &OutputFile) -> bool {
        let place = |p: &Path| {
            let folder = match p.parent() {
                Some(f) if !f.as_os_str().is_empty() => f.to_path_buf(),
                _ => PathBuf::from("."),
            };
            (folder.canonicalize().unwrap_or(folder), p.file_name().map(|n| n.to_os_string()))
        };
        self.path == other.path || place(&self.path) == place(&other.path)
    }

    /// The same file tagged ([`tagged`]): `t.json` -> `t-overlap.json`, in the same folder.
    pub fn tagged(&self, tag: &str) -> OutputFile {
        OutputFile { flag: self.flag, path: tagged(&self.path, tag) }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `text` to the file; an error names the flag and the file, and says what went
    /// wrong in words ([`io_text`]).
    pub fn write(&self, text: &str) -> Result<()> {
        std::fs::write(&self.path, text).map_err(|e| {
            let (flag, path, why) = (self.flag.to_string(), shown(&self.path), io_text(&e));
            Error::InvalidInput(t!("error.output.cannot_write", flag, path, why))
        })
    }
}

/// `path` as an error line names it: shortened where it is long ([`echoed`]).
fn shown(path: &Path) -> String {
    echoed(&path.display().to_string())
}

/// Writes the trace and the picture (and `plot` beside it) that were asked for, the
/// picture as the lesson's `drawing` says and in `lang`. `origin` is the command that made
/// the run and where and when ("measured on NVIDIA H200 on 2026-11-23 with streamlab
/// 0.1.0"). Returns what it wrote, a note per flag ("--svg wrote o.svg and o-plot.svg"), for
/// the command line to say in the learner's language.
pub fn write(
    report: &Report,
    recordings: &[Recording],
    plot: Option<&Plot>,
    drawing: &Drawing,
    (trace_to, svg_to): (Option<&OutputFile>, Option<&OutputFile>),
    origin: &Origin,
    lang: Lang,
) -> Result<Vec<Text>> {
    let mut wrote = Vec::new();
    let shown = |f: &OutputFile| f.path.display().to_string();
    if let Some(file) = trace_to {
        let meta = Meta {
            lesson: report.lesson.clone(),
            title: report.title.clone(),
            device: report.device.clone(),
            parameters: report.parameters.clone(),
            // The trace's metadata is read by tools: English.
            provenance: format!("{}; command: {}", origin.provenance.en(), origin.command),
        };
        let value = trace::write(&meta, recordings);
        let text = serde_json::to_string(&value)
            .map_err(|e| Error::Internal(format!("trace JSON: {e}")))?;
        file.write(&text)?;
        wrote.push(t!("output.wrote", flag = file.flag.to_string(), path = shown(file)));
    }
    if let Some(file) = svg_to {
        let c = caption(report, recordings, drawing, origin, lang);
        let svg = timeline_svg_in(&c, &panels(recordings, drawing, report), drawing, None, lang)
            .map_err(Error::Internal)?;
        file.write(&svg)?;
        let flag = file.flag.to_string();
        match plot {
            Some(p) => {
                let svg = plot::svg(p, &c.footer).map_err(Error::Internal)?;
                let beside = file.tagged("plot");
                beside.write(&svg)?;
                let (path, beside) = (shown(file), shown(&beside));
                wrote.push(t!("output.wrote_beside", flag, path, beside));
            }
            None => wrote.push(t!("output.wrote", flag, path = shown(file))),
        }
    }
    Ok(wrote)
}

/// Today's date, UTC, as YYYY-MM-DD.
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    civil_date(secs / 86_400)
}

/// The calendar date `days` after 1970-01-01 (Howard Hinnant's days-to-civil algorithm).
fn civil_date(days: u64) -> String {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::record::span::{Source, Span, Work};

    #[test]
    fn dates_are_civil() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(20_415), "2025-11-23");
        assert_eq!(civil_date(11_016), "2000-02-29");
    }

    #[test]
    fn tags_go_before_the_extension() {
        assert_eq!(tagged(Path::new("d/trace.json"), "overlap"), Path::new("d/trace-overlap.json"));
        assert_eq!(tagged(Path::new("pic"), "plot"), Path::new("pic-plot"));
    }

    #[test]
    fn the_report_carries_recordings_cost_and_source() {
        let r = Recording {
            version: "2 streams".into(),
            source: Source::Events { why: "no libcupti".into() },
            ms: 1.0,
            parts: Vec::new(),
            spans: vec![Span::new("s0", Work::Kernel, "k", 0.0, 1.0)],
            host: Vec::new(),
            flows: Vec::new(),
        };
        let cost = Cost {
            version: "2 streams".into(),
            recorder: "events".into(),
            off_ms: 2.0,
            on_ms: 2.02,
            rounds: 5,
        };
        let mut rep = Report::new("overlap", "t", "GPU");
        report(&mut rep, std::slice::from_ref(&r), Some(&cost), true);
        let text = rep.timeline.clone().unwrap();
        assert!(
            text.contains(
                "timeline from events: a span includes queueing (CUPTI not used: no libcupti)"
            ),
            "{text}"
        );
        assert!(text.contains("(+1.0%, medians of 5 interleaved runs)"), "{text}");
        assert!((rep.value("recording cost (events), 2 streams").unwrap() - 1.0).abs() < 1e-9);
        assert_eq!(recordings_of(&rep), vec![r]);
        assert!(plot_of(&rep).is_none());
    }

    /// Over the target, a CUPTI timeline says where the cost comes from; within it, or with
    /// events (whose cost is their own events), it does not.
    #[test]
    fn a_cupti_cost_over_the_target_is_explained() {
        let r = Recording {
            version: "K = 64".into(),
            source: Source::Cupti { library: "libcupti.so.13".into(), version: 130001 },
            ms: 2.0,
            parts: Vec::new(),
            spans: vec![Span::new("s0", Work::CopyToDevice, "copy", 0.0, 1.0)],
            host: Vec::new(),
            flows: Vec::new(),
        };
        let timeline = |recorder: &str, on_ms: f64| {
            let cost = Cost {
                version: "K = 64".into(),
                recorder: recorder.into(),
                off_ms: 1.8,
                on_ms,
                rounds: 10,
            };
            let mut rep = Report::new("stream-sweep", "t", "GPU");
            report(&mut rep, std::slice::from_ref(&r), Some(&cost), true);
            rep.timeline.unwrap_or_default()
        };
        let why = "over 2%: CUPTI's own timestamps slow copies queued back to back";
        assert!(timeline("CUPTI", 2.0).contains(why), "{}", timeline("CUPTI", 2.0));
        assert!(!timeline("CUPTI", 1.83).contains(why));
        assert!(!timeline("events", 2.0).contains(why));
        let zh = Text::recover(
            timeline("CUPTI", 2.0).lines().find(|l| l.starts_with("over 2%")).unwrap_or(""),
        );
        assert!(zh.render(Lang::Zh).starts_with("超过 2%：CUPTI"), "{}", zh.render(Lang::Zh));
    }

    #[test]
    fn files_are_written_and_unwritable_paths_refused() {
        let dir = std::env::temp_dir().join(format!("streamlab-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut rep = Report::new("overlap", "t", "GPU");
        let r = Recording {
            version: "one stream".into(),
            source: Source::Events { why: "test".into() },
            ms: 1.0,
            parts: Vec::new(),
            spans: vec![Span::new("s0", Work::Kernel, "k", 0.0, 1.0)],
            host: Vec::new(),
            flows: Vec::new(),
        };
        report(&mut rep, std::slice::from_ref(&r), None, false);
        let plot = Plot::Bars { title: "b".into(), y_label: "GB/s".into(), bars: Vec::new() };
        let t = OutputFile::checked("--trace", &dir.join("t.json")).unwrap();
        let s = OutputFile::checked("--svg", &dir.join("s.svg")).unwrap();
        let origin = Origin { command: "streamlab run overlap".into(), provenance: "test".into() };
        let files = (Some(&t), Some(&s));
        let wrote = write(
            &rep,
            std::slice::from_ref(&r),
            Some(&plot),
            &Drawing::PLAIN,
            files,
            &origin,
            Lang::En,
        )
        .unwrap();
        let wrote: Vec<String> = wrote.iter().map(Text::en).collect();
        let (t_path, s_path) = (t.path().display(), s.path().display());
        let plot_path = dir.join("s-plot.svg");
        assert_eq!(
            wrote,
            [
                format!("--trace wrote {t_path}"),
                format!("--svg wrote {s_path} and {}", plot_path.display())
            ],
            "one note per flag, naming every file"
        );
        let trace: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(t.path()).unwrap()).unwrap();
        assert_eq!(trace["metadata"]["provenance"], "test; command: streamlab run overlap");
        assert!(std::fs::read_to_string(s.path()).unwrap().starts_with("<svg"));
        assert!(dir.join("s-plot.svg").is_file());
        // A folder that was there when the file was checked and is gone when it is written.
        let gone = dir.join("gone");
        std::fs::create_dir_all(&gone).unwrap();
        let late = OutputFile::checked("--trace", &gone.join("t.json")).unwrap();
        std::fs::remove_dir_all(&gone).unwrap();
        let files = (Some(&late), None);
        let e = write(&rep, &[r], None, &Drawing::PLAIN, files, &origin, Lang::En).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().starts_with("--trace "), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// `--trace`/`--svg` that name a folder, or a file in a folder that does not exist, are
    /// refused in one line naming the flag; a bare file name is in the current folder.
    #[test]
    fn an_output_file_needs_a_folder_that_exists() {
        let dir = std::env::temp_dir();
        let e = OutputFile::checked("--svg", &dir).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let why = format!("--svg {}: a folder, not a file: name the file", dir.display());
        assert_eq!(e.to_string(), why);
        let e = OutputFile::checked("--trace", Path::new("/nonexistent-folder/t.json"));
        let why = "--trace /nonexistent-folder/t.json: cannot write it: the folder \
                   /nonexistent-folder does not exist";
        assert_eq!(e.unwrap_err().to_string(), why);
        let here = OutputFile::checked("--trace", Path::new("t.json")).unwrap();
        assert_eq!(here.tagged("overlap").path(), Path::new("t-overlap.json"));
    }

    /// A file named for another format (`--svg pic.png`, `--trace t.svg`, no extension) is
    /// refused in one line that names the file it could be; any case of the right one, and
    /// a device such as /dev/null, are taken.
    #[test]
    fn an_output_file_is_named_for_what_it_holds() {
        let e = OutputFile::checked("--svg", Path::new("pic.png")).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let why = "--svg pic.png: --svg writes an SVG picture, so its file must end in .svg: \
                   name it pic.svg";
        assert_eq!(e.to_string(), why);
        for (flag, name) in [("--trace", "t.svg"), ("--json", "r.txt"), ("--trace", "same.out")] {
            let e = OutputFile::checked(flag, Path::new(name)).unwrap_err().to_string();
            assert!(e.starts_with(&format!("{flag} {name}: ")) && e.contains(".json"), "{e}");
        }
        assert!(OutputFile::checked("--svg", Path::new("noextension")).is_err());
        assert!(OutputFile::checked("--svg", Path::new("P.SVG")).is_ok());
        assert!(OutputFile::checked("--json", Path::new("r.Json")).is_ok());
        if Path::new("/dev/null").exists() {
            assert!(OutputFile::checked("--svg", Path::new("/dev/null")).is_ok());
        }
    }

    /// Two flags naming one file, however spelt, are refused: the second would replace the
    /// first. Different files, or flags not given, pass.
    #[test]
    fn two_flags_cannot_name_one_file() {
        let file = |flag, p: &str| OutputFile::checked(flag, Path::new(p)).unwrap();
        let (trace, json) = (file("--trace", "t.json"), file("--json", "./t.json"));
        let e = OutputFile::apart(&[Some(&trace), None, Some(&json)]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let why = "--trace t.json and --json ./t.json name one file: the second would replace \
                   the first: give each its own";
        assert_eq!(e.to_string(), why);
        let tmp = std::env::temp_dir();
        let (a, b) = (tmp.join("t.json"), tmp.join(".").join("t.json"));
        let (a, b) = (file("--trace", a.to_str().unwrap()), file("--json", b.to_str().unwrap()));
        assert!(OutputFile::apart(&[Some(&a), Some(&b)]).is_err());
        let other = file("--json", "r.json");
        assert!(OutputFile::apart(&[Some(&trace), Some(&other), None]).is_ok());
        assert!(OutputFile::apart(&[None, None]).is_ok());
    }
}
