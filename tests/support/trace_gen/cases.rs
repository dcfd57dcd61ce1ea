//! The six cases of [`super`]: each a struct of named parameters (`new(records)` gives the
//! defaults) whose `write` lays its processes out with [`ProcessFile`].
use std::io;
use std::path::Path;

use streamlab::runtime::cupti::trace_file::{Direction, Memory};

use super::writer::{ProcessFile, ProcessSpec, LAUNCH_NS, LEGACY_STREAM, START_NS};
use super::{Counts, LateRank, Planted, StepTimes};

/// The stream a process computes on (created by it, blocking), and its other streams.
const COMPUTE_STREAM: u32 = 13;
const SIDE_STREAM: u32 = 14;
/// The first pid of a case; a case of several processes numbers them from it.
const FIRST_PID: u32 = 4001;

/// NCCL's all-reduce kernel, as CUPTI names it.
pub const NCCL_KERNEL: &str = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";

/// The kernels of [`Mix`]: the mangled name CUPTI gives, and the name the report shows.
pub const MIX_KERNELS: [(&str, &str); 8] = [
    (
        "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_",
        "at::native::vectorized_elementwise_kernel",
    ),
    (
        "_ZN7cutlass7Kernel2I52cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4EEvNT_6ParamsE",
        "cutlass::Kernel2",
    ),
    (
        "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5arrayIPcLm3EEEEviT0_T1_",
        "at::native::vectorized_elementwise_kernel",
    ),
    (
        "_ZN2at6native29vectorized_elementwise_kernelILi4EZNS0_21threshold_kernel_cudaERNS_18TensorIteratorBaseERKN3c106ScalarES7_EUlffE_St5arrayIPcLm3EEEEviT0_T1_",
        "at::native::vectorized_elementwise_kernel",
    ),
    (
        "_ZN2at6native12_GLOBAL__N_120softmax_warp_forwardIfffLi10ELb0ELb0EEEvPT0_PKT_iiiPKbib",
        "at::native::(anonymous namespace)::softmax_warp_forward",
    ),
    (
        "_ZN2at6native12_GLOBAL__N_121softmax_warp_backwardIfffLi10ELb0ELb0EEEvPT0_PKT_S7_iiiPKb",
        "at::native::(anonymous namespace)::softmax_warp_backward",
    ),
    (
        "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_14func_wrapper_tIfNS0_11sum_functorIfffEEEEjfLi4EEEEEvT1_",
        "at::native::reduce_kernel",
    ),
    (
        "_ZN2at6native25multi_tensor_apply_kernelINS0_18TensorListMetadataILi4EEENS0_11AdamFunctorIfEEJfffEEEvT_T0_DpT1_",
        "at::native::multi_tensor_apply_kernel",
    ),
];

/// How long each of [`MIX_KERNELS`] runs, ns.
const MIX_KERNEL_NS: [u64; 8] = [3_000, 80_000, 8_000, 6_000, 12_000, 12_000, 10_000, 30_000];
/// [`Mix`]'s forward and backward passes and its optimizer step, as indices into
/// [`MIX_KERNELS`].
const FORWARD: [usize; 6] = [1, 2, 3, 1, 2, 4];
const BACKWARD: [usize; 8] = [5, 1, 1, 3, 1, 1, 6, 2];
const OPTIMIZER: [usize; 2] = [0, 7];

fn args(script: &str) -> Vec<String> {
    vec!["/usr/bin/python3".into(), script.into()]
}

/// The planted figures every case has: the folder, the counts, the pids and the top-level
/// range names.
fn planted(dir: &Path, counts: Counts, pids: Vec<u32>, names: &[(&str, u64)]) -> Planted {
    Planted {
        dir: dir.to_path_buf(),
        counts,
        pids,
        range_names: names.iter().map(|(n, k)| (n.to_string(), *k)).collect(),
        ..Planted::default()
    }
}

/// Consecutive kernels' gaps on one stream, as [`Planted`] sums them.
#[derive(Default)]
struct Gaps {
    last_end: Option<u64>,
    count: u64,
    total_ns: u64,
    longest_ns: u64,
}

impl Gaps {
    fn kernel(&mut self, start: u64, end: u64) {
        if let Some(last) = self.last_end {
            let gap = start.saturating_sub(last);
            if gap > 0 {
                self.count += 1;
                self.total_ns += gap;
                self.longest_ns = self.longest_ns.max(gap);
            }
        }
        self.last_end = Some(end);
    }
}

