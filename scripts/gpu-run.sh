#!/usr/bin/env bash
# Runs a bundle made by scripts/gpu-bundle.sh on a GPU machine (no Rust or cargo needed there;
# nvcc is used for the CUDA C++ references when present). Usage, from the repository root:
#   bash .gpu/gpu-run.sh [stage ...]     stages: info refs lessons edges sanitizer tests perf
#                                        benches (default: all of them)
# Full logs go to $LOGS (default: $OUT if set, else ./gpu-logs); the end of stdout is a summary.
# `tests` runs every test executable, GPU tests included; a test that needs more GPUs than
# are visible says so in a line and passes, and the summary counts it apart ("3 skipped: need
# 3 or 4 GPUs, found 2"). `perf` is perf-check.sh: the timings against perf-targets.tsv, a
# table of ok and missed (PERF_ARGS=--strict fails on a miss too).
set -uo pipefail
G=$(cd "$(dirname "$0")" && pwd)
LOGS=${LOGS:-${OUT:-./gpu-logs}}
mkdir -p "$LOGS" "$G/ref"
stages=${*:-info refs lessons edges sanitizer tests perf benches}
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
    # shellcheck disable=SC2086 # LESSON_ARGS is flags, one a word
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
    # shellcheck disable=SC2086 # a line is a lesson and its flags, one a word
    "$G/streamlab" run $line >"$LOGS/edge.out" 2>&1; rc=$?
    cat "$LOGS/edge.out" >> "$LOGS/edges.txt"
    if [[ $rc == 3 ]] && grep -q "needs 2 GPUs" "$LOGS/edge.out"; then verdict="not run (one GPU)"
    elif grep -q panicked "$LOGS/edge.out" || [[ $rc != 0 && $rc != 2 ]]; then status=1; verdict=BAD; else verdict=ok; fi
    note "edge [$verdict] exit $rc: streamlab run $line $( [[ $rc == 2 ]] && tail -1 "$LOGS/edge.out")"
  done < "$G/edge-cases.txt"
