//! What a data-parallel lesson needs under it: the ranks this process drives, each with a
//! GPU, a compute stream, two communication streams (greatest and least priority), its
//! parameters, gradients and sums, and its NCCL communicator; and the checks that the sums
//! are exact.
//!
//! Alone, the process drives two GPUs, one rank each (`ncclCommInitAll`). Under `streamlab
//! launch` (or torchrun-style variables, [`crate::lab::ranks`]) it drives one GPU, its own
//! rank of `WORLD_SIZE` (`ncclCommInitRank`). Either way the lesson issues work the same way:
//! for each local rank, inside `nccl::group`.
//!
//! The rank on the GPU the lesson was handed shares the harness's [`Gpu`] (its context and
//! its loaded kernels, not a second module load): the lesson passes that `Gpu` to the calls
//! that launch, and only the other GPU is opened here.
use std::ops::Range;

use kernels_gpu::math::compute_element;

use crate::lab::checks::Checks;
use crate::lab::data::random_inputs;
use crate::lab::pipeline::Bracket;
use crate::lab::{devices, ranks};
use crate::runtime::nccl::{self, Communicator};
use crate::runtime::{AsContext, DeviceBuffer, Error, Event, Gpu, Result, Stream};

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
    /// One "bucket ready" event per bucket.
    pub ready: Vec<Event>,
    /// Three timing events on the compute stream.
    pub marks: [Event; 3],
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
}

/// Every rank this process drives, and the streams and timing over all of them.
pub struct Ranks {
    pub local: Vec<Rank>,
    /// All local streams, compute first (what the bracket and the recorder see).
    pub streams: Vec<Stream>,
    pub bracket: Bracket,
    world: usize,
    seed: u64,
}

impl Ranks {
    /// Two GPUs in this process (`gpu`, the harness's, and the next one), or this process's
    /// rank on `gpu` when started as one of several. `events`: the most buckets a version uses.
    pub fn new(gpu: &Gpu, n: usize, events: usize, seed: u64, name: &str) -> Result<Ranks> {
        let (owned, world, comms) = match ranks::from_env()? {
            None => {
                let peer = devices::others(gpu, 1)?.remove(0);
                let comms = Communicator::all(&[gpu.context(), peer.context()])?;
                (vec![None, Some(peer)], 2, comms)
            }
            Some(env) => {
                let id = env.share_id(nccl::unique_id)?;
                let comm = Communicator::join(gpu.context(), &id, env.rank, env.world)?;
                (vec![None], env.world, vec![comm])
            }
        };
        let mut local = Vec::new();
        for (own, nccl) in owned.into_iter().zip(comms) {
            let on = own.as_ref().unwrap_or(gpu);
            let ordinal = on.info.ordinal;
            let (least, greatest) = on.info.priority_range;
            let rank = nccl.rank();
            let label = |what: &str| format!("{name} rank {rank} {what}");
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
                rank,
                ordinal,
                own,
                nccl,
            });
        }
        let streams: Vec<Stream> = local
            .iter()
            .flat_map(|r| [r.compute.handle(), r.comm[0].handle(), r.comm[1].handle()])
            .collect();
        Ok(Ranks { bracket: Bracket::for_streams(&streams)?, streams, local, world, seed })
    }

    /// How many ranks there are in all, in this process and others.
    pub fn world(&self) -> usize {
        self.world
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
            crate::runtime::memory::copy_to_device_sync(&vec![f32::NAN; r.sums.len()], &r.sums)?;
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
            crate::runtime::memory::copy_to_device_sync(&inputs, &first.grads)?;
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
    fn every_rank_has_its_own_data() {
        assert_ne!(rank_seed(7, 0), rank_seed(7, 1));
        assert_eq!(rank_seed(7, 0), 7);
    }
}
