#!/usr/bin/env bash
# Two processes' kernels on one GPU: taking turns (time-slicing), or side by side under MPS.
# On a GPU machine with nvcc, from the repository root (or a copy holding cuda-reference/):
#   bash scripts/mps-check.sh            logs and a summary to $OUT (default ./mps-check)
# It starts an MPS control daemon of its own (pipe and log folders under $OUT) and stops it at
# the end, and never changes the GPU's compute mode: MPS serves clients in the default mode too.
# Each pair: two processes of cuda-reference/mps_probe.cu launch one fixed-work kernel of 4
# blocks at the same wall-clock time; the pair's span is from the first launch to the last end.
# Prints per case the median over REPEATS (default 5) of the kernel time and the span.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=$(mkdir -p "${OUT:-./mps-check}" && cd "${OUT:-./mps-check}" && pwd)
REPEATS=${REPEATS:-5}
ITERS=${ITERS:-20000000}
probe=$OUT/mps_probe
nvcc -O3 -arch=sm_90 "$root/cuda-reference/mps_probe.cu" -o "$probe" || exit 1
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader | tee "$OUT/gpu.txt"

# Runs $1 processes at once, launching together; appends their lines to $OUT/$2.txt.
together() {
  local n=$1 case=$2 at pids=()
  at=$(($(date +%s%3N) + 1500))
  for ((p = 0; p < n; p++)); do
    "$probe" --iters "$ITERS" --start-at "$at" >>"$OUT/$case.txt" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  echo "--" >>"$OUT/$case.txt"
}

# The medians of the kernel times and of the spans of case $1.
summary() {
  awk -v c="$1" '
    /^mps_probe/ { k[nk++] = $9; if (!(g in lo) || $5 < lo[g]) lo[g] = $5; if (!(g in hi) || $7 > hi[g]) hi[g] = $7; next }
    /^--/ { g++; next }
    function median(a, n,   i, j, t) {
      for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return n % 2 ? a[int(n / 2)] : (a[n / 2 - 1] + a[n / 2]) / 2
    }
    END {
      for (i = 0; i < g; i++) s[i] = hi[i] - lo[i]
      printf "%s: kernel %.3f ms (median of %d), span %.3f ms (median of %d pairs or runs)\n", c, median(k, nk), nk, median(s, g), g
    }' "$OUT/$1.txt"
}

for ((r = 0; r < REPEATS; r++)); do together 1 alone; done
for ((r = 0; r < REPEATS; r++)); do together 2 two-time-sliced; done

export CUDA_MPS_PIPE_DIRECTORY=$OUT/mps-pipe CUDA_MPS_LOG_DIRECTORY=$OUT/mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if nvidia-cuda-mps-control -d; then
  trap 'echo quit | nvidia-cuda-mps-control' EXIT
  for ((r = 0; r < REPEATS; r++)); do together 1 alone-mps; done
  for ((r = 0; r < REPEATS; r++)); do together 2 two-mps; done
  echo quit | nvidia-cuda-mps-control; trap - EXIT
  mps=1
else
  echo "mps-check: the MPS control daemon did not start (exit $?); see $CUDA_MPS_LOG_DIRECTORY" | tee -a "$OUT/summary.txt"
  mps=0
fi
{
  summary alone
  summary two-time-sliced
  if [[ $mps == 1 ]]; then summary alone-mps; summary two-mps; fi
} | tee -a "$OUT/summary.txt"
grep -h 'mps_probe:' "$OUT"/*.txt && exit 1
exit 0
