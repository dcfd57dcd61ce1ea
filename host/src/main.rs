//! The `streamlab` command: device facts, the list of demos, and running them.
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use streamlab::demos::{self, Options, DEMOS};
use streamlab::{Error, Gpu};

const AFTER_HELP: &str = "\
Examples:
  streamlab info                          what this GPU can overlap
  streamlab list                          every demo, with the flags it reads
  streamlab run overlap --streams 8       one stream vs 8 streams, verified and explained
  streamlab run overlap --timeline        ... and draw what each stream did when
  streamlab run all --json > runs.json    every demo, machine-readable

Exit codes:
  0  success, every check passed
  2  invalid arguments (found before any buffer is allocated or demo run)
  3  no CUDA device (the driver is there but cuInit or the device count says no)
  4  a CUDA call failed (the message names the call and the stream)
  5  a result check failed (async differs from sync, or the GPU from the CPU)
  70 an internal error (a bug in streamlab: please report it)
A machine with no NVIDIA driver at all has no libcuda.so.1: the system's loader then
refuses to start streamlab (exit 127) before it can say anything itself.";

#[derive(Parser)]
#[command(
    name = "streamlab",
    version,
    about = "CUDA streams and concurrency, taught and measured from Rust",
    long_about = "Runs each overlap technique of the CUDA streams literature on your GPU: \
the synchronous version and the asynchronous one, checked bit for bit against each other \
and against the CPU, timed with CUDA events (medians over --reps), and explained.",
    after_help = AFTER_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the device facts that decide what can overlap
    Info {
        /// Which CUDA device (0-based)
        #[arg(long, default_value_t = 0)]
        device: u32,
        /// Machine-readable output
        #[arg(long)]
        json: bool,
    },
    /// List the demos, in the order `run all` runs them
    List {
        #[arg(long)]
        json: bool,
    },
    /// Run one demo by name, or `all`
    Run(RunArgs),
}

#[derive(Args)]
struct RunArgs {
    /// A demo name from `streamlab list`, or `all`
    demo: String,
    /// Array size in f32 elements (default: the demo's own)
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    elements: Option<u64>,
    /// Number of streams, 1 to 64 (default: the demo's own)
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=64))]
    streams: Option<u64>,
    /// Iterations: x = sin(x)*cos(x) steps per element in the compute kernel; in `graph`,
    /// replays of the DAG per repeat (default: the demo's own)
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    iters: Option<u32>,
    /// Number of batches in the pipeline demos; in `priority`, waves of the long kernel
    /// (default: the demo's own)
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    batches: Option<u64>,
    /// How long each SleepKernel spins, in microseconds (default: the demo's own)
    #[arg(long, value_parser = parse_sleep_us)]
    sleep_us: Option<f64>,
    /// Timed repeats; every figure is their median
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    reps: u64,
    /// Seed of the pseudo-random input data
    #[arg(long, default_value_t = 0x5EED)]
    seed: u64,
    /// Also draw a per-stream timeline of one run (demos that support it)
    #[arg(long)]
    timeline: bool,
    /// Which CUDA device (0-based)
    #[arg(long, default_value_t = 0)]
    device: u32,
    /// Machine-readable output (one JSON object per demo; an array for `all`)
    #[arg(long)]
    json: bool,
}

