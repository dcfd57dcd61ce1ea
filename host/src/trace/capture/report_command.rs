//! `streamlab report DIR`: a trace folder kept by `streamlab trace --keep DIR` analysed
//! again, with any thresholds, in any language, drawn or written as JSON. It runs nothing
//! and needs no GPU and no driver. For the same files and thresholds it says what the trace
//! did: the trace command leaves the program's command line and ending in the folder
//! (`present::RunFile`), and both commands show the analysis through `present`.
use std::path::{Path, PathBuf};

use clap::{ArgMatches, Args as _, FromArgMatches as _};

use crate::runtime::{Error, Result};
use crate::t;
use crate::trace::capture::analysis::analyse_ranges;
use crate::trace::capture::flags::{OutputFlags, ThresholdFlags};
use crate::trace::capture::present::{present, Output, RunFile};
use crate::trace::inspect::findings::Thresholds;
use crate::trace::read::reader::trace_files;

const ABOUT: &str = "\
Analyses the recorder's files that `streamlab trace --keep DIR` kept, again: the same report \
the trace printed, with the thresholds and language given here, and the picture, the \
Perfetto trace and the JSON report written from them. Nothing runs: no GPU and no CUDA \
driver is needed, so a folder from a GPU machine can be read anywhere.

DIR holds one <pid>.jsonl per traced process (and, where the recorder kept the last \
records or a sample, its segments <pid>.<seq>.jsonl), and the trace command's \
streamlab-trace.json: the program's command line, how it ended and what tracing cost, \
which the header repeats. Without that file the header names the first process's command \
line and says nothing of the ending.

Exit codes: 0 the report was made; 2 invalid arguments, DIR missing or holding no trace \
files, or a file that cannot be written; 70 an internal error.";

const EXAMPLES: &str = "\
Examples:
  streamlab trace --keep raw/ -- python train.py      record once (on the GPU machine)
  streamlab report raw/                               the same report again, anywhere
  streamlab report raw/ --idle-gap-ms 1 --json r.json other thresholds, as JSON
  streamlab report raw/ --svg t.svg --trace t.json    the picture and the Perfetto trace
  streamlab report raw/ --svg t.svg --svg-range step:3
                                                      the third NVTX range \"step\" only
  streamlab report raw/ --svg t.svg --svg-range all   the whole run, start-up included
  streamlab report raw/ --lang zh                     the report in Chinese (中文)";

// The flags of `report` (`//`, not `///`: clap would make a doc comment the command's about).
#[derive(clap::Args, Debug, Clone)]
pub struct ReportFlags {
    #[arg(
        value_name = "DIR",
        help = "The folder `streamlab trace --keep DIR` kept: one <pid>.jsonl per process"
    )]
    pub dir: PathBuf,
    #[command(flatten)]
    pub output: OutputFlags,
    #[command(flatten)]
    pub thresholds: ThresholdFlags,
}

/// The `report` subcommand.
pub fn command() -> clap::Command {
    let report = clap::Command::new("report")
        .about(
            "Report again on a trace folder kept by `streamlab trace --keep DIR` (no GPU needed)",
        )
        .long_about(ABOUT)
        .after_help(EXAMPLES);
    ReportFlags::augment_args(report)
}

/// `DIR`, refused where it is no trace folder.
fn check_dir(dir: &Path) -> Result<()> {
    let path = dir.display().to_string();
    if !dir.is_dir() {
        return Err(Error::InvalidInput(match dir.exists() {
            true => t!("error.report.a_file", path),
            false => t!("error.report.no_such_folder", path),
        }));
    }
    let files = trace_files(dir).map_err(Error::InvalidInput)?;
    if files.is_empty() {
        return Err(Error::InvalidInput(t!("error.report.no_trace_files", path)));
    }
    Ok(())
}

/// `streamlab report` with `matches` (the subcommand's): the exit code to use.
pub fn run(matches: &ArgMatches) -> Result<i32> {
    let flags =
        ReportFlags::from_arg_matches(matches).map_err(|e| Error::Internal(e.to_string()))?;
    let output = flags.output.output()?;
    check_dir(&flags.dir)?;
    report_dir(&flags.dir, &flags.thresholds.thresholds(), &flags.thresholds.ranges, &output)?;
    Ok(0)
}

