"""A training-loop-shaped PyTorch program for `streamlab trace`: each step copies a batch from
host memory to the GPU on a side stream with non_blocking=True, while the default stream
computes on the previous batch. With `--pinned` the host batches are pinned (pin_memory()),
so the copies are truly asynchronous and run under the compute; without it they come from
pageable memory, which the driver stages through its own pinned buffer.

    streamlab trace --svg torch.svg -- python pytorch_copies.py            # pageable
    streamlab trace --svg torch-pinned.svg -- python pytorch_copies.py --pinned

Every step is an NVTX range ("step"), so the report has a window per step kind.
"""
import argparse

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pinned", action="store_true", help="pin the host batches")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--elements", type=int, default=16 * 1024 * 1024)
    args = parser.parse_args()

    device = torch.device("cuda")
    copy_stream = torch.cuda.Stream()
    batches = [torch.randn(args.elements) for _ in range(2)]
    if args.pinned:
        batches = [b.pin_memory() for b in batches]
    weight = torch.randn(2048, 2048, device=device)
    current = batches[0].to(device)
    checksum = 0.0
    for step in range(args.steps):
        torch.cuda.nvtx.range_push("step")
        # Bring the next batch in on the side stream while this one computes.
        with torch.cuda.stream(copy_stream):
            upcoming = batches[(step + 1) % 2].to(device, non_blocking=True)
        x = current[: 2048 * 2048].view(2048, 2048)
        for _ in range(8):
            x = torch.tanh(x @ weight)
        checksum += float(x[0, 0])  # a host read each step, as a loss.item() would be
        torch.cuda.current_stream().wait_stream(copy_stream)
        upcoming.record_stream(torch.cuda.current_stream())
        current = upcoming
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print(f"checksum {checksum:.6f}")


if __name__ == "__main__":
    main()
