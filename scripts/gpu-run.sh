#!/usr/bin/env bash
# Runs a bundle made by scripts/gpu-bundle.sh on a GPU machine (no Rust or cargo needed there;
# nvcc is used for the CUDA C++ references when present). Usage, from the repository root:
#   bash .gpu/gpu-run.sh [stage ...]     stages: info refs lessons edges sanitizer tests benches
#                                        (default: all of them)
# Full logs go to $LOGS (default: $OUT if set, else ./gpu-logs); the end of stdout is a summary.
set -uo pipefail
G=$(cd "$(dirname "$0")" && pwd)
LOGS=${LOGS:-${OUT:-./gpu-logs}}
mkdir -p "$LOGS" "$G/ref"
stages=${*:-info refs lessons edges sanitizer tests benches}
status=0
note() { echo "== $*" | tee -a "$LOGS/summary.txt"; }
has() { [[ " $stages " == *" $1 "* ]]; }

if has info; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$LOGS/nvidia-smi.txt"
  "$G/streamlab" info 2>&1 | tee "$LOGS/info.txt" || status=1
fi
if has refs && command -v nvcc >/dev/null; then
  (cd "$G/cuda-reference" && for f in *.cu; do
     if [[ $f == kernels.cu ]]; then nvcc -O3 -arch=sm_90 -cubin kernels.cu -o "$G/ref/kernels.cubin" &&
       nvcc -O3 -arch=sm_90 -cubin -DSTREAMLAB_SINCOSF kernels.cu -o "$G/ref/kernels-sincosf.cubin"
     elif [[ $f == multi_gpu.cu ]]; then nvcc -O3 -arch=sm_90 multi_gpu.cu -lnccl -o "$G/ref/multi_gpu"
     else nvcc -O3 -arch=sm_90 "$f" -o "$G/ref/${f%.cu}"; fi || echo "nvcc failed on $f"
   done) 2>&1 | tee "$LOGS/nvcc.txt"
  for exe in "$G"/ref/*; do
    [[ -x $exe && ! $exe == *.cubin ]] || continue
    echo "--- $(basename "$exe")"; "$exe" 2>&1
  done | tee "$LOGS/refs.txt"
fi
if has lessons; then
  for d in ${LESSONS:-all}; do
    "$G/streamlab" run "$d" ${LESSON_ARGS:-} 2>&1 | tee -a "$LOGS/lessons.txt"
    rc=${PIPESTATUS[0]}; note "streamlab run $d ${LESSON_ARGS:-}: exit $rc"; [[ $rc == 0 ]] || status=1
  done
  "$G/streamlab" run all --json > "$LOGS/lessons.json" 2>&1
  note "streamlab run all --json: exit $?"
fi
if has edges; then
  # Small, odd and extreme-but-valid flags: every run must end with exit 0 (checks passed or
  # honestly not asserted) or 2 (refused in one line), never a panic or a CUDA error.
  while read -r line; do
    [[ -z $line || $line == \#* ]] && continue
    "$G/streamlab" run $line >"$LOGS/edge.out" 2>&1; rc=$?
    cat "$LOGS/edge.out" >> "$LOGS/edges.txt"
    if [[ $rc == 3 ]] && grep -q "needs 2 GPUs" "$LOGS/edge.out"; then verdict="not run (one GPU)"
    elif grep -q panicked "$LOGS/edge.out" || [[ $rc != 0 && $rc != 2 ]]; then status=1; verdict=BAD; else verdict=ok; fi
    note "edge [$verdict] exit $rc: streamlab run $line $( [[ $rc == 2 ]] && tail -1 "$LOGS/edge.out")"
  done < "$G/edge-cases.txt"
fi
if has sanitizer && command -v compute-sanitizer >/dev/null; then
  # Every lesson at a small size (small-runs.txt), under each of the four tools. Concurrency
  # checks are reported as "not asserted" there (kernels run one at a time), so exit 0 is due.
  for tool in memcheck racecheck synccheck initcheck; do
    extra=; [[ $tool == memcheck ]] && extra="--leak-check full"
    errors=0; runs=0
    while read -r line; do
      [[ -z $line || $line == \#* ]] && continue
      compute-sanitizer --tool $tool $extra --print-limit 20 "$G/streamlab" run $line --reps 1 \
        >"$LOGS/sanitizer-$tool.out" 2>&1; rc=$?
      cat "$LOGS/sanitizer-$tool.out" >> "$LOGS/sanitizer-$tool.txt"
      # A two-GPU lesson on a one-GPU machine: said in one line, exit 3; not a sanitizer run.
      if [[ $rc == 3 ]] && grep -q "needs 2 GPUs" "$LOGS/sanitizer-$tool.out"; then
        note "sanitizer $tool: streamlab run $line: not run (one GPU)"; continue
      fi
      runs=$((runs + 1))
      # racecheck sums up as "RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)".
      if ! grep -qE "ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors" "$LOGS/sanitizer-$tool.out" || [[ $rc != 0 ]]; then
        errors=$((errors + 1)); note "sanitizer $tool: streamlab run $line: exit $rc, $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOGS/sanitizer-$tool.out" | tail -1)"
      fi
    done < "$G/small-runs.txt"
    note "compute-sanitizer $tool: $runs lessons, $errors with errors or a non-zero exit"
    [[ $errors == 0 ]] || status=1
  done
fi
if has tests; then
  export STREAMLAB_BIN="$G/streamlab"
  # Tests named two_gpus_* need two GPUs: skipped, and said so, where there is one.
  skip=(); if (( $(nvidia-smi -L | grep -c '^GPU') < 2 )); then
    skip=(--skip two_gpus); note "tests named two_gpus_*: NOT RUN (this machine has one GPU)"
  fi
  for t in "$G"/tests/*; do
    "$t" --include-ignored --test-threads=1 "${skip[@]}" >"$LOGS/test-$(basename "$t").txt" 2>&1
    rc=$?; note "test $(basename "$t"): exit $rc, $(grep -h '^test result' "$LOGS/test-$(basename "$t").txt" | tail -1)"
    [[ $rc == 0 ]] || { status=1; grep -E "FAILED|panicked" -A4 "$LOGS/test-$(basename "$t").txt" | head -30; }
  done
fi
if has benches; then
  export STREAMLAB_NVCC_KERNELS=${STREAMLAB_NVCC_KERNELS:-$G/ref/kernels.cubin}
  export STREAMLAB_EXTRA_KERNELS=${STREAMLAB_EXTRA_KERNELS:-nvcc-sincosf=$G/ref/kernels-sincosf.cubin}
  for b in ${BENCHES:-$(ls "$G/benches")}; do
    "$G/benches/$b" --bench ${BENCH_ARGS:-} >"$LOGS/bench-$b.txt" 2>&1
    rc=$?; note "bench $b: exit $rc"; [[ $rc == 0 ]] || status=1
    grep -E "^[a-z_]+/|time:" "$LOGS/bench-$b.txt" | paste - - | sed 's/  */ /g' | tee -a "$LOGS/summary.txt"
  done
fi
exit $status