fn parse_sleep_us(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if v.is_finite() && v > 0.0 && v <= 10_000_000.0 {
        Ok(v)
    } else {
        Err("must be more than 0 and at most 10000000 (10 s)".into())
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version are not errors: clap prints them as usual.
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            // One line, like every other streamlab error: clap's first line, without its
            // "error: " prefix, then where to look.
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("streamlab: {first} (see streamlab --help)");
            return ExitCode::from(2);
        }
    };
    match execute(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("streamlab: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

fn execute(command: Command) -> Result<ExitCode, Error> {
    match command {
        Command::List { json } => {
            if json {
                let list: Vec<_> = DEMOS
                    .iter()
                    .map(|d| serde_json::json!({"name": d.name, "summary": d.summary, "flags": d.flags}))
                    .collect();
                println!(
                    "{}",
                    serde_json::to_string_pretty(&list).unwrap_or_default()
                );
            } else {
                let width = DEMOS.iter().map(|d| d.name.len()).max().unwrap_or(0);
                for d in DEMOS {
                    println!(
                        "{:<width$}  {}\n{:<width$}  flags: {}",
                        d.name, d.summary, "", d.flags
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Info { device, json } => {
            let gpu = Gpu::new(device)?;
            let i = &gpu.info;
            if json {
                println!("{}", serde_json::to_string_pretty(i).unwrap_or_default());
            } else {
                let (least, greatest) = i.priority_range;
                println!("device {}: {}", i.ordinal, i.name);
                println!(
                    "  compute capability     {}.{}",
                    i.compute_capability.0, i.compute_capability.1
                );
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
                println!("  concurrentKernels      {}   (kernels from different streams can run at once)", i.concurrent_kernels as u8);
                println!("  asyncEngineCount       {}   (copy engines: 2+ means copy-in and copy-out overlap each other)", i.async_engine_count);
                println!(
                    "  deviceOverlap          {}   (a copy can overlap a kernel)",
                    i.device_overlap as u8
                );
                println!("  stream priorities      {least} (least) to {greatest} (greatest)");
                println!(
                    "  driver API version     {}.{}",
                    i.driver_version / 1000,
                    i.driver_version % 1000 / 10
                );
                println!(
                    "  embedded PTX target    {} (JIT-compiled by the driver for this GPU)",
                    i.ptx_arch
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => run(args),
    }
}

fn gib(bytes: usize) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

fn run(args: RunArgs) -> Result<ExitCode, Error> {
    // Resolve the demo names before touching the GPU: a typo is an argument error.
    let selected: Vec<&demos::Demo> = if args.demo == "all" {
        DEMOS.iter().collect()
    } else {
        vec![demos::find(&args.demo)?]
    };
    let opts = Options {
        elements: args.elements.map(|v| v as usize),
        streams: args.streams.map(|v| v as usize),
        iters: args.iters,
        batches: args.batches.map(|v| v as usize),
        sleep_us: args.sleep_us,
        reps: args.reps as usize,
        seed: args.seed,
        timeline: args.timeline,
    };
    // Every selected demo checks its flags before the GPU is touched.
    for demo in &selected {
        (demo.validate)(&opts).map_err(|e| match e {
            // Name the demo: with `run all` the flag may be fine for the others.
            Error::InvalidInput(why) => Error::InvalidInput(format!("{}: {why}", demo.name)),
            other => other,
        })?;
    }
    let gpu = Gpu::new(args.device)?;
    let mut reports = Vec::new();
    let mut failure = None;
    for demo in selected {
        match (demo.run)(&gpu, &opts) {
            Ok(report) => {
                if !args.json {
                    println!("{}", report.to_text());
                }
                reports.push(report);
            }
            Err(e) => {
                // Stop (the context may be unusable after a CUDA error), but keep what ran.
                failure = Some((demo.name, e));
                break;
            }
        }
    }
    if args.json && !reports.is_empty() {
        let value = if reports.len() == 1 && args.demo != "all" && failure.is_none() {
            serde_json::to_value(&reports[0])
        } else {
            serde_json::to_value(&reports)
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&value.unwrap_or_default()).unwrap_or_default()
        );
    }
    if let Some((name, e)) = failure {
        eprintln!("streamlab: {name}: {e}");
        return Ok(ExitCode::from(e.exit_code() as u8));
    }
    let failed: Vec<&str> = reports
        .iter()
        .filter(|r| !r.passed())
        .map(|r| r.demo.as_str())
        .collect();
    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        let e = Error::Verification(format!("checks failed in: {}", failed.join(", ")));
        eprintln!("streamlab: {e}");
        Ok(ExitCode::from(e.exit_code() as u8))
    }
}