/// One host thread launching tiny kernels on one stream: each launch call takes 4 µs and the
/// next begins 1 µs after it returns, so a kernel of `kernel_ns` (2 µs) starts every 5 µs,
/// 0.5 µs after its call returned, and the gap before it (3 µs) begins while that call is
/// under way: the host was issuing. Every
/// `kernels_per_step` kernels make an NVTX "step"; after every `sync_every_steps` steps the
/// host synchronizes the stream.
#[derive(Debug, Clone, PartialEq)]
pub struct SmallKernels {
    pub records: u64,
    pub kernel_ns: u64,
    pub kernels_per_step: u64,
    pub sync_every_steps: u64,
}

impl SmallKernels {
    pub fn new(records: u64) -> SmallKernels {
        SmallKernels { records, kernel_ns: 2_000, kernels_per_step: 50, sync_every_steps: 2 }
    }

    pub fn write(&self, dir: &Path) -> io::Result<Planted> {
        let spec = ProcessSpec {
            pid: FIRST_PID,
            device: 0,
            streams: vec![(COMPUTE_STREAM, false)],
            args: args("launch_bound.py"),
        };
        let mut p = ProcessFile::create(dir, &spec, self.records)?;
        let mut gaps = Gaps::default();
        let mut steps = 0;
        loop {
            let sync = steps % self.sync_every_steps == self.sync_every_steps - 1;
            let need = 2 + 2 * self.kernels_per_step + if sync { 2 } else { 0 };
            if p.remaining() < need {
                break;
            }
            p.push("step")?;
            for _ in 0..self.kernels_per_step {
                let k = p.kernel(COMPUTE_STREAM, "_Z11tiny_kernelPfi", self.kernel_ns)?;
                gaps.kernel(k.start, k.end);
            }
            p.pop()?;
            if sync {
                p.synchronize_stream(COMPUTE_STREAM)?;
            }
            steps += 1;
        }
        // What is left of the budget: more of the same kernels, outside any step.
        while p.remaining() >= 2 {
            let k = p.kernel(COMPUTE_STREAM, "_Z11tiny_kernelPfi", self.kernel_ns)?;
            gaps.kernel(k.start, k.end);
        }
        let counts = p.finish()?;
        let names: &[(&str, u64)] = if steps > 0 { &[("step", steps)] } else { &[] };
        let mut out = planted(dir, counts, vec![FIRST_PID], names);
        (out.kernel_gaps, out.kernel_gap_ns) = (gaps.count, gaps.total_ns);
        out.longest_kernel_gap_ns = gaps.longest_ns;
        Ok(out)
    }
}

/// `streams` streams, each copying 1 MiB in from pinned memory, running a kernel of
/// `kernel_ns` and copying 256 KiB out to pinned memory, the host issuing one stream's three
/// after the other's, round after round; copies of one direction queue on one copy engine.
/// After every `sync_every_rounds` rounds the host synchronizes the device.
#[derive(Debug, Clone, PartialEq)]
pub struct ManyStreams {
    pub records: u64,
    pub streams: u32,
    pub kernel_ns: u64,
    pub copy_in_ns: u64,
    pub copy_out_ns: u64,
    pub sync_every_rounds: u64,
}

impl ManyStreams {
    pub fn new(records: u64) -> ManyStreams {
        ManyStreams {
            records,
            streams: 64,
            kernel_ns: 200_000,
            copy_in_ns: 20_000,
            copy_out_ns: 10_000,
            sync_every_rounds: 4,
        }
    }

    pub fn write(&self, dir: &Path) -> io::Result<Planted> {
        let ids: Vec<u32> = (0..self.streams).map(|i| COMPUTE_STREAM + i).collect();
        let spec = ProcessSpec {
            pid: FIRST_PID,
            device: 0,
            streams: ids.iter().map(|&s| (s, true)).collect(),
            args: args("streams.py"),
        };
        let mut p = ProcessFile::create(dir, &spec, self.records)?;
        let (mut copy_in_ns, mut copy_out_ns) = (0, 0);
        let mut round = 0;
        'rounds: loop {
            for &s in &ids {
                if p.remaining() < 6 {
                    break 'rounds;
                }
                let copy =
                    p.copy(s, Direction::HostToDevice, Memory::Pinned, 1 << 20, self.copy_in_ns)?;
                copy_in_ns += copy.end - copy.start;
                p.kernel(s, "_Z13stream_kernelPfS_i", self.kernel_ns)?;
                let copy =
                    p.copy(s, Direction::DeviceToHost, Memory::Pinned, 1 << 18, self.copy_out_ns)?;
                copy_out_ns += copy.end - copy.start;
            }
            round += 1;
            if round % self.sync_every_rounds == 0 && p.remaining() >= 2 {
                p.synchronize_device()?;
            }
        }
        let counts = p.finish()?;
        let mut out = planted(dir, counts, vec![FIRST_PID], &[]);
        (out.copy_in_ns, out.copy_out_ns) = (copy_in_ns, copy_out_ns);
        Ok(out)
    }
}

