"""A host that runs ahead of its GPU, for `streamlab trace`'s launched-in measure and its
"cpu_ahead" finding.

    streamlab trace --json ahead.json -- python cpu_ahead.py

What it plants: --steps steps, each an NVTX range "step" that launches --kernels-per-step
kernels of about --kernel-ms each (torch.sin over a tensor sized at the start so that one
kernel takes that long; the size and the measured per-kernel time are printed) and returns
without synchronizing. The host waits only for the last kernel of step i-AHEAD before it
launches step i (--ahead, default 3), so it runs about three steps ahead of the GPU and each
step's GPU work runs after its range has ended on the host. After the loop, an NVTX range
"sync" holds only torch.cuda.synchronize(): it launches nothing while the GPU finishes the
queued steps.

What streamlab trace should report: the "step" window's span_ms (of the work launched in it) (over every
occurrence, the last end minus the first start of the GPU work launched in it) equal to the
program's own event-timed sum below, within 2%, its kernels (launched in it) equal to
steps x kernels-per-step, and a "cpu_ahead" finding. The "sync" window launches nothing
(kernels (launched in it) 0) while kernels ran during it (ran_during.kernels > 0).

Its own figures, one JSON object on its last stdout line: inside each step's range, a CUDA
event is recorded before the first launch and another after the last; elapsed_time(before,
after) is the GPU time of the work launched in the step. Printed: the per-step list, its sum
over all steps (gpu_ms_all_steps), and its sum without the first --warmup steps
(gpu_ms_after_warmup, with the count of warm-up steps). A report that sums every
occurrence of the range is compared with gpu_ms_all_steps.
"""
import argparse
import json
import os
import time

import torch


def per_kernel_ms(x, y, launches):
    """The mean GPU time of one torch.sin(x, out=y), timed by CUDA events."""
    for _ in range(3):
        torch.sin(x, out=y)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(launches):
        torch.sin(x, out=y)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / launches


def sized_tensors(target_ms, first_elements, most_elements):
    """Tensors on which one sin kernel takes about target_ms (a memory-bound kernel's time
    grows with its size: one measurement, one rescale, one more measurement)."""
    elements = first_elements
    for _ in range(2):
        x = torch.rand(elements, device="cuda")
        y = torch.empty_like(x)
        measured = per_kernel_ms(x, y, 20)
        wanted = int(elements * target_ms / max(measured, 1e-6))
        wanted = max(1 << 16, min(wanted, most_elements))
        if abs(wanted - elements) <= elements // 20:
            break
        del x, y
        elements = wanted
    x = torch.rand(elements, device="cuda")
    y = torch.empty_like(x)
    return x, y, per_kernel_ms(x, y, 50)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50, help="steps (default 50)")
    parser.add_argument("--kernels-per-step", type=int, default=200,
                        help="kernels each step launches (default 200)")
    parser.add_argument("--kernel-ms", type=float, default=0.2,
                        help="the GPU time one kernel should take (default 0.2)")
    parser.add_argument("--ahead", type=int, default=3,
                        help="steps the host may run ahead of the GPU (default 3)")
    parser.add_argument("--warmup", type=int, default=3,
                        help="first steps left out of gpu_ms_after_warmup (default 3)")
    parser.add_argument("--most-elements", type=int, default=1 << 28,
                        help="the largest tensor the sizing may choose (default 2**28 floats)")
    args = parser.parse_args()
    if args.steps < 1 or args.kernels_per_step < 1 or args.ahead < 1:
        parser.error("--steps, --kernels-per-step and --ahead must be at least 1")
    if not 0 <= args.warmup < args.steps:
        parser.error("--warmup must be at least 0 and less than --steps")

    x, y, kernel_ms = sized_tensors(args.kernel_ms, 1 << 24, args.most_elements)
    torch.cuda.synchronize()
    nvtx = torch.cuda.nvtx
    befores, afters = [], []
    start = time.perf_counter()
    for step in range(args.steps):
        # The throttle, outside the range: the range holds the launches only.
        if step >= args.ahead:
            afters[step - args.ahead].synchronize()
        nvtx.range_push("step")
        before = torch.cuda.Event(enable_timing=True)
        after = torch.cuda.Event(enable_timing=True)
        before.record()
        for _ in range(args.kernels_per_step):
            torch.sin(x, out=y)
        after.record()
        nvtx.range_pop()
        befores.append(before)
        afters.append(after)
    loop_ms = (time.perf_counter() - start) * 1e3
    nvtx.range_push("sync")
    torch.cuda.synchronize()
    nvtx.range_pop()
    wall_ms = (time.perf_counter() - start) * 1e3

    per_step = [b.elapsed_time(a) for b, a in zip(befores, afters)]
    print(json.dumps({
        "program": "cpu_ahead",
        "pid": os.getpid(),
        "steps": args.steps,
        "kernels_per_step": args.kernels_per_step,
        "kernels": {"step": args.steps * args.kernels_per_step, "sync": 0},
        "elements": x.numel(),
        "kernel_ms": round(kernel_ms, 6),
        "ahead": args.ahead,
        "warmup": args.warmup,
        "gpu_ms_all_steps": round(sum(per_step), 6),
        "gpu_ms_after_warmup": round(sum(per_step[args.warmup:]), 6),
        "per_step_ms": [round(ms, 6) for ms in per_step],
        "host_loop_ms": round(loop_ms, 3),
        "wall_ms": round(wall_ms, 3),
    }), flush=True)


if __name__ == "__main__":
    main()
