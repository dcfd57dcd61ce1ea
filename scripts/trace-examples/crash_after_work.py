"""A program that crashes soon after its GPU work, for what `streamlab trace` keeps of a crash.

    streamlab trace --json crash.json -- python crash_after_work.py             # exit 139
    streamlab trace --json crash.json -- python crash_after_work.py --signal abort  # 134

What it plants: about --work-ms of GPU work (torch.sin over a tensor of --elements floats, in
batches of --batch kernels, each batch synchronized so that the host's clock follows the
GPU's) inside an NVTX range "work", which ends after a last synchronize. It then prints its
own figures, flushed, and dies at once, about --work-ms after its first kernel: before the
recorder's periodic flush (every 200 ms by default) has surely handed over what it recorded.
--signal segv (the default) dies of SIGSEGV, --signal abort of SIGABRT; --by fault (the
default) raises it the way a real crash does (a read of address 0 through ctypes, or
abort()), --by kill sends it with os.kill. Core dumps are turned off first (a CUDA process's
core is large and slow to write; the exit status is the same).

What streamlab trace should report: exit code 139 (SIGSEGV) or 134 (SIGABRT), the process's
ending "crashed" with that signal, and the "work" window with kernels (launched in it) equal to
the kernels counted below.

Its own figures, one JSON object on its last stdout line (printed before it dies): the
kernels launched in "work", their GPU time by CUDA events around the range's work, the
host time from the first kernel to the print, and the signal it is about to die of.
"""
import argparse
import ctypes
import json
import os
import resource
import signal
import time

import torch

SIGNALS = {"segv": signal.SIGSEGV, "abort": signal.SIGABRT}


def die(how, by):
    """Dies of signal `how` ("segv" or "abort"), raised as a fault or sent by os.kill."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if by == "kill":
        os.kill(os.getpid(), SIGNALS[how])
    elif how == "segv":
        ctypes.string_at(0)
    else:
        os.abort()
    # os.kill delivers the signal on return to the interpreter loop; wait for it there.
    time.sleep(10)
    raise SystemExit("crash_after_work: still alive 10 s after the signal")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work-ms", type=float, default=100.0,
                        help="host time of the GPU work before dying (default 100)")
    parser.add_argument("--elements", type=int, default=1 << 25,
                        help="floats each kernel reads and writes (default 2**25)")
    parser.add_argument("--batch", type=int, default=10,
                        help="kernels launched between two synchronizations (default 10)")
    parser.add_argument("--signal", choices=sorted(SIGNALS), default="segv",
                        help="segv: exit 139; abort: exit 134 (default segv)")
    parser.add_argument("--by", choices=["fault", "kill"], default="fault",
                        help="a real fault (null read, abort()) or os.kill (default fault)")
    args = parser.parse_args()
    if args.work_ms <= 0 or args.elements < 1 or args.batch < 1:
        parser.error("--work-ms, --elements and --batch must be positive")

    x = torch.empty(args.elements, device="cuda")
    y = torch.empty_like(x)
    x.fill_(0.5)  # the first kernel, before the range
    torch.cuda.synchronize()
    nvtx = torch.cuda.nvtx
    first_kernel = time.perf_counter()
    before = torch.cuda.Event(enable_timing=True)
    after = torch.cuda.Event(enable_timing=True)
    kernels = 0
    nvtx.range_push("work")
    before.record()
    while True:
        for _ in range(args.batch):
            torch.sin(x, out=y)
        kernels += args.batch
        torch.cuda.synchronize()
        if (time.perf_counter() - first_kernel) * 1e3 >= args.work_ms:
            break
    after.record()
    torch.cuda.synchronize()
    nvtx.range_pop()
    gpu_ms = before.elapsed_time(after)
    print(json.dumps({
        "program": "crash_after_work",
        "pid": os.getpid(),
        "kernels": {"work": kernels},
        "gpu_ms": round(gpu_ms, 6),
        "host_ms_to_death": round((time.perf_counter() - first_kernel) * 1e3, 3),
        "signal": int(SIGNALS[args.signal]),
        "expected_exit": 128 + int(SIGNALS[args.signal]),
        "by": args.by,
    }), flush=True)
    die(args.signal, args.by)


if __name__ == "__main__":
    main()
