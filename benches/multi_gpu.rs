//! The three two-GPU lessons side by side with their versions, at their defaults, for
//! comparison with their CUDA C++ + NCCL twin (cuda-reference/multi_gpu.cu, same sizes and
//! schedules):
//! - `p2p`: 256 MiB from GPU 0 to GPU 1 staged through pinned host memory, by one peer copy,
//!   and by peer copies both ways at once (throughput in decimal GB/s, both ways counted);
//! - `allreduce`: 64M gradient floats per GPU, 10 iterations: backward then one all-reduce,
//!   against 8 buckets with the comm stream at the greatest and the least priority, 32, and
//!   8 summed on the copy engines;
//! - `allreduce_call`: the all-reduce of all 64M floats alone (the same NCCL call as C++'s);
//! - `pipeline`: 8 micro-batches of 4M floats, 50 iterations a stage, one at a time against
//!   pipelined.
//!
//! GPU time is measured with events by the lessons' own code (every stream forked from and
//! joined back into the first), fed to criterion through `iter_custom`. Afterwards every
//! version runs once more and the lesson's checks run; the bench exits 1 if one fails. With
//! one GPU it says "not run"; without NCCL the all-reduce groups say so and the others run.
use criterion::{BenchmarkId, Criterion, Throughput};
use streamlab::lab::harness::args_from;
use streamlab::lessons::allreduce_overlap::collective::{Ranks, Setup};
use streamlab::lessons::allreduce_overlap::{AllreduceOverlap, DEFAULT_GPUS};
use streamlab::lessons::p2p::P2p;
use streamlab::lessons::pipeline_parallel::PipelineParallel;
use streamlab::runtime::context::device_count;
use streamlab::runtime::nccl;
use streamlab::Gpu;
use testkit::bench::{fail, gpu_timed, quick_group, verify, version, versions};
use testkit::{gpu_for_bench, set_up};

const BENCH: &str = "multi-gpu";
/// The harness's default seed, as in the C++ twin.
const SEED: u64 = streamlab::lab::harness::common::SEED;

fn p2p(c: &mut Criterion, gpu: &Gpu) {
    let mib = args_from::<P2p>(&[]).unwrap_or_else(|e| fail(BENCH, e)).mib;
    let mut p: P2p = set_up(gpu, &[], SEED).unwrap_or_else(|e| fail(BENCH, e));
    let mut group = quick_group(c, "p2p");
    let mut failure = None;
    let (size, bytes) = (format!("{mib} MiB"), (mib as u64) << 20);
    for (v, id, copied) in
        [(0, "staged_host", bytes), (1, "peer_one_way", bytes), (2, "peer_both_ways", 2 * bytes)]
    {
        group.throughput(Throughput::BytesDecimal(copied));
        gpu_timed(&mut group, BenchmarkId::new(id, &size), &mut failure, || {
            version(&mut p, gpu, v).map(|s| s.ms)
        });
    }
    group.finish();
    if let Some(e) = failure {
        fail(BENCH, e);
    }
    verify(gpu, &mut p, 3);
}

fn allreduce(c: &mut Criterion, gpu: &Gpu) {
    let args = args_from::<AllreduceOverlap>(&[]).unwrap_or_else(|e| fail(BENCH, e));
    let (n, b) = (args.elements, args.buckets);
    let size = format!("{}M x {}", n >> 20, args.iters);
    {
        let mut a: AllreduceOverlap = set_up(gpu, &[], SEED).unwrap_or_else(|e| fail(BENCH, e));
        let ids = [
            "sequential".to_string(),
            format!("bucketed_{b}_greatest"),
            format!("bucketed_{b}_least"),
            format!("bucketed_{}_greatest", 4 * b),
            format!("bucketed_{b}_copy_engines"),
        ]
        .map(|id| BenchmarkId::new(id, &size));
        versions(quick_group(c, "allreduce"), BENCH, &mut a, gpu, ids.into_iter().enumerate());
        verify(gpu, &mut a, 5);
    }
    // The call alone, on ranks of its own (the lesson's, dropped above, hold 3 buffers a GPU).
    let setup =
        Setup { n, events: 1, seed: SEED, gpus: DEFAULT_GPUS, copy_engines: false, pieces: 1 };
    let ranks = Ranks::new(gpu, &setup).unwrap_or_else(|e| fail(BENCH, e));
    let all_reduce = || {
        ranks.bracket.time(&ranks.streams, || {
            nccl::group(|| ranks.local.iter().try_for_each(|r| r.all_reduce(0..n, &r.compute)))
        })
    };
    let mut group = quick_group(c, "allreduce_call");
    let mut failure = None;
    gpu_timed(
        &mut group,
        BenchmarkId::new("ncclAllReduce", format!("{}M floats", n >> 20)),
        &mut failure,
        &all_reduce,
    );
    group.finish();
    if let Some(e) = failure {
        fail(BENCH, e);
    }
    // Its sums, of gradients computed first, checked bit for bit against the CPU's a + b.
    let checked = ranks
        .local
        .iter()
        .try_for_each(|r| r.backward(gpu, args.iters, 0..n))
        .and_then(|()| all_reduce())
        .and_then(|_| ranks.sums());
    let sums = checked.unwrap_or_else(|e| fail(BENCH, e));
    let mut checks = streamlab::lab::Checks::default();
    if let Err(e) = ranks.check_sum_is_exact(gpu, args.iters, &sums, &mut checks) {
        fail(BENCH, e);
    }
    if let Some(check) = checks.items.iter().find(|c| !c.passed()) {
        fail(
            BENCH,
            streamlab::Error::Verification(format!("{}: {}", check.name, check.detail).into()),
        );
    }
}

fn pipeline(c: &mut Criterion, gpu: &Gpu) {
    let args = args_from::<PipelineParallel>(&[]).unwrap_or_else(|e| fail(BENCH, e));
    let mut p: PipelineParallel = set_up(gpu, &[], SEED).unwrap_or_else(|e| fail(BENCH, e));
    let size = format!("{} x {}M x {}", args.micro_batches, args.elements >> 20, args.iters);
    let ids = [(0, BenchmarkId::new("naive", &size)), (1, BenchmarkId::new("pipelined", &size))];
    versions(quick_group(c, "pipeline"), BENCH, &mut p, gpu, ids);
    verify(gpu, &mut p, 2);
}

fn main() {
    let Some(gpu) = gpu_for_bench(BENCH) else {
        return;
    };
    match device_count() {
        Ok(n) if n >= 2 => {}
        Ok(n) => return println!("{BENCH}: not run: needs 2 GPUs, found {n}"),
        Err(e) => return println!("{BENCH}: not run: {e}"),
    }
    let mut c = Criterion::default().configure_from_args();
    p2p(&mut c, &gpu);
    match nccl::version() {
        Ok(_) => allreduce(&mut c, &gpu),
        Err(e) => println!("{BENCH} allreduce: not run: {e}"),
    }
    pipeline(&mut c, &gpu);
    c.final_summary();
}
