#!/usr/bin/env bash
# The GPU checks of `streamlab trace` (issue 20), from the bundle scripts/gpu-bundle.sh makes:
#   bash .gpu/trace-check.sh            (from the folder holding .gpu/)
# Needs nvcc, and PyTorch at /opt/torch/.venv (or PYTHON=...). Logs, reports, traces and
# pictures go to $LOGS (default $OUT/trace). With two GPUs it also traces `streamlab launch`.
set -uo pipefail
G=$(cd "${G:-.gpu}" && pwd)
S=$G/streamlab
LOGS=$(mkdir -p "${LOGS:-${OUT:-.}/trace}" && cd "${LOGS:-${OUT:-.}/trace}" && pwd)
PYTHON=${PYTHON:-/opt/torch/.venv/bin/python}
export NCCL_NVLS_ENABLE=0
cd "$LOGS" || exit 1
step() { echo; echo "== $*"; }
# Runs a traced command: $1 names its files (report, json, svg, trace, raw records, stdout).
traced() {
  local name=$1; shift
  "$S" trace --json "$name.json" --svg "$name.svg" --trace "$name-trace.json" --keep "$name-raw" "$@" \
    >"$name.stdout" 2>"$name.report"
  local code=$?
  echo "exit $code"
  tail -n 60 "$name.report"
  return $code
}

step "build the C++ programs"
nvcc -O3 -arch=sm_90 "$G/cuda-reference/overlap.cu" -o overlap || exit 1
nvcc -O2 -arch=sm_90 "$G/cuda-reference/trace_probe.cu" -o trace_probe || exit 1

step "1. cuda-reference/overlap.cu, its phases as NVTX ranges, against the lesson"
traced overlap-cu -- ./overlap 16777216 8 100 10
"$S" run overlap --elements 16777216 --streams 8 --iters 100 --json >overlap-lesson.json 2>overlap-lesson.err
python3 "$G/trace_compare.py" overlap overlap-cu.json overlap-lesson.json 8 overlap-cu.stdout

step "2. PyTorch: non_blocking copies from pageable, then pinned, batches on a side stream"
traced torch-pageable -- "$PYTHON" "$G/trace-examples/pytorch_copies.py"
traced torch-pinned -- "$PYTHON" "$G/trace-examples/pytorch_copies.py" --pinned
grep -c "pageable" torch-pageable.report torch-pinned.report
"$S" trace --lang zh --timeline -- "$PYTHON" "$G/trace-examples/pytorch_copies.py" >/dev/null 2>torch-pageable-zh.report
echo "zh report: $(wc -l <torch-pageable-zh.report) lines"

step "3. streamlab run overlap traced, beside the lesson's own --trace (separate runs)"
traced streamlab-overlap -- "$S" run overlap
"$S" run overlap --trace lesson-overlap-trace.json --svg lesson-overlap.svg >lesson-overlap.txt 2>&1
tail -n 25 lesson-overlap.txt
python3 "$G/trace_compare.py" ops streamlab-overlap-trace.json lesson-overlap-trace.json
step "3b. the lesson's own recorder inside a traced run (two CUPTI users in one process)"
traced streamlab-overlap-timeline -- "$S" run overlap --timeline

step "4. abort() halfway"
traced probe-abort -- ./trace_probe abort
step "4b. SIGKILL from inside, after work and a flush"
traced probe-kill -- "$PYTHON" -c "import torch,os,time; x=torch.ones(1<<24,device='cuda'); y=(x*2).sum(); torch.cuda.synchronize(); time.sleep(1); os.kill(os.getpid(), 9)"
step "4c. the probe's full run, and exit codes passed through"
traced probe-ok -- ./trace_probe
"$S" trace -- sh -c 'exit 7' 2>exit7.report; echo "exit $? (7 expected)"

step "5. what tracing costs"
"$S" trace --cost -- ./overlap 16777216 8 100 10 >cost.stdout 2>cost.report; echo "exit $?"
grep -i -A3 "cost\|wall" cost.report | head -20

step "6. a program that profiles itself (torch.profiler)"
traced torch-profiler -- "$PYTHON" -c "
import torch
from torch.profiler import profile, ProfilerActivity
x = torch.ones(1 << 22, device='cuda')
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
    for _ in range(20):
        x = torch.sin(x) * 1.0001
    torch.cuda.synchronize()
print(p.key_averages().table(row_limit=3))
"

if [[ $(nvidia-smi -L | wc -l) -ge 2 ]]; then
  step "7. two ranks: streamlab launch --gpus 2 run allreduce-overlap"
  traced launch2 -- "$S" launch --gpus 2 run allreduce-overlap
fi
find "$LOGS" -maxdepth 1 -printf "%s\t%f\n" | sort -k2 | head -80
