"""A DDP training loop on two GPUs with a planted late rank, for `streamlab trace`'s late-rank
finding and its collectives-under-compute figures (issue 27).

    streamlab trace --json late.json -- torchrun --standalone --nproc-per-node 2 \\
        ddp_late_rank.py --bucket-cap-mb 25 --width 8192 --layers 4 --batch 16
    streamlab trace --json bucket-1.json -- torchrun --standalone --nproc-per-node 2 \\
        ddp_late_rank.py --bucket-cap-mb 1 --late-ms 0

What it plants: each rank (one process, one GPU: its local rank) trains an MLP of --layers
Linear layers of --width x --width (ReLU between them; fp32, 64 MiB of weights a layer at
the default 4096) on a random batch of --batch rows, wrapped in DistributedDataParallel
(NCCL) with --bucket-cap-mb, and plain SGD. Each step is an NVTX range "step": forward, a
mean loss, backward (DDP all-reduces the gradients bucket by bucket while the backward
runs), the optimizer step, then torch.cuda.synchronize(), so that every step starts with
both GPUs idle and the ranks in line. In every --late-every-th step (the steps i, counted
from 0 after the warm-up, with (i + 1) % late_every == 0), rank --late-rank sleeps
--late-ms on the host before its forward: its GPU starts that much later, and the other
rank's first all-reduce of the step waits for it that long.

Only the first all-reduce of a late step waits that long where the all-reduces, not the
backward, set the pace (a bucket's all-reduce longer than the backward between two
buckets): then the late rank's later buckets are ready before the all-reduce ahead of them
ends, on both ranks at once. Where the backward sets the pace, as at the default shape (a
layer's backward is two fp32 matmuls of 34 GFLOP each, beside 64 MiB to all-reduce), the
late rank starts every later all-reduce of that step last too, each by the backward
between two buckets less an all-reduce: the other ranks, done with their backward, wait
for each. Hence the shape of a late run: --width 8192 --layers 4 --batch 16 (a layer's
backward is two small matmuls that read or write its 256 MiB of weights about once each, in
the GPU's own memory, beside the same 256 MiB all-reduced over NVLink, several times slower).

Before the steps: one forward and backward of the bare model (before DDP wraps it: cuBLAS
and the kernels loaded, no collective), a barrier on a gloo group (host only: no GPU
collective to start apart), DDP's construction (its check of the shapes and its broadcast
of the weights, the first NCCL collectives), then --warmup steps in an NVTX range "warmup"
(never late, each after a gloo barrier; DDP rebuilds its buckets after its first step), and
another gloo barrier.

What streamlab trace should report: with --late-ms above 0, one straggler: the late rank's
process and GPU, last to start the first collective of each late step, by a median of about
--late-ms; its count of late collectives about the count of late steps (a collective of
DDP's construction or of a warm-up step, where that rank happened to start it last, adds
one). With --late-ms 0, the share of the collectives' time under compute higher with small
buckets (--bucket-cap-mb 1: one bucket a layer, each all-reduced while the backward of the
layers below it runs) than with one large one (--bucket-cap-mb 1000: DDP keeps its first
bucket small, the last layer alone; every other layer's gradient goes in one bucket,
all-reduced after the whole backward).

Its own figures, one JSON object a rank on its own stdout line (a "program" key): rank,
world size, pid, local GPU, NCCL_NVLS_ENABLE as it found it, steps, warm-up steps, the steps
it was late in (late_steps, the same list on every rank: the late rank's late steps),
late_ms, bucket_cap_mb, the buckets DDP all-reduced in the last step (buckets: counted by
the comm hook, which times each bucket and calls DDP's default all-reduce) and the bucket
sizes DDP logged (bucket_sizes, bytes, null where this PyTorch does not say), per step:
step_ms (CUDA events around the step's work, the late rank's sleep included) and
first_allreduce_ms (from the moment the step's first bucket was ready on the rank's stream
to the end of its all-reduce: on the ranks that were on time, a late step's first
all-reduce is longer by how long they waited), and wall_ms from the program's first line to
its exit.
"""
import time

STARTED = time.perf_counter()  # before PyTorch's import: wall_ms covers it

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402


class BucketTimes:
    """The comm hook's state: per step, one pair of CUDA events per bucket all-reduced (the
    bucket ready on the rank's stream; its all-reduce done)."""

    def __init__(self):
        self.buckets = []

    def start_step(self):
        self.buckets = []

    def first_allreduce_ms(self):
        """The first bucket's time from ready to all-reduced; None where none was."""
        if not self.buckets:
            return None
        ready, done = self.buckets[0]
        return ready.elapsed_time(done)


def timed_allreduce(state, bucket):
    """DDP's default all-reduce of one bucket, with an event before it on the stream the
    gradients were made on and one after it: a callback of a CUDA future runs on a stream
    that waits for the all-reduce to end."""
    ready = torch.cuda.Event(enable_timing=True)
    done = torch.cuda.Event(enable_timing=True)
    ready.record()
    state.buckets.append((ready, done))

    def all_reduced(future):
        done.record()
        return future.value()

    return default_hooks.allreduce_hook(None, bucket).then(all_reduced)


