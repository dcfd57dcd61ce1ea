"""A long loop of which only a few steps are to be recorded, for `streamlab trace`'s capture
range.

    streamlab trace --capture-range step --capture-count 10 --json capture.json -- python capture_loop.py

What it plants: --steps steps (default 1,000), each an NVTX range "step" that launches a few
small kernels (x.add_(1) on a small tensor): step i launches 1 + (i mod 4) of them, so that
a run of consecutive steps has a kernel count that depends on where it starts.

What streamlab trace should report, run as above: the "step" window has exactly 10
occurrences, and its kernels (launched in it) is the sum of the counts of 10 consecutive steps
below (23 for steps 0 to 9).

Its own figures, one JSON object on its last stdout line: the kernels each step launched (a
list, by step), their total, the wall time, and the tensor's first value (the count of
add_ calls, read back).
"""
import argparse
import json
import os
import time

import torch


def kernels_of_step(step):
    return 1 + step % 4


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1_000, help="steps (default 1000)")
    parser.add_argument("--elements", type=int, default=1_024,
                        help="floats in the tensor each kernel adds 1 to (default 1024)")
    args = parser.parse_args()
    if args.steps < 1:
        parser.error("--steps must be at least 1")

    x = torch.zeros(args.elements, device="cuda")
    torch.cuda.synchronize()
    nvtx = torch.cuda.nvtx
    per_step = []
    start = time.perf_counter()
    for step in range(args.steps):
        nvtx.range_push("step")
        count = kernels_of_step(step)
        for _ in range(count):
            x.add_(1)
        nvtx.range_pop()
        per_step.append(count)
    torch.cuda.synchronize()
    wall_ms = (time.perf_counter() - start) * 1e3
    print(json.dumps({
        "program": "capture_loop",
        "pid": os.getpid(),
        "steps": args.steps,
        "kernels": {"step": sum(per_step)},
        "kernels_per_step": per_step,
        "wall_ms": round(wall_ms, 3),
        "value": float(x[0].item()),
    }), flush=True)


if __name__ == "__main__":
    main()
