//! # All-reduce overlapped with the backward pass (DDP's gradient buckets)
//!
//! Data-parallel training sums every GPU's gradients before the optimizer step. Waiting for
//! the whole backward pass and then all-reducing everything leaves the link idle while the
//! GPU computes, and the SMs idle while the link works. DDP cuts the gradients into B
//! buckets: as each is ready, its all-reduce starts on a second stream while the next bucket
//! is computed.
//!
//! The seed (section 5 of the stream-overlap notes; PyTorch DDP's reducer):
//!
//! ```text
//! for (b = 0; b < B; ++b) {
//!   backward_bucket<<<g, 256, 0, compute[i]>>>(grad + off[b], ...);
//!   cudaEventRecord(ready[i][b], compute[i]);
//!   cudaStreamWaitEvent(comm[i], ready[i][b]);
//!   ncclAllReduce(grad + off[b], sum + off[b], len[b], ncclFloat, ncclSum, nccl[i], comm[i]);
//! }                                 // one thread, two GPUs: each b inside ncclGroupStart/End
//! ```
//!
//! In Rust: `gpu.compute_chunk(&compute, &grad, r, iters)`, `ready.record(&compute)`,
//! `comm.wait_event(&ready)`, `nccl.all_reduce_sum(grad.slice(r)?, sum.slice(r)?, &comm)`,
//! inside `nccl::group(|| ...)`. The rank set-up (1 to 8 GPUs in this process, or one GPU per
//! process under `streamlab launch`, torchrun, srun or mpirun) is `collective.rs` beside this file.
//!
//! The bound, with C the backward's time and A the all-reduce's: one of them runs whole and
//! the other hides behind it but for its last bucket, `max(C, A) + min(C, A) / B`.
//!
//! NCCL's all-reduce is a kernel: while it overlaps the backward, both want the SMs. Events
//! around each bucket time each side while they overlap, so the report shows which one
//! slowed down. With two GPUs in one process a fifth version sums on the copy engines
//! instead (peer pushes of the half the other GPU owns, a small add kernel, peer pushes of
//! the sums back), and leaves the SMs to the backward.
pub mod collective;
mod explain;
mod intervals;

use serde::Serialize;

use self::collective::{digest, Ranks, Setup};
use self::explain::Probe;
use crate::lab::harness::budget::{MAX_ELEMENTS, MAX_STREAMS};
use crate::lab::harness::data::chunk_ranges;
use crate::lab::record::span::named;
use crate::lab::{args, t, Checks, Lesson, Measured, Plan, Report, Sample, WorkModel};
use crate::runtime::{nccl, Error, Gpu, Result, Stream};

/// GPUs one process drives when it runs alone, unless `--gpus` says otherwise.
pub const DEFAULT_GPUS: usize = 2;

#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct Args {
    /// Gradient floats per GPU [1..=4294967295]. Try 1048576: fixed costs dominate.
    #[arg(long, default_value_t = 1 << 26, value_parser = args::whole(1usize..=MAX_ELEMENTS))]
    pub elements: usize,
    /// Gradient buckets B [1..=64]. Try 1 (no overlap) and 32 (small all-reduces).
    #[arg(long, default_value_t = 8, value_parser = args::whole(1usize..=MAX_STREAMS))]
    pub buckets: usize,
    /// sin·cos steps per gradient element [1..=100000]: sets C against A. Try 40.
    #[arg(long, default_value_t = 10, value_parser = args::whole(1u32..=100_000))]
    pub iters: u32,
    /// GPUs this process drives, one rank each, when it runs alone [1..=8] (default 2).
    /// Under `streamlab launch`, torchrun, srun or mpirun each process is one rank on one
    /// GPU: leave it out there. Try 4: with more than two ranks the sums are checked
    /// approximately.
    #[arg(long, value_parser = args::whole(1usize..=8))]
    pub gpus: Option<usize>,
    /// Pieces each bucket's copy-engine all-reduce is cut into [1..=64] (two GPUs in one
    /// process): while one piece is added and pushed back, the next is pushed. Try 4 and 8:
    /// a shorter tail, but every piece's add takes the SMs from the backward for a moment
    /// (on two H200s 1 piece gave 1.26 ms, 4 gave 1.49, 8 gave 2.13).
    #[arg(long, default_value_t = 1, value_parser = args::whole(1usize..=64))]
    pub copy_engine_pieces: usize,
    /// NCCL channels (NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS) [1..=32] (default: NCCL's
    /// choice). Each channel is a block of NCCL's kernel, on an SM of its own: try 2 and 4,
    /// fewer SMs taken from the backward, but a slower all-reduce.
    #[arg(long, value_parser = args::whole(1u32..=32))]
    pub nccl_channels: Option<u32>,
}

