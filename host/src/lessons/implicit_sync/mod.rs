//! # Which calls wait for the device
//!
//! Some CUDA calls make the host, or the work they enqueue, wait for work on *other* streams,
//! though no stream was named for it: a program that overlaps streams loses the overlap at
//! each one. This lesson asks one question of eight calls: while a kernel ran on stream A,
//! did the call wait for it?
//!
//! The seed is the CUDA C++ Programming Guide's "Implicit Synchronization" (its list: a
//! page-locked host allocation, a device allocation, a device memset, any command to the
//! legacy default stream) and the Runtime API's "API synchronization behavior" (what a
//! memset and a copy from pageable memory do to the host). Each version is one call, made
//! while a kernel of T runs on stream A (`a` and `b` from `cudaStreamCreate`, so both
//! blocking):
//!
//! ```text
//! sleep_kernel<<<1, 1, 0, a>>>(T);
//! // one call, timed on the host; then cudaStreamQuery(a): is the kernel still running?
//! cudaMalloc(&d, bytes);                                          // may wait
//! cudaMallocAsync(&d, bytes, b);                                  // does not
//! cudaFree(d);                                                    // may wait
//! cudaMemcpyAsync(d, pageable, bytes, cudaMemcpyHostToDevice, b); // staged: does not
//! cudaMemset(d, 0, bytes);         // returns at once; the memset waits for A's kernel
//! cudaHostAlloc(&h, bytes, cudaHostAllocPortable);                // may wait
//! cudaDeviceSynchronize();                                        // waits
//! sleep_kernel<<<1, 1>>>(T / 10);  // returns at once; the kernel waits for A's kernel
//! ```
//!
//! In Rust: `DeviceBuffer::alloc(&gpu, n)`, `DeviceBuffer::alloc_async(&b, n)`, `drop(d)`,
//! `b.copy_to_device(&pageable, &d)`, `memory::memset(&d, 0)`, `HostBuffer::pinned(&gpu, n)`
//! (then zeroed on the host), `gpu.synchronize()`, and
//! `gpu.sleep_stamped(&Stream::legacy_default(&gpu), ..)`; `a.is_idle()` is
//! `cudaStreamQuery(a)`. The host's answer is that query: still running when the call
//! returned means the call did not wait. The GPU's answer, for the two calls whose work lands
//! on the legacy default stream, is in the kernel's own stamps (`%globaltimer`): the legacy
//! kernel's start against A's kernel's end, and whether the memset, aimed at A's stamps,
//! erased them after the kernel wrote them.
//!
//! What CUDA promises is asserted; what it leaves to the driver (cudaMalloc, cudaFree and
//! cudaHostAlloc "may" synchronize) is measured and reported, not asserted.
mod answers;

use kernels_gpu::math::compute_element;
use serde::Serialize;

use crate::lab::harness::data::random_inputs;
use crate::lab::harness::lesson::no_such_version;
use crate::lab::harness::stats::host_ms;
use crate::lab::kit::sleep::{gap_us, serial_ms, Stamps};
use crate::lab::{args, Checks, Drawing, Lesson, Measured, Plan, Report, Sample, WorkModel};
use crate::runtime::memory::memset;
use crate::runtime::{DeviceBuffer, Gpu, HostBuffer, Result, Stream, StreamBuffer};

pub use answers::{answer, check_host, check_legacy_after, check_memset_after, interpret, Answer};

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Sleep of the kernel on stream A, µs [1000..=1000000]: every call is made while it
    /// runs. Try 100000: the calls that wait hold the host five times longer, the others not.
    #[arg(long, default_value_t = 20_000.0, value_parser = args::number(1000.0..=1e6))]
    pub sleep_us: f64,
    /// Floats each allocation holds and the pageable copy moves [1..=268435456]. Try
    /// 268435456 (1 GiB): allocating that much takes long on its own.
    #[arg(long, default_value_t = 1 << 20, value_parser = args::whole(1usize..=1 << 28))]
    pub elements: usize,
}

