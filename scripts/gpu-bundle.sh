#!/usr/bin/env bash
# Builds everything a GPU run needs on this (GPU-less) machine and copies it into .gpu/
# (ignored by git): the streamlab binary, every test and bench executable, the CUDA C++
# references, scripts/gpu-run.sh, scripts/perf-check.sh (with perf_check.py and
# perf-targets.tsv), scripts/multi-gpu-run.sh, scripts/gpu-arch-check.sh, scripts/gpu-mp-check.sh
# and scripts/pictures.sh. A GPU machine without Rust then runs `bash .gpu/gpu-run.sh` (and
# `bash .gpu/pictures.sh` for docs/img and docs/recorded, `bash .gpu/gpu-arch-check.sh` for PTX
# per architecture, `bash .gpu/gpu-mp-check.sh` for mixed precision against its twin and bound,
# `bash .gpu/trace-examples.sh` for `streamlab trace` on PyTorch programs and long runs,
# `bash .gpu/trace-examples-ddp.sh` for it on a DDP program of two ranks under torchrun).
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu && mkdir -p .gpu/tests .gpu/benches
cargo build --release --bin streamlab
target=${CARGO_TARGET_DIR:-target}
cp "$target/release/streamlab" .gpu/
# The recorder `streamlab trace` injects (embedded in streamlab too), for inject-check.sh.
cargo build --release -p streamlab-inject
cp "$target/release/libstreamlab_inject.so" .gpu/
# Test and bench executables, named by cargo's JSON messages: tests/<kind>-<name>, benches/<name>.
pick() { python3 -c '
import json, sys
want = sys.argv[1]
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    # kernels-build tests drive cargo and LLVM: they belong where Rust is, not on the GPU.
    if "kernels-build" in m.get("package_id", ""):
        continue
    kind = m["target"]["kind"][0]
    if want == "bench" and kind == "bench":
        print(m["target"]["name"], m["executable"])
    elif want == "test" and kind != "bench" and m["profile"]["test"]:
        print(kind + "-" + m["target"]["name"], m["executable"])' "$1"; }
cargo test --release --workspace --no-run --message-format=json 2>/dev/null | pick test | while read -r name exe; do
  cp "$exe" ".gpu/tests/$name"
done
cargo bench --workspace --no-run --message-format=json 2>/dev/null | pick bench | while read -r name exe; do
  cp "$exe" ".gpu/benches/$name"
done
cp -r cuda-reference scripts/gpu-run.sh scripts/gpu-arch-check.sh scripts/gpu-mp-check.sh scripts/multi-gpu-run.sh scripts/sanitizer_findings.py scripts/pictures.sh scripts/edge-cases.txt scripts/small-runs.txt \
  scripts/perf-check.sh scripts/perf_check.py scripts/perf-targets.tsv \
  scripts/trace-check.sh scripts/trace_compare.py scripts/trace-examples scripts/trace-examples.sh scripts/trace-examples-run.sh scripts/trace_examples_check.py \
  scripts/trace-examples-ddp.sh scripts/trace_ddp_check.py \
  scripts/inject-check.sh scripts/inject_check.py .gpu/
du -sh .gpu
ls .gpu .gpu/tests .gpu/benches
