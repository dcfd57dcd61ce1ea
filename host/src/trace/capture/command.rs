//! `streamlab trace [FLAGS] -- <program> [args...]`: its flags, its `--help`, and the checks
//! made before anything runs (in this order: the flags, the files to write, `--keep`, the
//! program, the driver), then the trace itself ([`session::trace`]).
use std::path::PathBuf;

use clap::{ArgMatches, Args as _, FromArgMatches as _};

use crate::runtime::context::driver_library_present;
use crate::runtime::cupti::trace_file::{Keep, WhenFull};
use crate::runtime::Error;
use crate::t;
use crate::text::flag_values::{number, whole, BadValue};
use crate::trace::capture::flags::{OutputFlags, ThresholdFlags};
use crate::trace::capture::injection::Recording;
use crate::trace::capture::session::{self, check_keep, Settings};
use crate::trace::capture::{injection, program};

/// How often the recorder hands CUPTI's records to its file, unless `--flush-ms` says.
pub const FLUSH_MS: u64 = 200;
/// The most records each process keeps, unless `--max-records` says: at some 187 bytes a
/// record (run 26-E: a Perfetto trace of 33,678 records was 6.31 MB), about 47 MB of
/// Perfetto JSON per process, which ui.perfetto.dev still opens. The limit is per process:
/// a launch of 8 ranks can write 8 times that.
pub const MAX_RECORDS: u64 = 250_000;

const ABOUT: &str = "\
Runs PROGRAM with its arguments, unchanged, while CUPTI records what its GPU work did; then \
reports on stderr what kept its streams from overlapping, each finding with the lesson that \
teaches the fix. Any CUDA program: CUDA C++, PyTorch, CuPy, streamlab itself.

How: the CUDA driver loads a small recorder library into the program at cuInit \
(CUDA_INJECTION64_PATH names it), which turns CUPTI's activity records on. Child processes \
inherit it, so a launcher's ranks are traced too, one file and one report each, on one clock.

What: kernels (concurrent), copies with their host memory (pageable or pinned), memsets and \
peer copies, each with its stream and device and its true start and end on the GPU; the \
host's synchronizations (stream, event, context) and how long they blocked; driver and \
runtime calls (allocations and frees among them); NVTX ranges and marks (PyTorch emits them \
with torch.cuda.nvtx.range_push, and for every operator under \
torch.autograd.profiler.emit_nvtx(); those made before the first CUDA call are not recorded); \
stream names set through NVTX. Each NVTX range the program marks, in the default domain or a \
domain of its own, is a window of the report; the ranges of the libraries' own domains (NCCL, \
NVSHMEM, libcudf, librmm, cuvs) are drawn but make no window. Records are written every \
--flush-ms, at exit, and when the program crashes (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL: \
the recorder writes them, then the program dies by its signal as it would have); a program \
killed with SIGKILL leaves what was recorded up to the last flush. The report says how each \
process ended.

A long run: each process keeps at most --max-records records, and --when-full says which. \
last (the default) keeps the most recent ones, deleting the oldest as the run goes on; first \
keeps the first ones; sample keeps whole occurrences of one NVTX range (--capture-range's, \
else the first top-level range the program marks: a training step), thinned evenly over the \
run as the limit fills (every 2nd, then every 4th, ...). To record one part of the run, as \
Nsight Systems does: --capture-range NAME keeps what happens from the start of the first \
NVTX range named NAME (any thread, the program's own domains) until --capture-count N ranges \
of that name have ended (without it, to the end); --delay S starts S seconds after the \
program started, --duration S stops S seconds after that. GPU work launched inside and run \
after is kept with its launch. What was left out is counted, never silently lost.

The report: a window per process and device (the whole run; where the program marks NVTX \
ranges, its start-up and the rest), and one per top-level NVTX range name, whose figures are \
the GPU work its code launched (charged through the thread that made each launch call, as \
Nsight Systems projects NVTX onto the GPU), beside the work that ran while it was open: they \
differ when the CPU runs ahead, and a finding says by how much. Findings are ranked by cost; \
those under 1% of their window are folded into one line. `streamlab report DIR` reports \
again on a folder kept with --keep DIR, with other thresholds, and without a GPU.

The program keeps its stdin and stdout: streamlab writes only to stderr and to the files \
named by --trace, --svg and --json. SIGTERM sent to streamlab is passed on to the program; \
so is SIGINT, except Ctrl-C at a terminal, which reaches the program by itself. A program \
that uses CUPTI itself (torch.profiler) may conflict with the recorder: the report says so \
when the recorder notices.

