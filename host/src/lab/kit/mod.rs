//! What several lessons share, one floor below them: the chunked copy-compute-copy pipeline
//! over streams ([`stream_pipeline`]), the host's log of a host-and-GPU pipeline
//! ([`host_batch_log`]), sleep kernels as stand-ins for work ([`sleep`]), batch sizes
//! ([`batches`]), the other GPUs of a multi-GPU lesson ([`devices`]) and a two-stream
//! run's gap split by a bound from times beside each other ([`contention`]). A helper that only
//! one lesson uses lives beside that lesson instead (`tests/layers.rs` checks it).
pub mod batches;
pub mod contention;
pub mod devices;
pub mod host_batch_log;
pub mod sleep;
pub mod stream_pipeline;
