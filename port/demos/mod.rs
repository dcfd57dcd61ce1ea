//! One module per technique, each a self-contained lesson: it sets up its data, runs the
//! synchronous and the asynchronous version, checks them against each other and against the
//! CPU, and explains what the numbers show.
use crate::error::{ensure, Error, Result};
use crate::gpu::Gpu;
use crate::report::Report;

pub mod basics;
pub mod callback;
pub mod compute_transfer;
pub mod default_stream;
pub mod estimate;
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
pub type ValidateFn = fn(&Options) -> Result<()>;

/// A demo as the CLI lists it.
pub struct Demo {
    pub name: &'static str,
    pub summary: &'static str,
    /// The flags this demo reads, for `streamlab list`.
    pub flags: &'static str,
    /// Checks the options without a GPU; the CLI calls it for every selected demo before it
    /// touches the GPU, so bad input costs nothing and loses no other demo's output.
    pub validate: ValidateFn,
    pub run: DemoFn,
}

/// Every demo, in the order `streamlab run all` runs them. Each module owns its `SUMMARY`
/// and `FLAGS` (the flags it reads, with defaults), so adding a demo touches one line here.
pub const DEMOS: &[Demo] = &[
    Demo {
        name: "basics",
        summary: basics::SUMMARY,
        flags: basics::FLAGS,
        validate: basics::check_options,
        run: basics::run,
    },
    Demo {
        name: "overlap",
        summary: overlap::SUMMARY,
        flags: overlap::FLAGS,
        validate: overlap::check_options,
        run: overlap::run,
    },
    Demo {
        name: "sleep-streams",
        summary: sleep_streams::SUMMARY,
        flags: sleep_streams::FLAGS,
        validate: sleep_streams::check_options,
        run: sleep_streams::run,
    },
    Demo {
        name: "pinned-vs-pageable",
        summary: pinned_vs_pageable::SUMMARY,
        flags: pinned_vs_pageable::FLAGS,
        validate: pinned_vs_pageable::check_options,
        run: pinned_vs_pageable::run,
    },
    Demo {
        name: "default-stream",
        summary: default_stream::SUMMARY,
        flags: default_stream::FLAGS,
        validate: default_stream::check_options,
        run: default_stream::run,
    },
    Demo {
        name: "priority",
        summary: priority::SUMMARY,
        flags: priority::FLAGS,
        validate: priority::check_options,
        run: priority::run,
    },
    Demo {
        name: "callback",
        summary: callback::SUMMARY,
        flags: callback::FLAGS,
        validate: callback::check_options,
        run: callback::run,
    },
    Demo {
        name: "events",
        summary: events::SUMMARY,
        flags: events::FLAGS,
        validate: events::check_options,
        run: events::run,
    },
    Demo {
        name: "sync-methods",
        summary: sync_methods::SUMMARY,
        flags: sync_methods::FLAGS,
        validate: sync_methods::check_options,
        run: sync_methods::run,
    },
    Demo {
        name: "compute-transfer",
        summary: compute_transfer::SUMMARY,
        flags: compute_transfer::FLAGS,
        validate: compute_transfer::check_options,
        run: compute_transfer::run,
    },
    Demo {
        name: "prefetch",
        summary: prefetch::SUMMARY,
        flags: prefetch::FLAGS,
        validate: prefetch::check_options,
        run: prefetch::run,
    },
    Demo {
        name: "stream-sweep",
        summary: stream_sweep::SUMMARY,
        flags: stream_sweep::FLAGS,
        validate: stream_sweep::check_options,
        run: stream_sweep::run,
    },
    Demo {
        name: "launch-order",
        summary: launch_order::SUMMARY,
        flags: launch_order::FLAGS,
        validate: launch_order::check_options,
        run: launch_order::run,
    },
    Demo {
        name: "graph",
        summary: graph::SUMMARY,
        flags: graph::FLAGS,
        validate: graph::check_options,
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

/// The largest array a kernel can take: its element count is a `u32` parameter.
pub const MAX_ELEMENTS: usize = u32::MAX as usize;
/// The most streams any demo creates (`--streams`).
pub const MAX_STREAMS: usize = 64;

/// The checks every demo shares: `--elements` within what a kernel can index.
pub fn check_common(opts: &Options) -> Result<()> {
    match opts.elements {
        Some(n) => check_elements(n, MAX_ELEMENTS),
        None => Ok(()),
    }
}

/// `--elements` must be from 1 to `max`.
pub fn check_elements(n: usize, max: usize) -> Result<()> {
    ensure(n >= 1, || "--elements must be at least 1".into())?;
    ensure(n <= max, || {
        format!("--elements {n} is more than this demo takes ({max})")
    })
}

/// `--sleep-us` must be from `min` to `max` for this demo; `why` says what the bounds protect.
pub fn check_sleep_us(us: f64, min: f64, max: f64, why: &str) -> Result<()> {
    ensure(us >= min && us <= max, || {
        format!("--sleep-us {us} is outside {min}..={max} for this demo: {why}")
    })
}

/// `count` buffers of `n` elements of `T`, in bytes, or a one-line error if that overflows.
pub fn buffer_bytes<T>(n: usize, count: usize) -> Result<usize> {
    n.checked_mul(count)
        .and_then(|e| e.checked_mul(std::mem::size_of::<T>()))
        .ok_or_else(|| {
            Error::InvalidInput(format!(
                "{count} buffers of {n} elements do not fit in memory"
            ))
        })
}

/// Fails with a one-line explanation when `bytes` of host memory are not available
/// (`MemAvailable` in /proc/meminfo; where that cannot be read, the allocation itself decides).
pub fn ensure_host_memory(bytes: usize, what: &str) -> Result<()> {
    let available = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
            let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
            kib.checked_mul(1024)
        });
    match available {
        Some(free) if bytes > free => Err(Error::InvalidInput(format!(
            "{what} needs {:.1} MiB of host memory but only {:.1} MiB is available",
            bytes as f64 / 1048576.0,
            free as f64 / 1048576.0
        ))),
        _ => Ok(()),
    }
}