Exit codes: before the program starts, streamlab's own: 2 invalid arguments; 3 no CUDA \
driver (libcuda) or no CUPTI (the line says what to install); 127 the program was not found, \
126 it cannot be run (as shells say). After: the program's own exit code, or 128+N when \
signal N killed it (137 for SIGKILL), said in one line; where the program succeeded but \
streamlab could not read the records or write a file, streamlab's code for that (2 or 70).";

const EXAMPLES: &str = "\
Examples:
  streamlab trace -- ./overlap                   a CUDA C++ program: its report on stderr
  streamlab trace --svg t.svg --trace t.json -- python train.py
                                                 a PyTorch script, as a picture and a
                                                 trace for ui.perfetto.dev
  streamlab trace --svg t.svg --svg-range step:3 -- python train.py
                                                 the picture of the third NVTX range
                                                 \"step\" (by default: from the first
                                                 range on, the start-up left out)
  streamlab trace --timeline -- python -c 'import torch; x = torch.ones(1 << 24).cuda()'
                                                 ... and its streams drawn in the terminal
  streamlab trace -- streamlab launch --gpus 2 run allreduce-overlap
                                                 one process per rank, on one clock
  streamlab trace --keep raw/ --json r.json -- torchrun --nproc-per-node 2 train.py
                                                 the recorder's files kept, the report as JSON
  streamlab trace --capture-range step --capture-count 10 -- python train.py
                                                 ten training steps (NVTX ranges named step)
                                                 and the GPU work they launched
  streamlab trace --when-full sample --capture-range step -- python train.py
                                                 whole steps, spread over the whole run
  streamlab trace --delay 60 --duration 5 -- ./app
                                                 five seconds of the run, a minute in
  streamlab trace --cost -- ./overlap            run twice, without and with the recorder
  streamlab trace --idle-gap-ms 1 -- ./app       only idle gaps over 1 ms are findings
  streamlab trace --lang zh -- ./app             the report in Chinese (中文)";

// The flags of `trace` (`//`, not `///`: clap would make a doc comment the command's about).
// The numbers take negative values (`allow_negative_numbers`), so that `--idle-gap-ms -1`
// is told its range rather than read as a flag of its own.
#[derive(clap::Args, Debug, Clone)]
pub struct TraceFlags {
    #[command(flatten)]
    pub output: OutputFlags,
    #[arg(
        long,
        value_name = "DIR",
        help = "Keep the recorder's files (one <pid>.jsonl per process, and its segments <pid>.<seq>.jsonl) in DIR, made if missing; otherwise a temporary folder, removed at the end"
    )]
    pub keep: Option<PathBuf>,
    #[arg(
        long,
        value_name = "N",
        default_value_t = FLUSH_MS,
        allow_negative_numbers = true,
        value_parser = whole(10u64..=60_000),
        help = "Hand the records to the file every N ms [10..=60000]: what a killed program leaves reaches its last flush"
    )]
    pub flush_ms: u64,
    #[arg(
        long,
        value_name = "N",
        default_value_t = MAX_RECORDS,
        allow_negative_numbers = true,
        value_parser = whole(1_000u64..=100_000_000),
        help = "Keep at most N records per process [1000..=100000000]; --when-full says which (the default, some 47 MB of --trace JSON per process, keeps the trace openable in Perfetto)"
    )]
    pub max_records: u64,
    #[arg(
        long,
        value_name = "WHICH",
        default_value = "last",
        value_parser = ["first", "last", "sample"],
        help = "Which records stay once --max-records are kept: last (the oldest are deleted as the run goes on), first (later ones are counted, not kept) or sample (whole occurrences of --capture-range's range, else of the first top-level NVTX range, thinned evenly over the run)"
    )]
    pub when_full: String,
    #[arg(
        long,
        value_name = "NAME",
        value_parser = range_name,
        help = "Keep only what happens from the start of the first NVTX range named NAME (push/pop or start/end, any thread, the program's own domains), and the GPU work launched then"
    )]
    pub capture_range: Option<String>,
    #[arg(
        long,
        value_name = "N",
        requires = "capture_range",
        allow_negative_numbers = true,
        value_parser = whole(1u64..=1_000_000_000),
        help = "... until N ranges of that name have ended [1..=1000000000] (needs --capture-range; without this, to the end of the run)"
    )]
    pub capture_count: Option<u64>,
    #[arg(
        long,
        value_name = "S",
        allow_negative_numbers = true,
        value_parser = number(0.0..=604_800.0),
        help = "Keep nothing of the first S seconds after the program started [0..=604800] (decimals allowed: 2.5); with --capture-range, its range is looked for from then on"
    )]
    pub delay: Option<f64>,
    #[arg(
        long,
        value_name = "S",
        allow_negative_numbers = true,
        value_parser = number(0.001..=604_800.0),
        help = "Keep S seconds of the run, from the start (or from the end of --delay) [0.001..=604800]"
    )]
    pub duration: Option<f64>,
    #[arg(
        long,
        help = "Run the program twice, without and with the recorder, and report both wall times and their ratio"
    )]
    pub cost: bool,
    #[command(flatten)]
    pub thresholds: ThresholdFlags,
    #[arg(
        last = true,
        required = true,
        num_args = 1..,
        value_name = "PROGRAM",
        help = "The program to run and its arguments, after `--`"
    )]
    pub program: Vec<String>,
}

