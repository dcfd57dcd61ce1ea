//! The harness: how every lesson is measured, checked and reported.
//!
//! 1. The plan is checked against the budget (host and device memory, time per repeat).
//! 2. `setup` allocates everything once.
//! 3. One warm-up run of each version (module load, first touch and clock ramp stay out of
//!    the figures), then `--reps` rounds that run every version once each, interleaved, so
//!    clock or thermal drift affects them all alike. Every figure is a median over the rounds.
//! 4. With `--timeline`, `--trace` or `--svg`, one more run of the first two versions,
//!    recorded stream by stream ([`record`](crate::lab::record): CUPTI's activity records,
//!    else events), each after a recorded warm-up run that is thrown away (CUPTI is turned on once for these
//!    runs), then the second version with the recorder off and on, interleaved: what
//!    recording costs.
//! 5. The lesson's checks, then its figures and interpretation; the report; the trace and
//!    picture files ([`output`]); the exit code (5 when a check failed).
pub mod args;
pub mod budget;
pub mod checks;
pub mod cli_errors;
pub mod common;
pub mod data;
pub mod entry;
pub mod info_command;
pub mod lesson;
pub mod list_command;
pub mod measured;
pub mod run_command;
pub mod stats;

use clap::{Args as _, FromArgMatches as _};

use crate::lab::harness::budget::WorkModel;
use crate::lab::harness::checks::Checks;
use crate::lab::harness::lesson::Lesson;
use crate::lab::harness::stats::Stats;
use crate::lab::record::drawing::Origin;
use crate::lab::record::output::{self, Cost};
use crate::lab::record::picture::command_line;
use crate::lab::record::recorder;
use crate::lab::record::report::{Check, Report, LOADED_PTX};
use crate::lab::record::span::{Recording, Span};
use crate::runtime::{Error, Gpu, Result, Stream};
use crate::t;
use crate::text::Text;

/// What a lesson runs with: the common flags, resolved for it ([`common`]).
pub use common::Settings;
pub use measured::{Measured, Sample, VersionStats};

/// Everything one run of a lesson produced, typed: tests read `measured` and `checks`
/// directly, and `lesson` holds whatever the lesson kept for its explanation.
pub struct Outcome<L> {
    pub lesson: L,
    pub measured: Measured,
    pub checks: Vec<Check>,
    /// Each recorded version's name and device spans (empty unless recorded).
    pub timeline: Vec<(String, Vec<Span>)>,
    /// The recorded runs, whole: spans, host spans, flows, their source and their sample.
    pub recordings: Vec<Recording>,
    /// What recording cost, when the runs were recorded.
    pub cost: Option<Cost>,
    pub report: Report,
    /// What `--trace` and `--svg` wrote, a note per flag ("--svg wrote o.svg").
    pub wrote: Vec<Text>,
}

impl<L> Outcome<L> {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(Check::passed)
    }

    /// Whether every check of a result passed: bits, the CPU reference, orders; the claims
    /// about speed ([`Check::claim`]) left out. What a test of results asserts.
    pub fn results_right(&self) -> bool {
        self.checks.iter().filter(|c| !c.claim).all(Check::passed)
    }
}

fn run_version<L: Lesson>(lesson: &mut L, gpu: &Gpu, index: usize) -> Result<Sample> {
    let sample = lesson.version(gpu, index)?;
    if sample.ms.is_nan() {
        return Err(Error::Internal(format!("{}: version {index} timed NaN", L::NAME)));
    }
    Ok(sample)
}

