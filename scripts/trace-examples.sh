#!/usr/bin/env bash
# `streamlab trace` on long runs and real-shaped PyTorch programs (issue 26): runs each program
# of trace-examples/ under `streamlab trace` on a GPU machine, one after another, then checks
# the reports against the programs' own figures with trace_examples_check.py.
#   bash .gpu/trace-examples.sh [--quick] [--long-seconds S] [--cost-steps N] [--repeats R]
#                               [--only small,ahead,crash,capture,cost,long] [OUTPUT_FOLDER]
# From the bundle scripts/gpu-bundle.sh makes (its streamlab beside this script), or from
# scripts/ with STREAMLAB=path/to/streamlab. PyTorch at /opt/torch/.venv (or PYTHON=...);
# /usr/bin/time, where present, gives the long run's peak memory.
# The runs: small (small_kernels.py), ahead (cpu_ahead.py), crash (crash_after_work.py, exit
# 139 due), capture (capture_loop.py under --capture-range step --capture-count 10), cost-1..R
# (training_loop.py --steps N under --cost) and profiler-1..R (the same under torch.profiler,
# untraced), long (training_loop.py --seconds S, under /usr/bin/time -v).
# OUTPUT_FOLDER (default $OUT, else ./trace-examples-out) gets, per run NAME: NAME.stdout (the
# program's; its own figures on its last line), NAME.stderr (the trace's report), NAME.json
# (--json), NAME.exit, NAME.wall_ns (this script's clock around the command); and check.txt,
# the checker's table. A failing run does not stop the others. Exit: the checker's (1 when a
# check failed); 2 for bad arguments, 3 when streamlab or Python is missing.
# --quick: every program small, the recorder's limit low (--max-records 10000 for the small
# kernels, so that records are still dropped), one repeat, a 10 s long run: under 2 minutes.
# Defaults: --long-seconds 300, --cost-steps 500, --repeats 3.
set -euo pipefail
G=$(cd "${G:-$(dirname "$0")}" && pwd)
# run NAME CMD...: see trace-examples-run.sh, beside this script (in the bundle too).
. "$(dirname "${BASH_SOURCE[0]}")/trace-examples-run.sh"
S=${STREAMLAB:-$G/streamlab}
PYTHON=${PYTHON:-/opt/torch/.venv/bin/python}
P=$G/trace-examples
CHECK=$G/trace_examples_check.py

usage() { echo "trace-examples.sh: $*" >&2; exit 2; }
# A whole number for flag $1, given as $2.
number() { [[ ${2:-} =~ ^[0-9]+$ && $2 -gt 0 ]] || usage "$1 needs a whole number above 0"; echo "$2"; }
quick=0 long_seconds='' cost_steps='' repeats='' only='' out=${OUT:-./trace-examples-out}
while (($#)); do
  case $1 in
    --quick) quick=1 ;;
    --long-seconds) long_seconds=$(number "$1" "${2:-}"); shift ;;
    --cost-steps) cost_steps=$(number "$1" "${2:-}"); shift ;;
    --repeats) repeats=$(number "$1" "${2:-}"); shift ;;
    --only) [[ -n ${2:-} ]] || usage "--only needs a list"; only=$2; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    -*) usage "unknown flag '$1' (try --help)" ;;
    *) out=$1 ;;
  esac
  shift
done
for name in ${only//,/ }; do
  [[ " small ahead crash capture cost long " == *" $name "* ]] || usage "--only: unknown run '$name'"
done
if ((quick)); then
  long_seconds=${long_seconds:-10} cost_steps=${cost_steps:-50} repeats=${repeats:-1}
  small_flags=(--kernels 20000) small_trace=(--max-records 10000) ahead_flags=(--steps 20 --warmup 2)
else
  long_seconds=${long_seconds:-300} cost_steps=${cost_steps:-500} repeats=${repeats:-3}
  small_flags=() small_trace=() ahead_flags=()
fi
[[ -x $S ]] || { echo "trace-examples.sh: no streamlab at $S (make the bundle, or set STREAMLAB)" >&2; exit 3; }
[[ -x $PYTHON ]] || { echo "trace-examples.sh: no Python at $PYTHON (set PYTHON)" >&2; exit 3; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$out"

wants() { [[ -z $only || ,$only, == *,$1,* ]]; }

if wants small; then
  run small "$S" trace "${small_trace[@]}" --json small.json -- \
    "$PYTHON" "$P/small_kernels.py" "${small_flags[@]}"
fi
if wants ahead; then
  run ahead "$S" trace --json ahead.json -- "$PYTHON" "$P/cpu_ahead.py" "${ahead_flags[@]}"
fi
if wants crash; then
  run crash "$S" trace --json crash.json -- "$PYTHON" "$P/crash_after_work.py"
fi
if wants capture; then
  run capture "$S" trace --capture-range step --capture-count 10 --json capture.json -- \
    "$PYTHON" "$P/capture_loop.py"
fi
if wants cost; then
  for i in $(seq "$repeats"); do
    run "cost-$i" "$S" trace --cost --json "cost-$i.json" -- \
      "$PYTHON" "$P/training_loop.py" --steps "$cost_steps"
    run "profiler-$i" "$PYTHON" "$P/training_loop.py" --steps "$cost_steps" --profiler
  done
fi
if wants long; then
  timer=()
  [[ -x /usr/bin/time ]] && timer=(/usr/bin/time -v -o long.time)
  run long "${timer[@]}" "$S" trace --json long.json -- \
    "$PYTHON" "$P/training_loop.py" --seconds "$long_seconds"
fi

echo "== check: $out"
status=0
python3 "$CHECK" "$out" ${only:+--only "$only"} >check.txt || status=$?
cat check.txt
exit "$status"
