//! Recorded runs, embedded in the binary so that learners without an NVIDIA GPU see every
//! lesson too: `streamlab run <lesson> --recorded` prints the report of a run made on a real
//! GPU, its timeline and interpretation, and writes `--trace`/`--svg` from its trace.
//! Always labelled as recorded, with the GPU and the date: never presented as a
//! measurement on this machine.
//!
//! The runs are `docs/recorded/<lesson>.json` (made by `scripts/pictures.sh` on a GPU
//! machine); `build.rs` lists whichever are there, so the build works without any. Each
//! file holds `{lesson, gpu, date, command, report, trace}`: the `--json` report and the
//! `--trace` file of one `streamlab run`.
//!
//! The report names the kernels that ran ([`Report::kernels`], a digest of the embedded
//! PTX set) and, since PTX per architecture, which PTX its GPU loaded (`details.ptx`): where
//! a recording's kernels differ from this binary's, or it predates the field, the header says
//! so, since a kernel change moves the figures (after the first recordings the compute kernel
//! went from sinf*cosf to sincosf and became 1.76x faster; with PTX per architecture, bf16
//! rounding on sm_80 and newer became one instruction).
use serde::Deserialize;

use crate::lab::record::drawing::{name_the_legacy_stream, Drawing, Origin};
use crate::lab::record::output::{self, OutputFile};
use crate::lab::record::report::{kernels_id, Report, LOADED_PTX};
use crate::lab::record::span::Recording;
use crate::lab::record::trace;
use crate::runtime::ptx::embedded_archs;
use crate::runtime::{Error, Result};
use crate::t;
use crate::text::{Lang, Text};

include!(concat!(env!("OUT_DIR"), "/recorded.rs"));

/// One embedded run.
#[derive(Debug, Clone, Deserialize)]
pub struct RecordedRun {
    pub lesson: String,
    pub gpu: String,
    pub date: String,
    /// The command that made it.
    pub command: String,
    pub report: Report,
    pub trace: serde_json::Value,
}

impl RecordedRun {
    /// "recorded on NVIDIA H200 on 2026-11-23".
    pub fn label(&self) -> String {
        self.label_text().en()
    }

    fn label_text(&self) -> Text {
        t!("recorded.label", gpu = self.gpu.clone(), date = self.date.clone())
    }

    /// The line `--recorded` prints above the report, in `lang`, and below it a second
    /// one where the run's kernels are not this binary's ([`Self::kernels_note`]).
    pub fn header(&self, lang: Lang) -> String {
        let header =
            t!("recorded.header", label = self.label_text(), command = self.command.clone());
        match self.kernels_note() {
            Some(note) => format!("{}\n{}", header.render(lang), note.render(lang)),
            None => header.render(lang),
        }
    }

    /// Whether the run was made with the kernels this binary embeds ([`kernels_id`]).
    pub fn same_kernels(&self) -> bool {
        self.report.kernels.as_deref() == Some(kernels_id())
    }

    /// What to say about the run's kernels: nothing where they are this binary's; that they
    /// came from an earlier build where the run predates the id; both ids, and what the
    /// recording's build ran, where it predates PTX per architecture (its report names no
    /// loaded PTX: such builds embedded one, for sm_75 unless told otherwise); else both ids.
    pub fn kernels_note(&self) -> Option<Text> {
        let (theirs, ours) = match self.report.kernels.as_deref() {
            _ if self.same_kernels() => return None,
            None => return Some(t!("recorded.kernels_earlier")),
            Some(theirs) => (theirs.to_string(), kernels_id().to_string()),
        };
        Some(if self.report.details.contains_key(LOADED_PTX) {
            t!("recorded.kernels_other", kernels = theirs, ours = ours)
        } else {
            t!("recorded.kernels_one_ptx", kernels = theirs, ours = ours, archs = embedded_archs())
        })
    }

    /// The recorded versions, from the trace (or the report where the trace has none).
    /// The legacy default stream is named where the run predates the recorder naming it.
    pub fn recordings(&self) -> Vec<Recording> {
        let mut recordings = match trace::read(&self.trace) {
            Ok((_, r)) if !r.is_empty() => r,
            _ => output::recordings_of(&self.report),
        };
        recordings.iter_mut().for_each(name_the_legacy_stream);
        recordings
    }
}

/// The lessons this binary has a recorded run of.
pub fn lessons() -> Vec<&'static str> {
    RECORDED.iter().map(|(l, _)| *l).collect()
}

