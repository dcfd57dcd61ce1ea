//! `streamlab run <lesson>|all`: the selected lessons, their flags checked before the GPU is
//! touched, then each run (or its recorded run shown, `--recorded`) and printed as text or
//! JSON, with the exit code of what happened.
use std::process::ExitCode;

use clap::{ArgMatches, Args as _};

use crate::lab::harness::common::{Common, Rank, Resolved};
use crate::lab::harness::entry::Entry;
use crate::lab::record::{recorded_runs, recorder};
use crate::lab::text::{Lang, Text};
use crate::runtime::{Error, Gpu};
use crate::t;

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
            eprintln!(
                "streamlab: {who}: --recorded shows the recorded run with its own parameters; ignored: {}",
                ignored.join(", ")
            );
        }
        return show_recorded(&selected, &resolved, json);
    }
    // A mistyped recorder is refused now, not noticed in a timeline after the run.
    recorder::check_recorder_setting().map_err(|e| (e, lesson_named))?;
    let gpu = Gpu::new(resolved.device).map_err(|e| {
        let name = if single { selected[0].0.name } else { "all" };
        let e = match e {
            Error::NoDevice(why) => {
                Error::NoDevice(format!("{why}; {}", recorded_runs::hint(name)))
            }
            other => other,
        };
        (e, lesson_named)
    })?;
    let lang = resolved.lang;
    let mut reports = Vec::new();
    let mut failure = None;
    for (entry, matches) in &selected {
        match (entry.run)(&gpu, matches, &resolved.settings_for(entry.name)) {
            Ok(report) => {
                if !json {
                    println!("{}", report.to_text_in(lang));
                }
                reports.push(report);
            }
            Err(Error::NotRun(why)) if !single => {
                // A lesson this machine cannot run (one GPU, no NCCL): say so and go on.
                if json {
                    eprintln!("streamlab run all: {}: not run: {why}", entry.name);
                } else {
                    // A label, so the reasons zh::LABELS knows are translated.
                    let line = t!("run.not_run", lesson = entry.name, why = Text::label(why));
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
    let failed: Vec<&str> =
        reports.iter().filter(|r| !r.passed()).map(|r| r.lesson.as_str()).collect();
    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err((Error::Verification(format!("checks failed in: {}", failed.join(", "))), None))
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

/// `--recorded`: the embedded runs of the selected lessons, labelled, instead of running.
fn show_recorded(
    selected: &[(&'static Entry, ArgMatches)],
    resolved: &Resolved,
    json: bool,
) -> Result<ExitCode, Failure> {
    let single = selected.len() == 1;
    let lang = resolved.lang;
    let mut reports = Vec::new();
    for (entry, _) in selected {
        let run = match recorded_runs::find(entry.name) {
            Some(run) => run.map_err(|e| (e, Some(entry.name)))?,
            None if single => {
                let have = recorded_runs::lessons();
                let why = if have.is_empty() {
                    "no recorded run embedded for this lesson (this build embeds none)".to_string()
                } else {
                    format!(
                        "no recorded run embedded for this lesson (this build has: {})",
                        have.join(", ")
                    )
                };
                return Err((Error::InvalidInput(why), Some(entry.name)));
            }
            None => {
                if !json {
                    println!("{}\n", t!("recorded.none", lesson = entry.name).render(lang));
                }
                continue;
            }
        };
        let settings = resolved.settings_for(entry.name);
        // JSON stays English whatever the language: scripts read the same fields.
        let shown = if json { Lang::En } else { lang };
        let files = (settings.trace.as_ref(), settings.svg.as_ref());
        let report = recorded_runs::show_in(&run, shown, &entry.drawing, files)
            .map_err(|e| (e, Some(entry.name)))?;
        if !json {
            println!("{}", run.header(lang));
            println!("{}", report.to_text_in(lang));
        }
        reports.push(report);
    }
    if json {
        let value =
            if single { serde_json::to_value(&reports[0]) } else { serde_json::to_value(&reports) };
        println!(
            "{}",
            serde_json::to_string_pretty(&value.unwrap_or_default()).unwrap_or_default()
        );
    }
    // The checks are the recorded run's: a recorded failure is shown, not re-raised here.
    Ok(ExitCode::SUCCESS)
}
