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
//! inside `nccl::group(|| ...)`. The rank set-up (two GPUs here, or one GPU per process under
//! `streamlab launch`) is `lab::collective`.
//!
//! The bound, with C the backward's time and A the all-reduce's: one of them runs whole and
//! the other hides behind it but for its last bucket, `max(C, A) + min(C, A) / B`.
use serde::Serialize;

use crate::lab::budget::{MAX_ELEMENTS, MAX_STREAMS};
use crate::lab::collective::{digest, Ranks};
use crate::lab::data::chunk_ranges;
use crate::lab::span::named;
use crate::lab::{args, fixed, t, Checks, Lesson, Measured, Plan, Report, Sample, WorkModel};
use crate::runtime::{nccl, Error, Gpu, Result, Stream};

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
}

/// Parts of the sequential version: the backward pass and the one all-reduce, in ms.
pub const C: &str = "C";
pub const A: &str = "A";

pub struct AllreduceOverlap {
    ranks: Ranks,
    iters: u32,
    /// The bucket boundaries for B buckets, and for 4B.
    buckets: [Vec<std::ops::Range<usize>>; 2],
    names: Vec<String>,
}

impl AllreduceOverlap {
    /// Every local GPU runs the backward pass and then one all-reduce of all of it, on its
    /// compute stream.
    fn sequential(&self, gpu: &Gpu) -> Result<Sample> {
        let ranks = &self.ranks;
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
        Ok(Sample::ms(ms).part(C, c).part(A, a))
    }

    /// Bucket by bucket: the backward on the compute stream, each bucket's all-reduce on the
    /// communication stream (`comm`: 0 greatest priority, 1 least) once its event fires.
    fn bucketed(
        &self,
        gpu: &Gpu,
        buckets: &[std::ops::Range<usize>],
        comm: usize,
    ) -> Result<Sample> {
        let ranks = &self.ranks;
        let ms = ranks.bracket.time(&ranks.streams, || {
            for (b, bucket) in buckets.iter().enumerate() {
                named("bucket", b, || -> Result<()> {
                    for r in &ranks.local {
                        r.backward(gpu, self.iters, bucket.clone())?;
                        r.ready[b].record(&r.compute)?;
                    }
                    nccl::group(|| {
                        ranks.local.iter().try_for_each(|r| {
                            r.comm[comm].wait_event(&r.ready[b])?;
                            r.all_reduce(buckets[b].clone(), &r.comm[comm])
                        })
                    })?;
                    Ok(())
                })?;
            }
            Ok(())
        })?;
        Ok(Sample::ms(ms))
    }

    /// The bug: the second rank issues the same all-reduces in the opposite order. NCCL
    /// pairs collectives by their position in each communicator's sequence, not by bucket,
    /// so it sums the wrong buckets. The whole backward runs first, so every bucket is ready
    /// before any all-reduce reads it and the wrong sums are the same in every run.
    fn reversed_order(&self, gpu: &Gpu) -> Result<()> {
        let (ranks, buckets) = (&self.ranks, &self.buckets[0]);
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
}

impl Lesson for AllreduceOverlap {
    const NAME: &'static str = "allreduce-overlap";
    const SUMMARY: &'static str =
        "DDP on two GPUs: backward then one all-reduce vs bucketed all-reduces on a second stream";
    type Args = Args;

    fn versions(a: &Args) -> Vec<String> {
        let b = a.buckets;
        vec![
            "backward, then one all-reduce".into(),
            format!("{b} buckets, comm stream at greatest priority"),
            format!("{b} buckets, comm stream at least priority"),
            format!("{} buckets, comm stream at greatest priority", 4 * b),
        ]
    }

    fn plan(a: &Args, model: &WorkModel) -> Result<Plan> {
        if a.buckets > a.elements {
            return Err(Error::InvalidInput(format!(
                "--buckets {} is more than --elements {}: every bucket needs at least one element",
                a.buckets, a.elements
            )));
        }
        let gpus = if crate::lab::ranks::from_env()?.is_some() { 1 } else { 2 };
        let c = model.compute_ms(a.elements, a.iters) + 2.0 * model.copy_ms(a.elements) / 20.0;
        Ok(Plan::new()
            .gpus(gpus)
            .nccl()
            .host::<f32>(a.elements, 4)? // inputs, gradients and sums read back to check
            .device::<f32>(a.elements, 3)? // per GPU: parameters, gradients, sums
            .work(4.0 * (c + model.copy_ms(a.elements)), "--elements x --iters"))
    }

    fn setup(gpu: &Gpu, a: &Args, seed: u64) -> Result<AllreduceOverlap> {
        let ranks = Ranks::new(gpu, a.elements, 4 * a.buckets, seed, "allreduce")?;
        let buckets = [
            chunk_ranges(a.elements, a.buckets),
            chunk_ranges(a.elements, (4 * a.buckets).min(a.elements)),
        ];
        Ok(AllreduceOverlap { ranks, iters: a.iters, buckets, names: Self::versions(a) })
    }