/// Runs lesson `L` with `args` on `gpu`: budget, setup, warm-up, interleaved repeats,
/// timeline, checks, report.
pub fn run<L: Lesson>(gpu: &Gpu, args: &L::Args, settings: &Settings) -> Result<Outcome<L>> {
    let names = L::versions(args);
    if names.len() < 2 {
        return Err(Error::Internal(format!("{} has fewer than two versions", L::NAME)));
    }
    L::plan(args, &WorkModel::for_device(&gpu.info))?.admit(Some(gpu))?;
    let mut lesson = L::setup(gpu, args, settings.seed)?;

    for v in 0..names.len() {
        run_version(&mut lesson, gpu, v)?;
    }
    let mut runs: Vec<Vec<Sample>> = vec![Vec::new(); names.len()];
    for _ in 0..settings.reps.max(1) {
        for (v, samples) in runs.iter_mut().enumerate() {
            samples.push(run_version(&mut lesson, gpu, v)?);
        }
    }
    let parts_agree = runs.iter().all(|s| s.iter().all(|x| x.parts.len() == s[0].parts.len()));
    if !parts_agree {
        return Err(Error::Internal(format!(
            "{}: a version's parts changed between runs",
            L::NAME
        )));
    }
    let measured = Measured::from_samples(names.clone(), runs);

    let (recordings, cost) = if settings.records() {
        let streams: Vec<Stream> = lesson.streams().iter().map(|s| s.handle()).collect();
        let observed: Vec<&Stream> = streams.iter().collect();
        let drawn = lesson.drawn();
        let mut run = |v| {
            let s = run_version(&mut lesson, gpu, v)?;
            Ok((s.ms, s.parts.iter().map(|(n, x)| (n.to_string(), *x)).collect()))
        };
        let (r, c) = recorder::versions(gpu, &observed, &names, &drawn, settings.reps, &mut run)?;
        let cost = Cost {
            off_ms: Stats::of(&c.off_ms).median,
            on_ms: Stats::of(&c.on_ms).median,
            rounds: c.off_ms.len(),
            version: c.version,
            recorder: c.recorder,
        };
        (r, Some(cost))
    } else {
        (Vec::new(), None)
    };
    let timeline = recordings.iter().map(|r| (r.version.clone(), r.spans.clone())).collect();

    let mut checks = Checks::default();
    lesson.verify(gpu, &measured, &mut checks)?;

    let mut report = Report::new(L::NAME, L::SUMMARY, &gpu.info.name);
    let ptx = serde_json::json!({ "arch": gpu.info.ptx_arch, "choice": gpu.info.ptx_choice });
    report.detail(LOADED_PTX, ptx);
    if let Ok(serde_json::Value::Object(params)) = serde_json::to_value(args) {
        // Which parameters are the lesson's flags (the others a lesson adds are derived):
        // what a picture's footer may print as a command line.
        report.detail("flags", params.keys().collect::<Vec<_>>());
        for (k, v) in params {
            report.param(&k, v);
        }
    }
    report.param("reps", settings.reps).param("seed", settings.seed);
    for v in &measured.versions {
        report.figure(&format!("{}, median", v.name), v.time.median, "ms");
    }
    if L::SPEEDUP {
        report.figure("speed-up (first / second)", measured.speedup(), "x");
    }
    lesson.explain(&measured, &mut report);
    report.detail("versions", &measured.versions);
    // Kept in the report as `details.plot`, and drawn beside the picture as it is.
    let plot = lesson.plot(&measured);
    if let Some(plot) = &plot {
        report.detail("plot", plot);
    }
    output::report(&mut report, &recordings, cost.as_ref(), settings.timeline);
    report.checks = checks.items.clone();
    let (device, date, version) =
        (report.device.clone(), output::today(), env!("CARGO_PKG_VERSION").to_string());
    let origin = Origin {
        command: command_line(&report),
        provenance: t!("output.measured", device, date, version),
    };
    let files = (settings.trace.as_ref(), settings.svg.as_ref());
    let drawing = &L::DRAWING;
    let wrote =
        output::write(&report, &recordings, plot.as_ref(), drawing, files, &origin, settings.lang)?;
    Ok(Outcome {
        lesson,
        measured,
        checks: checks.items,
        timeline,
        recordings,
        cost,
        report,
        wrote,
    })
}

/// The `streamlab run <lesson>` subcommand: the lesson's own flags under its name.
pub fn command<L: Lesson>() -> clap::Command {
    L::Args::augment_args(
        clap::Command::new(L::NAME).about(L::SUMMARY).allow_negative_numbers(true),
    )
}

fn parse<L: Lesson>(matches: &clap::ArgMatches) -> Result<L::Args> {
    L::Args::from_arg_matches(matches).map_err(|e| {
        // clap checked these flags already: its error here has no context to word it by,
        // only its English line.
        let text = e.to_string();
        let first = text.lines().next().unwrap_or("invalid arguments");
        let why = first.trim_start_matches("error: ").to_string();
        Error::InvalidInput(t!("error.args.not_parsed", why))
    })
}

/// Parses the flags and checks them against the budget with an H100's model, no GPU.
pub fn check_matches<L: Lesson>(matches: &clap::ArgMatches) -> Result<()> {
    let args = parse::<L>(matches)?;
    L::plan(&args, &WorkModel::H100)?.admit(None)
}

/// Parses the flags and runs the lesson: the report the CLI prints, and what `--trace` and
/// `--svg` wrote.
pub fn run_matches<L: Lesson>(
    gpu: &Gpu,
    matches: &clap::ArgMatches,
    settings: &Settings,
) -> Result<entry::Ran> {
    let args = parse::<L>(matches)?;
    let outcome = run::<L>(gpu, &args, settings)?;
    Ok((outcome.report, outcome.wrote))
}

/// Lesson `L`'s flags as given on a command line (without the lesson's name), or the
/// defaults for an empty list: for tests and benches.
pub fn args_from<L: Lesson>(flags: &[&str]) -> Result<L::Args> {
    let matches = command::<L>()
        .try_get_matches_from(std::iter::once(L::NAME).chain(flags.iter().copied()))
        .map_err(|e| {
            let command = format!("streamlab run {}", L::NAME);
            Error::InvalidInput(cli_errors::clap_error_line(&e, &command, &[]))
        })?;
    parse::<L>(&matches)
}
