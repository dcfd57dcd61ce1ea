//! streamlab: CUDA streams and concurrency, taught and measured from Rust.
//!
//! Four layers, arrows pointing down only:
//! - [`lessons`]: one file per technique, each reading like the tutorial it teaches; beside
//!   them [`trace`], a profiler of any CUDA program, which never runs a lesson (the two never
//!   import each other);
//! - [`lab`]: the lesson harness (warm-up, interleaved repeats, statistics, checks, budget,
//!   timeline, report, exit code) that every lesson runs in, and the drawing room
//!   (`lab::record`) that `trace` shares;
//! - [`runtime`]: a thin, safe view of the CUDA driver (context, streams, events, memory,
//!   kernels, graphs), which knows nothing of lessons;
//! - [`text`]: the words, in English and Chinese (the catalogs and the `t!` macro), below
//!   everything, so that an error of the runtime is a sentence of the catalogs too.
//!
//! The `streamlab` command (`main.rs`) sits on top.
pub mod lab;
pub mod lessons;
pub mod runtime;
pub mod text;
pub mod trace;

/// The per-element arithmetic the kernels run, compiled for the host: the CPU reference.
pub use kernels_gpu::math;

pub use runtime::{Error, Gpu, Result};