fi
if has sanitizer && command -v compute-sanitizer >/dev/null; then
  # Every lesson at a small size (small-runs.txt, or the file $SMALL_RUNS names), under each
  # of the four tools (or those $SANITIZER_TOOLS names). Concurrency checks are reported as
  # "not asserted" there (kernels run one at a time), so exit 0 is due.
  # sanitizer_findings.py splits each log: NCCL's findings (in NCCL's kernels, or API errors and
  # leaks that NCCL's own calls made) are listed apart and do not fail the stage; ours do. No
  # --error-exitcode: compute-sanitizer then exits with the program's own code, so a non-zero
  # exit is the lesson's failure, never the findings'.
  findings=$G/sanitizer_findings.py; [[ -f $findings ]] || findings=$G/../scripts/sanitizer_findings.py
  # Runs "${@:4}" under tool $1 with --print-limit $2, everything it prints into $3.
  sanitize() {
    local tool=$1 limit=$2 out=$3 extra=(); shift 3
    [[ $tool == memcheck ]] && extra=(--leak-check full)
    compute-sanitizer --tool "$tool" "${extra[@]}" --print-limit "$limit" "$@" >"$out" 2>&1
  }
  for tool in ${SANITIZER_TOOLS:-memcheck racecheck synccheck initcheck}; do
    runs=0; bad=0; ours=0; nccl=0
    out=$LOGS/sanitizer-$tool.out nccl_file=$LOGS/sanitizer-$tool-nccl.txt
    : >"$nccl_file"
    while read -r line; do
      [[ -z $line || $line == \#* ]] && continue
      read -ra flags <<<"$line"
      sanitize "$tool" 20 "$out" "$G/streamlab" run "${flags[@]}" --reps 1; rc=$?
      cat "$out" >> "$LOGS/sanitizer-$tool.txt"
      # A two-GPU lesson on a one-GPU machine: said in one line, exit 3; not a sanitizer run.
      if [[ $rc == 3 ]] && grep -q "needs 2 GPUs" "$out"; then
        note "sanitizer $tool: streamlab run $line: not run (one GPU)"; continue
      fi
      runs=$((runs + 1))
      listed=$(mktemp)
      verdict=$(python3 "$findings" "$out" --show 3 --nccl-out "$listed" 2>&1); vrc=$?
      [[ -s $listed ]] && { echo "--- streamlab run $line"; cat "$listed"; } >> "$nccl_file"
      rm -f "$listed"
      # Findings not shown to be NCCL's, or left unlisted by --print-limit (NCCL's initcheck
      # findings run to ~10^5, its memcheck API errors to ~10^2), are settled by a second
      # run with NCCL's kernels and API errors left out by the tool itself
      # (--kernel-name-exclude, --report-api-errors no; streamlab checks every driver call it
      # makes and fails on its own): whatever that run finds is ours, the rest NCCL's.
      # Listing everything is no way out: on CUDA 13.0 the tool's text for NCCL's API errors
      # came back garbled (library paths in place of the error and API names) in some runs.
      if [[ $vrc == 1 ]]; then
        rest=$(mktemp)
        sanitize "$tool" 20 "$rest" --kernel-name-exclude kns=nccl --report-api-errors no \
          "$G/streamlab" run "${flags[@]}" --reps 1 || rc=$?
        again=$(python3 "$findings" "$rest" --show 3 2>&1); vrc=$?
        # memcheck, synccheck, initcheck: "ERROR SUMMARY: N errors"; racecheck:
        # "RACECHECK SUMMARY: H hazards displayed (N errors, W warnings)".
        total=$(grep -hoE "ERROR SUMMARY: [0-9]+" "$out" | head -1 | grep -oE "[0-9]+")
        [[ -n $total ]] || total=$(grep -hoE "RACECHECK SUMMARY: .*\([0-9]+ errors" "$out" \
          | grep -oE "\([0-9]+ errors" | grep -oE "[0-9]+" | head -1)
        first=${again%%$'\n'*} shown=
        [[ $again == *$'\n'* ]] && shown=$'\n'"${again#*$'\n'}"
        if [[ $first =~ ^ours\ ([0-9]+),\ nccl\ 0(,\ unlisted\ ([0-9]+))?$ ]]; then
          mine=$(( BASH_REMATCH[1] + ${BASH_REMATCH[3]:-0} ))
          verdict="ours $mine, nccl $(( ${total:-0} - mine ))$shown"
          # The first listing, as the tool printed it, goes with NCCL's.
          (( mine == 0 )) && { echo "--- streamlab run $line (as printed)"; grep "^=========" "$out"; } >> "$nccl_file"
        else
          verdict=$again; vrc=1
        fi
        { echo "(${total:-?} findings in all; run again without NCCL's kernels and API errors:"
          echo " ${again%%$'\n'*})"; } >> "$nccl_file"
        rm -f "$rest"
      fi
      counts=${verdict%%$'\n'*}
      if [[ $counts =~ ^ours\ ([0-9]+),\ nccl\ ([0-9]+) ]]; then
        ours=$((ours + BASH_REMATCH[1])); nccl=$((nccl + BASH_REMATCH[2]))
      fi
      if [[ $rc != 0 || $vrc != 0 ]]; then
        bad=$((bad + 1)); note "sanitizer $tool: streamlab run $line: exit $rc, $counts"
        [[ $verdict == *$'\n'* ]] && echo "${verdict#*$'\n'}" | tee -a "$LOGS/summary.txt"
      elif [[ $counts != "ours 0, nccl 0" ]]; then
        note "sanitizer $tool: streamlab run $line: exit 0, $counts (NCCL's only)"
      fi
    done < "${SMALL_RUNS:-$G/small-runs.txt}"
    note "compute-sanitizer $tool: $runs lessons, ours $ours, NCCL's $nccl (listed apart in sanitizer-$tool-nccl.txt)"
    [[ $bad == 0 ]] || status=1
  done
  # The planted error (tests/sanitizer_planted.rs): a read of uninitialized memory in our
  # compute_kernel. Unless initcheck sees it as ours, the split above could be hiding ours.
  plant=$G/tests/test-sanitizer_planted
  if [[ -x $plant ]]; then
    sanitize initcheck 20 "$LOGS/sanitizer-planted.txt" "$plant" --include-ignored --exact \
      planted_uninitialized_read_for_the_sanitizer; rc=$?
    verdict=$(python3 "$findings" "$LOGS/sanitizer-planted.txt" --show 1 2>&1)
  else
    rc=-; verdict="no $plant"
  fi
  if [[ $rc == 0 && $verdict =~ ^ours\ [1-9] && $verdict == *"in kernel compute_kernel"* ]]; then
    note "compute-sanitizer initcheck, planted error: seen as ours in compute_kernel (${verdict%%$'\n'*})"
  else
    status=1; note "compute-sanitizer initcheck, planted error: the planted error was not seen (exit $rc, ${verdict%%$'\n'*})"
  fi
fi
if has tests; then
  export STREAMLAB_BIN="$G/streamlab"
  # Every test, GPU tests included. A test that needs more GPUs than are visible
  # (CUDA_VISIBLE_DEVICES counts) writes "skipped: TEST: needs N GPUs, found M" and passes
  # (tests/support's gpus, host/tests/common's has_gpus): counted apart from the passes here.
  # libtest prints "test NAME ... " before the test runs, so the line may follow it.
  skip_line='skipped: [^ ]+: needs [0-9]+ GPUs, found [0-9]+'
  # "K skipped: need 3 or 4 GPUs, found 2" for the skip lines of log $1, or nothing.
  skipped_for_gpus() {
    local lines needs found
    lines=$(grep -oE "$skip_line" "$1") || return 0
    needs=$(grep -oE 'needs [0-9]+' <<<"$lines" | cut -d' ' -f2 | sort -nu | paste -sd' ' | sed 's/ / or /g')
    found=$(grep -oE 'found [0-9]+' <<<"$lines" | cut -d' ' -f2 | sort -nu | paste -sd/)
    echo "$(wc -l <<<"$lines") skipped: need $needs GPUs, found $found"
  }
  skipped_in_all=0
  for t in "$G"/tests/*; do
    log=$LOGS/test-$(basename "$t").txt
    "$t" --include-ignored --test-threads=1 >"$log" 2>&1
    rc=$?
    result=$(grep -h '^test result' "$log" | tail -1)
    skips=$(skipped_for_gpus "$log")
    if [[ -n $skips ]]; then
      passed=$(sed -nE 's/.* ([0-9]+) passed;.*/\1/p' <<<"$result")
      skipped=${skips%% *}; skipped_in_all=$((skipped_in_all + skipped))
      note "test $(basename "$t"): exit $rc, $((${passed:-0} - skipped)) passed, $skips ($result)"
    else
      note "test $(basename "$t"): exit $rc, $result"
    fi
    [[ $rc == 0 ]] || { status=1; grep -E "FAILED|panicked" -A4 "$log" | head -30; }
  done
  (( skipped_in_all == 0 )) || note "tests: $skipped_in_all skipped for want of GPUs (each says so in its log), not passed"
fi
if has perf; then
  # The timings against perf-targets.tsv: its table goes into the summary.
  read -ra perf_args <<<"${PERF_ARGS:-}"
  LOGS=$LOGS bash "$G/perf-check.sh" "${perf_args[@]}" >"$LOGS/perf-stdout.txt" 2>"$LOGS/perf-stderr.txt"
  rc=$?
  if [[ -f $LOGS/perf-check.txt ]]; then tee -a "$LOGS/summary.txt" <"$LOGS/perf-check.txt"
  else tail -5 "$LOGS/perf-stderr.txt"; fi
  note "perf-check.sh${PERF_ARGS:+ $PERF_ARGS}: exit $rc"
  [[ $rc == 0 ]] || status=1
fi
if has benches; then
  export STREAMLAB_NVCC_KERNELS=${STREAMLAB_NVCC_KERNELS:-$G/ref/kernels.cubin}
  export STREAMLAB_EXTRA_KERNELS=${STREAMLAB_EXTRA_KERNELS:-nvcc-sincosf=$G/ref/kernels-sincosf.cubin}
  for b in ${BENCHES:-$(ls "$G/benches")}; do
    # shellcheck disable=SC2086 # BENCH_ARGS is criterion's flags, one a word
    "$G/benches/$b" --bench ${BENCH_ARGS:-} >"$LOGS/bench-$b.txt" 2>&1
    rc=$?; note "bench $b: exit $rc"; [[ $rc == 0 ]] || status=1
    grep -E "^[a-z_]+/|time:" "$LOGS/bench-$b.txt" | paste - - | sed 's/  */ /g' | tee -a "$LOGS/summary.txt"
  done
fi
exit $status
