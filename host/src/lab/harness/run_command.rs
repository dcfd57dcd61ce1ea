//! `streamlab run <lesson>|all`: the selected lessons, their flags checked before the GPU is
//! touched, then each run (or its recorded run shown, `--recorded`) and printed as text or
//! JSON, with the exit code of what happened.
use std::process::ExitCode;

use clap::{ArgMatches, Args as _};

use crate::lab::harness::common::{Common, Rank, Resolved};
use crate::lab::harness::entry::Entry;
use crate::lab::record::recorded_runs::{self, RecordedRun};
use crate::lab::record::recorder;
use crate::lab::record::report::{Report, Verdict};
use crate::runtime::{Error, Gpu};
use crate::t;
use crate::text::{Lang, Text};

/// An error, and the lesson it happened in where there is one: what the error line names.
pub type Failure = (Error, Option<&'static str>);

/// The `run` subcommand: the common flags, then `all` and each of `lessons` with its own.
pub fn command(lessons: &[Entry]) -> clap::Command {
    let mut run = clap::Command::new("run")
        .about("Run one lesson by name, or `all`")
        .subcommand_required(true)
        .subcommand_value_name("LESSON")
        // `help` is not a lesson: `run <LESSON> --help` and `streamlab help run` stay.
        .disable_help_subcommand(true);
    run = Common::augment_args(run).subcommand(
        clap::Command::new("all").about("Every lesson with its defaults, in teaching order"),
    );
    for lesson in lessons {
        run = run.subcommand((lesson.command)());
    }
    run
}

/// Runs what `matches` (`run`'s) selects among `lessons`, as `rank` of a multi-process run
/// or alone; `json` prints reports as JSON.
pub fn run(
    lessons: &'static [Entry],
    matches: &ArgMatches,
    rank: Option<Rank>,
    json: bool,
) -> Result<ExitCode, Failure> {
    let common = Common::from_matches(matches).map_err(|e| (e, None))?;
    let all = matches!(matches.subcommand(), Some(("all", _)));
    // The selected lessons and their flags, all checked before the GPU is touched.
    let selected: Vec<(&'static Entry, ArgMatches)> = match matches.subcommand() {
        Some(("all", _)) => lessons
            .iter()
            .map(|l| {
                let defaults = (l.command)()
                    .try_get_matches_from([l.name])
                    .map_err(|e| (Error::Internal(e.to_string()), Some(l.name)))?;
                Ok((l, defaults))
            })
            .collect::<Result<_, Failure>>()?,
        Some((name, sub)) => {
            let entry = lessons
                .iter()
                .find(|l| l.name == name)
                .ok_or((Error::Internal(format!("unknown lesson {name}")), None))?;
            vec![(entry, sub.clone())]
        }
        None => return Err((Error::Internal("no lesson".into()), None)),
    };
    let single = selected.len() == 1;
    let lesson_named = single.then(|| selected[0].0.name);
    for (entry, matches) in &selected {
        (entry.check)(matches).map_err(|e| (e, Some(entry.name)))?;
    }
    // A missing folder for --trace or --svg is found now, not after minutes of GPU work.
    let resolved = common.resolve(all, rank).map_err(|e| (e, lesson_named))?;
    if resolved.recorded {
        let ignored = ignored_by_recorded(&resolved, &selected);
        if !ignored.is_empty() {
            let who = if single { selected[0].0.name } else { "all" };
            let ignored = ignored.join(", ");
            let line = t!("run.recorded_ignores", ignored).render(resolved.lang);
            eprintln!("streamlab: {who}: {line}");
        }
        let entries: Vec<&'static Entry> = selected.iter().map(|(e, _)| *e).collect();
        show_recorded(&entries, &resolved, json, &recorded_runs::find)?.print();
        return Ok(ExitCode::SUCCESS);
    }
    // A mistyped recorder is refused now, not noticed in a timeline after the run.
    recorder::check_recorder_setting().map_err(|e| (e, lesson_named))?;
    let gpu = Gpu::new(resolved.device).map_err(|e| {
        let name = if single { selected[0].0.name } else { "all" };
        let e = match e {
            Error::NoDevice(why) => {
                Error::NoDevice(t!("error.then", why, then = recorded_runs::hint(name)))
            }
            other => other,
        };
        (e, lesson_named)
    })?;
    let lang = resolved.lang;
    let mut reports = Vec::new();
    let mut tally = Tally { lessons: selected.len(), ..Tally::default() };
    let mut failure = None;
    for (entry, matches) in &selected {
        match (entry.run)(&gpu, matches, &resolved.settings_for(entry.name)) {
            Ok((report, wrote)) => {
                if !json {
                    println!("{}", report.to_text_in(lang));
                }
                say_wrote(entry.name, &wrote, lang);
                tally.add(&report);
                reports.push(report);
            }
            Err(Error::NotRun(why)) if !single => {
                // A lesson this machine cannot run (one GPU, no NCCL): say so and go on.
                tally.skipped += 1;
                if json {
                    let line = t!("run.not_run_why", why).render(lang);
                    eprintln!("streamlab: {}: {line}", entry.name);
                } else {
                    // The reason is a sentence of the catalogs, said in `lang` too.
                    let line = t!("run.not_run", lesson = entry.name, why);
                    println!("{}\n", line.render(lang));
                }
            }
            Err(e) => {
                // Stop (the context may be unusable after a CUDA error), but keep what ran.
                failure = Some((e, Some(entry.name)));
                break;
            }
        }
    }
    if json && !reports.is_empty() && failure.is_none() {
        let value =
            if single { serde_json::to_value(&reports[0]) } else { serde_json::to_value(&reports) };
        println!(
            "{}",
            serde_json::to_string_pretty(&value.unwrap_or_default()).unwrap_or_default()
        );
    }
    if let Some(f) = failure {
        if json && !reports.is_empty() {
            // What ran before the failure, then the error object the caller prints.
            println!("{}", serde_json::to_string_pretty(&reports).unwrap_or_default());
        }
        return Err(f);
    }
    if !json && !single {
        println!("{}", tally.line(false).render(lang));
    }
    let failed: Vec<&str> =
        reports.iter().filter(|r| !r.passed()).map(|r| r.lesson.as_str()).collect();
    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        let lessons = failed.join(", ");
        Err((Error::Verification(t!("error.run.checks_failed", lessons)), None))
    }
}

