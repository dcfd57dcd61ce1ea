//! `streamlab diff A.json B.json`: two JSON reports of `streamlab trace` or `streamlab report`
//! (before and after a fix) side by side, window by window, as text in the catalogs' words
//! or as JSON with `--json FILE`. The comparison itself is `diff`'s; this reads the files
//! (one error line naming the file where one is not a report) and shows the result. A diff
//! is no test: reports that differ exit 0.
use std::path::{Path, PathBuf};

use clap::{ArgMatches, Args as _, FromArgMatches as _};
use serde::Serialize;

use crate::lab::record::output::OutputFile;
use crate::runtime::error::io_text;
use crate::runtime::{Error, Result};
use crate::t;
use crate::text::{pad, width, Lang, Text};
use crate::trace::capture::diff::{
    compare, Diff, Figure, FigureDiff, FindingDiff, FindingSide, Found, ReportFile, Unit,
    WindowDiff,
};
use crate::trace::inspect::overlap_text::engine_name;
use crate::trace::inspect::windows::Part;

const ABOUT: &str = "\
Compares two JSON reports that `streamlab trace --json FILE` or `streamlab report DIR --json \
FILE` wrote, A before a change and B after it, window by window: the window's time, the \
bound, measured over bound, each engine class's busy time, the copies under compute, the \
collectives under compute and exposed, the time that ran while a range was open, and each \
finding's count and cost by rule (findings folded into a report's \"more findings\" line too). \
Each figure is shown in A and in B, with B − A and, for times, B/A.

Windows are matched by process, GPU and part of the run or NVTX range. A process is known by \
the GPUs its windows are on and its position among the report's processes on those GPUs (the \
order they started in), not by its pid, which changes from run to run: the ranks of a torchrun \
job, each on its own GPU, are matched rank for rank whichever started first. The diff says \
which pid of A was matched with which pid of B. A window that only one report has is listed as \
such.

Make both reports with the same thresholds: a finding that comes or goes may be the \
thresholds', not the program's (the diff says when they differ). Nothing runs: no GPU is \
needed.

Exit codes: 0 the diff was made (reports that differ are no error); 2 invalid arguments, a \
file that cannot be read, is not JSON or is not a streamlab trace report, or a --json FILE \
that cannot be written; 70 an internal error.";

const EXAMPLES: &str = "\
Examples:
  streamlab trace --keep before/ --json before.json -- python train.py
                                                 record before the fix
  ... fix the program ...
  streamlab trace --keep after/ --json after.json -- python train.py
                                                 and after it
  streamlab diff before.json after.json          what changed, window by window
  streamlab diff before.json after.json --json d.json
                                                 ... also as JSON (every delta, the matching)
  streamlab report before/ --json before.json    a report from a kept folder, to compare
  streamlab diff before.json after.json --lang zh
                                                 in Chinese (中文)";

// The flags of `diff` (`//`, not `///`: clap would make a doc comment the command's about).
#[derive(clap::Args, Debug, Clone)]
pub struct DiffFlags {
    #[arg(
        value_name = "A.json",
        help = "The report before: written by `streamlab trace --json FILE` or `streamlab report DIR --json FILE`"
    )]
    pub a: PathBuf,
    #[arg(value_name = "B.json", help = "The report after, compared with A")]
    pub b: PathBuf,
    #[arg(
        long,
        value_name = "FILE",
        help = "Also write the diff as JSON to FILE: every figure, delta and ratio, and the matching"
    )]
    pub json: Option<PathBuf>,
    #[arg(
        long,
        value_name = "LANG",
        value_parser = Lang::NAMES,
        help = "Language of the text (default: zh when LC_ALL, LC_MESSAGES or LANG starts with zh, else en; --json FILE stays English)"
    )]
    pub lang: Option<String>,
}

/// The `diff` subcommand.
pub fn command() -> clap::Command {
    let diff = clap::Command::new("diff")
        .about("Compare two JSON reports of `streamlab trace`, before and after a fix")
        .long_about(ABOUT)
        .after_help(EXAMPLES);
    DiffFlags::augment_args(diff)
}

/// The report in `path`, or the one error line that names the file.
pub fn read_report(path: &Path) -> Result<ReportFile> {
    let path_shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::InvalidInput(t!(
            "error.diff.cannot_read",
            path = path_shown.clone(),
            why = io_text(&e)
        ))
    })?;
    serde_json::from_str(&text).map_err(|e| {
        // serde's own words, as it says them.
        let (path, detail) = (path_shown, e.to_string());
        Error::InvalidInput(match e.classify() {
            serde_json::error::Category::Data => t!("error.diff.not_a_report", path, detail),
            _ => t!("error.diff.not_json", path, detail),
        })
    })
}