/// Top-level NVTX ranges named in turn from `few`, each holding a "forward" range with a
/// kernel and a "backward" range holding a "layer" range (depth 2) with a kernel: 12 records
/// a range. Spread over the run, `distinct` more top-level ranges are named "layer 00",
/// "layer 01", ..., each once, so that a process marks more than 20 names.
#[derive(Debug, Clone, PartialEq)]
pub struct ManyRanges {
    pub records: u64,
    pub few: Vec<String>,
    pub distinct: u64,
    pub kernel_ns: u64,
}

impl ManyRanges {
    pub fn new(records: u64) -> ManyRanges {
        let few = ["step", "data", "optimizer"].map(String::from).to_vec();
        ManyRanges { records, few, distinct: 24, kernel_ns: 5_000 }
    }

    pub fn write(&self, dir: &Path) -> io::Result<Planted> {
        const PER_RANGE: u64 = 12;
        let spec = ProcessSpec {
            pid: FIRST_PID,
            device: 0,
            streams: vec![(COMPUTE_STREAM, false)],
            args: args("ranges.py"),
        };
        let mut p = ProcessFile::create(dir, &spec, self.records)?;
        let few = self.few.len() as u64;
        // The distinct names, one every `spacing` ranges after each of the few was marked.
        let spacing = (self.records / PER_RANGE / (self.distinct + 8)).max(1);
        let mut names: Vec<(String, u64)> = Vec::new();
        let (mut i, mut marked_distinct) = (0u64, 0u64);
        while p.remaining() >= PER_RANGE {
            let distinct =
                i >= few && (i - few).is_multiple_of(spacing) && marked_distinct < self.distinct;
            let name = if distinct {
                marked_distinct += 1;
                format!("layer {:02}", marked_distinct - 1)
            } else {
                self.few[(i % few) as usize].clone()
            };
            match names.iter_mut().find(|(n, _)| *n == name) {
                Some((_, count)) => *count += 1,
                None => names.push((name.clone(), 1)),
            }
            p.push(&name)?;
            p.push("forward")?;
            p.kernel(COMPUTE_STREAM, "_Z14forward_kernelPfPKfi", self.kernel_ns)?;
            p.pop()?;
            p.push("backward")?;
            p.push("layer")?;
            p.kernel(COMPUTE_STREAM, "_Z15backward_kernelPfPKfi", self.kernel_ns)?;
            p.pop()?;
            p.pop()?;
            p.pop()?;
            i += 1;
        }
        let counts = p.finish()?;
        let mut out = planted(dir, counts, vec![FIRST_PID], &[]);
        out.range_names = names;
        Ok(out)
    }
}

/// `ranks` processes, one device each (device = rank), in step: every `step_ns` each runs two
/// compute kernels of `compute_ns` on its compute stream, then an NCCL all-reduce of
/// `collective_ns` on its side stream once its compute is done (the NCCL range around the
/// launch call, in NCCL's domain); every rank's host starts its step 1 µs after the rank
/// before it. In the steps `i` with `i % late_every == late_phase`, rank `late_rank`'s
/// second kernel runs `late_ns` longer, so its all-reduce starts that much later and the
/// others' wait for it (every copy of an all-reduce ends `collective_ns` after the last one
/// started). 12 records a rank and step.
#[derive(Debug, Clone, PartialEq)]
pub struct ManyProcesses {
    pub records: u64,
    pub ranks: u32,
    pub step_ns: u64,
    pub compute_ns: u64,
    pub collective_ns: u64,
    pub late_rank: u32,
    pub late_every: u64,
    pub late_phase: u64,
    pub late_ns: u64,
}

impl ManyProcesses {
    pub fn new(records: u64) -> ManyProcesses {
        ManyProcesses {
            records,
            ranks: 8,
            step_ns: 1_000_000,
            compute_ns: 200_000,
            collective_ns: 100_000,
            late_rank: 5,
            late_every: 10,
            late_phase: 3,
            late_ns: 300_000,
        }
    }