    /// Compute everything, then all-reduce everything.
    fn without(&mut self, gpu: &Gpu) -> Result<Sample> {
        self.sequential(gpu)
    }

    /// B buckets, each all-reduced on the communication stream as soon as it is ready.
    fn with(&mut self, gpu: &Gpu) -> Result<Sample> {
        self.bucketed(gpu, &self.buckets[0], 0)
    }

    /// The least-priority communication stream, then 4B buckets.
    fn other(&mut self, gpu: &Gpu, index: usize) -> Result<Sample> {
        match index {
            2 => self.bucketed(gpu, &self.buckets[0], 1),
            _ => self.bucketed(gpu, &self.buckets[1], 0),
        }
    }

    fn streams(&self) -> Vec<&Stream> {
        self.ranks.streams.iter().collect()
    }

    fn verify(&mut self, gpu: &Gpu, _m: &Measured, checks: &mut Checks) -> Result<()> {
        let ranks = &self.ranks;
        let sequential = ranks.sums_of(|| self.sequential(gpu))?;
        // Against the gradients the sequential run just left.
        ranks.check_sum_is_exact(gpu, self.iters, &sequential, checks)?;
        for v in 1..4 {
            let sums = ranks.sums_of(|| match v {
                1 => self.bucketed(gpu, &self.buckets[0], 0),
                2 => self.bucketed(gpu, &self.buckets[0], 1),
                _ => self.bucketed(gpu, &self.buckets[1], 0),
            })?;
            let name = &self.names[v];
            for (r, (got, want)) in sums.iter().zip(&sequential).enumerate() {
                checks.bitwise(
                    &format!("{name} == sequential, bit for bit (rank {})", ranks.local[r].rank),
                    got,
                    want,
                );
            }
        }
        checks.record("result digest (compare runs and processes)", Ok(digest(&sequential[0])));
        // The bug: the same collectives in a different order on the second rank. With equal
        // bucket sizes NCCL cannot tell; it pairs them by position and sums the wrong buckets.
        let equal = self.buckets[0].iter().all(|b| b.len() == self.buckets[0][0].len());
        if ranks.world() >= 2 && self.buckets[0].len() >= 2 && equal {
            let got = ranks.sums_of(|| self.reversed_order(gpu))?;
            let wrong = got[0]
                .iter()
                .zip(&sequential[0])
                .filter(|(a, b)| a.to_bits() != b.to_bits())
                .count();
            // Every sum written (no NaN left from the fill), and some of them wrong.
            let outcome = if wrong > 0 && got[0].iter().all(|x| !x.is_nan()) {
                Ok(t!("allreduce.wrong_sums", wrong, n = got[0].len()))
            } else {
                Err(Error::Verification("reversed order gave the right sums".into()))
            };
            checks
                .record("collectives in a different order on rank 1: silently wrong sums", outcome);
        }
        Ok(())
    }

    fn explain(&self, m: &Measured, r: &mut Report) {
        let seq = m.without();
        let (c, a, b) = (seq.part(C), seq.part(A), self.buckets[0].len() as f64);
        let bound = c.max(a) + c.min(a) / b;
        let (hi, lo, many) =
            (m.with().time.median, m.versions[2].time.median, m.versions[3].time.median);
        r.figure("backward C", c, "ms");
        r.figure("all-reduce A", a, "ms");
        r.figure("bound max(C, A) + min(C, A)/B", bound, "ms");
        let (gpus, ranks) = (self.ranks.local.len(), self.ranks.world());
        let mib = fixed(self.ranks.local[0].params.len() as f64 * 4.0 / 1048576.0, 0);
        let (x, off) = (fixed(m.speedup(), 2), format!("{:+.1}", (hi / bound - 1.0) * 100.0));
        let (gap, slower, faster) = (hi > bound * 1.05, lo > hi * 1.02, many < hi);
        let [c, a, seq, hi, lo, many, bound] =
            [c, a, seq.time.median, hi, lo, many, bound].map(|v| fixed(v, 3));
        r.explain(t!("allreduce.sequential", gpus, ranks, c, mib, a, seq));
        r.explain(t!("allreduce.bucketed", b = b.to_string(), hi, x, off, bound));
        if gap {
            r.explain(t!("allreduce.gap"));
        }
        let prio = if slower { t!("allreduce.slower", lo) } else { t!("allreduce.no_slower", lo) };
        r.explain(t!("allreduce.priority", prio));
        let more = if faster { t!("allreduce.faster") } else { t!("allreduce.not_faster") };
        r.explain(t!("allreduce.more_buckets", buckets = self.buckets[1].len(), many, more));
        r.explain(t!("allreduce.order_bug"));
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
    }
}