/// What `--json FILE` holds: the two files' names and the diff.
#[derive(Serialize)]
struct DiffFile<'a> {
    a: &'a str,
    b: &'a str,
    #[serde(flatten)]
    diff: &'a Diff,
}

/// `streamlab diff` with `matches` (the subcommand's): the exit code to use.
pub fn run(matches: &ArgMatches) -> Result<i32> {
    let flags = DiffFlags::from_arg_matches(matches).map_err(|e| Error::Internal(e.to_string()))?;
    let json = flags.json.as_deref().map(|p| OutputFile::checked("--json", p)).transpose()?;
    let lang = Lang::or_locale(flags.lang.as_deref());
    let (a, b) = (read_report(&flags.a)?, read_report(&flags.b)?);
    let diff = compare(&a, &b);
    let (a_name, b_name) = (flags.a.display().to_string(), flags.b.display().to_string());
    print!("{}", diff_text(&diff, &a_name, &b_name, lang));
    if let Some(file) = json {
        let doc = DiffFile { a: &a_name, b: &b_name, diff: &diff };
        let text = serde_json::to_string_pretty(&doc)
            .map_err(|e| Error::Internal(format!("diff JSON: {e}")))?;
        file.write(&text)?;
        let path = file.path().display().to_string();
        eprintln!("{}", t!("diff.wrote_json", path).render(lang));
    }
    Ok(0)
}

fn line(text: Text, lang: Lang) -> String {
    text.render(lang) + "\n"
}

/// The diff as text: the two files, the processes matched, each window's table (or that only
/// one report has it), and the findings across windows.
pub fn diff_text(diff: &Diff, a: &str, b: &str, lang: Lang) -> String {
    let mut out = line(t!("diff.header", a = a.to_string(), b = b.to_string()), lang);
    if !diff.same_thresholds {
        out += &line(t!("diff.thresholds_differ"), lang);
    }
    out += &line(t!("diff.processes"), lang);
    for p in &diff.processes {
        let n = p.position;
        let text = match (p.a_pid, p.b_pid) {
            (Some(a), Some(b)) => t!("diff.process_both", n, a, b),
            (Some(pid), None) => t!("diff.process_only_a", n, pid),
            (None, Some(pid)) => t!("diff.process_only_b", n, pid),
            (None, None) => continue,
        };
        out += &format!("  {}", line(text, lang));
    }
    if diff.windows.is_empty() {
        out += &line(t!("diff.no_windows"), lang);
    }
    for w in &diff.windows {
        let name = title(w, lang);
        match (w.found, w.a_pid, w.b_pid) {
            (Found::Both, Some(a), Some(b)) => {
                out += &line(t!("diff.window", name, a, b), lang);
                let mut rows: Vec<Row> = w.figures.iter().map(|f| figure_row(f, lang)).collect();
                rows.extend(w.findings.iter().flat_map(finding_rows));
                out += &table(&rows, lang);
            }
            (Found::OnlyB, ..) => out += &line(t!("diff.window_only_b", name), lang),
            _ => out += &line(t!("diff.window_only_a", name), lang),
        }
    }
    if !diff.across_windows.is_empty() {
        out += &line(t!("inspect.across"), lang);
        let rows: Vec<Row> = diff.across_windows.iter().flat_map(finding_rows).collect();
        out += &table(&rows, lang);
    }
    out
}

/// A window in words: its process (by position), device and part or range.
fn title(w: &WindowDiff, lang: Lang) -> String {
    let process = t!("diff.process", n = w.process).render(lang);
    let mut name = format!("{process} · {}", t!("inspect.gpu", device = w.device).render(lang));
    let part = match (w.part, &w.range) {
        (Part::Range, Some(range)) => Some(t!("diff.range", range = range.clone())),
        (Part::StartUp, _) => Some(t!("inspect.part.start_up")),
        (Part::Rest, _) => Some(t!("inspect.part.rest")),
        _ => None,
    };
    if let Some(part) = part {
        name += &format!(" · {}", part.render(lang));
    }
    name
}

/// A row of a table: the figure's name, A, B, B − A and B/A, as shown.
type Row = [Text; 5];

fn figure_label(figure: Figure, lang: Lang) -> Text {
    match figure {
        Figure::Occurrences => t!("diff.figure.occurrences"),
        Figure::Span => t!("diff.figure.span"),
        Figure::Bound => t!("diff.figure.bound"),
        Figure::MeasuredOverBound => t!("diff.figure.over"),
        Figure::Busy(engine) => t!("diff.figure.busy", engine = engine_name(engine, lang)),
        Figure::CopyUnderCompute => t!("diff.figure.copy_under"),
        Figure::CollectivesUnderCompute => t!("diff.figure.comm_under"),
        Figure::CollectivesExposed => t!("diff.figure.comm_exposed"),
        Figure::RanDuring => t!("diff.figure.ran_during"),
    }
}