/// Parts of the sequential version, in ms: the backward pass (C) and the one all-reduce (A).
const BACKWARD: &str = "C";
const ALL_REDUCE: &str = "A";
/// Compute everything, then all-reduce everything.
const SEQUENTIAL: usize = 0;
/// B buckets, each all-reduced on the communication stream, at the greatest priority, as
/// soon as it is ready.
const GREATEST: usize = 1;
/// The same with the communication stream at the least priority.
const LEAST: usize = 2;
/// 4B buckets, at the greatest priority.
const MANY: usize = 3;
/// B buckets summed by the copy engines and an add kernel (two GPUs in this process only).
const COPY_ENGINES: usize = 4;

/// Who sums a bucket: NCCL's kernels, or the two GPUs' copy engines and an add kernel.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reducer {
    Nccl,
    CopyEngines,
}

pub struct AllreduceOverlap {
    ranks: Ranks,
    iters: u32,
    /// The bucket boundaries for B buckets, and for 4B.
    buckets: [Vec<std::ops::Range<usize>>; 2],
    names: Vec<String>,
    /// Filled by `verify`, read by `explain`.
    probes: Vec<Probe>,
}

/// Whether this process runs alone (not one rank of several processes), and how many GPUs
/// it drives then.
fn local_gpus(a: &Args) -> Result<Option<usize>> {
    let under_launcher = crate::lab::ddp::ranks::from_env()?.is_some();
    match (under_launcher, a.gpus) {
        (true, Some(n)) => {
            Err(Error::InvalidInput(t!("error.allreduce_overlap.gpus_under_launcher", n)))
        }
        (true, None) => Ok(None),
        (false, n) => Ok(Some(n.unwrap_or(DEFAULT_GPUS))),
    }
}

impl AllreduceOverlap {
    /// Every local GPU runs the backward pass and then one all-reduce of all of it, on its
    /// compute stream.
    fn sequential(&self, gpu: &Gpu) -> Result<Sample> {
        let ranks = &self.ranks;
        ranks.line_up()?;
        let (mut c, mut a) = (0.0, 0.0);
        let ms = ranks.bracket.time(&ranks.streams, || {
            for r in &ranks.local {
                r.marks[0].record(&r.compute)?;
                r.backward(gpu, self.iters, 0..r.params.len())?;
                r.marks[1].record(&r.compute)?;
            }
            nccl::group(|| {
                ranks.local.iter().try_for_each(|r| r.all_reduce(0..r.params.len(), &r.compute))
            })?;
            ranks.local.iter().try_for_each(|r| r.marks[2].record(&r.compute))
        })?;
        for r in &ranks.local {
            c = f64::max(c, r.marks[1].elapsed_ms(&r.marks[0])?);
            a = f64::max(a, r.marks[2].elapsed_ms(&r.marks[1])?);
        }
        Ok(Sample::ms(ms).part(BACKWARD, c).part(ALL_REDUCE, a))
    }

