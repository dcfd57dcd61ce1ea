//! streamlab: CUDA streams and concurrency, taught and measured from Rust.
//!
//! Three layers, arrows pointing down only:
//! - [`lessons`]: one file per technique, each reading like the tutorial it teaches;
//! - [`lab`]: the lesson harness (warm-up, interleaved repeats, statistics, checks, budget,
//!   timeline, report, exit code) that every lesson runs in;
//! - [`runtime`]: a thin, safe view of the CUDA driver (context, streams, events, memory,
//!   kernels, graphs), which knows nothing of lessons.
//!
//! The `streamlab` command (`main.rs`) sits on top.
pub mod lab;
pub mod lessons;
pub mod runtime;

/// The per-element arithmetic the kernels run, compiled for the host: the CPU reference.
pub use kernels_gpu::math;

pub use runtime::{Error, Gpu, Result};