/// Parses a recorded run.
pub fn parse(text: &str) -> Result<RecordedRun> {
    serde_json::from_str(text)
        .map_err(|e| Error::Internal(format!("an embedded recorded run does not parse: {e}")))
}

/// The embedded run of `lesson`, if this binary has one.
pub fn find(lesson: &str) -> Option<Result<RecordedRun>> {
    RECORDED.iter().find(|(l, _)| *l == lesson).map(|(_, text)| parse(text))
}

/// What the no-GPU error line adds for `lesson` (`all` for every lesson): the flag to add,
/// and the command as this process was started with it added, so the user can paste it
/// (`target/release/streamlab run overlap --recorded` after `cargo run`).
pub fn hint(lesson: &str) -> Text {
    hint_for(lesson, &std::env::args().collect::<Vec<_>>())
}

/// [`hint`] for a process started otherwise: `argv` is the `streamlab run …` command that
/// `--recorded` is added to (`streamlab info` and `streamlab launch` offer `run` commands).
pub fn hint_for(lesson: &str, argv: &[String]) -> Text {
    let again = with_recorded(argv);
    if lesson == "all" {
        return match lessons().len() {
            0 => t!("error.record.hint_none"),
            n => t!("error.record.hint_all", n, again),
        };
    }
    match find(lesson) {
        Some(Ok(run)) => t!("error.record.hint_one", label = run.label_text(), again),
        _ => t!("error.record.hint_none_of", lesson = lesson.to_string()),
    }
}

/// `argv` with `--recorded` added, quoted for a POSIX shell where a word needs it.
fn with_recorded(argv: &[String]) -> String {
    let quote = |word: &String| {
        let plain = !word.is_empty()
            && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
        if plain {
            word.clone()
        } else {
            format!("'{}'", word.replace('\'', "'\\''"))
        }
    };
    let mut words: Vec<String> = argv.iter().map(quote).collect();
    if words.is_empty() {
        words.push("streamlab".into());
    }
    words.push("--recorded".into());
    words.join(" ")
}

#[cfg(test)]
mod hint_tests {
    use super::*;

    #[test]
    fn the_no_gpu_hint_gives_the_flag_and_the_command_as_it_was_run() {
        let argv: Vec<String> =
            ["target/release/streamlab", "run", "overlap", "--elements", "1000", "--lang", "a b"]
                .map(String::from)
                .to_vec();
        let hint = hint_for("overlap", &argv).en();
        assert!(hint.starts_with("add --recorded to see a run recorded on "), "{hint}");
        assert!(
            hint.ends_with(
                "`target/release/streamlab run overlap --elements 1000 --lang 'a b' --recorded`"
            ),
            "{hint}"
        );
        let all = hint_for("all", &["streamlab".into(), "run".into(), "all".into()]).en();
        assert!(all.starts_with("add --recorded to see the "), "{all}");
        assert!(all.ends_with("`streamlab run all --recorded`"), "{all}");
    }
}

/// The files `--recorded` writes from a recorded run: `--trace`, `--svg`.
pub type Files<'a> = (Option<&'a OutputFile>, Option<&'a OutputFile>);

/// The report of `run` as `--recorded` prints it: labelled as recorded in its device line
/// and in `details.recorded`, with the timeline drawn when the run had none in its text.
/// Writes `--trace` and `--svg` from the recorded trace, the picture as `drawing` (the
/// lesson's) says, and returns what it wrote beside the report ([`output::write`]).
pub fn show(run: &RecordedRun, drawing: &Drawing, files: Files<'_>) -> Result<(Report, Vec<Text>)> {
    show_in(run, (Lang::En, Lang::En), drawing, files)
}