    /// Bucket by bucket: the backward on the compute stream, each bucket's all-reduce on the
    /// communication stream (`comm`: 0 greatest priority, 1 least) once its event fires,
    /// by NCCL or on the copy engines. `probe`: also record each bucket's timing events
    /// ([`AllreduceOverlap::probe`]); timed runs record none, so that what they time is the
    /// lesson's own work.
    fn bucketed(
        &self,
        gpu: &Gpu,
        buckets: &[std::ops::Range<usize>],
        comm: usize,
        reducer: Reducer,
        probe: bool,
    ) -> Result<Sample> {
        let ranks = &self.ranks;
        ranks.line_up()?;
        let ms = ranks.bracket.time(&ranks.streams, || {
            for (b, bucket) in buckets.iter().enumerate() {
                named("bucket", b, || -> Result<()> {
                    for r in &ranks.local {
                        if probe {
                            r.probe.backward_begins[b].record(&r.compute)?;
                        }
                        r.backward(gpu, self.iters, bucket.clone())?;
                        r.ready[b].record(&r.compute)?;
                        if probe {
                            r.probe.backward_ends[b].record(&r.compute)?;
                        }
                    }
                    match reducer {
                        Reducer::Nccl => {
                            nccl::group(|| {
                                ranks.local.iter().try_for_each(|r| {
                                    let stream = &r.comm[comm];
                                    stream.wait_event(&r.ready[b])?;
                                    if probe {
                                        r.probe.reduce_begins[b].record(stream)?;
                                    }
                                    r.all_reduce(bucket.clone(), stream)
                                })
                            })?;
                            if probe {
                                // After ncclGroupEnd: only then is the all-reduce queued.
                                for r in &ranks.local {
                                    r.probe.reduce_ends[b].record(&r.comm[comm])?;
                                }
                            }
                        }
                        Reducer::CopyEngines => {
                            ranks.copy_engine_all_reduce(gpu, b, bucket.clone(), comm, probe)?
                        }
                    }
                    Ok(())
                })?;
            }
            Ok(())
        })?;
        Ok(Sample::ms(ms))
    }

    /// The version at `index` (see [`AllreduceOverlap::versions`]). `&self`, so that
    /// `verify` can run a version inside `sums_of` while it holds the ranks.
    fn run(&self, gpu: &Gpu, index: usize) -> Result<Sample> {
        let (few, many) = (&self.buckets[0], &self.buckets[1]);
        match index {
            SEQUENTIAL => self.sequential(gpu),
            GREATEST => self.bucketed(gpu, few, 0, Reducer::Nccl, false),
            LEAST => self.bucketed(gpu, few, 1, Reducer::Nccl, false),
            MANY => self.bucketed(gpu, many, 0, Reducer::Nccl, false),
            COPY_ENGINES => self.bucketed(gpu, few, 0, Reducer::CopyEngines, false),
            i => Err(Error::Internal(format!("allreduce-overlap has no version {i}"))),
        }
    }

    /// The bug: odd ranks issue the same all-reduces in the opposite order. NCCL pairs
    /// collectives by their position in each communicator's sequence, not by bucket, so it
    /// sums the wrong buckets. The whole backward runs first, so every bucket is ready
    /// before any all-reduce reads it and the wrong sums are the same in every run.
    fn reversed_order(&self, gpu: &Gpu) -> Result<()> {
        let (ranks, buckets) = (&self.ranks, &self.buckets[0]);
        ranks.line_up()?;
        for r in &ranks.local {
            r.backward(gpu, self.iters, 0..r.params.len())?;
            r.ready[0].record(&r.compute)?;
        }
        for b in 0..buckets.len() {
            nccl::group(|| {
                ranks.local.iter().try_for_each(|r| {
                    let b = if r.rank % 2 == 1 { buckets.len() - 1 - b } else { b };
                    r.comm[0].wait_event(&r.ready[0])?;
                    r.all_reduce(buckets[b].clone(), &r.comm[0])
                })
            })?;
        }
        Ok(())
    }

    /// Whether the wrong-order bug can be shown: two ranks or more, and two buckets or more
    /// of equal size (with unequal sizes NCCL would hang instead of summing wrongly).
    fn shows_order_bug(&self) -> bool {
        let few = &self.buckets[0];
        let equal = few.iter().all(|b| b.len() == few[0].len());
        self.ranks.world() >= 2 && few.len() >= 2 && equal
    }

    /// With more than two ranks NCCL's order of additions depends on the message size (its
    /// algorithm, protocol and chunks), so bucketed and whole sums may differ in the last
    /// bit: compared approximately then. Two ranks add `a + b` once, in any order: exact.
    fn compare(&self, checks: &mut Checks, name: &str, got: &[Vec<f32>], want: &[Vec<f32>]) {
        for (r, (got, want)) in got.iter().zip(want).enumerate() {
            let rank = self.ranks.local[r].rank;
            if self.ranks.world() <= 2 {
                checks.bitwise(
                    &format!("{name} == sequential, bit for bit (rank {rank})"),
                    got,
                    want,
                );
            } else {
                let ranks = self.ranks.world();
                checks.approx(
                    &format!("{name} == sequential, approx: {ranks} ranks add in NCCL's order (rank {rank})"),
                    got,
                    4096,
                    |i| want[i],
                );
            }
        }
    }
}

