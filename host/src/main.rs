//! The `streamlab` command: device facts, the list of lessons, and running them.
use std::process::ExitCode;

use clap::{Arg, ArgAction, ArgMatches, Args as _, Command};
use streamlab::lab::ddp::ranks;
use streamlab::lab::harness::common::{
    lang_or_locale, Common, Rank, Resolved, DEVICE, LANG_HELP, MAX_DEVICE,
};
use streamlab::lab::record::recorded_runs;
use streamlab::lab::text::{label, Lang, Text};
use streamlab::lab::{t, Entry};
use streamlab::lessons::{find, LESSONS};
use streamlab::{Error, Gpu};

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

Exit codes:
  0  success, every check passed (or honestly not asserted)
  2  invalid arguments (found before any buffer is allocated or lesson run)
  3  no CUDA device (no driver library, or cuInit or the device count says no), or the
     lesson needs what this machine lacks (a second GPU, NCCL); `run all` skips those
  4  a CUDA call failed (the message names the call and the stream)
  5  a result check failed (async differs from sync, or the GPU from the CPU)
  70 an internal error (a bug in streamlab: please report it)
  launch: the first failing rank's own code, or 128+N when signal N killed it (137: SIGKILL);
     130 or 143 when the launcher itself got SIGINT (Ctrl-C) or SIGTERM; a rank whose
     launcher is gone ends by SIGHUP (129)";

/// `--lang`: the language of what a learner reads (`run`, `list`).
fn lang_arg() -> Arg {
    Arg::new("lang").long("lang").value_name("LANG").value_parser(Lang::NAMES).help(LANG_HELP)
}

fn cli() -> Command {
    let mut run = Command::new("run")
        .about("Run one lesson by name, or `all`")
        .subcommand_required(true)
        .subcommand_value_name("LESSON")
        // `help` is not a lesson: `run <LESSON> --help` and `streamlab help run` stay.
        .disable_help_subcommand(true);
    run = Common::augment_args(run)
        .subcommand(Command::new("all").about("Every lesson with its defaults, in teaching order"));
    for lesson in LESSONS {
        run = run.subcommand((lesson.command)());
    }
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
        .subcommand(
            Command::new("info")
                .about("Print the device facts that decide what can overlap")
                .arg(
                    Arg::new("device")
                        .long("device")
                        .value_name("N")
                        .default_value("0")
                        .value_parser(streamlab::lab::harness::args::whole(0u32..=MAX_DEVICE))
                        .help("Which CUDA device, 0-based [0..=1023]"),
                )
                .arg(
                    Arg::new("json")
                        .long("json")
                        .action(ArgAction::SetTrue)
                        .help("Machine-readable output"),
                ),
        )
        .subcommand(
            Command::new("list")
                .about("List the lessons, in the order `run all` runs them")
                .arg(
                    Arg::new("json")
                        .long("json")
                        .action(ArgAction::SetTrue)
                        .help("Machine-readable output"),
                )
                .arg(lang_arg()),
        )
        .subcommand(run)
        .subcommand(
            Command::new("launch")
                .about("Run a lesson as one process per GPU, as DDP jobs do (allreduce-overlap)")
                .long_about(
                    "Starts one `streamlab run` per GPU with RANK, LOCAL_RANK and WORLD_SIZE set \
(torchrun's names) and a rendezvous file this launcher owns, through which rank 0 hands NCCL's \
unique id to the others. Rank 0's report is printed. To run across machines, start `streamlab \
run allreduce-overlap --device <LOCAL_RANK>` on each with RANK, WORLD_SIZE and either \
MASTER_ADDR/MASTER_PORT (rank 0 listens on MASTER_PORT + 1: torchrun's own store holds \
MASTER_PORT) or STREAMLAB_RENDEZVOUS=tcp:host:port (see the README); under mpirun or srun \
the ranks come from Open MPI's or Slurm's variables.

Every rank's stderr comes through the launcher: rank 0's lines as they are, rank N's after \
`rank N: `. When a rank fails, one line names it and its cause (its error line, or the signal \
that killed it); ranks that fail the same way on their own get one more line. The others get \
2 s to finish, then SIGTERM, then SIGKILL 5 s later, one line each. Ctrl-C or SIGTERM on the \
launcher stops every rank the same way. A rank whose launcher is gone (killed with SIGKILL) \
notices within 0.2 s and ends by SIGHUP (129 in a shell).

Exit code: the first failing rank's own code, or 128+N when signal N killed it (137 for \
SIGKILL), as shells report it; 130 after Ctrl-C (SIGINT), 143 after SIGTERM; 0 when every \
rank succeeded.",
                )
                .arg(
                    Arg::new("gpus")
                        .long("gpus")
                        .value_name("N")
                        .required(true)
                        .value_parser(streamlab::lab::harness::args::whole(1usize..=64))
                        .help("Processes to start, one per GPU: rank i uses GPU i [1..=64]"),
                )
                .arg(
                    Arg::new("command")
                        .num_args(1..)
                        .trailing_var_arg(true)
                        .allow_hyphen_values(true)
                        .value_name("run LESSON [FLAGS]")
                        .required(true)
                        .help("What each rank runs: `run allreduce-overlap` and its flags"),
                ),
        )
}