/// [`show`], with the device line in `report_lang` (the rest of the report is rendered in a
/// language when it is printed: [`Report::to_text_in`]) and the picture's words in
/// `picture_lang` (a `--json` report stays English, its picture need not).
pub fn show_in(
    run: &RecordedRun,
    (report_lang, picture_lang): (Lang, Lang),
    drawing: &Drawing,
    files: Files<'_>,
) -> Result<(Report, Vec<Text>)> {
    let mut report = run.report.clone();
    let recordings = run.recordings();
    if report.timeline.is_none() && !recordings.is_empty() {
        output::report(&mut report, &recordings, None, true);
    }
    report.device =
        t!("recorded.device", gpu = run.gpu.clone(), label = run.label_text()).render(report_lang);
    report.detail(
        "recorded",
        serde_json::json!({
            "gpu": run.gpu,
            "date": run.date,
            "command": run.command,
            "kernels": run.report.kernels,
            "same_kernels": run.same_kernels(),
        }),
    );
    let origin = Origin { command: run.command.clone(), provenance: run.label_text() };
    let mut drawn = run.report.clone();
    drawn.device = run.gpu.clone();
    // The run holds its plot only as its report's JSON.
    let plot = output::plot_of(&run.report);
    let wrote =
        output::write(&drawn, &recordings, plot.as_ref(), drawing, files, &origin, picture_lang)?;
    Ok((report, wrote))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::record::span::{Source, Span, Work};
    use crate::lab::record::trace::Meta;
    use crate::text::Text;

    fn recorded() -> String {
        recorded_with(Some(kernels_id()))
    }

    /// A recorded run whose report names `kernels` (none: made before the id was kept), made
    /// by a build from before PTX per architecture (its report names no loaded PTX).
    fn recorded_with(kernels: Option<&str>) -> String {
        recorded_by(kernels, None)
    }

    /// A recorded run whose report names `kernels` and, where given, the PTX its GPU loaded.
    fn recorded_by(kernels: Option<&str>, loaded: Option<&str>) -> String {
        let r = Recording {
            version: "8 streams".into(),
            source: Source::Cupti { library: "libcupti.so.13".into(), version: 130001 },
            ms: 2.9,
            parts: Vec::new(),
            spans: vec![Span::new("overlap-0", Work::Kernel, "compute", 0.0, 2.9)],
            host: Vec::new(),
            flows: Vec::new(),
        };
        let mut report = Report::new("overlap", "one stream vs K streams", "NVIDIA H200");
        report.figure("8 streams, median", 2.9, "ms");
        report.kernels = kernels.map(str::to_string);
        if let Some(arch) = loaded {
            report.detail(LOADED_PTX, serde_json::json!({ "arch": arch, "choice": "" }));
        }
        let meta = Meta {
            lesson: "overlap".into(),
            title: "t".into(),
            device: "NVIDIA H200".into(),
            parameters: Default::default(),
            provenance: "measured 2026-11-23".into(),
        };
        serde_json::json!({
            "lesson": "overlap",
            "gpu": "NVIDIA H200",
            "date": "2026-11-23",
            "command": "streamlab run overlap --timeline",
            "report": report,
            "trace": trace::write(&meta, &[r]),
        })
        .to_string()
    }

    #[test]
    fn a_recorded_run_is_labelled_and_drawn_from_its_trace() {
        let run = parse(&recorded()).unwrap();
        assert_eq!(run.label(), "recorded on NVIDIA H200 on 2026-11-23");
        let dir = std::env::temp_dir().join(format!("streamlab-recorded-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let t = OutputFile::checked("--trace", &dir.join("t.json")).unwrap();
        let s = OutputFile::checked("--svg", &dir.join("s.svg")).unwrap();
        let (report, wrote) = show(&run, &Drawing::PLAIN, (Some(&t), Some(&s))).unwrap();
        assert_eq!(wrote.len(), 2, "{wrote:?}");
        let text = report.to_text();
        assert!(
            text.contains("device: NVIDIA H200 (a run recorded on NVIDIA H200 on 2026-11-23, embedded in streamlab: not measured on this machine)"),
            "{text}"
        );
        assert!(text.contains("timeline, 8 streams (one run; GPU time from CUPTI"), "{text}");
        let trace: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(t.path()).unwrap()).unwrap();
        assert!(trace["metadata"]["provenance"]
            .as_str()
            .unwrap()
            .starts_with("recorded on NVIDIA H200 on 2026-11-23"));
        let svg = std::fs::read_to_string(s.path()).unwrap();
        assert!(svg.contains("recorded on NVIDIA H200 on 2026-11-23"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_header_says_when_the_kernels_are_not_this_binarys() {
        let earlier = "recorded with an older version of streamlab's GPU code";
        let earlier_zh = "GPU 代码比本程序的旧";
        let other =
            "recorded with other GPU code (kernels ptx-0000000000000000) than this binary's";
        let same = parse(&recorded()).unwrap();
        assert!(same.same_kernels());
        let header = same.header(Lang::En);
        assert_eq!(header.lines().count(), 1, "{header}");
        assert!(!header.contains("kernels"), "{header}");
        assert!(!same.header(Lang::Zh).contains("内核"), "{}", same.header(Lang::Zh));
        let (report, _) = show(&same, &Drawing::PLAIN, (None, None)).unwrap();
        assert_eq!(report.details["recorded"]["same_kernels"], true);

        let unknown = parse(&recorded_with(None)).unwrap();
        assert!(!unknown.same_kernels());
        let header = unknown.header(Lang::En);
        assert_eq!(header.lines().count(), 2, "{header}");
        assert!(header.lines().nth(1).unwrap().contains(earlier), "{header}");
        assert!(unknown.header(Lang::Zh).contains(earlier_zh), "{}", unknown.header(Lang::Zh));
        let (report, _) = show(&unknown, &Drawing::PLAIN, (None, None)).unwrap();
        assert_eq!(report.details["recorded"]["same_kernels"], false);
        assert_eq!(report.details["recorded"]["kernels"], serde_json::Value::Null);

        // Made by a build that loads PTX per architecture, with other kernels: both ids.
        let another = parse(&recorded_by(Some("ptx-0000000000000000"), Some("sm_90"))).unwrap();
        let header = another.header(Lang::En);
        assert!(header.contains(other) && header.contains(kernels_id()), "{header}");
        assert!(!header.contains(earlier) && !header.contains("sm_75 alone"), "{header}");
        let zh = another.header(Lang::Zh);
        assert!(zh.contains("ptx-0000000000000000") && zh.contains(kernels_id()), "{zh}");
        assert!(!zh.contains("较旧的 streamlab"), "{zh}");

        // Made before PTX per architecture: what that build ran, and what this one does.
        let one = parse(&recorded_with(Some("ptx-0000000000000000"))).unwrap();
        let header = one.header(Lang::En);
        let line = header.lines().nth(1).unwrap();
        assert!(line.starts_with("(note: this run was recorded by an older streamlab, whose GPU code (kernels ptx-0000000000000000) was compiled for sm_75 alone and ran as such on every GPU; this binary's ("), "{line}");
        let archs = crate::runtime::ptx::embedded_archs();
        let ours =
            format!("({}) is compiled for {archs} and runs the newest your GPU", kernels_id());
        assert!(line.contains(&ours), "{line}");
        let zh = one.header(Lang::Zh);
        let said = zh.contains("较旧的 streamlab") && zh.contains(&archs);
        assert!(said && zh.contains(kernels_id()), "{zh}");
    }

    /// `--recorded --lang zh` for every embedded run: the title, every figure and check name
    /// translated, and every interpretation and check line in Chinese with no English
    /// sentence left, whether the run stored its messages or only its English lines.
    #[test]
    fn every_embedded_run_reads_in_chinese() {
        use crate::text::{english_sentence, has_chinese};
        assert!(!RECORDED.is_empty(), "this build embeds no recorded runs (docs/recorded)");
        for (lesson, text) in RECORDED {
            let run = parse(text).unwrap();
            let (report, _) =
                show_in(&run, (Lang::Zh, Lang::Zh), &Drawing::PLAIN, (None, None)).unwrap();
            let names = std::iter::once(&report.title)
                .chain(report.figures.iter().map(|f| &f.name))
                .chain(report.checks.iter().map(|c| &c.name));
            for name in names {
                assert!(Text::label(name).is_translated(), "{lesson}: {name:?} has no Chinese");
            }
            let text = report.to_text_in(Lang::Zh);
            let said: Vec<&str> = text.lines().filter(|l| l.starts_with("  > ")).collect();
            assert_eq!(said.len(), report.interpretation.len(), "{lesson}:\n{text}");
            let checks = text.lines().filter(|l| l.starts_with("  ["));
            let device = text.lines().filter(|l| l.starts_with("设备"));
            for line in said.iter().copied().chain(checks).chain(device) {
                assert!(has_chinese(line), "{lesson}: not Chinese: {line}");
                assert_eq!(english_sentence(line), None, "{lesson}: English left in: {line}");
            }
        }
    }

    #[test]
    fn every_embedded_run_parses() {
        for (lesson, text) in RECORDED {
            let run = parse(text).unwrap_or_else(|e| panic!("{lesson}: {e}"));
            assert_eq!(run.lesson, *lesson);
            assert!(!run.recordings().is_empty(), "{lesson}: no recorded spans");
        }
    }
}