/// Says on stderr, a line each, what `--trace` and `--svg` wrote for `lesson`, in `lang`.
fn say_wrote(lesson: &str, wrote: &[Text], lang: Lang) {
    for note in wrote {
        eprintln!("streamlab: {lesson}: {}", note.render(lang));
    }
}

/// What `run all` did, for its last line: lessons run (or shown) and skipped, and their
/// checks by verdict.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Tally {
    pub lessons: usize,
    pub done: usize,
    pub skipped: usize,
    pub passed: usize,
    pub not_asserted: usize,
    pub failed: usize,
}

impl Tally {
    fn add(&mut self, report: &Report) {
        self.done += 1;
        for c in &report.checks {
            match c.verdict {
                Verdict::Passed => self.passed += 1,
                Verdict::NotAsserted => self.not_asserted += 1,
                Verdict::Failed => self.failed += 1,
            }
        }
    }

    /// "== all: 20 of 20 lessons run, 0 not run; checks: 61 passed, 2 not asserted, 0
    /// failed" (or the recorded runs shown, and their checks as recorded).
    pub fn line(&self, recorded: bool) -> Text {
        let n = |v: usize| v.to_string();
        let (lessons, done, skipped) = (n(self.lessons), n(self.done), n(self.skipped));
        let (passed, not_asserted, failed) = (n(self.passed), n(self.not_asserted), n(self.failed));
        match recorded {
            false => t!("run.summary", lessons, done, skipped, passed, not_asserted, failed),
            true => {
                t!("run.summary_recorded", lessons, done, skipped, passed, not_asserted, failed)
            }
        }
    }
}

/// How `--recorded` finds a lesson's embedded run ([`recorded_runs::find`]; tests hide some).
pub type FindRecorded<'a> = &'a dyn Fn(&str) -> Option<crate::runtime::Result<RecordedRun>>;

