//! streamlab: CUDA streams and concurrency, taught and measured from Rust.
//!
//! The shared runtime, one module a job: [`gpu`] (driver, context, embedded PTX, device
//! facts, launches), [`stream`] (streams and events), [`memory`] (pinned and device buffers,
//! copies), [`kernels`] (one typed launch per kernel), [`graph`] (stream capture and CUDA
//! graphs), [`timeline`] (per-stream spans),
//! [`timing`] (medians), [`data`] (inputs and checks), [`report`] (what a demo prints).
//! On top of it, [`demos`]: one module per technique, each reading like the tutorial it
//! teaches.
pub mod data;
pub mod demos;
pub mod error;
pub mod gpu;
pub mod graph;
pub mod kernels;
pub mod memory;
pub mod report;
pub mod stream;
pub mod timeline;
pub mod timing;

/// The per-element arithmetic the kernels run, compiled for the host: the CPU reference.
pub use kernels_gpu::math;

pub use error::{Error, Result};
pub use gpu::{Gpu, LaunchConfig};
pub use stream::{Event, Stream, StreamKind};
