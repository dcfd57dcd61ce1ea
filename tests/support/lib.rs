//! Shared by the integration tests (tests/) and the benches (benches/).
//!
//! GPU tests are `#[ignore = "needs a CUDA GPU"]`: on a machine without one, `cargo test`
//! lists them as ignored (never as passed); on a GPU machine run them with
//! `cargo test --release -- --include-ignored`, where [`gpu`] fails loudly if no GPU is there.
pub use streamlab;
use streamlab::Gpu;

/// The GPU for a GPU test: device 0, or a panic naming why there is none.
pub fn gpu() -> Gpu {
    Gpu::new(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU and found none: {e}"))
}

/// The GPU for a bench, or `None` after printing "not run: no GPU" (benches have no
/// "ignored" state; they say so instead of reporting a time).
pub fn gpu_for_bench(bench: &str) -> Option<Gpu> {
    match Gpu::new(0) {
        Ok(gpu) => Some(gpu),
        Err(e) => {
            println!("{bench}: not run: no GPU ({e})");
            None
        }
    }
}

/// Seconds of GPU time as the `Duration` criterion's `iter_custom` wants.
pub fn gpu_duration(total_ms: f64) -> std::time::Duration {
    std::time::Duration::from_secs_f64(total_ms / 1e3)
}
