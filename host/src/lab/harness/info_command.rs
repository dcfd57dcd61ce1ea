//! `streamlab info`: the device facts that decide what can overlap.
use clap::Args as _;

use crate::lab::harness::args::whole;
use crate::lab::harness::common::{DEVICE, MAX_DEVICE};
use crate::lab::record::recorded_runs;
use crate::lab::record::report::kernels_id;
use crate::runtime::ptx::embedded_archs;
use crate::runtime::{Error, Gpu, Result};
use crate::t;

// `info`'s flags. (`//`, not `///`: clap would make a doc comment the command's about.)
#[derive(clap::Args, Debug, Clone)]
pub struct InfoFlags {
    #[arg(
        long,
        value_name = "N",
        default_value_t = DEVICE,
        value_parser = whole(0u32..=MAX_DEVICE),
        help = "Which CUDA device, 0-based [0..=1023]"
    )]
    pub device: u32,
    #[arg(long, help = "Machine-readable output")]
    pub json: bool,
}

/// The `info` subcommand.
pub fn command() -> clap::Command {
    InfoFlags::augment_args(
        clap::Command::new("info").about("Print the device facts that decide what can overlap"),
    )
}

/// What this build is: "streamlab 0.1.0, kernels ptx-…, PTX for sm_75, sm_80, sm_90".
pub fn build() -> String {
    let version = env!("CARGO_PKG_VERSION");
    format!("streamlab {version}, kernels {}, PTX for {}", kernels_id(), embedded_archs())
}

/// Prints the facts of device `flags.device`, and of this build, as text or as JSON. With no
/// device, the error line names the build and offers the recorded runs.
pub fn print(flags: &InfoFlags) -> Result<()> {
    let gpu = Gpu::new(flags.device).map_err(|e| match e {
        Error::NoDevice(why) => {
            let program = std::env::args().next().unwrap_or_else(|| "streamlab".into());
            let argv = [program, "run".into(), "all".into()];
            let recorded = recorded_runs::hint_for("all", &argv);
            Error::NoDevice(t!(
                "error.then",
                why,
                then = t!("error.run.this_build", build = build(), recorded)
            ))
        }
        other => other,
    })?;
    let i = &gpu.info;
    if flags.json {
        let mut value = serde_json::to_value(i).unwrap_or_default();
        if let Some(facts) = value.as_object_mut() {
            let build = serde_json::json!({
                "version": env!("CARGO_PKG_VERSION"),
                "kernels": kernels_id(),
                "ptx_archs": crate::runtime::ptx::embedded().iter().map(|p| p.arch).collect::<Vec<_>>(),
            });
            facts.insert("build".into(), build);
        }
        println!("{}", serde_json::to_string_pretty(&value).unwrap_or_default());
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
    println!("  PTX loaded             {}, JIT-compiled for it by the driver", i.ptx_choice);
    println!("  build                  {}", build());
    Ok(())
}