/// A value as the report prints it: ms with 3 decimals, ratios with 2, shares in percent.
fn value(unit: Unit, v: Option<f64>) -> Text {
    let Some(v) = v else { return Text::Plain("-".into()) };
    Text::Plain(match unit {
        Unit::Ms => format!("{v:.3}"),
        Unit::Times => format!("{v:.2}"),
        Unit::Share => format!("{:.0}", v * 100.0),
        Unit::Count => format!("{v:.0}"),
    })
}

/// A change with its sign, in the unit's decimals (a share's in percentage points); a
/// change that rounds to zero is shown without a sign.
fn change(unit: Unit, d: Option<f64>) -> Text {
    let Some(d) = d else { return Text::Plain("-".into()) };
    let (v, decimals) = match unit {
        Unit::Ms => (d, 3),
        Unit::Times => (d, 2),
        Unit::Share => (d * 100.0, 0),
        Unit::Count => (d, 0),
    };
    let digits = format!("{:.decimals$}", v.abs());
    Text::Plain(match digits.bytes().all(|c| c == b'0' || c == b'.') {
        true => digits,
        false if v < 0.0 => format!("-{digits}"),
        false => format!("+{digits}"),
    })
}

/// B/A, for times only (blank for the other figures, "-" where A is 0 or missing).
fn ratio(unit: Unit, r: Option<f64>) -> Text {
    match (unit, r) {
        (Unit::Ms, Some(r)) => Text::Plain(format!("{r:.2}")),
        (Unit::Ms, None) => Text::Plain("-".into()),
        _ => Text::Plain(String::new()),
    }
}

fn figure_row(f: &FigureDiff, lang: Lang) -> Row {
    [
        figure_label(f.figure, lang),
        value(f.unit, f.a),
        value(f.unit, f.b),
        change(f.unit, f.delta),
        ratio(f.unit, f.ratio),
    ]
}

/// A finding's two rows: its count and its cost.
fn finding_rows(f: &FindingDiff) -> [Row; 2] {
    let rule = f.rule.clone();
    let count = |side: Option<FindingSide>| value(Unit::Count, side.map(|s| s.count as f64));
    let cost = |side: Option<FindingSide>| value(Unit::Ms, side.map(|s| s.cost_ms));
    [
        [
            t!("diff.finding_count", rule),
            count(f.a),
            count(f.b),
            change(Unit::Count, f.count_delta.map(|d| d as f64)),
            ratio(Unit::Count, None),
        ],
        [
            t!("diff.finding_cost", rule),
            cost(f.a),
            cost(f.b),
            change(Unit::Ms, f.cost_delta_ms),
            ratio(Unit::Ms, f.cost_ratio),
        ],
    ]
}

