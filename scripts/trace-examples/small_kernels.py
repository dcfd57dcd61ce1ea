"""Many small kernels, more than the recorder keeps, for `streamlab trace`'s "when full" rule.

    streamlab trace --json small.json -- python small_kernels.py

What it plants: --kernels small kernels (x.add_(1) on a tensor of --elements floats, one
kernel each), --per-step of them in each NVTX range "step", then one NVTX range "last" that
holds --last kernels (default 2,000). At the defaults that is 300,000 + 2,000 kernels and as
many launch calls: more records than the recorder keeps, so it has to drop some.

What streamlab trace should report: the recorder keeps the last records by default
(`--when-full last`), so the range "last" is recorded whole: its window's kernels (launched in it)
is exactly --last, and no range is said to have "never ended" (a range whose push was dropped
is left out, not drawn to the end of the run).

Its own figures, one JSON object on its last stdout line: the kernels it launched per range
name, the number of "step" ranges, the wall time of the loop, and the tensor's first value
(the count of add_ calls, read back, so a lost launch would show).
"""
import argparse
import json
import os
import time

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kernels", type=int, default=300_000,
                        help="kernels in the 'step' ranges, in all (default 300000)")
    parser.add_argument("--per-step", type=int, default=1_000,
                        help="kernels per 'step' range (default 1000)")
    parser.add_argument("--last", type=int, default=2_000,
                        help="kernels in the final 'last' range (default 2000)")
    parser.add_argument("--elements", type=int, default=1_024,
                        help="floats in the tensor each kernel adds 1 to (default 1024)")
    args = parser.parse_args()
    if args.per_step < 1 or args.kernels < args.per_step or args.last < 1:
        parser.error("need --kernels >= --per-step >= 1 and --last >= 1")

    x = torch.zeros(args.elements, device="cuda")
    torch.cuda.synchronize()
    steps = args.kernels // args.per_step
    launched = {"step": 0, "last": 0}
    nvtx = torch.cuda.nvtx
    start = time.perf_counter()
    for _ in range(steps):
        nvtx.range_push("step")
        for _ in range(args.per_step):
            x.add_(1)
        nvtx.range_pop()
        launched["step"] += args.per_step
    nvtx.range_push("last")
    for _ in range(args.last):
        x.add_(1)
    nvtx.range_pop()
    launched["last"] += args.last
    torch.cuda.synchronize()
    wall_ms = (time.perf_counter() - start) * 1e3
    # Every add_ ran once: the first element counts them (exact in float32 below 2**24).
    value = float(x[0].item())
    print(json.dumps({
        "program": "small_kernels",
        "pid": os.getpid(),
        "kernels": launched,
        "steps": steps,
        "per_step": args.per_step,
        "wall_ms": round(wall_ms, 3),
        "value": value,
        "value_expected": float(launched["step"] + launched["last"]),
    }), flush=True)


if __name__ == "__main__":
    main()
