//! The `streamlab` command: device facts, the list of lessons, running them, and tracing any
//! CUDA program. It parses, dispatches and exits; each command lives in its room, its flags
//! beside it: `lab::harness` (`info_command`, `list_command`, `run_command`), `lab::ddp`
//! (`launch`), `trace::capture` (`trace`, `report`, `diff`).
use std::process::ExitCode;

use clap::{ArgMatches, Command};
use streamlab::lab::ddp::launcher;
use streamlab::lab::ddp::ranks;
use streamlab::lab::harness::cli_errors::{clap_error_line, command_path, lesson_named};
use streamlab::lab::harness::common::Rank;
use streamlab::lab::harness::info_command::{self, InfoFlags};
use streamlab::lab::harness::list_command::{self, ListFlags};
use streamlab::lab::harness::run_command::{self, Failure};
use streamlab::lessons::LESSONS;
use streamlab::text::Lang;
use streamlab::trace::capture::command as trace_command;
use streamlab::trace::capture::diff_command;
use streamlab::trace::capture::report_command;
use streamlab::Error;

const AFTER_HELP: &str = "\
Examples:
  streamlab info                              what this GPU can overlap
  streamlab list                              every lesson, in teaching order
  streamlab run overlap                       one stream vs 8 streams, verified and explained
  streamlab run overlap --streams 4 --help    the lesson's own flags, defaults and ranges
  streamlab run overlap --timeline            ... and draw what each stream did when
  streamlab run overlap --trace t.json        ... as a trace for ui.perfetto.dev
  streamlab run overlap --svg overlap.svg     ... as a picture (sync and async on one time scale)
  streamlab run overlap --recorded            a run recorded on a real GPU (no GPU needed)
  streamlab run all --json > runs.json        every lesson, machine-readable
  streamlab launch --gpus 2 run allreduce-overlap
                                              one process per GPU, meeting through NCCL
  streamlab run all --lang zh                 every lesson, explained in Chinese (中文)
  streamlab trace -- python train.py          any CUDA program's streams, recorded and
                                              reported on (see streamlab trace --help)
  streamlab report raw/                       a folder `trace --keep raw/` kept, reported
                                              on again (no GPU needed)
  streamlab diff before.json after.json       two JSON reports of trace, before and after
                                              a fix, window by window

Exit codes:
  0  success, every check passed (or honestly not asserted)
  2  invalid arguments (found before any buffer is allocated or lesson run)
  3  no CUDA device (no driver library, or cuInit or the device count says no), or the
     lesson needs what this machine lacks (a second GPU, NCCL), or with --recorded this
     build embeds no run of it; `run all` skips those, saying so, and ends with the totals
  4  a CUDA call failed (the message names the call and the stream)
  5  a result check failed (async differs from sync, or the GPU from the CPU)
  70 an internal error (a bug in streamlab: please report it)
  launch: the first failing rank's own code, or 128+N when signal N killed it (137: SIGKILL);
     130 or 143 when the launcher itself got SIGINT (Ctrl-C) or SIGTERM; a rank whose
     launcher is gone ends by SIGHUP (129)

Errors are one line on stderr: `streamlab: <lesson>: <what>` where it concerns one lesson,
else `streamlab: <what>`; with --json also a JSON object on stdout.";

fn cli() -> Command {
    Command::new("streamlab")
        .version(env!("CARGO_PKG_VERSION"))
        .about("CUDA streams and concurrency, taught and measured from Rust")
        .long_about(
            "Runs each overlap technique of the CUDA streams literature on your GPU: the version \
without the technique and the version with it, checked bit for bit against each other and \
against the CPU, timed with CUDA events (medians over --reps), and explained.",
        )
        .after_help(AFTER_HELP)
        .subcommand_required(true)
        .subcommand(info_command::command())
        .subcommand(list_command::command())
        .subcommand(run_command::command(LESSONS))
        .subcommand(launcher::command())
        .subcommand(trace_command::command())
        .subcommand(report_command::command())
        .subcommand(diff_command::command())
}

fn main() -> ExitCode {
    // A panic is a bug: one line and exit 70, like every other error, without a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        // A reader that stops early (`streamlab run all | head`) closes the pipe: not a bug.
        if message.contains("Broken pipe") {
            std::process::exit(0);
        }
        let at =
            info.location().map(|l| format!(" at {}:{}", l.file(), l.line())).unwrap_or_default();
        let argv: Vec<String> = std::env::args().collect();
        let bug = Error::Internal(format!("{message}{at}"));
        eprintln!("streamlab: {}", bug.render(error_lang(&argv)));
        std::process::exit(70);
    }));
    let argv: Vec<String> = std::env::args().collect();
    let (json, lang) = (errors_as_json(&argv), error_lang(&argv));
    let matches = match cli().try_get_matches_from(&argv) {
        Ok(m) => m,
        // --help and --version are not errors: clap prints them as usual.
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let line = clap_error_line(&e, &command_path(&argv, LESSONS), LESSONS);
            return fail(&Error::InvalidInput(line), lesson_named(&argv, LESSONS), json, lang);
        }
    };
    match execute(&matches, json) {
        Ok(code) => code,
        Err((e, lesson)) => fail(&e, lesson, json, lang),
    }
}