/// The report on the trace folder `dir`, shown as `output` asks.
pub fn report_dir(
    dir: &Path,
    thresholds: &Thresholds,
    ranges: &[String],
    output: &Output,
) -> Result<()> {
    let analysis = analyse_ranges(dir, thresholds, ranges)
        .map_err(|why| Error::InvalidInput(t!("error.report.reading_folder", why)))?;
    let run = RunFile::read(dir);
    let command = match &run {
        Some(run) => run.command.clone(),
        None => analysis.capture.processes.first().map(|p| p.args.clone()).unwrap_or_default(),
    };
    let ended = run.as_ref().map(|r| r.ended);
    let cost = run.as_ref().and_then(|r| r.cost);
    let cupti = run.as_ref().map(|r| (r.cupti.clone(), r.cupti_version));
    present(&analysis, &command, ended, cost, cupti, output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::read::reader_tests::testdata;

    fn parse(args: &[&str]) -> std::result::Result<ReportFlags, clap::Error> {
        let m = command()
            .try_get_matches_from(std::iter::once("report").chain(args.iter().copied()))?;
        Ok(ReportFlags::from_arg_matches(&m).unwrap())
    }

    #[test]
    fn the_folder_is_checked_before_anything_is_read() {
        let flags = parse(&["some/dir", "--idle-gap-ms", "2", "--lang", "zh"]).unwrap();
        assert_eq!(flags.dir, PathBuf::from("some/dir"));
        assert_eq!(flags.thresholds.thresholds().idle_gap_ms, 2.0);
        assert!(parse(&[]).is_err(), "DIR is required");
        let e = parse(&["d", "--late-rank-ms", "-1"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation);
        let missing = check_dir(Path::new("/no/such/folder")).unwrap_err();
        assert_eq!(
            (missing.exit_code(), missing.to_string()),
            (2, "/no/such/folder: no such folder".to_string())
        );
        // Said in the language asked for.
        let zh = missing.render(crate::text::Lang::Zh);
        assert_eq!(zh, "/no/such/folder：没有这个文件夹");
        let empty =
            std::env::temp_dir().join(format!("streamlab-report-empty-{}", std::process::id()));
        std::fs::create_dir_all(&empty).unwrap();
        let e = check_dir(&empty).unwrap_err();
        assert!(e.to_string().contains("holds no trace files"), "{e}");
        std::fs::remove_dir_all(&empty).unwrap();
        check_dir(&testdata("one-process")).unwrap();
    }

    /// `--svg-range` draws the picture `--svg` names, and a bad one is refused before anything
    /// is read, in one line (exit 2).
    #[test]
    fn the_svg_range_is_read_and_checked_with_the_flags() {
        use crate::trace::capture::svg_range::SvgRange;
        let flags = parse(&["d", "--svg", "t.svg", "--svg-range", "step:2-4"]).unwrap();
        let range = SvgRange::Range { name: "step".into(), first: 2, last: Some(4) };
        assert_eq!(flags.output.svg_range, Some(range.clone()));
        assert_eq!(flags.output.output().unwrap().svg_range, range);
        let plain = parse(&["d", "--svg", "t.svg"]).unwrap().output.output().unwrap();
        assert_eq!(plain.svg_range, SvgRange::Steady);
        let e = parse(&["d", "--svg", "t.svg", "--svg-range", "step:0"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation);
        // clap's first line, which streamlab's one error line is made of.
        let text = e.to_string();
        let line = text.lines().next().unwrap_or_default();
        assert!(line.contains("step:0") && line.contains("counted from 1"), "{text}");
        let e = parse(&["d", "--svg-range", "step"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::MissingRequiredArgument);
        // The help says the arrows' cap as the code has it.
        let help = command().render_long_help().to_string();
        let cap = crate::trace::capture::recordings::MAX_LAUNCH_FLOWS;
        assert!(help.contains(&format!("at most {cap} a process")), "{help}");
    }

    #[test]
    fn the_help_teaches() {
        let help = command().render_long_help().to_string();
        for want in [
            "--keep DIR",
            "no GPU",
            "streamlab-trace.json",
            "[default: 0.1]",
            "--json",
            "--svg-range",
        ] {
            assert!(help.contains(want), "{want}: {help}");
        }
    }
}