/// The rows under a heading, the names padded to one column (wide characters counted twice),
/// the numbers right-aligned.
fn table(rows: &[Row], lang: Lang) -> String {
    let heading: Row = [
        t!("diff.figure"),
        Text::Plain("A".into()),
        Text::Plain("B".into()),
        Text::Plain("B − A".into()),
        Text::Plain("B/A".into()),
    ];
    let shown: Vec<[String; 5]> = std::iter::once(&heading)
        .chain(rows)
        .map(|row| row.clone().map(|t| t.render(lang)))
        .collect();
    let names = shown.iter().map(|row| width(&row[0])).max().unwrap_or(0) + 2;
    let mut out = String::new();
    for [name, a, b, delta, ratio] in &shown {
        let row = format!("  {}{a:>11}{b:>11}{delta:>11}{ratio:>8}", pad(name, names));
        out += row.trim_end();
        out += "\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{english_sentence, has_chinese};
    use crate::trace::capture::diff_tests::{changed, parsed, report_json};

    fn temp(name: &str, text: &str) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("streamlab-diff-{}-{name}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The numbers of the first row named `name` in `text`.
    fn row<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
        let line = text.lines().find(|l| l.trim_start().starts_with(name)).unwrap();
        line.trim_start()[name.len()..].split_whitespace().collect()
    }

    #[test]
    fn the_text_says_the_matching_and_each_change() {
        let diff = compare(&parsed(&report_json("one-process")), &parsed(&changed()));
        let text = diff_text(&diff, "before.json", "after.json", Lang::En);
        assert!(text.starts_with("comparing A = before.json with B = after.json ("), "{text}");
        for want in [
            "  process #1: pid 4242 in A, pid 5151 in B",
            "process #1 · GPU 0 (pid 4242 in A, pid 5151 in B):",
            "process #1 · GPU 0 · NVTX range \"epoch\" (pid 4242 in A, pid 5151 in B):",
            "process #1 · GPU 1: only in B",
        ] {
            assert!(text.lines().any(|l| l == want), "{want}\n{text}");
        }
        assert!(!text.contains("thresholds"), "{text}");
        assert_eq!(row(&text, "figure"), ["A", "B", "B", "−", "A", "B/A"]);
        assert_eq!(row(&text, "window time (ms)"), ["3.600", "1.800", "-1.800", "0.50"]);
        assert_eq!(row(&text, "bound (ms)"), ["2.100", "2.100", "0.000", "1.00"]);
        assert_eq!(row(&text, "measured over bound (x)"), ["1.71", "1.71", "0.00"]);
        assert_eq!(row(&text, "busy: copy in (ms)"), ["1.000", "1.000", "0.000", "1.00"]);
        assert_eq!(row(&text, "copies under compute (%)"), ["55", "55", "0"]);
        assert_eq!(row(&text, "collectives under compute (%)"), ["0", "0", "0"]);
        assert_eq!(row(&text, "collectives exposed (ms)"), ["0.400", "0.400", "0.000", "1.00"]);
        assert_eq!(row(&text, "finding pageable_copy: count"), ["1", "-", "-1"]);
        assert_eq!(row(&text, "finding pageable_copy: cost (ms)"), ["1.000", "-", "-1.000", "-"]);
        assert_eq!(row(&text, "finding idle_gap: count"), ["-", "2", "+2"]);
        assert_eq!(row(&text, "finding idle_gap: cost (ms)"), ["-", "0.250", "+0.250", "-"]);
        // The range's window: its occurrences and the work that ran while it was open.
        assert_eq!(row(&text, "times marked"), ["1", "1", "0"]);
        assert_eq!(
            row(&text, "ran while the range was open (ms)"),
            ["4.500", "4.500", "0.000", "1.00"]
        );
    }

    #[test]
    fn in_chinese_every_line_is_chinese() {
        let diff = compare(&parsed(&report_json("one-process")), &parsed(&changed()));
        let text = diff_text(&diff, "a.json", "b.json", Lang::Zh);
        for line in text.lines() {
            assert!(has_chinese(line), "{line}\n{text}");
            assert_eq!(english_sentence(line), None, "{line}");
        }
        // The columns line up under the heading, wide characters counted twice.
        let heading = text.lines().find(|l| l.ends_with(" B/A")).unwrap();
        let span = text.lines().find(|l| l.contains("窗口时间")).unwrap();
        assert_eq!(width(heading), width(span), "{text}");
    }

    #[test]
    fn a_file_that_is_no_report_is_named_in_one_line_with_exit_2() {
        let missing = Path::new("/no/such/report.json");
        let e = read_report(missing).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().starts_with("/no/such/report.json: cannot read it: "), "{e}");
        let not_json = temp("notjson", "overlap report (thresholds: ...)");
        let e = read_report(&not_json).unwrap_err();
        assert!(e.to_string().starts_with(&format!("{}: not JSON (", not_json.display())), "{e}");
        // A lesson's JSON report is JSON, but not a trace report.
        let lesson = temp("lesson", r#"{"lesson": "overlap", "checks": []}"#);
        let e = read_report(&lesson).unwrap_err();
        let want = format!(
            "{}: not a streamlab trace report (missing field `processes`",
            lesson.display()
        );
        assert!(e.to_string().starts_with(&want), "{e}");
        assert_eq!((e.exit_code(), e.to_string().lines().count()), (2, 1));
        let good = temp("good", &report_json("killed").to_string());
        assert_eq!(read_report(&good).unwrap().processes[0].pid, 777);
        for path in [not_json, lesson, good] {
            std::fs::remove_file(path).unwrap();
        }
    }

    #[test]
    fn the_help_teaches() {
        let help = command().render_long_help().to_string();
        for want in [
            "the GPUs its windows are on and its position among the report's processes",
            "only one report has",
            "streamlab trace --keep before/ --json before.json",
            "streamlab diff before.json after.json",
            "reports that differ are no error",
            "--json <FILE>",
            "--lang <LANG>",
        ] {
            assert!(help.contains(want), "{want}: {help}");
        }
        let m = command().try_get_matches_from(["diff", "a.json"]);
        assert!(m.is_err(), "B.json is required");
    }
}