/// The kernel on the legacy default stream sleeps this fraction of stream A's.
pub const SHORT_FRACTION: f64 = 0.1;
/// sin·cos steps of the compute kernel that uses the pageable copy's data.
pub const ITERS: u32 = 16;
/// The parts of a sample, each 1 or 0: stream A's kernel still ran as the call began (else
/// the question cannot be asked); it had ended when the call returned (the call waited).
pub const ASKED: &str = "A's kernel ran as the call began";
pub const WAITED: &str = "A's kernel had ended as the call returned";
/// The memset's part, 1 or 0: it ran after A's kernel (both of the kernel's stamps erased).
pub const MEMSET_AFTER: &str = "memset ran after A's kernel";
/// The legacy kernel's part: its start minus A's kernel's end, µs (GPU stamps).
pub const LEGACY_GAP_US: &str = "legacy kernel start - A's end, µs";

/// The calls, in version order: the pair CUDA's list starts with (cudaMalloc, the baseline,
/// against cudaMallocAsync), then the rest of the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Call {
    Malloc,
    MallocAsync,
    Free,
    PageableCopy,
    Memset,
    HostAlloc,
    DeviceSynchronize,
    LegacyLaunch,
}

pub const CALLS: [Call; 8] = [
    Call::Malloc,
    Call::MallocAsync,
    Call::Free,
    Call::PageableCopy,
    Call::Memset,
    Call::HostAlloc,
    Call::DeviceSynchronize,
    Call::LegacyLaunch,
];

/// What CUDA documents of a call's host side while another stream's work runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Promise {
    /// It returns once the device is idle.
    Waits,
    /// It returns without waiting for other streams' work.
    Returns,
    /// It may or may not: the driver and the memory decide.
    Either,
}

impl Call {
    /// The version's name.
    pub fn name(self) -> &'static str {
        match self {
            Call::Malloc => "cudaMalloc",
            Call::MallocAsync => "cudaMallocAsync on stream B",
            Call::Free => "cudaFree",
            Call::PageableCopy => "pageable cudaMemcpyAsync on stream B",
            Call::Memset => "cudaMemset",
            Call::HostAlloc => "cudaHostAlloc",
            Call::DeviceSynchronize => "cudaDeviceSynchronize",
            Call::LegacyLaunch => "kernel launch on the legacy default stream",
        }
    }

    pub fn promise(self) -> Promise {
        match self {
            Call::Malloc | Call::Free | Call::HostAlloc => Promise::Either,
            Call::DeviceSynchronize => Promise::Waits,
            Call::MallocAsync | Call::PageableCopy | Call::Memset | Call::LegacyLaunch => {
                Promise::Returns
            }
        }
    }

    /// The name of the check on its host side.
    pub fn check_name(self) -> &'static str {
        match self {
            Call::Malloc => "cudaMalloc: waited or not (measured)",
            Call::MallocAsync => "cudaMallocAsync returned while stream A's kernel ran",
            Call::Free => "cudaFree: waited or not (measured)",
            Call::PageableCopy => "pageable cudaMemcpyAsync returned while stream A's kernel ran",
            Call::Memset => "cudaMemset returned while stream A's kernel ran",
            Call::HostAlloc => "cudaHostAlloc: waited or not (measured)",
            Call::DeviceSynchronize => "cudaDeviceSynchronize returned after stream A's kernel",
            Call::LegacyLaunch => "the legacy-stream launch returned while stream A's kernel ran",
        }
    }
}

