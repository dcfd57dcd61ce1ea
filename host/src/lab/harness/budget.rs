//! One budget policy for every lesson: what its flags will cost, estimated before anything
//! is allocated, and refused in one line when it is more than the machine has or more than a
//! repeat may take. Estimates are never reported as measurements.
use crate::runtime::{DeviceInfo, Error, Gpu, Result};
use crate::t;
use crate::text::Text;

/// The longest one repeat of a lesson (all its versions once) may be estimated to take.
pub const MAX_SECONDS_PER_REPEAT: f64 = 60.0;
/// The largest array a kernel can take: its element count is a `u32` parameter.
pub const MAX_ELEMENTS: usize = u32::MAX as usize;
/// The most streams any lesson creates.
pub const MAX_STREAMS: usize = 64;
/// A speed-up a lesson calls clear (for interpretation lines): 10% or more.
pub const CLEAR_SPEEDUP: f64 = 1.10;

/// What a lesson's flags will cost.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub host_bytes: usize,
    pub device_bytes: usize,
    /// Estimated GPU (or host-waiting) time of one repeat of every version, ms.
    pub ms_per_repeat: f64,
    /// The flags that set the work, for the refusal message.
    pub work_flags: Vec<Text>,
    /// GPUs the lesson drives from this process (0 and 1 both mean one).
    pub gpus: u32,
    /// Whether the lesson calls NCCL.
    pub nccl: bool,
}

impl Plan {
    pub fn new() -> Plan {
        Plan::default()
    }

    /// `count` host buffers of `n` elements of `T`.
    pub fn host<T>(mut self, n: usize, count: usize) -> Result<Plan> {
        self.host_bytes = add(self.host_bytes, bytes::<T>(n, count)?)?;
        Ok(self)
    }

    /// `count` device buffers of `n` elements of `T`.
    pub fn device<T>(mut self, n: usize, count: usize) -> Result<Plan> {
        self.device_bytes = add(self.device_bytes, bytes::<T>(n, count)?)?;
        Ok(self)
    }

    /// The lesson drives `n` GPUs from this process: the one `--device` names and the
    /// lowest-numbered others ([`crate::lab::kit::devices`]).
    pub fn gpus(mut self, n: u32) -> Plan {
        self.gpus = n;
        self
    }

    /// The lesson calls NCCL, which is opened at run time and may be missing.
    pub fn nccl(mut self) -> Plan {
        self.nccl = true;
        self
    }

    /// One repeat is estimated at `ms`, set by `flags` (e.g. "--elements x --iters", or a
    /// sentence of the catalogs where the flags need words).
    pub fn work(mut self, ms: f64, flags: impl Into<Text>) -> Plan {
        self.ms_per_repeat += ms;
        self.work_flags.push(flags.into());
        self
    }

    /// Refuses what cannot run here: more host memory than is available, a repeat over
    /// [`MAX_SECONDS_PER_REPEAT`], or (with a GPU) more device memory than is free.
    pub fn admit(&self, gpu: Option<&Gpu>) -> Result<()> {
        // NaN is refused too: it is not within the cap.
        if self.ms_per_repeat.is_nan() || self.ms_per_repeat > MAX_SECONDS_PER_REPEAT * 1e3 {
            let flags = Text::List(self.work_flags.clone());
            let s = format!("{:.0}", self.ms_per_repeat / 1e3);
            let cap = format!("{MAX_SECONDS_PER_REPEAT:.0}");
            return Err(Error::InvalidInput(t!("error.budget.too_long", flags, s, cap)));
        }
        ensure_host_memory(self.host_bytes)?;
        if let Some(gpu) = gpu {
            if self.gpus > 1 {
                let found = crate::runtime::context::device_count()?;
                if found < self.gpus {
                    let n = self.gpus;
                    return Err(Error::NotRun(t!("error.kit.needs_gpus", n, found)));
                }
            }
            if self.nccl {
                crate::runtime::nccl::version()?;
            }
            gpu.ensure_device_memory(self.device_bytes, t!("error.budget.these_flags"))?;
        }
        Ok(())
    }
}

fn bytes<T>(n: usize, count: usize) -> Result<usize> {
    n.checked_mul(count)
        .and_then(|e| e.checked_mul(std::mem::size_of::<T>()))
        .ok_or_else(|| Error::InvalidInput(t!("error.budget.buffers_too_large", count, n)))
}

fn add(a: usize, b: usize) -> Result<usize> {
    a.checked_add(b).ok_or_else(|| Error::InvalidInput(t!("error.budget.sum_too_large")))
}

