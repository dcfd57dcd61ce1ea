"""A training loop for long `streamlab trace` runs and for its cost beside torch.profiler's.

    streamlab trace --json long.json -- python training_loop.py --seconds 300
    streamlab trace --cost --json cost.json -- python training_loop.py --steps 500
    python training_loop.py --steps 500 --profiler      # the same steps under torch.profiler

What it plants: a small MLP (--features -> --hidden -> --hidden -> --classes, ReLU) trained
on random data with AdamW: each step, an NVTX range "step", runs forward, cross-entropy
loss, backward and the optimizer step on the default stream while the next batch (pinned
host memory) is copied to the GPU on a side stream with non_blocking=True; the loss is read
back with .item() every --item-every steps. It runs for --seconds (default 300) or, given
--steps, for that many steps. With --profiler (needs --steps) the same loop runs inside
torch.profiler.profile(activities=[CPU, CUDA]); the program itself exports nothing.

What streamlab trace should report: a "step" window whose occurrences are the steps it kept
(all of them for a short run; the last ones for a long one, the recorder keeping the last
records by default), and a report written within seconds of the program's exit however long
it ran (the runner scripts/trace-examples.sh measures that delay: the trace command's wall
time minus the program's own).

Its own figures, one JSON object on its last stdout line: the steps run, the loop's wall
time (loop_ms, synchronized at its end; under --profiler, inside the profiler), the time
from entering the profiler to leaving it (profiled_ms, its start and its stop's processing
included; null without --profiler), and wall_ms, from the program's first line (before
PyTorch is imported) to its exit.
"""
import time

STARTED = time.perf_counter()  # before PyTorch's import: wall_ms covers it

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402


class Trainer:
    """The model, its optimizer, two pinned host batches and the side stream for copies."""

    def __init__(self, args):
        self.device = torch.device("cuda")
        self.item_every = args.item_every
        self.model = nn.Sequential(
            nn.Linear(args.features, args.hidden), nn.ReLU(),
            nn.Linear(args.hidden, args.hidden), nn.ReLU(),
            nn.Linear(args.hidden, args.classes),
        ).to(self.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.inputs = [torch.randn(args.batch, args.features).pin_memory() for _ in range(2)]
        self.labels = [torch.randint(0, args.classes, (args.batch,)).pin_memory()
                       for _ in range(2)]
        self.copy_stream = torch.cuda.Stream()
        self.x = self.inputs[0].to(self.device)
        self.y = self.labels[0].to(self.device)
        self.loss = None

    def step(self, step):
        torch.cuda.nvtx.range_push("step")
        # The next batch comes in on the side stream while this one trains.
        with torch.cuda.stream(self.copy_stream):
            next_x = self.inputs[(step + 1) % 2].to(self.device, non_blocking=True)
            next_y = self.labels[(step + 1) % 2].to(self.device, non_blocking=True)
        loss = F.cross_entropy(self.model(self.x), self.y)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        if (step + 1) % self.item_every == 0:
            self.loss = loss.item()
        current = torch.cuda.current_stream()
        current.wait_stream(self.copy_stream)
        next_x.record_stream(current)
        next_y.record_stream(current)
        self.x, self.y = next_x, next_y
        torch.cuda.nvtx.range_pop()


def run_loop(trainer, steps, seconds):
    """Runs `steps` steps, or (steps None) until `seconds` have passed; returns the count."""
    start = time.perf_counter()
    done = 0
    while True:
        if steps is not None and done == steps:
            break
        if steps is None and time.perf_counter() - start >= seconds:
            break
        trainer.step(done)
        done += 1
    torch.cuda.synchronize()
    return done


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=300.0,
                        help="run this long, unless --steps is given (default 300)")
    parser.add_argument("--steps", type=int, help="run exactly this many steps")
    parser.add_argument("--profiler", action="store_true",
                        help="run the loop under torch.profiler (CPU and CUDA); needs --steps")
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--features", type=int, default=1024)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--item-every", type=int, default=10,
                        help="read the loss back every N steps (default 10)")
    args = parser.parse_args()
    if args.profiler and args.steps is None:
        parser.error("--profiler needs --steps N (the same steps as the runs it is set beside)")
    if args.steps is not None and args.steps < 1:
        parser.error("--steps must be at least 1")
    if args.seconds <= 0 or args.item_every < 1:
        parser.error("--seconds and --item-every must be positive")

    trainer = Trainer(args)
    torch.cuda.synchronize()
    profiled_ms = None
    if args.profiler:
        from torch.profiler import ProfilerActivity, profile
        profiler = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    else:
        profiler = contextlib.nullcontext()
    entered = time.perf_counter()
    with profiler:
        loop_start = time.perf_counter()
        steps = run_loop(trainer, args.steps, args.seconds)
        loop_ms = (time.perf_counter() - loop_start) * 1e3
    if args.profiler:
        profiled_ms = (time.perf_counter() - entered) * 1e3
    print(json.dumps({
        "program": "training_loop",
        "pid": os.getpid(),
        "mode": "profiler" if args.profiler else "plain",
        "steps": steps,
        "loop_ms": round(loop_ms, 3),
        "profiled_ms": None if profiled_ms is None else round(profiled_ms, 3),
        "loss": trainer.loss,
        "wall_ms": round((time.perf_counter() - STARTED) * 1e3, 3),
    }), flush=True)


if __name__ == "__main__":
    main()