    pub fn write(&self, dir: &Path) -> io::Result<Planted> {
        const PER_STEP: u64 = 12;
        let ranks = u64::from(self.ranks);
        let share = self.records / ranks;
        let mut files = Vec::new();
        for rank in 0..self.ranks {
            let spec = ProcessSpec {
                pid: FIRST_PID + rank,
                device: rank,
                streams: vec![(COMPUTE_STREAM, false), (SIDE_STREAM, true)],
                args: vec!["/usr/bin/python3".into(), "train.py".into(), format!("--rank={rank}")],
            };
            // Rank 0 takes what the division leaves.
            let budget = if rank == 0 { share + self.records % ranks } else { share };
            files.push(ProcessFile::create(dir, &spec, budget)?);
        }
        let steps = share / PER_STEP;
        let mut late = LateRank {
            pid: FIRST_PID + self.late_rank,
            collectives: Vec::new(),
            spreads_ns: Vec::new(),
            largest_in_step_ns: 0,
        };
        for step in 0..steps {
            let is_late = step % self.late_every == self.late_phase;
            let mut launched = Vec::new();
            for (rank, p) in files.iter_mut().enumerate() {
                let begin = START_NS + 100_000 + step * self.step_ns + rank as u64 * 1_000;
                p.host_ns = p.host_ns.max(begin);
                p.push("step")?;
                p.kernel(COMPUTE_STREAM, "_Z12layer_kernelPfPKfi", self.compute_ns)?;
                let extra = if is_late && rank as u32 == self.late_rank { self.late_ns } else { 0 };
                p.kernel(COMPUTE_STREAM, "_Z12layer_kernelPfPKfi", self.compute_ns + extra)?;
                p.stream_waits(SIDE_STREAM, COMPUTE_STREAM)?;
                p.push_in("ncclAllReduce", "NCCL")?;
                let call = p.call("cudaLaunchKernel", LAUNCH_NS)?;
                p.pop_in("NCCL")?;
                p.pop()?;
                launched.push((call, p.queued(SIDE_STREAM, &call)));
            }
            let first = launched.iter().map(|(_, start)| *start).min().unwrap_or(0);
            let last = launched.iter().map(|(_, start)| *start).max().unwrap_or(0);
            let end = last + self.collective_ns;
            for (p, (call, start)) in files.iter_mut().zip(launched) {
                p.kernel_at(SIDE_STREAM, NCCL_KERNEL, call, start, end)?;
            }
            if is_late {
                late.collectives.push(step);
                late.spreads_ns.push(last - first);
            } else {
                late.largest_in_step_ns = late.largest_in_step_ns.max(last - first);
            }
        }
        let mut counts = Counts::default();
        for p in files {
            counts += p.finish()?;
        }
        let pids = (0..self.ranks).map(|r| FIRST_PID + r).collect();
        let names: &[(&str, u64)] = if steps > 0 { &[("step", steps)] } else { &[] };
        let mut out = planted(dir, counts, pids, names);
        out.late = Some(late);
        Ok(out)
    }
}

/// A host range "step" that launches `kernels_per_step` kernels of `kernel_ns` and returns;
/// the host waits (an event synchronization, outside the range) for the work of the step
/// `ahead` steps back before it starts the next, so it runs ahead of the GPU, whose work
/// queues: each step's work runs well after its range closed.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuAhead {
    pub records: u64,
    pub kernels_per_step: u64,
    pub kernel_ns: u64,
    pub ahead: u64,
}

impl CpuAhead {
    pub fn new(records: u64) -> CpuAhead {
        CpuAhead { records, kernels_per_step: 8, kernel_ns: 100_000, ahead: 3 }
    }