/// Helpers for the demos' unit tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::Options;
    use crate::error::{Error, Result};

    /// The flags of the batch pipelines (callback, compute-transfer, prefetch).
    pub fn batch_opts(elements: usize, batches: usize, iters: u32) -> Options {
        Options {
            elements: Some(elements),
            batches: Some(batches),
            iters: Some(iters),
            ..Options::default()
        }
    }

    /// The message `check` refuses `o` with; panics unless it is a one-line InvalidInput.
    pub fn refusal(check: fn(&Options) -> Result<()>, o: &Options) -> String {
        match check(o) {
            Err(Error::InvalidInput(why)) if !why.contains('\n') => why,
            other => panic!("{o:?}: expected a one-line InvalidInput, got {other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_demo_has_a_unique_name_and_documents_its_flags() {
        let mut names: Vec<&str> = DEMOS.iter().map(|d| d.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DEMOS.len());
        assert!(DEMOS
            .iter()
            .all(|d| !d.summary.is_empty() && d.flags.contains("--")));
        assert!(find("all").is_err() && find("overlap").is_ok());
    }

    #[test]
    fn shared_validators_refuse_what_they_should() {
        assert!(check_elements(0, 10).is_err());
        assert!(check_elements(11, 10).is_err());
        assert!(check_elements(10, 10).is_ok());
        assert!(check_sleep_us(0.5, 1.0, 10.0, "x").is_err());
        assert!(check_sleep_us(5.0, 1.0, 10.0, "x").is_ok());
        assert!(buffer_bytes::<f32>(usize::MAX / 2, 3).is_err());
        assert_eq!(buffer_bytes::<f32>(10, 3).unwrap(), 120);
        assert!(ensure_host_memory(usize::MAX, "everything").is_err());
        assert!(ensure_host_memory(1, "a byte").is_ok());
    }
}
