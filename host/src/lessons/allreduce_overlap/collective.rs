//! What a data-parallel lesson needs under it: the ranks this process drives, each with a
//! GPU, a compute stream, two communication streams (greatest and least priority), its
//! parameters, gradients and sums, and its NCCL communicator; and the checks that the sums
//! are exact.
//!
//! Alone, the process drives N GPUs (1 to 8), one rank each (`ncclCommInitAll`). Under
//! `streamlab launch` (or torchrun, Slurm or Open MPI variables, [`crate::lab::ddp::ranks`]) it
//! drives one GPU, its own rank of the world (`ncclCommInitRank`). Either way the lesson
//! issues work the same way: for each local rank, inside `nccl::group`.
//!
//! With exactly two GPUs in one process the ranks can also all-reduce on the copy engines
//! ([`Ranks::copy_engine_all_reduce`]): peer copies and a small add kernel instead of NCCL's
//! kernels, so the SMs stay with the backward.
//!
//! The rank on the GPU the lesson was handed shares the harness's [`Gpu`] (its context and
//! its loaded kernels, not a second module load): the lesson passes that `Gpu` to the calls
//! that launch, and only the other GPU is opened here.
use std::ops::Range;

use kernels_gpu::math::compute_element;

use super::intervals;
use crate::lab::harness::checks::Checks;
use crate::lab::harness::data::random_inputs;
use crate::lab::kit::stream_pipeline::Bracket;
use crate::lab::{ddp::ranks, kit::devices};
use crate::runtime::nccl::{self, Communicator};
use crate::runtime::{peer, AsContext, DeviceBuffer, Error, Event, Gpu, Result, Stream};

/// One rank driven by this process.
pub struct Rank {
    /// The rank's number among all ranks.
    pub rank: usize,
    /// The rank's GPU when it is not the harness's (`None`: the harness's, handed to each
    /// call that launches).
    own: Option<Gpu>,
    ordinal: u32,
    pub compute: Stream,
    /// Communication streams at the greatest and at the least priority.
    pub comm: [Stream; 2],
    pub params: DeviceBuffer<f32>,
    pub grads: DeviceBuffer<f32>,
    pub sums: DeviceBuffer<f32>,
    /// One "bucket ready" event per bucket, recorded after its backward.
    pub ready: Vec<Event>,
    /// Three timing events on the compute stream.
    pub marks: [Event; 3],
    /// Per bucket, timing events for a probed run (`AllreduceOverlap::probe`, explain.rs):
    /// its backward begins and ends on the compute stream; its all-reduce begins (once the
    /// wait for it is over) and ends on the communication stream. A timed run records none.
    pub probe: ProbeEvents,
    /// Copy engines only: the halves the other GPU pushed here, one "pushed" event per piece
    /// of each bucket, and the stream that adds and pushes the sums back.
    received: Option<DeviceBuffer<f32>>,
    pushed: Vec<Event>,
    copy_back: Option<Stream>,
    /// One float that the ranks of several processes all-reduce before each timed run.
    barrier: DeviceBuffer<f32>,
    nccl: Communicator,
}

/// The seed of rank `rank`'s parameters: each rank's data differ, and any rank can make any
/// other's.
pub fn rank_seed(seed: u64, rank: usize) -> u64 {
    seed.wrapping_add(rank as u64 * 7919)
}

impl Rank {
    /// The rank's GPU: its own, or `harness` (the GPU the lesson was handed) when the rank
    /// runs there.
    pub fn gpu<'a>(&'a self, harness: &'a Gpu) -> Result<&'a Gpu> {
        match &self.own {
            Some(gpu) => Ok(gpu),
            None if harness.info.ordinal == self.ordinal => Ok(harness),
            None => Err(Error::Internal(format!(
                "rank {} runs on GPU {}, but was handed GPU {}",
                self.rank, self.ordinal, harness.info.ordinal
            ))),
        }
    }