def logged_bucket_sizes(ddp):
    """The bucket sizes (bytes) DDP logged, after its rebuild where it did one; None where
    this PyTorch's DDP does not log them."""
    try:
        data = ddp._get_ddp_logging_data()
    except (AttributeError, AssertionError, RuntimeError):
        return None
    for key in ("rebuilt_bucket_sizes", "bucket_sizes"):
        text = data.get(key)
        if isinstance(text, str) and text.strip():
            try:
                return [int(s) for s in text.split(",")]
            except ValueError:
                return None
    return None


def mlp(width, layers):
    parts = []
    for i in range(layers):
        parts.append(nn.Linear(width, width))
        if i + 1 < layers:
            parts.append(nn.ReLU())
    return nn.Sequential(*parts)


def is_late(step, args):
    return args.late_ms > 0 and (step + 1) % args.late_every == 0


def train_step(model, optimizer, x, rank, sleeper, late_ms):
    """One step: the sleep of rank `sleeper` (None: no one sleeps), forward, loss, backward,
    optimizer step."""
    if sleeper is not None and rank == sleeper:
        time.sleep(late_ms / 1e3)
    loss = model(x).square().mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=30, help="steps timed (default 30)")
    parser.add_argument("--warmup", type=int, default=2,
                        help="steps before them, never late (default 2)")
    parser.add_argument("--late-rank", type=int, default=1,
                        help="the rank that sleeps before its forward (default 1)")
    parser.add_argument("--late-ms", type=float, default=20.0,
                        help="how long it sleeps, 0 for none (default 20)")
    parser.add_argument("--late-every", type=int, default=2,
                        help="it sleeps in every N-th step (default 2)")
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0,
                        help="DDP's bucket_cap_mb (default 25, DDP's own default)")
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=1024)
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 1 or args.late_every < 1:
        parser.error("--steps, --warmup and --late-every must be at least 1")
    if args.late_ms < 0 or args.bucket_cap_mb <= 0:
        parser.error("--late-ms must be 0 or more, --bucket-cap-mb above 0")
    if min(args.width, args.layers, args.batch) < 1:
        parser.error("--width, --layers and --batch must be at least 1")

    if not all(name in os.environ for name in ("LOCAL_RANK", "RANK", "WORLD_SIZE")):
        parser.error("LOCAL_RANK, RANK and WORLD_SIZE unset: run it under torchrun")
    world = int(os.environ["WORLD_SIZE"])
    if not 0 <= args.late_rank < world:
        parser.error(f"--late-rank {args.late_rank}: there are ranks 0..{world - 1}")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    host_group = dist.new_group(backend="gloo")

    torch.manual_seed(0)
    model = mlp(args.width, args.layers).cuda()
    x = torch.randn(args.batch, args.width, device="cuda")
    model(x).square().mean().backward()  # cuBLAS and the kernels, before any collective
    model.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    dist.barrier(group=host_group)
    ddp = DistributedDataParallel(model, device_ids=[local_rank],
                                  bucket_cap_mb=args.bucket_cap_mb)
    times = BucketTimes()
    ddp.register_comm_hook(times, timed_allreduce)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-6)

    for _ in range(args.warmup):
        dist.barrier(group=host_group)
        torch.cuda.nvtx.range_push("warmup")
        train_step(ddp, optimizer, x, rank, None, 0.0)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    dist.barrier(group=host_group)

    step_ms, first_allreduce_ms, late_steps, buckets = [], [], [], 0
    for step in range(args.steps):
        late = is_late(step, args)
        if late:
            late_steps.append(step)
        torch.cuda.nvtx.range_push("step")
        times.start_step()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        train_step(ddp, optimizer, x, rank, args.late_rank if late else None, args.late_ms)
        end.record()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        step_ms.append(round(start.elapsed_time(end), 4))
        first = times.first_allreduce_ms()
        first_allreduce_ms.append(None if first is None else round(first, 4))
        buckets = len(times.buckets)

    dist.barrier(group=host_group)
    figures = {
        "program": "ddp_late_rank",
        "rank": rank,
        "world_size": world,
        "pid": os.getpid(),
        "local_rank": local_rank,
        "device": torch.cuda.current_device(),
        "gpu": torch.cuda.get_device_name(),
        "nccl_nvls_enable": os.environ.get("NCCL_NVLS_ENABLE"),
        "steps": args.steps,
        "warmup": args.warmup,
        "late_rank": args.late_rank,
        "late_ms": args.late_ms,
        "late_every": args.late_every,
        "late_steps": late_steps,
        "bucket_cap_mb": args.bucket_cap_mb,
        "buckets": buckets,
        "bucket_sizes": logged_bucket_sizes(ddp),
        "weights_mib": round(sum(p.numel() * p.element_size() for p in model.parameters())
                             / 2**20, 3),
        "step_ms": step_ms,
        "first_allreduce_ms": first_allreduce_ms,
        "wall_ms": round((time.perf_counter() - STARTED) * 1e3, 3),
    }
    # The line and its newline in one write: the ranks share torchrun's stdout, unbuffered
    # (torchrun runs them with python -u), where print's two writes can interleave.
    sys.stdout.write(json.dumps(figures) + "\n")
    sys.stdout.flush()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
