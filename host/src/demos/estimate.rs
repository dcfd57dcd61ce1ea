//! Rough work estimates that bound a run before anything is allocated. They are never
//! reported as measurements; they only turn flags that would keep the GPU busy for minutes
//! into a one-line refusal. The pipeline demos (callback, events, compute-transfer,
//! prefetch, stream-sweep) share them.
use crate::error::{Error, Result};
use crate::gpu::Gpu;

/// The longest one repeat of a demo may be estimated to take, in ms.
pub const MAX_MS_PER_REPEAT: f64 = 60_000.0;
/// The H100 these numbers come from: 132 SMs at 1.98 GHz.
const H100_SM_GHZ: f64 = 132.0 * 1.98;

/// How fast the GPU and the host are assumed to be.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkModel {
    /// GPU time of one `compute_element` iteration of one element with the whole GPU
    /// busy, in ps (an H100: 524,288 elements x 100 iterations take about 75 µs).
    pub compute_ps: f64,
    /// Pinned host<->device copy bandwidth, one direction, GB/s.
    pub copy_gb_per_s: f64,
    /// Fixed cost of one launch or copy, µs.
    pub op_us: f64,
    /// Blocks of 256 threads resident at once on the whole GPU.
    pub blocks_per_wave: usize,
    /// Host time to prepare one element in the callback demo (a hash), ns.
    pub host_prepare_ns: f64,
}

impl WorkModel {
    /// An H100. Without a GPU the flags are judged against it, the fastest GPU these
    /// demos were tuned on, so only work too long even there is refused before the GPU
    /// is touched; [`WorkModel::for_gpu`] then rescales for the GPU really present.
    pub const H100: WorkModel = WorkModel {
        compute_ps: 1.5,
        copy_gb_per_s: 50.0,
        op_us: 5.0,
        blocks_per_wave: 132 * 8,
        host_prepare_ns: 2.0,
    };

    /// The H100 model scaled to `gpu`: compute by SMs x clock, waves by its SM count
    /// and resident blocks. Copy bandwidth stays the H100's (the bus is not queried).
    pub fn for_gpu(gpu: &Gpu) -> WorkModel {
        let info = &gpu.info;
        let sms = info.multiprocessors.max(1) as f64;
        let sm_ghz = sms * info.clock_khz.max(1) as f64 / 1e6;
        WorkModel {
            compute_ps: WorkModel::H100.compute_ps * (H100_SM_GHZ / sm_ghz).max(0.1),
            blocks_per_wave: info.multiprocessors.max(1) as usize
                * gpu.resident_blocks_per_sm(256) as usize,
            ..WorkModel::H100
        }
    }

    /// `compute` on `n` elements for `iters` iterations, ms.
    pub fn compute_ms(&self, n: usize, iters: u32) -> f64 {
        n as f64 * iters as f64 * self.compute_ps * 1e-9 + self.op_us * 1e-3
    }

    /// One copy of `n` floats, one direction, ms.
    pub fn copy_ms(&self, n: usize) -> f64 {
        n as f64 * 4.0 / (self.copy_gb_per_s * 1e6) + self.op_us * 1e-3
    }

    /// A light element-wise kernel (add, scale) on `n` elements: memory bound, ms.
    pub fn elementwise_ms(&self, n: usize) -> f64 {
        // Three arrays through ~2 TB/s of device memory.
        n as f64 * 12.0 / 2e9 + self.op_us * 1e-3
    }

    /// How many waves a grid of `blocks` blocks of 256 threads takes.
    pub fn waves(&self, blocks: usize) -> usize {
        blocks.div_ceil(self.blocks_per_wave.max(1))
    }

    /// The callback demo's host preparation of `n` elements, ms.
    pub fn prepare_ms(&self, n: usize) -> f64 {
        n as f64 * self.host_prepare_ns * 1e-6
    }
}

/// Refuses, in one line, work estimated over [`MAX_MS_PER_REPEAT`] per repeat of
/// `demo`; `what` names the flags that set the work.
pub fn ensure_bounded(demo: &str, estimate_ms: f64, what: &str) -> Result<()> {
    if estimate_ms <= MAX_MS_PER_REPEAT {
        return Ok(());
    }
    Err(Error::InvalidInput(format!(
        "{demo}: {what} is estimated at {:.0} s of GPU work per repeat, over the {:.0} s a repeat may take: use smaller values",
        estimate_ms / 1e3,
        MAX_MS_PER_REPEAT / 1e3
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_model_matches_the_h100_defaults_and_bounds_a_repeat() {
        let m = WorkModel::H100;
        // The default batch computes in about the time of its two copies (2 MiB each).
        let c = m.compute_ms(
            crate::demos::compute_transfer::DEFAULT_ELEMENTS,
            crate::demos::compute_transfer::DEFAULT_ITERS,
        );
        let h = m.copy_ms(crate::demos::compute_transfer::DEFAULT_ELEMENTS);
        assert!(
            (0.03..0.3).contains(&c) && (0.02..0.2).contains(&h),
            "{c} {h}"
        );
        assert_eq!(m.waves(1), 1);
        assert_eq!(m.waves(m.blocks_per_wave + 1), 2);
        assert!(ensure_bounded("x", MAX_MS_PER_REPEAT, "x").is_ok());
        assert!(ensure_bounded("x", MAX_MS_PER_REPEAT + 1.0, "x").is_err());
        // No overflow for the largest counts.
        assert!(m.compute_ms(usize::MAX, u32::MAX).is_finite());
    }
}