    /// The backward pass over `range` of the gradients, on the compute stream: the range's
    /// parameters copied to the gradients, then `iters` sin·cos steps on them. `harness`:
    /// the GPU the lesson was handed.
    pub fn backward(&self, harness: &Gpu, iters: u32, range: Range<usize>) -> Result<()> {
        let (params, grads) = (self.params.slice(range.clone())?, self.grads.slice(range.clone())?);
        self.compute.copy_on_device(params, grads)?;
        self.gpu(harness)?.compute_chunk(&self.compute, &self.grads, range, iters)
    }

    /// The sum over ranks of `range` of the gradients, into the same range of the sums.
    pub fn all_reduce(&self, range: Range<usize>, stream: &Stream) -> Result<()> {
        self.nccl.all_reduce_sum(self.grads.slice(range.clone())?, self.sums.slice(range)?, stream)
    }

    fn context<'a>(&'a self, harness: &'a Gpu) -> Result<&'a crate::runtime::Context> {
        Ok(self.gpu(harness)?.context())
    }

    fn copy_back_stream(&self) -> Result<&Stream> {
        self.copy_back
            .as_ref()
            .ok_or_else(|| Error::Internal(format!("rank {} has no copy-back stream", self.rank)))
    }

    fn received_buffer(&self) -> Result<&DeviceBuffer<f32>> {
        self.received.as_ref().ok_or_else(|| {
            Error::Internal(format!(
                "rank {} has no receive buffer for the copy engines",
                self.rank
            ))
        })
    }
}

/// The timing events of a probed run, per bucket.
pub struct ProbeEvents {
    pub backward_begins: Vec<Event>,
    pub backward_ends: Vec<Event>,
    pub reduce_begins: Vec<Event>,
    pub reduce_ends: Vec<Event>,
}

impl ProbeEvents {
    fn new(on: &impl AsContext, buckets: usize) -> Result<ProbeEvents> {
        let timing = || (0..buckets).map(|_| Event::new(on)).collect::<Result<Vec<_>>>();
        Ok(ProbeEvents {
            backward_begins: timing()?,
            backward_ends: timing()?,
            reduce_begins: timing()?,
            reduce_ends: timing()?,
        })
    }
}

/// `range` cut into `n` consecutive pieces (fewer when it is shorter than `n`).
fn pieces(range: &Range<usize>, n: usize) -> Vec<Range<usize>> {
    let n = n.clamp(1, range.len().max(1));
    let (len, extra) = (range.len() / n, range.len() % n);
    let mut start = range.start;
    (0..n)
        .map(|i| {
            let end = start + len + usize::from(i < extra);
            let piece = start..end;
            start = end;
            piece
        })
        .collect()
}

/// Every rank this process drives, and the streams and timing over all of them.
pub struct Ranks {
    pub local: Vec<Rank>,
    /// All local streams, compute first (what the bracket and the recorder see).
    pub streams: Vec<Stream>,
    pub bracket: Bracket,
    world: usize,
    seed: u64,
    /// Pieces each bucket's copy-engine all-reduce is cut into.
    pieces: usize,
}

/// How the ranks are set up: how many GPUs one process drives when it runs alone, and
/// whether the copy engines' all-reduce is wanted (two GPUs in one process only).
pub struct Setup {
    /// Gradient floats per rank.
    pub n: usize,
    /// The most buckets a version uses.
    pub events: usize,
    pub seed: u64,
    /// GPUs driven by this process when it runs alone.
    pub gpus: usize,
    pub copy_engines: bool,
    /// Pieces each bucket's copy-engine all-reduce is cut into (1 or more).
    pub pieces: usize,
}

