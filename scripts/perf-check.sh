#!/usr/bin/env bash
# The timings, against their targets: on a GPU machine, from the bundle scripts/gpu-bundle.sh
# makes (no Rust there) or from a checkout with target/release/streamlab built. From the
# repository root:
#   bash .gpu/perf-check.sh [--strict]       (or bash scripts/perf-check.sh [--strict])
# It runs each lesson the targets name (`streamlab run LESSON FLAGS --json`) and each C++
# twin they name (cuda-reference/PROGRAM.cu, built with nvcc for this GPU unless the refs
# stage of gpu-run.sh built it already), then scripts/perf_check.py compares every figure and
# ratio with scripts/perf-targets.tsv, the one file of targets, and prints a table: ok or
# missed per row, or not run (a lesson that needs more GPUs than there are, a twin without
# nvcc). Exit 0 unless a run or a check failed (1); --strict also fails on a missed target.
# Logs go to $LOGS/perf (LOGS: default $OUT if set, else ./perf-logs); the table also to
# $LOGS/perf-check.txt. STREAMLAB names the binary; PERF_TARGETS another targets file.
set -uo pipefail
G=$(cd "$(dirname "$0")" && pwd)
LOGS=${LOGS:-${OUT:-./perf-logs}}
strict=()
for arg in "$@"; do
  case $arg in
    --strict) strict=(--strict) ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "perf-check: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done
# The bundle has everything beside this script; a checkout has it in its usual places.
BIN=${STREAMLAB:-$G/streamlab}
[[ -x $BIN ]] || BIN=$G/../target/release/streamlab
TARGETS=${PERF_TARGETS:-$G/perf-targets.tsv}
SRC=$G/cuda-reference
[[ -d $SRC ]] || SRC=$G/../cuda-reference
if [[ ! -x $BIN ]]; then
  echo "perf-check: no streamlab binary: build it (cargo build --release) or set STREAMLAB" >&2
  exit 2
fi
DIR=$LOGS/perf
mkdir -p "$DIR" "$G/ref"
rm -f "$DIR"/*.rc "$DIR"/*.json "$DIR"/*.txt "$DIR"/*.err "$DIR"/*.nvcc

plan=$(python3 "$G/perf_check.py" plan "$TARGETS") || exit 2
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
while IFS=$'\t' read -r kind what flags name; do
  case $kind in
    lesson)
      [[ $flags == - ]] && flags=
      read -ra words <<<"$flags"
      echo "perf-check: streamlab run $what${flags:+ $flags} --json" >&2
      "$BIN" run "$what" "${words[@]}" --json >"$DIR/$name.json" 2>"$DIR/$name.err"
      echo $? >"$DIR/$name.rc"
      ;;
    twin)
      exe=$G/ref/$what
      if [[ ! -x $exe ]]; then
        if ! command -v nvcc >/dev/null; then
          echo "not built: no nvcc" >"$DIR/$name.err"; continue
        fi
        libs=(); [[ $what == multi_gpu ]] && libs=(-lnccl)
        if ! nvcc -O3 -arch="sm_${cap:-90}" "$SRC/$what.cu" "${libs[@]}" -o "$exe" >"$DIR/$name.nvcc" 2>&1; then
          : >"$DIR/$name.txt"
          echo "nvcc failed on $what.cu (its output: $name.nvcc)" >"$DIR/$name.err"
          echo 1 >"$DIR/$name.rc"
          continue
        fi
      fi
      echo "perf-check: $what (C++ twin)" >&2
      "$exe" >"$DIR/$name.txt" 2>"$DIR/$name.err"
      echo $? >"$DIR/$name.rc"
      ;;
  esac
done <<<"$plan"

python3 "$G/perf_check.py" check "$TARGETS" "$DIR" "${strict[@]}" | tee "$LOGS/perf-check.txt"
exit "${PIPESTATUS[0]}"
