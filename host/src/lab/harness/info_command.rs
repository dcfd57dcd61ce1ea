//! `streamlab info`: the device facts that decide what can overlap.
use clap::Args as _;

use crate::lab::harness::args::whole;
use crate::lab::harness::common::{DEVICE, MAX_DEVICE};
use crate::runtime::{Gpu, Result};

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

/// Prints the facts of device `flags.device`, as text or as JSON.
pub fn print(flags: &InfoFlags) -> Result<()> {
    let gpu = Gpu::new(flags.device)?;
    let i = &gpu.info;
    if flags.json {
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
    println!("  PTX loaded             {}, JIT-compiled for it by the driver", i.ptx_choice);
    Ok(())
}