/// `--capture-range`'s NAME: any text but an empty one.
fn range_name(name: &str) -> Result<String, BadValue> {
    if name.trim().is_empty() {
        // The error line finds the sentence by its type, in --lang's language.
        return Err(BadValue(t!("error.trace.range_name_empty")));
    }
    Ok(name.to_string())
}

/// Seconds as whole ms (the parsers keep them in range: no overflow).
fn millis(seconds: f64) -> u64 {
    (seconds * 1e3).round() as u64
}

/// What the recorder is asked to do, as the flags say it.
pub fn recording(f: &TraceFlags) -> Recording {
    let when_full = match f.when_full.as_str() {
        "first" => WhenFull::First,
        "sample" => WhenFull::Sample,
        _ => WhenFull::Last,
    };
    let keep = Keep {
        when_full,
        capture_range: f.capture_range.clone(),
        capture_count: f.capture_count.unwrap_or(0),
        delay_ms: f.delay.map_or(0, millis),
        // At least 1 ms: the smallest duration the flag takes rounds to it.
        duration_ms: f.duration.map(|s| millis(s).max(1)),
    };
    Recording { flush_ms: f.flush_ms, max_records: f.max_records, keep }
}

/// The `trace` subcommand.
pub fn command() -> clap::Command {
    let trace = clap::Command::new("trace")
        .about("Run any CUDA program with CUPTI recording its streams, and report what keeps them from overlapping")
        .long_about(ABOUT)
        .after_help(EXAMPLES);
    TraceFlags::augment_args(trace)
}