/// What a command prints, assembled before it is printed: stdout's text, and stderr's
/// lines.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Printed {
    pub stdout: String,
    pub stderr: Vec<String>,
}

impl Printed {
    fn print(&self) {
        print!("{}", self.stdout);
        for line in &self.stderr {
            eprintln!("{line}");
        }
    }
}

/// The flags on the command line that a recorded run cannot honour (it was measured with
/// its own): `--reps`, `--seed`, `--device` and the lesson's own flags.
fn ignored_by_recorded(
    resolved: &Resolved,
    selected: &[(&'static Entry, ArgMatches)],
) -> Vec<String> {
    use clap::parser::ValueSource;
    let given = |m: &ArgMatches, id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
    let mut ignored: Vec<String> = resolved.given.iter().map(|id| format!("--{id}")).collect();
    for (entry, matches) in selected {
        for arg in (entry.command)().get_arguments() {
            if let Some(long) = arg.get_long().filter(|_| given(matches, arg.get_id().as_str())) {
                ignored.push(format!("--{long}"));
            }
        }
    }
    ignored
}

/// `--recorded`: the embedded runs of `lessons`, labelled, instead of running them. A lesson
/// this build embeds no run of is handled as `run all` handles one this machine cannot run:
/// named alone, it is an error (exit 3); in `run all` it is skipped with a line saying so (on
/// stdout with the text, on stderr with `--json`, whose stdout stays one JSON array) and
/// counted in the last line.
pub fn show_recorded(
    lessons: &[&'static Entry],
    resolved: &Resolved,
    json: bool,
    find: FindRecorded<'_>,
) -> Result<Printed, Failure> {
    let single = lessons.len() == 1;
    let lang = resolved.lang;
    let mut printed = Printed::default();
    let mut reports = Vec::new();
    let mut tally = Tally { lessons: lessons.len(), ..Tally::default() };
    for entry in lessons {
        let run = match find(entry.name) {
            Some(run) => run.map_err(|e| (e, Some(entry.name)))?,
            None if single => {
                let why = match recorded_runs::lessons() {
                    have if have.is_empty() => t!("error.run.no_recording_at_all"),
                    have => t!("error.run.no_recording", have = have.join(", ")),
                };
                return Err((Error::NotRun(why), Some(entry.name)));
            }
            None => {
                tally.skipped += 1;
                match json {
                    true => {
                        let line = t!("recorded.not_shown").render(lang);
                        printed.stderr.push(format!("streamlab: {}: {line}", entry.name));
                    }
                    false => {
                        let line = t!("recorded.none", lesson = entry.name).render(lang);
                        printed.stdout.push_str(&format!("{line}\n\n"));
                    }
                }
                continue;
            }
        };
        let settings = resolved.settings_for(entry.name);
        // JSON stays English whatever the language: scripts read the same fields.
        let shown = if json { Lang::En } else { lang };
        let files = (settings.trace.as_ref(), settings.svg.as_ref());
        let (report, wrote) = recorded_runs::show_in(&run, (shown, lang), &entry.drawing, files)
            .map_err(|e| (e, Some(entry.name)))?;
        if !json {
            let text = format!("{}\n{}\n", run.header(lang), report.to_text_in(lang));
            printed.stdout.push_str(&text);
        }
        let said = wrote.iter().map(|w| format!("streamlab: {}: {}", entry.name, w.render(lang)));
        printed.stderr.extend(said);
        tally.add(&report);
        reports.push(report);
    }
    if json {
        let value = match single {
            true => serde_json::to_value(&reports[0]),
            false => serde_json::to_value(&reports),
        };
        let text = serde_json::to_string_pretty(&value.unwrap_or_default()).unwrap_or_default();
        printed.stdout.push_str(&format!("{text}\n"));
    } else if !single {
        printed.stdout.push_str(&format!("{}\n", tally.line(true).render(lang)));
    }
    // The checks are the recorded run's: a recorded failure is shown, not re-raised here.
    Ok(printed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::record::drawing::Drawing;

    /// A registry entry that is only a name and a flagless command: `--recorded` needs
    /// nothing else.
    macro_rules! named {
        ($name:literal) => {
            Entry {
                name: $name,
                summary: "",
                command: || clap::Command::new($name),
                check: |_| Ok(()),
                run: |_, _, _| Err(Error::Internal("not run in these tests".into())),
                drawing: Drawing::PLAIN,
            }
        };
    }
    static OVERLAP: Entry = named!("overlap");
    static P2P: Entry = named!("p2p");

    /// `run <all|overlap> <flags>`, its common flags resolved as the command line would.
    fn resolved(all: bool, flags: &[&str]) -> Resolved {
        let lesson = if all { "all" } else { "overlap" };
        let argv: Vec<&str> =
            ["run"].into_iter().chain(flags.iter().copied()).chain([lesson]).collect();
        let entries = [named!("overlap")];
        let matches = command(&entries).try_get_matches_from(argv).unwrap();
        Common::from_matches(&matches).unwrap().resolve(all, None).unwrap()
    }

    /// The embedded runs, with p2p's hidden: a build that has no recording of it.
    fn without_p2p(name: &str) -> Option<crate::runtime::Result<RecordedRun>> {
        (name != "p2p").then(|| recorded_runs::find(name)).flatten()
    }

    #[test]
    fn a_missing_recording_is_skipped_in_all_and_counted_in_text_and_json() {
        assert!(recorded_runs::find("overlap").is_some(), "the build embeds overlap's run");
        let all = [&OVERLAP, &P2P];
        let text = show_recorded(&all, &resolved(true, &["--recorded"]), false, &without_p2p)
            .unwrap_or_else(|(e, _)| panic!("{e}"));
        assert!(text.stderr.is_empty(), "{:?}", text.stderr);
        let said = "== p2p: not shown: this build embeds no recorded run of it";
        assert!(text.stdout.contains(said), "{}", text.stdout);
        let last = text.stdout.lines().last().unwrap();
        assert!(
            last.starts_with(
                "== all: 1 of 2 recorded runs shown, 1 not shown; their checks as recorded: "
            ),
            "{last}"
        );
        let json = show_recorded(&all, &resolved(true, &["--recorded"]), true, &without_p2p)
            .unwrap_or_else(|(e, _)| panic!("{e}"));
        assert_eq!(
            json.stderr,
            ["streamlab: p2p: not shown: this build embeds no recorded run of it"]
        );
        let reports: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
        let shown: Vec<&str> =
            reports.as_array().unwrap().iter().map(|r| r["lesson"].as_str().unwrap()).collect();
        assert_eq!(shown, ["overlap"], "stdout stays one JSON array of what was shown");
    }

    #[test]
    fn a_missing_recording_named_alone_is_an_error_exit_3() {
        for json in [false, true] {
            let r = show_recorded(&[&P2P], &resolved(false, &["--recorded"]), json, &without_p2p);
            let (e, lesson) = r.unwrap_err();
            assert_eq!((e.exit_code(), lesson), (3, Some("p2p")));
            assert!(e.to_string().starts_with("this build embeds no recorded run of it (it has: "));
        }
    }

    #[test]
    fn the_summary_counts_lessons_and_checks() {
        let mut tally = Tally { lessons: 3, skipped: 1, ..Tally::default() };
        let mut report = Report::new("overlap", "t", "GPU");
        report.checks = [Verdict::Passed, Verdict::Passed, Verdict::NotAsserted, Verdict::Failed]
            .into_iter()
            .map(|verdict| crate::lab::record::report::Check {
                name: "c".into(),
                verdict,
                detail: String::new(),
                text: None,
                claim: false,
            })
            .collect();
        tally.add(&report);
        tally.add(&Report::new("basics", "t", "GPU"));
        assert_eq!(
            tally.line(false).en(),
            "== all: 2 of 3 lessons run, 1 not run; checks: 2 passed, 1 not asserted, 1 failed"
        );
        let zh = tally.line(true).render(Lang::Zh);
        assert!(zh.contains("3 课中显示了 2 次录制运行") && zh.contains("1 项失败"), "{zh}");
    }
}
