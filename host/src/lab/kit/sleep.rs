//! What the lessons built on the sleep kernel share: the hardware queues their streams land
//! on, what their sleeps cost a repeat (for [`Plan::work`](crate::lab::Plan::work)), the
//! shortest sleep that still says something, and the GPU's own start and end stamps of
//! `gpu.sleep_stamped` kernels ([`Stamps`]).
//!
//! Resident blocks and waves are the [`WorkModel`](crate::lab::WorkModel)'s
//! (`blocks_per_wave`, `waves`); sleep ticks are `gpu.info.cycles_for_micros(us)`.
use crate::runtime::memory::{copy_to_device_sync, copy_to_host_sync, DeviceView};
use crate::runtime::{DeviceBuffer, Error, Gpu, Result};
use crate::t;

/// The shortest sleep, µs, of a lesson that asks whether one kernel started before another
/// ended: the second is issued a few µs after the first, so a shorter kernel could end
/// before the next one starts whatever the streams allow, and the answer would mean nothing.
pub const OUTLASTS_A_LAUNCH_US: f64 = 100.0;

/// The hardware work queues a context gets when `CUDA_DEVICE_MAX_CONNECTIONS` is not set.
pub const DEFAULT_CONNECTIONS: usize = 8;

/// The hardware queues this process gets: `CUDA_DEVICE_MAX_CONNECTIONS` if set, else 8.
/// Streams beyond this count share queues, and work on one queue runs in order again.
pub fn connections() -> usize {
    parse_connections(std::env::var("CUDA_DEVICE_MAX_CONNECTIONS").ok().as_deref())
}

/// `CUDA_DEVICE_MAX_CONNECTIONS`'s value as the driver reads it: 1 to 32, else the default.
pub fn parse_connections(value: Option<&str>) -> usize {
    value
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|c| (1..=32).contains(c))
        .unwrap_or(DEFAULT_CONNECTIONS)
}

/// `sleeps` sleeps of `sleep_us` each, one after another, in ms: what a repeat costs when
/// nothing overlaps, the worst case a plan must admit.
pub fn serial_ms(sleeps: f64, sleep_us: f64) -> f64 {
    sleeps * sleep_us / 1e3
}

/// How many waves a grid of `blocks` takes on `multiprocessors` SMs holding `blocks_per_sm`
/// of its blocks each, as a fraction (3.9: three full waves and part of a fourth).
pub fn waves(blocks: usize, multiprocessors: i32, blocks_per_sm: u32) -> f64 {
    blocks as f64 / (multiprocessors.max(1) as f64 * blocks_per_sm.max(1) as f64)
}

/// The share of `total_ms` that `sleeps` sleeps of `sleep_ms` one after another account for
/// (the rest is copies and launch costs).
pub fn sleep_share(sleeps: f64, sleep_ms: f64, total_ms: f64) -> f64 {
    sleeps * sleep_ms / total_ms
}

/// A stamped sleep's GPU start and end times (`%globaltimer`), ns.
pub type Stamp = [u64; 2];

/// Where `gpu.sleep_stamped` kernels write their [`Stamp`]s: one slot per kernel.
pub struct Stamps {
    dev: DeviceBuffer<u64>,
    zeros: Vec<u64>,
}

impl Stamps {
    /// Slots for `kernels` kernels.
    pub fn new(gpu: &Gpu, kernels: usize) -> Result<Stamps> {
        Ok(Stamps { dev: DeviceBuffer::zeroed(gpu, 2 * kernels)?, zeros: vec![0; 2 * kernels] })
    }

    /// Zeroes every slot, so a kernel that did not run is caught by [`Stamps::read`]. Waits
    /// for the zeros to land: a copy from pageable memory may return before its DMA is done,
    /// and a non-blocking stream's kernel would not wait for it.
    pub fn clear(&self, gpu: &Gpu) -> Result<()> {
        copy_to_device_sync(&self.zeros, &self.dev)?;
        gpu.synchronize()
    }

    /// Kernel `i`'s slot: `gpu.sleep_stamped(&s, cycles, stamps.slot(i)?)`.
    pub fn slot(&self, i: usize) -> Result<DeviceView<'_, u64>> {
        self.dev.slice(2 * i..2 * i + 2)
    }

    /// Every kernel's stamp, once the device is idle (the legacy stream's copy would not wait
    /// for a non-blocking stream), or an error naming the first kernel that wrote no start
    /// and end.
    pub fn read(&self, gpu: &Gpu) -> Result<Vec<Stamp>> {
        checked(self.read_raw(gpu)?)
    }

    /// Every slot as it is, once the device is idle, zeros included: for a lesson whose own
    /// work may have cleared a kernel's stamps.
    pub fn read_raw(&self, gpu: &Gpu) -> Result<Vec<Stamp>> {
        gpu.synchronize()?;
        let mut raw = self.zeros.clone();
        copy_to_host_sync(&self.dev, &mut raw)?;
        Ok(raw.chunks_exact(2).map(|s| [s[0], s[1]]).collect())
    }
}