impl Lesson for AllreduceOverlap {
    const NAME: &'static str = "allreduce-overlap";
    const SUMMARY: &'static str =
        "DDP across GPUs: backward then one all-reduce vs bucketed all-reduces on a second stream, by NCCL or on the copy engines";
    type Args = Args;

    fn versions(a: &Args) -> Vec<String> {
        let b = a.buckets;
        let mut names = vec![
            "backward, then one all-reduce".into(),
            format!("{b} buckets, comm stream at greatest priority"),
            format!("{b} buckets, comm stream at least priority"),
            format!("{} buckets, comm stream at greatest priority", 4 * b),
        ];
        // The copy engines' all-reduce needs both GPUs in this process.
        if matches!(local_gpus(a), Ok(Some(2))) {
            names.push(format!("{b} buckets, all-reduce on the copy engines"));
        }
        names
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        if a.buckets > a.elements {
            let (buckets, elements) = (a.buckets, a.elements);
            return Err(Error::InvalidInput(t!(
                "error.allreduce_overlap.buckets_over_elements",
                buckets,
                elements
            )));
        }
        let gpus = local_gpus(a)?;
        // Per GPU: parameters, gradients, sums, and the halves received for the copy engines.
        let buffers = if gpus == Some(2) { 4 } else { 3 };
        let c = model.compute_ms(a.elements, a.iters) + 2.0 * model.copy_ms(a.elements) / 20.0;
        let versions = Self::versions(a).len() as f64;
        Ok(Plan::new()
            .gpus(gpus.unwrap_or(1) as u32)
            .nccl()
            .host::<f32>(a.elements, 4)? // inputs, gradients and sums read back to check
            .device::<f32>(a.elements, buffers)?
            .work(versions * (c + model.copy_ms(a.elements)), "--elements x --iters"))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<AllreduceOverlap> {
        if let Some(channels) = a.nccl_channels {
            // Read by NCCL when the communicators are made, just below.
            std::env::set_var("NCCL_MIN_NCHANNELS", channels.to_string());
            std::env::set_var("NCCL_MAX_NCHANNELS", channels.to_string());
        }
        let gpus = local_gpus(a)?;
        let setup = Setup {
            n: a.elements,
            events: 4 * a.buckets,
            seed,
            gpus: gpus.unwrap_or(1),
            copy_engines: gpus == Some(2),
            pieces: a.copy_engine_pieces,
        };
        let ranks = Ranks::new(gpu, &setup)?;
        let buckets = [
            chunk_ranges(a.elements, a.buckets),
            chunk_ranges(a.elements, (4 * a.buckets).min(a.elements)),
        ];
        let names = Self::versions(a);
        Ok(AllreduceOverlap { ranks, iters: a.iters, buckets, names, probes: Vec::new() })
    }

    fn version(&mut self, gpu: &Gpu, v: usize) -> Result<Sample> {
        self.run(gpu, v)
    }

    fn streams(&self) -> Vec<&Stream> {
        self.ranks.streams.iter().collect()
    }

    /// The copy engines' version too, where it runs: its copy rows under the kernels are
    /// why it wins.
    fn drawn(&self) -> Vec<usize> {
        (0..self.names.len())
            .filter(|&v| [SEQUENTIAL, GREATEST, COPY_ENGINES].contains(&v))
            .collect()
    }

    fn verify(&mut self, gpu: &Gpu, _m: &Measured, checks: &mut Checks) -> Result<()> {
        let ranks = &self.ranks;
        let sequential = ranks.sums_of(|| self.sequential(gpu))?;
        // Against the gradients the sequential run just left.
        ranks.check_sum_is_exact(gpu, self.iters, &sequential, checks)?;
        for v in [GREATEST, LEAST, MANY] {
            let sums = ranks.sums_of(|| self.run(gpu, v))?;
            self.compare(checks, &self.names[v], &sums, &sequential);
        }
        if self.names.len() > COPY_ENGINES {
            // Two ranks: the copy engines add a + b once per element, as NCCL does.
            let sums = ranks.sums_of(|| self.run(gpu, COPY_ENGINES))?;
            for (r, (got, want)) in sums.iter().zip(&sequential).enumerate() {
                let rank = ranks.local[r].rank;
                checks.bitwise(
                    &format!("copy engines' sums == NCCL's, bit for bit (rank {rank})"),
                    got,
                    want,
                );
            }
        }
        checks.record("result digest (compare runs and processes)", Ok(digest(&sequential[0])));
        // The bug: the same collectives in a different order on odd ranks. With equal bucket
        // sizes NCCL cannot tell; it pairs them by position and sums the wrong buckets.
        if self.shows_order_bug() {
            let got = ranks.sums_of(|| self.reversed_order(gpu))?;
            let wrong = got[0]
                .iter()
                .zip(&sequential[0])
                .filter(|(a, b)| a.to_bits() != b.to_bits())
                .count();
            // Every sum written (no NaN left from the fill), and some of them wrong.
            let outcome = if wrong > 0 && got[0].iter().all(|x| !x.is_nan()) {
                Ok(t!("allreduce_overlap.wrong_sums", wrong, n = got[0].len()))
            } else {
                Err(Error::Verification(t!("error.allreduce_overlap.right_sums")))
            };
            checks.record(
                "collectives in a different order on odd ranks: silently wrong sums",
                outcome,
            );
        }
        let probed = [GREATEST, COPY_ENGINES].into_iter().filter(|&v| v < self.names.len());
        self.probes = probed.map(|v| self.probe(gpu, v)).collect::<Result<_>>()?;
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        explain::explain(self, m, r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::harness::args_from;

    #[test]
    fn flags_are_checked_before_the_gpu() {
        let plan = |f: &[&str]| {
            AllreduceOverlap::plan(&args_from::<AllreduceOverlap>(f)?, &WorkModel::H100)
        };
        let p = plan(&[]).unwrap();
        assert!(p.admit(None).is_ok());
        assert!(p.nccl);
        let e = plan(&["--buckets", "9", "--elements", "8"]).unwrap_err().to_string();
        assert!(e.contains("--buckets 9 is more than --elements 8"), "{e}");
        let e = args_from::<AllreduceOverlap>(&["--buckets", "0"]).unwrap_err().to_string();
        assert!(e.contains("whole number from 1 to 64"), "{e}");
        for bad in [["--gpus", "0"], ["--gpus", "9"], ["--nccl-channels", "0"]] {
            let e = args_from::<AllreduceOverlap>(&bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}: {e}");
        }
    }

    #[test]
    fn the_copy_engines_version_runs_only_with_two_gpus_in_one_process() {
        let names =
            |f: &[&str]| AllreduceOverlap::versions(&args_from::<AllreduceOverlap>(f).unwrap());
        // A test run inside a launcher's step (srun, torchrun) is a rank itself: one GPU per
        // process, so no copy-engine version, and --gpus is refused there.
        if crate::lab::ddp::ranks::from_env().ok().flatten().is_some() {
            assert_eq!(names(&[]).len(), 4);
            return;
        }
        // The test process runs alone (no RANK/WORLD_SIZE): two GPUs by default.
        assert_eq!(names(&[]).len(), 5);
        assert_eq!(names(&[])[COPY_ENGINES], "8 buckets, all-reduce on the copy engines");
        assert_eq!(names(&["--gpus", "2"]).len(), 5);
        for gpus in ["1", "3", "4", "8"] {
            assert_eq!(names(&["--gpus", gpus]).len(), 4, "--gpus {gpus}");
        }
        let plan = |f: &[&str]| {
            AllreduceOverlap::plan(&args_from::<AllreduceOverlap>(f).unwrap(), &WorkModel::H100)
                .unwrap()
        };
        assert_eq!(plan(&["--gpus", "4"]).gpus, 4);
        assert_eq!(plan(&[]).gpus, 2);
    }
}