/// Whether an error is also printed as JSON on stdout: `--json` among streamlab's own
/// arguments, but never for `trace`, whose stdout is the traced program's, nor `report` or
/// `diff`: their `--json FILE` names a file (nor a `--json` of the program's, after `--`).
fn errors_as_json(argv: &[String]) -> bool {
    let own = argv.iter().skip(1).take_while(|a| *a != "--");
    let command = argv.iter().skip(1).find(|a| !a.starts_with('-'));
    let writes_a_file = command.is_some_and(|c| c == "trace" || c == "report" || c == "diff");
    !writes_a_file && own.into_iter().any(|a| a == "--json")
}

/// The language of the error line: `--lang` among streamlab's own arguments (before `--`),
/// else the locale's. `launch`'s own arguments go on past its `--`: the command its ranks run.
fn error_lang(argv: &[String]) -> Lang {
    let args = &argv[argv.len().min(1)..];
    if args.iter().find(|a| !a.starts_with('-')).is_some_and(|c| c == "launch") {
        let past_the_dashes: Vec<String> = args.iter().filter(|a| *a != "--").cloned().collect();
        return Lang::named_in(&past_the_dashes);
    }
    Lang::named_in(args)
}

/// Prints `e` as streamlab's one error line, in `lang` (and in English as JSON on stdout
/// with `--json`, for scripts), and returns its exit code.
fn fail(e: &Error, lesson: Option<&str>, json: bool, lang: Lang) -> ExitCode {
    let said = |line: String| match lesson {
        Some(name) => format!("streamlab: {name}: {line}"),
        None => format!("streamlab: {line}"),
    };
    eprintln!("{}", said(e.render(lang)));
    if json {
        let line = said(e.to_string());
        let value = serde_json::json!({
            "error": line.trim_start_matches("streamlab: "),
            "lesson": lesson,
            "exit_code": e.exit_code(),
        });
        println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
    }
    ExitCode::from(e.exit_code() as u8)
}

/// The flags of a subcommand, typed; clap has already checked them, so a failure is a bug.
fn flags<F: clap::FromArgMatches>(m: &ArgMatches) -> Result<F, Failure> {
    F::from_arg_matches(m).map_err(|e| (Error::Internal(e.to_string()), None))
}

fn execute(matches: &ArgMatches, json: bool) -> Result<ExitCode, Failure> {
    match matches.subcommand() {
        Some(("list", m)) => {
            list_command::print(LESSONS, &flags::<ListFlags>(m)?);
            Ok(ExitCode::SUCCESS)
        }
        Some(("info", m)) => {
            info_command::print(&flags::<InfoFlags>(m)?).map_err(|e| (e, None))?;
            Ok(ExitCode::SUCCESS)
        }
        Some(("run", m)) => {
            // A bad rank setting is reported where the ranks meet (the lesson), not here.
            let rank_env = ranks::from_env().ok().flatten();
            let rank = rank_env.map(|r| Rank { rank: r.rank, local_rank: r.local_rank });
            // A rank of `streamlab launch` stops when its launcher is gone.
            launcher::watch_launcher(rank.map(|r| r.rank));
            run_command::run(LESSONS, m, rank, json)
        }
        Some(("launch", m)) => {
            let gpus = *m.get_one::<usize>("gpus").unwrap_or(&2);
            let command: Vec<String> =
                m.get_many::<String>("command").into_iter().flatten().cloned().collect();
            let code = launcher::launch(gpus, &command).map_err(|e| (e, None))?;
            Ok(ExitCode::from(code.clamp(0, 255) as u8))
        }
        Some(("report", m)) => {
            let code = report_command::run(m).map_err(|e| (e, Some("report")))?;
            Ok(ExitCode::from(code.clamp(0, 255) as u8))
        }
        Some(("diff", m)) => {
            let code = diff_command::run(m).map_err(|e| (e, Some("diff")))?;
            Ok(ExitCode::from(code.clamp(0, 255) as u8))
        }
        Some(("trace", m)) => {
            let code = trace_command::run(m).map_err(|e| (e, Some("trace")))?;
            Ok(ExitCode::from(code.clamp(0, 255) as u8))
        }
        _ => Err((Error::Internal("no subcommand".into()), None)),
    }
}