impl Ranks {
    /// `setup.gpus` GPUs in this process (`gpu`, the harness's, and the lowest-numbered
    /// others), or this process's rank on `gpu` when started as one of several.
    pub fn new(gpu: &Gpu, setup: &Setup) -> Result<Ranks> {
        let (n, events, seed) = (setup.n, setup.events, setup.seed);
        let (owned, world, comms) = match ranks::from_env()? {
            None => {
                let others = devices::others(gpu, setup.gpus - 1)?;
                let mut contexts = vec![gpu.context()];
                contexts.extend(others.iter().map(|g| g.context()));
                let comms = Communicator::all(&contexts)?;
                let mut owned = vec![None];
                owned.extend(others.into_iter().map(Some));
                (owned, setup.gpus, comms)
            }
            Some(env) => {
                let id = env.share_id(nccl::unique_id)?;
                let comm =
                    Communicator::join(gpu.context(), &id, env.rank, env.world, env.timeout)?;
                (vec![None], env.world, vec![comm])
            }
        };
        let copy_engines = setup.copy_engines && owned.len() == 2;
        let mut local = Vec::new();
        for (own, nccl) in owned.into_iter().zip(comms) {
            let on = own.as_ref().unwrap_or(gpu);
            let ordinal = on.info.ordinal;
            let (least, greatest) = on.info.priority_range;
            let rank = nccl.rank();
            let label = |what: &str| format!("rank {rank} {what}");
            local.push(Rank {
                compute: Stream::non_blocking(on, label("compute"))?,
                comm: [
                    Stream::non_blocking_with_priority(
                        on,
                        label("comm (greatest priority)"),
                        greatest,
                    )?,
                    Stream::non_blocking_with_priority(on, label("comm (least priority)"), least)?,
                ],
                params: DeviceBuffer::from_slice(on, &random_inputs(n, rank_seed(seed, rank)))?,
                grads: DeviceBuffer::zeroed(on, n)?,
                sums: DeviceBuffer::zeroed(on, n)?,
                ready: (0..events).map(|_| Event::without_timing(on)).collect::<Result<_>>()?,
                marks: [Event::new(on)?, Event::new(on)?, Event::new(on)?],
                probe: ProbeEvents::new(on, events)?,
                received: if copy_engines { Some(DeviceBuffer::zeroed(on, n)?) } else { None },
                pushed: if copy_engines {
                    let pieces = events * setup.pieces;
                    (0..pieces).map(|_| Event::without_timing(on)).collect::<Result<_>>()?
                } else {
                    Vec::new()
                },
                copy_back: if copy_engines {
                    Some(Stream::non_blocking_with_priority(
                        on,
                        label("sums back (greatest priority)"),
                        greatest,
                    )?)
                } else {
                    None
                },
                barrier: DeviceBuffer::zeroed(on, 1)?,
                rank,
                ordinal,
                own,
                nccl,
            });
        }
        if copy_engines {
            // Pushes go over the link directly where the GPUs can reach each other (the
            // driver stages them through the host where they cannot).
            let (a, b) = (local[0].context(gpu)?, local[1].context(gpu)?);
            if peer::link(a, b)?.access && peer::link(b, a)?.access {
                peer::enable_access(a, b)?;
                peer::enable_access(b, a)?;
            }
        }
        let mut streams: Vec<Stream> = Vec::new();
        for r in &local {
            streams.extend([r.compute.handle(), r.comm[0].handle(), r.comm[1].handle()]);
            streams.extend(r.copy_back.as_ref().map(Stream::handle));
        }
        let pieces = setup.pieces;
        Ok(Ranks { bracket: Bracket::for_streams(&streams)?, streams, local, world, seed, pieces })
    }

    /// How many ranks there are in all, in this process and others.
    pub fn world(&self) -> usize {
        self.world
    }

    /// Whether the ranks of this process are all the ranks there are.
    pub fn alone(&self) -> bool {
        self.local.len() == self.world
    }

    /// Ranks in other processes start their timed runs at different moments, and the first
    /// collective of a run would absorb the difference. A one-float all-reduce, waited for,
    /// lines them up before the run is timed (the ranks of one process need none).
    pub fn line_up(&self) -> Result<()> {
        if self.alone() {
            return Ok(());
        }
        for r in &self.local {
            r.nccl.all_reduce_sum(r.barrier.slice(0..1)?, r.barrier.slice(0..1)?, &r.compute)?;
        }
        self.synchronize()
    }

