#!/usr/bin/env bash
# Checks the injected recorder (inject/) on a GPU machine, before and without `streamlab
# trace`: the environment the trace command sets, set by hand around cuda-reference/trace_probe.cu.
# Usage, from the repository root (or a copy holding cuda-reference/ and scripts/):
#   LIB=path/to/libstreamlab_inject.so [STREAMLAB=path/to/streamlab] bash scripts/inject-check.sh
# LIB: `cargo build --release -p streamlab-inject` leaves it in target/release/. Needs nvcc and
# python3; PyTorch (/opt/torch/.venv) and STREAMLAB for the conflict observations at the end.
# Trace files and logs go to $OUT (default ./inject-check); exit 1 when a check fails.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
LIB=$(realpath "${LIB:?name the built recorder: LIB=target/release/libstreamlab_inject.so}")
CUPTI=${CUPTI:-/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti.so.13}
OUT=$(mkdir -p "${OUT:-./inject-check}" && cd "${OUT:-./inject-check}" && pwd)
PYTHON=${PYTHON:-/opt/torch/.venv/bin/python}
[[ -x $PYTHON ]] || PYTHON=python3
status=0

# Runs "$@" with the recorder writing into folder $1 (emptied first).
traced() {
  local dir=$1; shift
  rm -rf "$dir"
  CUDA_INJECTION64_PATH=$LIB NVTX_INJECTION64_PATH=$CUPTI STREAMLAB_CUPTI=$CUPTI \
    STREAMLAB_TRACE_DIR=$dir "$@"
}

nvcc -O2 -arch=sm_90 "$root/cuda-reference/trace_probe.cu" -o "$OUT/trace_probe" || exit 1

echo "== a full run"
traced "$OUT/ok" "$OUT/trace_probe"; echo "exit $? (0 expected)"
python3 "$root/scripts/inject_check.py" ok "$OUT/ok" || status=1

echo "== abort() halfway"
traced "$OUT/abort" "$OUT/trace_probe" abort; echo "exit $? (134 expected: SIGABRT)"
python3 "$root/scripts/inject_check.py" abort "$OUT/abort" || status=1

echo "== a segfault halfway, before the first periodic flush (a minute apart)"
traced "$OUT/segv" env STREAMLAB_TRACE_FLUSH_MS=60000 "$OUT/trace_probe" segv
echo "exit $? (139 expected: SIGSEGV)"
python3 "$root/scripts/inject_check.py" segv "$OUT/segv" || status=1

echo "== a capture range: the 'alloc' phase and the work it launched"
traced "$OUT/capture" env STREAMLAB_TRACE_CAPTURE_RANGE=alloc STREAMLAB_TRACE_CAPTURE_COUNT=1 \
  "$OUT/trace_probe" >/dev/null; echo "exit $? (0 expected)"
python3 "$root/scripts/inject_check.py" capture "$OUT/capture" || status=1

echo "== the last 10 records, in segments"
traced "$OUT/last" env STREAMLAB_TRACE_WHEN_FULL=last STREAMLAB_TRACE_MAX_RECORDS=10 \
  "$OUT/trace_probe" >/dev/null; echo "exit $? (0 expected)"
python3 "$root/scripts/inject_check.py" last "$OUT/last" || status=1

echo "== two processes from one shell (the environment is inherited)"
# shellcheck disable=SC2016  # $0 is expanded by the inner shell
traced "$OUT/two" sh -c '"$0" && "$0"' "$OUT/trace_probe" >/dev/null; echo "exit $?"
python3 "$root/scripts/inject_check.py" two "$OUT/two" || status=1

echo "== cost: wall time untraced, then traced (three runs each)"
for mode in untraced traced; do
  for _ in 1 2 3; do
    start=$(date +%s%N)
    if [[ $mode == traced ]]; then traced "$OUT/cost" "$OUT/trace_probe" >/dev/null; else "$OUT/trace_probe" >/dev/null; fi
    echo "$mode: $(( ($(date +%s%N) - start) / 1000000 )) ms"
  done
done

echo "== observations (not checked): a program that uses CUPTI itself"
if "$PYTHON" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  traced "$OUT/torch" "$PYTHON" - <<'EOF'
import torch, time
x = torch.randn(1 << 24, device="cuda")
for _ in range(20):
    x = torch.sin(x) * torch.cos(x)
torch.cuda.synchronize(); time.sleep(1)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
    for _ in range(20):
        x = torch.sin(x) * torch.cos(x)
    torch.cuda.synchronize()
for _ in range(20):
    x = torch.sin(x) * torch.cos(x)
torch.cuda.synchronize(); time.sleep(12)
for _ in range(20):
    x = torch.sin(x) * torch.cos(x)
torch.cuda.synchronize()
print("profiler saw", len(prof.events()), "events")
EOF
  echo "exit $?"
  python3 "$root/scripts/inject_check.py" show "$OUT/torch"
fi
if [[ -n ${STREAMLAB:-} ]]; then
  traced "$OUT/streamlab-timeline" "$STREAMLAB" run overlap --timeline >/dev/null; echo "exit $?"
  python3 "$root/scripts/inject_check.py" show "$OUT/streamlab-timeline"
  traced "$OUT/streamlab" "$STREAMLAB" run overlap >/dev/null; echo "exit $?"
  python3 "$root/scripts/inject_check.py" show "$OUT/streamlab"
fi
echo "== inject-check: $([[ $status == 0 ]] && echo passed || echo FAILED)"
exit $status
