//! The flags `streamlab trace` and `streamlab report` share, declared once: the files and
//! views asked for ([`OutputFlags`]) and the findings' thresholds ([`ThresholdFlags`]), each
//! threshold's default from [`Thresholds::DEFAULT`].
use std::path::PathBuf;

use crate::lab::record::output::OutputFile;
use crate::runtime::Result;
use crate::text::flag_values::{number, whole};
use crate::text::Lang;
use crate::trace::capture::present::Output;
use crate::trace::capture::svg_range::SvgRange;
use crate::trace::inspect::findings::Thresholds;

/// `--help`'s heading for the thresholds.
pub const THRESHOLDS: &str = "Thresholds of the findings";
/// `--help`'s heading for the choice of windows.
pub const WINDOWS: &str = "Windows";

// The output flags (`//`, not `///`: clap would take a doc comment for the help).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct OutputFlags {
    #[arg(
        long,
        value_name = "FILE.json",
        help = "Also write the trace for ui.perfetto.dev: one process per traced process, its streams and host threads, each thread's NVTX ranges on a track of their own, an arrow from launch calls to their work (at most 20000 a process, spread evenly)"
    )]
    pub trace: Option<PathBuf>,
    #[arg(
        long,
        value_name = "FILE.svg",
        help = "Also draw the streams as an SVG picture, a panel per process on one time scale, each thread's NVTX ranges in rows above its streams; by default the steady state only (see --svg-range)"
    )]
    pub svg: Option<PathBuf>,
    #[arg(
        long,
        value_name = "NAME[:N[-M]]",
        requires = "svg",
        value_parser = SvgRange::parse,
        help = "What --svg draws. Without it, the steady state: from the first top-level NVTX range (else the first GPU work) to the last GPU work, the caption saying how much start-up was left out. all: the whole run. NAME: every occurrence of the NVTX range NAME; NAME:N its Nth; NAME:N-M its Nth to Mth (counted from 1 in each process), each to the end of the GPU work launched in it. A range the trace does not hold is said after the report and no picture is written: exit 2 (for trace, where the program succeeded)"
    )]
    pub svg_range: Option<SvgRange>,
    #[arg(long, help = "Also draw each process's streams in the terminal (on stderr)")]
    pub timeline: bool,
    #[arg(
        long,
        value_name = "FILE",
        help = "Also write the report as JSON to FILE (with trace, stdout stays the program's)"
    )]
    pub json: Option<PathBuf>,
    #[arg(
        long,
        value_name = "LANG",
        value_parser = crate::text::Lang::NAMES,
        help = "Language of the report (default: zh when LC_ALL, LC_MESSAGES or LANG starts with zh, else en; --json FILE stays English)"
    )]
    pub lang: Option<String>,
}

impl OutputFlags {
    /// The files checked writable, named for what they hold and apart from each other (exit
    /// 2 before anything runs where one is not), and the language resolved.
    pub fn output(&self) -> Result<Output> {
        let file = |flag: &'static str, path: &Option<PathBuf>| {
            path.as_deref().map(|p| OutputFile::checked(flag, p)).transpose()
        };
        let (trace, svg, json) =
            (file("--trace", &self.trace)?, file("--svg", &self.svg)?, file("--json", &self.json)?);
        OutputFile::apart(&[trace.as_ref(), svg.as_ref(), json.as_ref()])?;
        Ok(Output {
            trace,
            svg,
            svg_range: self.svg_range.clone().unwrap_or_default(),
            json,
            timeline: self.timeline,
            lang: Lang::or_locale(self.lang.as_deref()),
        })
    }
}

// The thresholds. The numbers take negative values (`allow_negative_numbers`), so that
// `--idle-gap-ms -1` is told its range rather than read as a flag of its own.
#[derive(clap::Args, Debug, Clone)]
pub struct ThresholdFlags {
    #[arg(
        long = "range",
        value_name = "NAME",
        help_heading = WINDOWS,
        help = "Make windows for the NVTX range NAME only (repeat the flag for more names); by default every top-level range name gets one, up to 20 a process"
    )]
    pub ranges: Vec<String>,
    #[arg(
        long,
        value_name = "MS",
        default_value_t = Thresholds::DEFAULT.idle_gap_ms,
        allow_negative_numbers = true,
        value_parser = number(0.0..=60_000.0),
        help_heading = THRESHOLDS,
        help = "An idle gap is a time longer than MS when a device ran nothing [0..=60000]"
    )]
    pub idle_gap_ms: f64,
    #[arg(
        long,
        value_name = "MS",
        default_value_t = Thresholds::DEFAULT.launch_gap_ms,
        allow_negative_numbers = true,
        value_parser = number(0.0..=60_000.0),
        help_heading = THRESHOLDS,
        help = "Between two small kernels of one stream, the device idle longer than MS (and not longer than --idle-gap-ms) is a launch gap [0..=60000]"
    )]
    pub launch_gap_ms: f64,
    #[arg(
        long,
        value_name = "MS",
        default_value_t = Thresholds::DEFAULT.back_to_back_ms,
        allow_negative_numbers = true,
        value_parser = number(0.0..=60_000.0),
        help_heading = THRESHOLDS,
        help = "A copy and a kernel on one stream are back to back when the second starts within MS of the first's end [0..=60000]"
    )]
    pub back_to_back_ms: f64,
    #[arg(
        long,
        value_name = "MS",
        default_value_t = Thresholds::DEFAULT.small_kernel_ms,
        allow_negative_numbers = true,
        value_parser = number(0.0..=60_000.0),
        help_heading = THRESHOLDS,
        help = "A kernel of MS or less is small [0..=60000]"
    )]
    pub small_kernel_ms: f64,
    #[arg(
        long,
        value_name = "N",
        default_value_t = Thresholds::DEFAULT.many_small_kernels,
        allow_negative_numbers = true,
        value_parser = whole(1usize..=1_000_000_000),
        help_heading = THRESHOLDS,
        help = "N small kernels in a window, or more, are many [1..=1000000000]"
    )]
    pub many_small_kernels: usize,
    #[arg(
        long,
        value_name = "MS",
        default_value_t = Thresholds::DEFAULT.late_rank_ms,
        allow_negative_numbers = true,
        value_parser = number(0.0..=60_000.0),
        help_heading = THRESHOLDS,
        help = "A collective whose ranks started it further apart than MS waited for a late rank [0..=60000]"
    )]
    pub late_rank_ms: f64,
    #[arg(
        long,
        value_name = "MS",
        default_value_t = Thresholds::DEFAULT.cpu_ahead_ms,
        allow_negative_numbers = true,
        value_parser = number(0.0..=600_000.0),
        help_heading = THRESHOLDS,
        help = "In an NVTX range's window, the work it launched ending more than MS after the range (at the median of its occurrences) is the CPU running ahead of the GPU [0..=600000]"
    )]
    pub cpu_ahead_ms: f64,
}

impl ThresholdFlags {
    /// The findings' thresholds the flags set: each flag to its field, in one place.
    pub fn thresholds(&self) -> Thresholds {
        Thresholds {
            idle_gap_ms: self.idle_gap_ms,
            launch_gap_ms: self.launch_gap_ms,
            back_to_back_ms: self.back_to_back_ms,
            small_kernel_ms: self.small_kernel_ms,
            many_small_kernels: self.many_small_kernels,
            late_rank_ms: self.late_rank_ms,
            cpu_ahead_ms: self.cpu_ahead_ms,
        }
    }
}