    /// What a probed run of `buckets` buckets showed, the slowest local rank's (ms): how
    /// long the backward's buckets ran on the compute stream, and how long some all-reduce
    /// was in flight (from a bucket's all-reduce beginning to its end, the buckets' spans
    /// joined where they overlap). Read after the run has finished.
    pub fn overlapped_ms(&self, buckets: usize) -> Result<(f64, f64)> {
        let (mut backward, mut reduce) = (0.0f64, 0.0f64);
        for r in &self.local {
            let p = &r.probe;
            let origin = &p.backward_begins[0];
            let span = |begin: &Event, end: &Event| -> Result<(f64, f64)> {
                Ok((begin.elapsed_ms(origin)?, end.elapsed_ms(origin)?))
            };
            let mut c = Vec::new();
            let mut a = Vec::new();
            for b in 0..buckets {
                c.push(span(&p.backward_begins[b], &p.backward_ends[b])?);
                a.push(span(&p.reduce_begins[b], &p.reduce_ends[b])?);
            }
            backward = backward.max(intervals::length(&intervals::union(c)));
            reduce = reduce.max(intervals::length(&intervals::union(a)));
        }
        Ok((backward, reduce))
    }

    /// Bucket `b` (`range` of the gradients) summed over the two GPUs of this process on
    /// their copy engines, after each rank's bucket is ready:
    /// 1. on the `comm` stream, each GPU pushes the half the other owns into the other's
    ///    receive buffer, piece by piece;
    /// 2. on its copy-back stream, as each piece of the other's push lands, each adds that
    ///    piece of the half it owns (a short kernel) and pushes the sums into the other's
    ///    sums.
    ///
    /// Cut into pieces on two streams, the link carries the next piece while a piece is
    /// added, and the last bucket's tail is one piece's add and push back, not a half's.
    /// Two ranks add `a + b` once per element, so the sums are NCCL's, bit for bit.
    pub fn copy_engine_all_reduce(
        &self,
        harness: &Gpu,
        b: usize,
        range: Range<usize>,
        comm: usize,
        probe: bool,
    ) -> Result<()> {
        let [first, second] = &self.local[..] else {
            return Err(Error::Internal("the copy engines' all-reduce needs two ranks".into()));
        };
        let middle = range.start + range.len() / 2;
        let halves = [range.start..middle, middle..range.end];
        // (this rank, the other, the index of the half this rank owns)
        let pair = [(first, second, 0), (second, first, 1)];
        for (me, other, mine) in pair {
            let push = &me.comm[comm];
            push.wait_event(&me.ready[b])?;
            if probe {
                me.probe.reduce_begins[b].record(push)?;
            }
            let received = other.received_buffer()?;
            for (k, piece) in pieces(&halves[1 - mine], self.pieces).into_iter().enumerate() {
                push.copy_peer(me.grads.slice(piece.clone())?, received.slice(piece)?)?;
                me.pushed[b * self.pieces + k].record(push)?;
            }
        }
        for (me, other, mine) in pair {
            let back = me.copy_back_stream()?;
            back.wait_event(&me.ready[b])?;
            let received = me.received_buffer()?;
            let gpu = me.gpu(harness)?;
            for (k, piece) in pieces(&halves[mine], self.pieces).into_iter().enumerate() {
                back.wait_event(&other.pushed[b * self.pieces + k])?;
                // A grid over every element: the add is memory-bound and needs many loads in
                // flight (a grid of a quarter of the SMs ran at ~130 GB/s and made the copy
                // engines' version 2.4x slower on two H200s).
                gpu.vector_add(
                    back,
                    me.grads.slice(piece.clone())?,
                    received.slice(piece.clone())?,
                    me.sums.slice(piece.clone())?,
                )?;
                back.copy_peer(me.sums.slice(piece.clone())?, other.sums.slice(piece)?)?;
            }
            if probe {
                me.probe.reduce_ends[b].record(back)?;
            }
        }
        // Each GPU's sums are whole once the other's last push back has landed: the
        // bracket's join waits for every stream of both GPUs.
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        self.streams.iter().try_for_each(Stream::synchronize)
    }

    /// Each local rank's sums, read back.
    pub fn sums(&self) -> Result<Vec<Vec<f32>>> {
        self.synchronize()?;
        self.local.iter().map(|r| r.sums.to_vec()).collect()
    }

    /// The sums after `run` alone: they are filled with NaN first, so a version that wrote
    /// nothing cannot pass on the results the version before it left.
    pub fn sums_of<T>(&self, run: impl FnOnce() -> Result<T>) -> Result<Vec<Vec<f32>>> {
        self.synchronize()?;
        for r in &self.local {
            crate::runtime::memory::copy_to_device_landed(&vec![f32::NAN; r.sums.len()], &r.sums)?;
        }
        run()?;
        self.sums()
    }