/// One line for a clap error: its first line without "error: ", plus clap's "did you mean"
/// tip when it has one, and where to look.
fn clap_error_line(e: &clap::Error, command: &str) -> String {
    use clap::error::ErrorKind;
    if e.kind() == ErrorKind::MissingSubcommand && command.starts_with("streamlab run") {
        let names: Vec<&str> = LESSONS.iter().map(|l| l.name).collect();
        return format!(
            "run: <LESSON> is missing: name one of {}, or all (see streamlab list)",
            names.join(", ")
        );
    }
    if e.kind() == ErrorKind::MissingSubcommand && command == "streamlab" {
        return "a command is missing: info, list, run or launch (see streamlab --help)".into();
    }
    let text = e.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    // clap puts the names of missing arguments on the lines after the first.
    let (first, rest): (String, Vec<&str>) = if e.kind() == ErrorKind::MissingRequiredArgument {
        let (names, rest): (Vec<&str>, Vec<&str>) =
            lines.partition(|l| l.starts_with('<') || l.starts_with("--"));
        (format!("{first} {}", names.join(", ")).trim_end().to_string(), rest)
    } else {
        (first.to_string(), lines.collect())
    };
    let tips: String = rest
        .into_iter()
        .filter(|l| l.starts_with("tip:") || l.starts_with("[possible values:"))
        .map(|t| format!("; {t}"))
        .collect();
    format!("{first}{tips} (see {command} --help)")
}

/// The words of `argv` that name a command streamlab has: `streamlab run overlap` for
/// `streamlab run overlap --bad`, `streamlab run` for `streamlab run overlp`.
fn command_path(argv: &[String]) -> String {
    let mut path = vec!["streamlab"];
    let mut words = argv.iter().skip(1).filter(|a| !a.starts_with('-'));
    let top = words.next().filter(|w| ["info", "list", "run", "launch"].contains(&w.as_str()));
    if let Some(top) = top {
        path.push(top);
        // The first word that names a lesson: a flag's value (`--reps 5`) may come before it.
        let lesson = words.find(|w| top == "run" && (*w == "all" || find(w).is_some()));
        if let Some(lesson) = lesson {
            path.push(lesson);
        }
    }
    path.join(" ")
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
        eprintln!("streamlab: internal error (a bug in streamlab): {message}{at}");
        std::process::exit(70);
    }));
    let argv: Vec<String> = std::env::args().collect();
    let json = argv.iter().any(|a| a == "--json");
    let matches = match cli().try_get_matches_from(&argv) {
        Ok(m) => m,
        // --help and --version are not errors: clap prints them as usual.
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let line = clap_error_line(&e, &command_path(&argv));
            return fail(&Error::InvalidInput(line), None, json);
        }
    };
    match execute(&matches, json) {
        Ok(code) => code,
        Err((e, lesson)) => fail(&e, lesson, json),
    }
}

/// Prints `e` as streamlab's one error line (and as JSON on stdout with `--json`), and
/// returns its exit code.
fn fail(e: &Error, lesson: Option<&str>, json: bool) -> ExitCode {
    let line = match lesson {
        Some(name) => format!("streamlab: {name}: {e}"),
        None => format!("streamlab: {e}"),
    };
    eprintln!("{line}");
    if json {
        let value = serde_json::json!({
            "error": line.trim_start_matches("streamlab: "),
            "lesson": lesson,
            "exit_code": e.exit_code(),
        });
        println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
    }
    ExitCode::from(e.exit_code() as u8)
}