/// What a call leaves that must outlive it: freed (or dropped) once the device is idle, so
/// that the next version starts from the same state and no free waits inside a timed call.
enum Kept {
    Nothing,
    Device(#[allow(dead_code)] DeviceBuffer<f32>),
    FromPool(StreamBuffer<f32>),
    Pinned(#[allow(dead_code)] HostBuffer<f32>),
}

pub struct ImplicitSync {
    n: usize,
    long_us: f64,
    long_cycles: u64,
    short_cycles: u64,
    /// Stream A runs the long kernel; B takes the calls that name a stream.
    stream_a: Stream,
    stream_b: Stream,
    legacy: Stream,
    /// Slot 0: stream A's kernel; slot 1: the legacy default stream's.
    stamps: Stamps,
    input: Vec<f32>,
    pageable: HostBuffer<f32>,
    copied: DeviceBuffer<f32>,
    /// The pageable copy's data, computed on and copied back: what the CPU checks (public
    /// for the tests).
    pub output: HostBuffer<f32>,
}

impl ImplicitSync {
    /// Launches the long kernel on stream A, makes `call` while it runs, and asks stream A
    /// whether the kernel still runs just before and just after. The time is the call's, on
    /// the host. Leaves the device idle.
    fn ask(&self, gpu: &Gpu, call: Call) -> Result<Sample> {
        // Untimed, before the kernel: the buffer cudaFree frees, and stamps cleared where a
        // kernel's stamps are read back.
        let to_free = match call {
            Call::Free => Some(DeviceBuffer::<f32>::alloc(gpu, self.n)?),
            _ => None,
        };
        if call == Call::LegacyLaunch {
            self.stamps.clear(gpu)?;
        }
        gpu.sleep_stamped(&self.stream_a, self.long_cycles, self.stamps.slot(0)?)?;
        let asked = !self.stream_a.is_idle()?;
        let (kept, ms) = host_ms(|| self.make(gpu, call, to_free));
        let waited = self.stream_a.is_idle();
        // Whatever the call left running ends before anything is freed or read.
        let idle = gpu.synchronize();
        let (kept, waited) = (kept?, waited?);
        idle?;
        if let Kept::FromPool(buffer) = kept {
            buffer.free_async(&self.stream_b)?;
        }
        let sample = Sample::ms(ms).part(ASKED, flag(asked)).part(WAITED, flag(waited));
        Ok(match call {
            Call::Memset => {
                let erased = self.stamps.read_raw(gpu)?[0] == [0, 0];
                sample.part(MEMSET_AFTER, flag(erased))
            }
            Call::LegacyLaunch => {
                let s = self.stamps.read(gpu)?;
                sample.part(LEGACY_GAP_US, gap_us(s[0], s[1]))
            }
            _ => sample,
        })
    }

    /// The call itself: the only part of a version that is timed.
    fn make(&self, gpu: &Gpu, call: Call, to_free: Option<DeviceBuffer<f32>>) -> Result<Kept> {
        Ok(match call {
            Call::Malloc => Kept::Device(DeviceBuffer::alloc(gpu, self.n)?),
            Call::MallocAsync => Kept::FromPool(DeviceBuffer::alloc_async(&self.stream_b, self.n)?),
            Call::Free => {
                drop(to_free); // cuMemFree
                Kept::Nothing
            }
            Call::PageableCopy => {
                self.stream_b.copy_to_device(&self.pageable, &self.copied)?;
                Kept::Nothing
            }
            Call::Memset => {
                memset(self.stamps.slot(0)?, 0)?;
                Kept::Nothing
            }
            Call::HostAlloc => Kept::Pinned(HostBuffer::pinned(gpu, self.n)?),
            Call::DeviceSynchronize => {
                gpu.synchronize()?;
                Kept::Nothing
            }
            Call::LegacyLaunch => {
                gpu.sleep_stamped(&self.legacy, self.short_cycles, self.stamps.slot(1)?)?;
                Kept::Nothing
            }
        })
    }

    /// The pageable copy's version, then what uses its data: the compute kernel and a copy
    /// back, on stream B after the timed call.
    fn pageable_copy(&self, gpu: &Gpu) -> Result<Sample> {
        let sample = self.ask(gpu, Call::PageableCopy)?;
        gpu.compute(&self.stream_b, &self.copied, ITERS)?;
        self.stream_b.copy_to_host(&self.copied, &self.output)?;
        self.stream_b.synchronize()?;
        Ok(sample)
    }
}

fn flag(yes: bool) -> f64 {
    if yes {
        1.0
    } else {
        0.0
    }
}

impl Lesson for ImplicitSync {
    const NAME: &'static str = "implicit-sync";
    const SUMMARY: &'static str =
        "which calls wait for another stream's kernel: allocations and frees, a pageable copy, a memset, a device synchronize, the legacy default stream";
    // Eight different calls: no pair of them is the same work done two ways.
    const SPEEDUP: bool = false;
    const DRAWING: Drawing = Drawing {
        host_row: true,
        measure: Some(("host time inside the call", &[])),
        note: "Each version launches the kernel on stream A, then makes one call; each run ends with an untimed cuCtxSynchronize that leaves the GPU idle.",
        ..Drawing::PLAIN
    };
    type Args = Args;

    fn versions(_: &Args) -> Vec<String> {
        CALLS.iter().map(|c| c.name().to_string()).collect()
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        // Every version waits for the long kernel; the legacy one adds its short kernel, and
        // the pageable copy's data is computed on and copied back.
        let sleeps = serial_ms(CALLS.len() as f64 + SHORT_FRACTION, a.sleep_us);
        let copy = 2.0 * model.copy_ms(a.elements) + model.compute_ms(a.elements, ITERS);
        Ok(Plan::new()
            .host::<f32>(a.elements, 4)? // the input, its pageable copy, the output, cudaHostAlloc's
            .device::<f32>(a.elements, 3)? // the copy's, cudaMalloc's (or cudaFree's), the pool's
            .work(sleeps + copy, "--sleep-us, --elements"))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<ImplicitSync> {
        let input = random_inputs(a.elements, seed);
        Ok(ImplicitSync {
            n: a.elements,
            long_us: a.sleep_us,
            long_cycles: gpu.info.cycles_for_micros(a.sleep_us),
            short_cycles: gpu.info.cycles_for_micros(a.sleep_us * SHORT_FRACTION),
            stream_a: Stream::new(gpu, "A (kernel)")?,
            stream_b: Stream::new(gpu, "B (calls)")?,
            legacy: Stream::legacy_default(gpu),
            stamps: Stamps::new(gpu, 2)?,
            pageable: HostBuffer::pageable_from_vec(gpu, input.clone())?,
            input,
            copied: DeviceBuffer::zeroed(gpu, a.elements)?,
            output: HostBuffer::pinned(gpu, a.elements)?,
        })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        match CALLS.get(v) {
            Some(Call::PageableCopy) => self.pageable_copy(gpu),
            Some(&call) => self.ask(gpu, call),
            None => no_such_version::<Self>(v),
        }
    }

    fn streams(&self) -> Vec<&Stream> {
        vec![&self.stream_a, &self.stream_b, &self.legacy]
    }

    /// Every version, on one time scale: each is one call, and the story is all of them.
    fn drawn(&self) -> Vec<usize> {
        (0..CALLS.len()).collect()
    }

    fn verify(&mut self, _gpu: &Gpu, m: &Measured, checks: &mut Checks) -> Result<()> {
        for (call, v) in CALLS.iter().zip(&m.versions) {
            let name = call.check_name();
            match (call.promise(), check_host(*call, v)) {
                (Promise::Either, _) => checks.not_asserted(name, answers::measured_only(v)),
                (_, None) => checks.not_asserted(name, answers::not_asked()),
                (Promise::Waits, Some(outcome)) => checks.record(name, outcome),
                // Returning while A's kernel runs needs the kernel to run beside the call.
                (Promise::Returns, Some(outcome)) => checks.concurrency(name, outcome),
            }
        }
        let version = |call: Call| m.version(call as usize);
        checks.record(
            "cudaMemset's work ran after stream A's kernel",
            check_memset_after(version(Call::Memset)),
        );
        checks.record(
            "the legacy default stream's kernel started after stream A's ended",
            check_legacy_after(version(Call::LegacyLaunch)),
        );
        let output = self.output.read()?;
        let reference = |i: usize| compute_element(self.input[i], ITERS);
        checks.approx("GPU vs CPU reference (approx)", &output, 4096, reference);
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        r.param("short_kernel_us", self.long_us * SHORT_FRACTION);
        interpret(self.long_us, m, r);
    }
}