    /// Checks `sums` (each local rank's) against the CPU: the gradients of every rank added
    /// on the CPU. The local ranks' gradients are the ones the run that produced `sums` left
    /// in their buffers (every version computes the whole backward pass), read back here, not
    /// computed again; another process's rank's are made here from its seed. With two ranks
    /// NCCL adds once per element, so the sum must be bit-identical to the CPU's `a + b`; with
    /// more, the order of its additions is NCCL's, and the check is approximate. The first
    /// local rank's gradients are also checked against the CPU's own sin·cos (approx), so a
    /// wrong backward pass fails too. `harness`: the GPU the lesson was handed.
    pub fn check_sum_is_exact(
        &self,
        harness: &Gpu,
        iters: u32,
        sums: &[Vec<f32>],
        checks: &mut Checks,
    ) -> Result<()> {
        let first = &self.local[0];
        let n = first.params.len();
        self.synchronize()?;
        let mut expected = vec![0f32; n];
        // Local ranks first, read before the first one's gradients serve as scratch for the
        // other processes' ranks. The order of addition is the CPU's: with two ranks `a + b`
        // is `b + a` bit for bit, and with more the check is approximate.
        for r in &self.local {
            let grads = r.grads.to_vec()?;
            if r.rank == first.rank {
                let inputs = random_inputs(n, rank_seed(self.seed, r.rank));
                checks.approx("gradients: GPU vs CPU reference (approx)", &grads, 4096, |i| {
                    compute_element(inputs[i], iters)
                });
            }
            expected.iter_mut().zip(&grads).for_each(|(e, g)| *e += g);
        }
        for q in (0..self.world).filter(|q| self.local.iter().all(|r| r.rank != *q)) {
            // Another process's rank: its gradients, made here from its seed.
            let inputs = random_inputs(n, rank_seed(self.seed, q));
            crate::runtime::memory::copy_to_device_landed(&inputs, &first.grads)?;
            first.gpu(harness)?.compute_chunk(&first.compute, &first.grads, 0..n, iters)?;
            self.synchronize()?;
            let grads = first.grads.to_vec()?;
            expected.iter_mut().zip(&grads).for_each(|(e, g)| *e += g);
        }
        for (r, got) in self.local.iter().zip(sums) {
            let name =
                format!("all-reduce sum == CPU sum of every rank's gradients (rank {})", r.rank);
            if self.world <= 2 {
                checks.bitwise(&format!("{name}, bit for bit"), got, &expected);
            } else {
                checks.approx(&format!("{name}, approx"), got, 4096, |i| expected[i]);
            }
        }
        Ok(())
    }
}

/// A short fingerprint of `values`' bits (FNV-1a, 64 bits), to compare runs and processes.
pub fn digest(values: &[f32]) -> String {
    let hash = values
        .iter()
        .flat_map(|v| v.to_bits().to_le_bytes())
        .fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3));
    format!("fnv1a64:{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_tell_one_bit_apart() {
        let a = [1.0f32, 2.0, 3.0];
        let mut b = a;
        b[2] = f32::from_bits(b[2].to_bits() ^ 1);
        assert_eq!(digest(&a), digest(&[1.0, 2.0, 3.0]));
        assert_ne!(digest(&a), digest(&b));
        assert_eq!(digest(&[]), "fnv1a64:cbf29ce484222325");
    }

    #[test]
    fn pieces_cover_the_range_in_order() {
        assert_eq!(pieces(&(10..20), 4), vec![10..13, 13..16, 16..18, 18..20]);
        assert_eq!(pieces(&(0..3), 8), vec![0..1, 1..2, 2..3]);
        assert_eq!(pieces(&(5..9), 1), vec![5..9]);
        assert_eq!(pieces(&(4..4), 3), vec![4..4]);
    }

    #[test]
    fn every_rank_has_its_own_data() {
        assert_ne!(rank_seed(7, 0), rank_seed(7, 1));
        assert_eq!(rank_seed(7, 0), 7);
    }
}
