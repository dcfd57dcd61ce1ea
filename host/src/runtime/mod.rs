//! The runtime: a thin, safe view of the CUDA driver. It knows nothing of lessons.
//!
//! [`context`] (driver, device, primary context, device facts), [`ptx`] (the embedded PTX,
//! one per architecture, and which one a device loads), [`kernels`] and
//! [`kernel_launch`] (the module and one typed launcher per kernel), [`stream`] (streams, the
//! asynchronous copies, and the observer a stream reports to), [`event`] (events),
//! [`memory`] (host and device buffers), [`pool`] (stream-ordered allocation and the device's
//! memory pool), [`managed`] (managed memory, its prefetches and advice), [`worker`] (a host
//! thread of its own on the same context), [`graph`] (stream capture and CUDA graphs), [`op`]
//! (what an enqueued operation is), [`cupti`] (CUPTI, opened at run time: what each operation
//! really did on the GPU), [`peer`] (two GPUs: peer access and the link between them, with
//! NVML's count of NVLink links), [`nccl`] (NCCL, opened at run time: communicators and the
//! all-reduce), [`error`]. [`gpu`] bundles a context with its kernels. `libcuda` is loaded at
//! run time (cudarc's `dynamic-loading`), so a machine without the driver gets a one-line
//! error, not a loader failure.
//!
//! Every driver call goes through `driver`: one function per raw call, as cudarc's `result`
//! layer is. The other files never call cudarc's `sys` themselves (`tests/layers.rs` checks
//! it).
//!
//! Handles keep their context alive (each holds a [`Context`], a reference-counted owner of
//! the primary context), so nothing can outlive what it was made in. Host memory that an
//! asynchronous copy uses is tracked (module `in_flight`: an event recorded after each copy,
//! which the host waits for before it touches the buffer), so enqueueing from a borrowed buffer
//! is safe.
pub mod context;
/// CUPTI, in a crate of its own (`cupti/`): the recorder here and `streamlab trace` share it.
pub use streamlab_cupti as cupti;
mod driver;
pub mod error;
pub mod event;
pub mod gpu;
pub mod graph;
mod in_flight;
pub mod kernel_launch;
pub mod kernels;
pub mod managed;
pub mod memory;
pub mod nccl;
mod nvml;
pub mod op;
pub mod peer;
pub mod pool;
pub mod ptx;
pub mod stream;
pub mod worker;

pub use context::{AsContext, Context, DeviceInfo};
pub use error::{Error, Result};
pub use gpu::Gpu;
pub use kernels::HalfFormat;
pub use managed::{Advice, Location, ManagedBuffer};
pub use memory::{DeviceBuffer, HostBuffer};
pub use op::{LaunchConfig, Op, OpKind};
pub use pool::{MemPool, StreamBuffer};
pub use stream::{Event, Observer, Stream, StreamKind};
pub use worker::Worker;

/// The kernel launches' former path (`runtime::launch`), for code outside the runtime that
/// still names it (tests/ptx.rs reads `MAX_ARGS` there).
pub use kernel_launch as launch;
