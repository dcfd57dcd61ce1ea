#!/usr/bin/env bash
# `streamlab trace` on a DDP training loop of two ranks under torchrun (issue 27): runs
# trace-examples/ddp_late_rank.py on two GPUs under `streamlab trace`, three times, then checks
# the reports against the ranks' own figures with trace_ddp_check.py.
#   bash .gpu/trace-examples-ddp.sh [--steps N] [--limit-s S] [--late-rank-ms MS]
#                                   [--only late,buckets] [OUTPUT_FOLDER]
# From the bundle scripts/gpu-bundle.sh makes (its streamlab beside this script), or from
# scripts/ with STREAMLAB=path/to/streamlab. PyTorch at /opt/torch/.venv (or PYTHON=...), its
# torchrun beside that Python (or TORCHRUN=...). Needs two GPUs (nvidia-smi -L, and
# CUDA_VISIBLE_DEVICES where set); NCCL_NVLS_ENABLE=0 for every run.
# The runs, each `torchrun --standalone --nproc-per-node 2 ddp_late_rank.py` (a free port for
# its rendezvous: runs back to back never meet an old one's):
#   late         --bucket-cap-mb 25 (DDP's default) --width 8192 --layers 4 --batch 16 (the
#                all-reduces set the pace: only the first of a late step waits, the program's
#                docstring says why), rank 1 20 ms late in every 2nd step
#   bucket-1     --bucket-cap-mb 1 --late-ms 0: a bucket a layer, all-reduced during the backward
#   bucket-1000  --bucket-cap-mb 1000 --late-ms 0: one large bucket, all-reduced after it
# OUTPUT_FOLDER (default $OUT, else ./trace-examples-ddp-out) gets, per run NAME: NAME.stdout
# (torchrun's: each rank's own figures on a line), NAME.stderr (the trace's report), NAME.json
# (--json), NAME.svg (--svg, the timeline), NAME.exit, NAME.wall_ns (this script's clock
# around the command); and check.txt, the checker's table. A failing run does not stop the
# others. Exit: the checker's (1 when a check failed); 2 for bad arguments, 3 when streamlab,
# Python or torchrun is missing or there are fewer than two GPUs.
# --steps N: the steps each run times (default: the program's, 30); --limit-s S: each run is
# stopped after S seconds (default 180; its exit is then 124); --late-rank-ms MS: the late
# run's `streamlab trace --late-rank-ms` (default: streamlab's own).
set -euo pipefail
G=$(cd "${G:-$(dirname "$0")}" && pwd)
# run NAME CMD...: see trace-examples-run.sh, beside this script (in the bundle too).
. "$(dirname "${BASH_SOURCE[0]}")/trace-examples-run.sh"
S=${STREAMLAB:-$G/streamlab}
PYTHON=${PYTHON:-/opt/torch/.venv/bin/python}
TORCHRUN=${TORCHRUN:-$(dirname "$PYTHON")/torchrun}
PROGRAM=$G/trace-examples/ddp_late_rank.py
CHECK=$G/trace_ddp_check.py
export NCCL_NVLS_ENABLE=0

usage() { echo "trace-examples-ddp.sh: $*" >&2; exit 2; }
# A whole number for flag $1, given as $2.
number() { [[ ${2:-} =~ ^[0-9]+$ && $2 -gt 0 ]] || usage "$1 needs a whole number above 0"; echo "$2"; }
steps=() limit_s=180 late_rank_ms=() only='' out=${OUT:-./trace-examples-ddp-out}
while (($#)); do
  case $1 in
    --steps) steps=(--steps "$(number "$1" "${2:-}")"); shift ;;
    --limit-s) limit_s=$(number "$1" "${2:-}"); shift ;;
    --late-rank-ms)
      [[ ${2:-} =~ ^[0-9]+([.][0-9]+)?$ ]] || usage "--late-rank-ms needs a number of ms"
      late_rank_ms=(--late-rank-ms "$2"); shift ;;
    --only) [[ -n ${2:-} ]] || usage "--only needs a list"; only=$2; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    -*) usage "unknown flag '$1' (try --help)" ;;
    *) out=$1 ;;
  esac
  shift
done
for name in ${only//,/ }; do
  [[ " late buckets " == *" $name "* ]] || usage "--only: unknown run '$name'"
done
missing() { echo "trace-examples-ddp.sh: $*" >&2; exit 3; }
[[ -x $S ]] || missing "no streamlab at $S (make the bundle, or set STREAMLAB)"
[[ -x $PYTHON ]] || missing "no Python at $PYTHON (set PYTHON)"
[[ -x $TORCHRUN ]] || missing "no torchrun at $TORCHRUN (set TORCHRUN)"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [[ -n ${CUDA_VISIBLE_DEVICES+set} ]]; then
  visible=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c . || true)
  if ((visible < gpus)); then gpus=$visible; fi
fi
((gpus >= 2)) || missing "needs two GPUs, this machine shows $gpus"
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$out"

wants() { [[ -z $only || ,$only, == *,$1,* ]]; }
RUN_LIMIT_S=$limit_s
# Run $1: ddp_late_rank.py under torchrun under `streamlab trace`, with the trace's flags
# "${trace_flags[@]}" and the program's "${@:2}".
trace_flags=()
traced() {
  local name=$1
  shift
  run "$name" "$S" trace "${trace_flags[@]}" --json "$name.json" --svg "$name.svg" -- \
    "$TORCHRUN" --standalone --nproc-per-node 2 "$PROGRAM" "$@" "${steps[@]}"
}

if wants late; then
  trace_flags=("${late_rank_ms[@]}")
  traced late --bucket-cap-mb 25 --width 8192 --layers 4 --batch 16
  trace_flags=()
fi
if wants buckets; then
  traced bucket-1 --bucket-cap-mb 1 --late-ms 0
  traced bucket-1000 --bucket-cap-mb 1000 --late-ms 0
fi

echo "== check: $out"
status=0
python3 "$CHECK" "$out" ${only:+--only "$only"} >check.txt || status=$?
cat check.txt
exit "$status"