/// `stamps` if every one is a start and an end, else an error naming the first that is not.
pub fn checked(stamps: Vec<Stamp>) -> Result<Vec<Stamp>> {
    match stamps.iter().position(|s| s[0] == 0 || s[1] < s[0]) {
        None => Ok(stamps),
        Some(i) => {
            let stamp = format!("{:?}", stamps[i]);
            Err(Error::Verification(t!("error.kit.bad_stamps", i, stamp)))
        }
    }
}

/// `after`'s start minus `before`'s end, µs: positive if `after` waited for `before`,
/// negative if it started while `before` still ran.
pub fn gap_us(before: Stamp, after: Stamp) -> f64 {
    (after[0] as f64 - before[1] as f64) / 1e3
}

/// From the first start to the last end of `stamps`, ms.
pub fn span_ms(stamps: &[Stamp]) -> f64 {
    let start = stamps.iter().map(|s| s[0]).min().unwrap_or(0);
    let end = stamps.iter().map(|s| s[1]).max().unwrap_or(0);
    end.saturating_sub(start) as f64 / 1e6
}

/// The most kernels running at the same instant (a kernel runs from its start up to, not
/// including, its end).
pub fn max_concurrent(stamps: &[Stamp]) -> usize {
    // Ends sort before starts at the same time: a kernel that starts exactly when another
    // ends did not run beside it.
    let mut edges: Vec<(u64, i64)> = stamps.iter().flat_map(|s| [(s[0], 1), (s[1], -1)]).collect();
    edges.sort_unstable();
    let (mut running, mut most) = (0i64, 0i64);
    for (_, delta) in edges {
        running += delta;
        most = most.max(running);
    }
    most as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_follow_the_environment_variable_rules() {
        assert_eq!(parse_connections(None), 8);
        assert_eq!(parse_connections(Some("32")), 32);
        assert_eq!(parse_connections(Some(" 4 ")), 4);
        assert_eq!(parse_connections(Some("0")), 8);
        assert_eq!(parse_connections(Some("33")), 8);
        assert_eq!(parse_connections(Some("many")), 8);
    }

    #[test]
    fn serial_sleeps_add_up_in_ms() {
        assert_eq!(serial_ms(40.0, 1500.0), 60.0);
        assert_eq!(serial_ms(0.0, 1e7), 0.0);
    }

    #[test]
    fn waves_and_sleep_shares_follow_their_formulas() {
        // H100/H200: 132 SMs x 8 blocks of 256 = 1056 resident, 4096 blocks = 3.9 waves.
        assert!((waves(4096, 132, 8) - 3.878).abs() < 1e-3);
        assert_eq!(waves(4096, 512, 8), 1.0);
        assert_eq!(waves(4096, 0, 0), 4096.0);
        assert_eq!(sleep_share(4.0, 2.0, 10.0), 0.8);
    }

    #[test]
    fn stamps_give_gaps_spans_and_concurrency() {
        let (first, waited, beside) =
            ([1_000, 6_000_000], [6_002_000, 11_000_000], [4_000, 5_004_000]);
        assert!((gap_us(first, waited) - 2.0).abs() < 1e-9);
        assert!((gap_us(first, beside) + 5996.0).abs() < 1e-9);
        assert!((span_ms(&[first, waited]) - 10.999).abs() < 1e-9);
        assert!((span_ms(&[first, beside]) - 5.999).abs() < 1e-9);
        assert_eq!(max_concurrent(&[first, waited]), 1);
        assert_eq!(max_concurrent(&[first, beside]), 2);
        // Back to back (one ends exactly when the next starts): never two at once.
        assert_eq!(max_concurrent(&[[10, 20], [20, 30], [30, 40]]), 1);
        assert_eq!(max_concurrent(&[[10, 100], [11, 100], [12, 100]]), 3);
    }

    #[test]
    fn stamps_of_a_kernel_that_did_not_run_are_refused() {
        assert!(checked(vec![[1, 2], [3, 3]]).is_ok());
        for bad in [[0, 0], [0, 5], [5, 4]] {
            let e = checked(vec![[1, 2], bad]).unwrap_err().to_string();
            assert!(e.contains("kernel 1's stamps") && e.contains("did it run?"), "{e}");
        }
    }
}
