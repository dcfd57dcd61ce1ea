//! One module per technique, each a self-contained lesson: it sets up its data, runs the
//! synchronous and the asynchronous version, checks them against each other and against the
//! CPU, and explains what the numbers show.
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::report::Report;

pub mod overlap;

/// Settings from the command line. `None` means "the demo's own default".
#[derive(Debug, Clone)]
pub struct Options {
    pub elements: Option<usize>,
    pub streams: Option<usize>,
    pub iters: Option<u32>,
    pub batches: Option<usize>,
    pub sleep_us: Option<f64>,
    pub reps: usize,
    pub seed: u64,
    pub timeline: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            elements: None,
            streams: None,
            iters: None,
            batches: None,
            sleep_us: None,
            reps: 10,
            seed: 0x5EED,
            timeline: false,
        }
    }
}

pub type DemoFn = fn(&Gpu, &Options) -> Result<Report>;

/// A demo as the CLI lists it.
pub struct Demo {
    pub name: &'static str,
    pub summary: &'static str,
    /// The flags this demo reads, for `streamlab list`.
    pub flags: &'static str,
    pub run: DemoFn,
}

/// Every demo, in the order `streamlab run all` runs them.
pub const DEMOS: &[Demo] = &[Demo {
    name: "overlap",
    summary: "one stream vs K streams each copying in, computing and copying out its chunk",
    flags: "--elements (16777216) --streams (8) --iters (100) --reps --timeline",
    run: overlap::run,
}];

pub fn find(name: &str) -> Result<&'static Demo> {
    DEMOS.iter().find(|d| d.name == name).ok_or_else(|| {
        let names: Vec<&str> = DEMOS.iter().map(|d| d.name).collect();
        Error::InvalidInput(format!(
            "no demo named {name:?}; demos: {}, all",
            names.join(", ")
        ))
    })
}
