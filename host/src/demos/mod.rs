//! One module per technique, each a self-contained lesson: it sets up its data, runs the
//! synchronous and the asynchronous version, checks them against each other and against the
//! CPU, and explains what the numbers show.
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::report::Report;

pub mod basics;
pub mod callback;
pub mod compute_transfer;
pub mod default_stream;
pub mod events;
pub mod graph;
pub mod launch_order;
pub mod overlap;
pub mod pinned_vs_pageable;
pub mod prefetch;
pub mod priority;
pub mod sleep_streams;
pub mod stream_sweep;
pub mod sync_methods;

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

/// Every demo, in the order `streamlab run all` runs them. Each module owns its `SUMMARY`
/// and `FLAGS` (the flags it reads, with defaults), so adding a demo touches one line here.
pub const DEMOS: &[Demo] = &[
    Demo {
        name: "basics",
        summary: basics::SUMMARY,
        flags: basics::FLAGS,
        run: basics::run,
    },
    Demo {
        name: "overlap",
        summary: overlap::SUMMARY,
        flags: overlap::FLAGS,
        run: overlap::run,
    },
    Demo {
        name: "sleep-streams",
        summary: sleep_streams::SUMMARY,
        flags: sleep_streams::FLAGS,
        run: sleep_streams::run,
    },
    Demo {
        name: "pinned-vs-pageable",
        summary: pinned_vs_pageable::SUMMARY,
        flags: pinned_vs_pageable::FLAGS,
        run: pinned_vs_pageable::run,
    },
    Demo {
        name: "default-stream",
        summary: default_stream::SUMMARY,
        flags: default_stream::FLAGS,
        run: default_stream::run,
    },
    Demo {
        name: "priority",
        summary: priority::SUMMARY,
        flags: priority::FLAGS,
        run: priority::run,
    },
    Demo {
        name: "callback",
        summary: callback::SUMMARY,
        flags: callback::FLAGS,
        run: callback::run,
    },
    Demo {
        name: "events",
        summary: events::SUMMARY,
        flags: events::FLAGS,
        run: events::run,
    },
    Demo {
        name: "sync-methods",
        summary: sync_methods::SUMMARY,
        flags: sync_methods::FLAGS,
        run: sync_methods::run,
    },
    Demo {
        name: "compute-transfer",
        summary: compute_transfer::SUMMARY,
        flags: compute_transfer::FLAGS,
        run: compute_transfer::run,
    },
    Demo {
        name: "prefetch",
        summary: prefetch::SUMMARY,
        flags: prefetch::FLAGS,
        run: prefetch::run,
    },
    Demo {
        name: "stream-sweep",
        summary: stream_sweep::SUMMARY,
        flags: stream_sweep::FLAGS,
        run: stream_sweep::run,
    },
    Demo {
        name: "launch-order",
        summary: launch_order::SUMMARY,
        flags: launch_order::FLAGS,
        run: launch_order::run,
    },
    Demo {
        name: "graph",
        summary: graph::SUMMARY,
        flags: graph::FLAGS,
        run: graph::run,
    },
];

pub fn find(name: &str) -> Result<&'static Demo> {
    DEMOS.iter().find(|d| d.name == name).ok_or_else(|| {
        let names: Vec<&str> = DEMOS.iter().map(|d| d.name).collect();
        Error::InvalidInput(format!(
            "no demo named {name:?}; demos: {}, all",
            names.join(", ")
        ))
    })
}