    pub fn write(&self, dir: &Path) -> io::Result<Planted> {
        let spec = ProcessSpec {
            pid: FIRST_PID,
            device: 0,
            streams: vec![(COMPUTE_STREAM, false)],
            args: args("ahead.py"),
        };
        let mut p = ProcessFile::create(dir, &spec, self.records)?;
        let mut steps: Vec<StepTimes> = Vec::new();
        loop {
            let i = steps.len() as u64;
            let wait = i >= self.ahead;
            let need = 2 + 2 * self.kernels_per_step + if wait { 2 } else { 0 };
            if p.remaining() < need {
                break;
            }
            if wait {
                let done = steps[(i - self.ahead) as usize].gpu_end;
                p.synchronize_event(done)?;
            }
            let range_start = p.push("step")?;
            let (mut gpu_start, mut gpu_end) = (u64::MAX, 0);
            for _ in 0..self.kernels_per_step {
                let k = p.kernel(COMPUTE_STREAM, "_Z10gemm_tilePKfS0_Pfi", self.kernel_ns)?;
                (gpu_start, gpu_end) = (gpu_start.min(k.start), gpu_end.max(k.end));
            }
            let range_end = p.pop()?;
            steps.push(StepTimes { range_start, range_end, gpu_start, gpu_end });
        }
        let counts = p.finish()?;
        let names: Vec<(&str, u64)> =
            if steps.is_empty() { Vec::new() } else { vec![("step", steps.len() as u64)] };
        let mut out = planted(dir, counts, vec![FIRST_PID], &names);
        out.steps = steps;
        Ok(out)
    }
}

/// A training step as PyTorch issues it, in an NVTX "step": the batch copied in from pinned
/// memory on a side stream (non-blocking) that the legacy default stream then waits for, the
/// labels copied in from pageable memory, a memset; a "forward" and a "backward" range of
/// [`MIX_KERNELS`]; the optimizer's kernels; the loss copied out to pageable memory and a
/// `cudaStreamSynchronize`. Every `alloc_every` steps, a `cudaMalloc` opens the step and a
/// `cudaFree` closes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Mix {
    pub records: u64,
    pub alloc_every: u64,
}

impl Mix {
    pub fn new(records: u64) -> Mix {
        Mix { records, alloc_every: 10 }
    }

    pub fn write(&self, dir: &Path) -> io::Result<Planted> {
        let spec = ProcessSpec {
            pid: FIRST_PID,
            device: 0,
            streams: vec![(COMPUTE_STREAM, true)],
            args: args("train.py"),
        };
        let mut p = ProcessFile::create(dir, &spec, self.records)?;
        let (copy_stream, compute) = (COMPUTE_STREAM, LEGACY_STREAM);
        let kernels = (FORWARD.len() + BACKWARD.len() + OPTIMIZER.len()) as u64;
        let mut allocs = Vec::new();
        let mut steps = 0;
        loop {
            let alloc = steps % self.alloc_every == 0;
            // Marks 6, copies in 4 and the wait 1, a memset 2, kernels, copy out 2, sync 2.
            let need = 6 + 5 + 2 + 2 * kernels + 2 + 2 + if alloc { 2 } else { 0 };
            if p.remaining() < need {
                break;
            }
            p.push("step")?;
            if alloc {
                allocs.push(p.call("cudaMalloc", 30_000)?);
            }
            p.copy(copy_stream, Direction::HostToDevice, Memory::Pinned, 8 << 20, 350_000)?;
            p.stream_waits(compute, copy_stream)?;
            p.copy(compute, Direction::HostToDevice, Memory::Pageable, 64 << 10, 8_000)?;
            p.push("forward")?;
            p.memset(compute, 4 << 20, 4_000)?;
            for k in FORWARD {
                p.kernel(compute, MIX_KERNELS[k].0, MIX_KERNEL_NS[k])?;
            }
            p.pop()?;
            p.push("backward")?;
            for k in BACKWARD {
                p.kernel(compute, MIX_KERNELS[k].0, MIX_KERNEL_NS[k])?;
            }
            p.pop()?;
            for k in OPTIMIZER {
                p.kernel(compute, MIX_KERNELS[k].0, MIX_KERNEL_NS[k])?;
            }
            p.copy(compute, Direction::DeviceToHost, Memory::Pageable, 4, 2_000)?;
            p.synchronize_stream(compute)?;
            if alloc {
                // cudaFree waits for the device to finish first.
                let until = (p.host_ns + 25_000).max(p.device_free() + 1_000);
                allocs.push(p.call_until("cudaFree", until)?);
            }
            p.pop()?;
            steps += 1;
        }
        // Once every record is written, the process's first end and last start are final.
        let allocs_between_work = allocs.iter().filter(|c| p.between_work(c)).count();
        let counts = p.finish()?;
        let names: Vec<(&str, u64)> = if steps == 0 { Vec::new() } else { vec![("step", steps)] };
        let mut out = planted(dir, counts, vec![FIRST_PID], &names);
        out.allocs_between_work = allocs_between_work as u64;
        Ok(out)
    }
}