/// Refuses `--streams` over `--elements`: every stream gets a chunk of at least one element.
pub fn ensure_a_chunk_per_stream(streams: usize, elements: usize) -> Result<()> {
    if streams > elements {
        let line = t!("error.budget.chunk_per_stream", streams, elements);
        return Err(Error::InvalidInput(line));
    }
    Ok(())
}

/// Fails with a one-line explanation when `bytes` of host memory are not available
/// (`MemAvailable` in /proc/meminfo; where that cannot be read, the allocation decides).
pub fn ensure_host_memory(bytes: usize) -> Result<()> {
    let available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| {
        let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
        let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
        kib.checked_mul(1024)
    });
    match available {
        Some(free) if bytes > free => {
            let need = format!("{:.1}", bytes as f64 / 1048576.0);
            let free = format!("{:.1}", free as f64 / 1048576.0);
            Err(Error::InvalidInput(t!("error.budget.host_memory", need, free)))
        }
        _ => Ok(()),
    }
}

/// The H100 these numbers come from: 132 SMs at 1.98 GHz.
const H100_SM_GHZ: f64 = 132.0 * 1.98;

/// How fast the GPU and the host are assumed to be, for estimates only.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkModel {
    /// GPU time of one `compute_element` iteration of one element with the whole GPU busy,
    /// in ps (an H100: 524,288 elements x 100 iterations take about 75 µs).
    pub compute_ps: f64,
    /// Pinned host<->device copy bandwidth, one direction, GB/s.
    pub copy_gb_per_s: f64,
    /// Fixed cost of one launch or copy, µs.
    pub op_us: f64,
    /// Blocks of 256 threads resident at once on the whole GPU.
    pub blocks_per_wave: usize,
    /// Host time to prepare one element in the callback lesson (a hash), ns.
    pub host_prepare_ns: f64,
    /// SM clock, kHz (turns sleep times into clock ticks).
    pub clock_khz: f64,
}

impl WorkModel {
    /// An H100. Before the GPU is touched, flags are judged against it, the fastest GPU the
    /// lessons were tuned on, so only work too long even there is refused;
    /// [`WorkModel::for_device`] then rescales for the GPU really present.
    pub const H100: WorkModel = WorkModel {
        compute_ps: 1.5,
        copy_gb_per_s: 50.0,
        op_us: 5.0,
        blocks_per_wave: 132 * 8,
        host_prepare_ns: 2.0,
        clock_khz: 1_980_000.0,
    };

    /// The H100 model scaled to `info`: compute by SMs x clock, waves by its SM count and
    /// resident blocks. Copy bandwidth stays the H100's (the bus is not queried).
    pub fn for_device(info: &DeviceInfo) -> WorkModel {
        let sms = info.multiprocessors.max(1) as f64;
        let sm_ghz = sms * info.clock_khz.max(1) as f64 / 1e6;
        WorkModel {
            compute_ps: WorkModel::H100.compute_ps * (H100_SM_GHZ / sm_ghz).max(0.1),
            blocks_per_wave: info.multiprocessors.max(1) as usize
                * info.resident_blocks_per_sm(256) as usize,
            clock_khz: info.clock_khz.max(1) as f64,
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

    /// The callback lesson's host preparation of `n` elements, ms.
    pub fn prepare_ms(&self, n: usize) -> f64 {
        n as f64 * self.host_prepare_ns * 1e-6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_refuses_overflow_and_work_over_a_minute() {
        assert!(Plan::new().host::<f32>(usize::MAX / 2, 3).is_err());
        let ok = Plan::new().host::<f32>(10, 3).unwrap().work(1.0, "--x");
        assert_eq!(ok.host_bytes, 120);
        assert!(ok.admit(None).is_ok());
        let long = Plan::new().work(MAX_SECONDS_PER_REPEAT * 1e3 + 1.0, "--elements x --iters");
        let e = long.admit(None).unwrap_err().to_string();
        assert!(e.contains("--elements x --iters") && e.contains("60 s"), "{e}");
        assert!(Plan::new().work(f64::NAN, "--x").admit(None).is_err());
        assert!(ensure_host_memory(usize::MAX).is_err());
        assert!(ensure_host_memory(1).is_ok());
    }

    #[test]
    fn the_work_model_is_finite_and_counts_waves() {
        let m = WorkModel::H100;
        assert_eq!(m.waves(1), 1);
        assert_eq!(m.waves(m.blocks_per_wave + 1), 2);
        assert!(m.compute_ms(usize::MAX, u32::MAX).is_finite());
        // 1M floats one way at 50 GB/s: about 84 µs plus the fixed cost.
        assert!((m.copy_ms(1 << 20) - 0.0889).abs() < 1e-3);
    }
}