/// `streamlab trace` with `matches` (the subcommand's): the exit code to use. An error is
/// streamlab's own (`main.rs` names `trace` in its line).
pub fn run(matches: &ArgMatches) -> Result<i32, Error> {
    let flags =
        TraceFlags::from_arg_matches(matches).map_err(|e| Error::Internal(e.to_string()))?;
    let output = flags.output.output()?;
    if let Some(dir) = &flags.keep {
        check_keep(dir)?;
    }
    let path = std::env::var("PATH").ok();
    if let Err(not) = program::resolve(&flags.program[0], path.as_deref()) {
        eprintln!("streamlab: trace: {}", not.why.render(output.lang));
        return Ok(not.code);
    }
    // Only looked for: this process must not start CUDA (the program's driver would then
    // share nothing with it, but a driver started here costs time and GPU memory).
    if !driver_library_present() {
        return Err(Error::NoDevice(t!("error.trace.no_libcuda")));
    }
    let settings = Settings {
        program: flags.program.clone(),
        output,
        keep: flags.keep.clone(),
        recording: recording(&flags),
        cost: flags.cost,
        thresholds: flags.thresholds.thresholds(),
        ranges: flags.thresholds.ranges.clone(),
    };
    session::trace(&settings, &injection::prepare)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::inspect::findings::Thresholds;

    fn parse(args: &[&str]) -> Result<TraceFlags, clap::Error> {
        let m =
            command().try_get_matches_from(std::iter::once("trace").chain(args.iter().copied()))?;
        Ok(TraceFlags::from_arg_matches(&m).unwrap())
    }

    #[test]
    fn everything_after_the_double_dash_is_the_program() {
        let f = parse(&["--timeline", "--", "python", "-c", "print(1)", "--json", "x"]).unwrap();
        assert_eq!(f.program, ["python", "-c", "print(1)", "--json", "x"]);
        assert!(f.output.timeline && f.output.json.is_none());
        assert_eq!((f.flush_ms, f.max_records), (FLUSH_MS, MAX_RECORDS));
        assert_eq!(f.thresholds.thresholds(), Thresholds::DEFAULT);
        // By default the last records are kept, with no capture window.
        let keep = Keep { when_full: WhenFull::Last, ..Keep::default() };
        let told = Recording { flush_ms: FLUSH_MS, max_records: MAX_RECORDS, keep };
        assert_eq!(recording(&f), told);
        // Without `--`, or without a program, it is refused.
        assert!(parse(&["python", "x.py"]).is_err());
        assert!(parse(&["--timeline"]).is_err());
        assert!(parse(&["--flush-ms", "5", "--", "x"]).is_err());
        // A negative number is a value out of range, not an unknown flag.
        for flag in [
            "--idle-gap-ms",
            "--flush-ms",
            "--max-records",
            "--many-small-kernels",
            "--delay",
            "--duration",
        ] {
            let e = parse(&[flag, "-1", "--", "x"]).unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{flag}: {e}");
        }
    }

    #[test]
    fn each_threshold_flag_sets_its_own_threshold() {
        let given = [
            ("--idle-gap-ms", "1.5"),
            ("--back-to-back-ms", "0.2"),
            ("--small-kernel-ms", "0.05"),
            ("--many-small-kernels", "7"),
            ("--launch-gap-ms", "0.003"),
            ("--late-rank-ms", "0.5"),
        ];
        let mut args: Vec<&str> = given.iter().flat_map(|(flag, v)| [*flag, *v]).collect();
        args.extend(["--", "x"]);
        let t = parse(&args).unwrap().thresholds.thresholds();
        assert_eq!(
            (t.idle_gap_ms, t.back_to_back_ms, t.small_kernel_ms, t.many_small_kernels),
            (1.5, 0.2, 0.05, 7)
        );
        assert_eq!((t.launch_gap_ms, t.late_rank_ms), (0.003, 0.5));
    }

    #[test]
    fn the_capture_window_and_when_full_reach_the_recorder_and_bad_ones_are_refused() {
        let args = [
            "--capture-range",
            "step",
            "--capture-count",
            "10",
            "--delay",
            "2.5",
            "--duration",
            "0.0014",
            "--when-full",
            "sample",
            "--",
            "x",
        ];
        let keep = recording(&parse(&args).unwrap()).keep;
        let want = Keep {
            when_full: WhenFull::Sample,
            capture_range: Some("step".into()),
            capture_count: 10,
            delay_ms: 2500,
            duration_ms: Some(1),
        };
        assert_eq!(keep, want);
        assert_eq!(recording(&parse(&["--when-full", "first", "--", "x"]).unwrap()).keep, {
            Keep { when_full: WhenFull::First, ..Keep::default() }
        });
        // A count without a range; an empty range; a word --when-full does not know; a
        // duration of 0; a count of 0.
        use clap::error::ErrorKind;
        let refused = [
            (&["--capture-count", "3", "--", "x"][..], ErrorKind::MissingRequiredArgument),
            (&["--capture-range", " ", "--", "x"], ErrorKind::ValueValidation),
            (&["--when-full", "newest", "--", "x"], ErrorKind::InvalidValue),
            (&["--duration", "0", "--", "x"], ErrorKind::ValueValidation),
            (
                &["--capture-range", "s", "--capture-count", "0", "--", "x"],
                ErrorKind::ValueValidation,
            ),
        ];
        for (args, kind) in refused {
            assert_eq!(parse(args).unwrap_err().kind(), kind, "{args:?}");
        }
    }

    #[test]
    fn the_help_shows_the_defaults_and_teaches() {
        let help = command().render_long_help().to_string();
        for want in [
            "[default: 200]",
            "[default: 250000]",
            "[default: 0.1]",
            "[default: 0.05]",
            "[default: 0.01]",
            "[default: 100]",
            "[default: 0.002]",
            "CUDA_INJECTION64_PATH",
            "128+N",
            "127",
            "streamlab launch --gpus 2",
            "emit_nvtx",
            "python train.py",
            "[default: last]",
            "--capture-range step --capture-count 10",
            "Nsight Systems",
            "SIGABRT",
            "<pid>.<seq>.jsonl",
            "--svg-range step:3",
        ] {
            assert!(help.contains(want), "{want}: {help}");
        }
        // Which NVTX domains make no window: the reader's list, every name of it.
        let domains = crate::runtime::cupti::trace_file::LIBRARY_DOMAINS;
        assert!(domains.iter().all(|d| help.contains(d)), "{domains:?}: {help}");
    }
}