type Failure = (Error, Option<&'static str>);

fn execute(matches: &ArgMatches, json: bool) -> Result<ExitCode, Failure> {
    match matches.subcommand() {
        Some(("list", m)) => {
            list(
                m.get_flag("json"),
                lang_or_locale(m.get_one::<String>("lang").map(String::as_str)),
            );
            Ok(ExitCode::SUCCESS)
        }
        Some(("info", m)) => {
            let device = *m.get_one::<u32>("device").unwrap_or(&DEVICE);
            info(device, m.get_flag("json")).map_err(|e| (e, None))?;
            Ok(ExitCode::SUCCESS)
        }
        Some(("run", m)) => run(m, json),
        Some(("launch", m)) => {
            let gpus = *m.get_one::<usize>("gpus").unwrap_or(&2);
            let command: Vec<String> =
                m.get_many::<String>("command").into_iter().flatten().cloned().collect();
            let code =
                streamlab::lab::ddp::launcher::launch(gpus, &command).map_err(|e| (e, None))?;
            Ok(ExitCode::from(code.clamp(0, 255) as u8))
        }
        _ => Err((Error::Internal("no subcommand".into()), None)),
    }
}

fn list(json: bool, lang: Lang) {
    if json {
        let list: Vec<_> = LESSONS
            .iter()
            .map(|l| {
                let flags: Vec<String> = (l.command)()
                    .get_arguments()
                    .filter_map(|a| a.get_long().map(|f| format!("--{f}")))
                    .collect();
                serde_json::json!({"name": l.name, "summary": l.summary, "flags": flags})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&list).unwrap_or_default());
        return;
    }
    let width = LESSONS.iter().map(|l| l.name.len()).max().unwrap_or(0);
    for l in LESSONS {
        println!("{:<width$}  {}", l.name, label(lang, l.summary));
    }
    println!("\n{}", t!("list.more").render(lang));
}

fn info(device: u32, json: bool) -> Result<(), Error> {
    let gpu = Gpu::new(device)?;
    let i = &gpu.info;
    if json {
        println!("{}", serde_json::to_string_pretty(i).unwrap_or_default());
        return Ok(());
    }
    let gib = |b: usize| b as f64 / (1u64 << 30) as f64;
    let (least, greatest) = i.priority_range;
    println!("device {}: {}", i.ordinal, i.name);
    println!("  compute capability     {}.{}", i.compute_capability.0, i.compute_capability.1);
    println!("  multiprocessors (SMs)  {}", i.multiprocessors);
    println!(
        "  memory                 {:.1} GiB total, {:.1} GiB free",
        gib(i.total_memory_bytes),
        gib(i.free_memory_bytes)
    );
    println!("  SM clock               {} MHz", i.clock_khz / 1000);
    println!(
        "  memory clock, bus      {} MHz, {} bits",
        i.memory_clock_khz / 1000,
        i.memory_bus_width_bits
    );
    println!("  L2 cache               {} MiB", i.l2_cache_bytes >> 20);
    println!(
        "  concurrentKernels      {}   (kernels from different streams can run at once)",
        i.concurrent_kernels as u8
    );
    println!("  asyncEngineCount       {}   (copy engines: 2+ means copy-in and copy-out overlap each other)", i.async_engine_count);
    println!("  deviceOverlap          {}   (a copy can overlap a kernel)", i.device_overlap as u8);
    println!("  stream priorities      {least} (least) to {greatest} (greatest)");
    println!(
        "  driver API version     {}.{}",
        i.driver_version / 1000,
        i.driver_version % 1000 / 10
    );
    println!("  embedded PTX target    {} (JIT-compiled by the driver for this GPU)", i.ptx_arch);
    Ok(())
}

fn run(m: &ArgMatches, json: bool) -> Result<ExitCode, Failure> {
    let common = Common::from_matches(m).map_err(|e| (e, None))?;
    let all = matches!(m.subcommand(), Some(("all", _)));
    // A bad rank setting is reported where the ranks meet (the lesson), not here.
    let rank_env = ranks::from_env().ok().flatten();
    let rank = rank_env.map(|r| Rank { rank: r.rank, local_rank: r.local_rank });
    // A rank of `streamlab launch` stops when its launcher is gone.
    streamlab::lab::ddp::launcher::watch_launcher(rank.map(|r| r.rank));
    // The selected lessons and their flags, all checked before the GPU is touched.
    let selected: Vec<(&'static Entry, ArgMatches)> = match m.subcommand() {
        Some(("all", _)) => LESSONS
            .iter()
            .map(|l| {
                let defaults = (l.command)()
                    .try_get_matches_from([l.name])
                    .map_err(|e| (Error::Internal(e.to_string()), Some(l.name)))?;
                Ok((l, defaults))
            })
            .collect::<Result<_, Failure>>()?,
        Some((name, sub)) => {
            let entry =
                find(name).ok_or((Error::Internal(format!("unknown lesson {name}")), None))?;
            vec![(entry, sub.clone())]
        }
        None => return Err((Error::Internal("no lesson".into()), None)),
    };
    let single = selected.len() == 1;
    for (entry, matches) in &selected {
        (entry.check)(matches).map_err(|e| (e, Some(entry.name)))?;
    }
    // A missing folder for --trace or --svg is found now, not after minutes of GPU work.
    let resolved =
        common.resolve(all, rank).map_err(|e| (e, single.then(|| selected[0].0.name)))?;
    let lang = resolved.lang;
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
    streamlab::lab::record::recorder::check_recorder_setting()
        .map_err(|e| (e, single.then(|| selected[0].0.name)))?;
    let gpu = Gpu::new(resolved.device).map_err(|e| {
        let name = if single { selected[0].0.name } else { "all" };
        let e = match e {
            Error::NoDevice(why) => {
                Error::NoDevice(format!("{why}; {}", recorded_runs::hint(name)))
            }
            other => other,
        };
        (e, single.then(|| selected[0].0.name))
    })?;
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
            // What ran before the failure, then the error object from `fail`.
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
        let (trace, svg) = (settings.trace.as_ref(), settings.svg.as_ref());
        let report =
            recorded_runs::show_in(&run, shown, trace, svg).map_err(|e| (e, Some(entry.name)))?;
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
