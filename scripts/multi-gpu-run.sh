#!/usr/bin/env bash
# The multi-GPU runs, on a machine with two or more GPUs, from a bundle made by
# scripts/gpu-bundle.sh (no Rust needed there). Usage, from the repository root:
#   bash .gpu/multi-gpu-run.sh [stage ...]
# Stages (default: all of them, in this order):
#   twin      the CUDA C++ + NCCL twin (cuda-reference/multi_gpu.cu) on GPUs 0 and 1, run
#             before and after the lessons, so its figures come from the same call
#   lessons   p2p, allreduce-overlap and pipeline-parallel on GPUs 0 and 1, drawn and
#             recorded by pictures.sh ($LOGS/pictures/)
#   knobs     allreduce-overlap at the defaults, with --copy-engine-pieces 1, 2 and 8, and
#             with each knob that is not streamlab's to fix: --nccl-channels 4 and 2,
#             --iters 40, CUDA_DEVICE_MAX_CONNECTIONS=1; then a timeline drawn from events
#   ranks     allreduce-overlap with 1, 3, 4, ... GPUs in one process (--gpus N) and with
#             `launch --gpus N` for every N from 2 to the GPUs there are; the digests compared
#   sockets   two "nodes" on this host: allreduce-overlap as two processes started as a job on
#             two machines starts them (RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT,
#             one GPU each), NCCL on its socket transport over loopback (no NVLink, no shared
#             memory), beside `launch --gpus 2` on NVLink: the bus bandwidths side by side,
#             the digests compared, and the transport NCCL's log names. SOCKET_ARGS: flags
#             for both runs (default: the lesson's defaults)
#   faults    under `launch`: a rank killed with SIGKILL, the launcher killed, a rank whose
#             partners never come (STREAMLAB_RENDEZVOUS_TIMEOUT=10)
#   tests     the multi-GPU test executables (a test that needs more GPUs than there are
#             says so in a line and passes; counted apart)
# Full logs go to $LOGS (default: $OUT if set, else ./multi-gpu-logs); the end of stdout is
# a summary. NCCL_NVLS_ENABLE=0 throughout (streamlab sets it for itself; the twin too).
set -uo pipefail
G=$(cd "$(dirname "$0")" && pwd)
LOGS=${LOGS:-${OUT:-./multi-gpu-logs}}
BIN=$G/streamlab
mkdir -p "$LOGS" "$G/ref"
export NCCL_NVLS_ENABLE=0
stages=${*:-twin lessons knobs ranks sockets faults tests}
gpus=$(nvidia-smi -L | grep -c '^GPU')
status=0
note() { echo "== $*" | tee -a "$LOGS/summary.txt"; }
# Notes a run's exit code, and fails the script unless it is the one expected (default 0).
noted() { local rc=$1 want=${3:-0}; note "$2: exit $rc"; [[ $rc == "$want" ]] || status=1; }
has() { [[ " $stages " == *" $1 "* ]]; }
# The figures a JSON report holds, one "name value unit" a line, and its checks' verdicts.
figures() {
  python3 - "$1" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"  (no report: {e})"); sys.exit(0)
for f in r.get("figures", []):
    print(f"  {f['name']}: {f['value']:.4f} {f['unit']}")
bad = [c["name"] for c in r.get("checks", []) if c.get("verdict") != "passed"]
print(f"  checks: {len(r.get('checks', []))}, failed: {len(bad)} {bad[:3]}")
for c in r.get("checks", []):
    if c["name"].startswith("result digest"):
        print(f"  digest: {c.get('detail')}")
PY
}

if (( gpus < 2 )); then
  note "multi-gpu-run: needs two GPUs, found $gpus"
  exit 3
fi
nvidia-smi topo -m > "$LOGS/topology.txt" 2>&1
"$BIN" info > "$LOGS/info.txt" 2>&1

twin() {
  if [[ ! -x $G/ref/multi_gpu ]]; then
    nvcc -O3 -arch=sm_90 "$G/cuda-reference/multi_gpu.cu" -lnccl -o "$G/ref/multi_gpu" \
      > "$LOGS/nvcc-multi_gpu.txt" 2>&1 || { note "twin: nvcc failed"; status=1; return; }
  fi
  # TWIN_PIECES: the copy engines' pieces a bucket, as --copy-engine-pieces gives the lesson.
  # shellcheck disable=SC2086 # TWIN_PIECES is a number or nothing
  CUDA_VISIBLE_DEVICES=0,1 timeout 300 "$G/ref/multi_gpu" ${TWIN_PIECES:-} > "$LOGS/twin-$1.txt" 2>&1
  noted $? "twin ($1)"
  grep -E "allreduce-overlap|p2p peer|pipeline" "$LOGS/twin-$1.txt" | grep -v "^check" | tee -a "$LOGS/summary.txt"
  grep -c "FAILED" "$LOGS/twin-$1.txt" | sed 's/^/  twin checks failed: /' | tee -a "$LOGS/summary.txt"
}

if has twin; then twin before; fi
if has lessons; then
  # PICTURED names the lessons (default: all three); LESSON_ARGS goes to each.
  pictured=${PICTURED:-p2p allreduce-overlap pipeline-parallel}
  # shellcheck disable=SC2086
  CUDA_VISIBLE_DEVICES=0,1 OUT="$LOGS/pictures" timeout 400 bash "$G/pictures.sh" \
    $pictured > "$LOGS/pictures-stdout.txt" 2>&1
  noted $? "pictures.sh $pictured (GPUs 0, 1) ${LESSON_ARGS:-}"
  grep -E "exit|recording cost" "$LOGS/pictures/pictures.log" | tee -a "$LOGS/summary.txt"
  for l in $pictured; do
    note "$l (from the pictures run)"; figures "$LOGS/pictures/reports/$l.json" | tee -a "$LOGS/summary.txt"
  done
fi
if has twin; then twin after; fi
if has knobs; then
  run_knob() {
    local name=$1; shift
    CUDA_VISIBLE_DEVICES=0,1 timeout 120 "$@" --json > "$LOGS/knob-$name.json" 2> "$LOGS/knob-$name.err"
    noted $? "knob $name"; figures "$LOGS/knob-$name.json" | grep -E "median|bound|overlapped|checks" | tee -a "$LOGS/summary.txt"
  }
  run_knob defaults "$BIN" run allreduce-overlap
  for p in 1 2 8; do run_knob "pieces$p" "$BIN" run allreduce-overlap --copy-engine-pieces "$p"; done
  run_knob channels4 "$BIN" run allreduce-overlap --nccl-channels 4
  run_knob channels2 "$BIN" run allreduce-overlap --nccl-channels 2
  run_knob iters40 "$BIN" run allreduce-overlap --iters 40
  run_knob connections1 env CUDA_DEVICE_MAX_CONNECTIONS=1 "$BIN" run allreduce-overlap
  # Where each GPU's streams idle, drawn from events instead of CUPTI (no CUPTI callbacks
  # on the host thread): does the host stall seen in CUPTI timelines happen without them?
  CUDA_VISIBLE_DEVICES=0,1 STREAMLAB_RECORDER=events timeout 120 "$BIN" run allreduce-overlap \
    --timeline > "$LOGS/timeline-events.txt" 2>&1
  noted $? "allreduce-overlap --timeline, events recorder"
fi
if has ranks; then
  for n in $(seq 1 "$gpus"); do
    has lessons && [[ $n == 2 ]] && continue   # the lessons stage ran two
    timeout 180 "$BIN" run allreduce-overlap --gpus "$n" --json > "$LOGS/ranks-process-$n.json" 2> "$LOGS/ranks-process-$n.err"
    noted $? "run allreduce-overlap --gpus $n (one process)"
    figures "$LOGS/ranks-process-$n.json" | grep -E "bus bandwidth|median|bound|checks|digest" | tee -a "$LOGS/summary.txt"
  done
  for n in $(seq 2 "$gpus"); do
    timeout 240 "$BIN" launch --gpus "$n" run allreduce-overlap --json > "$LOGS/ranks-launch-$n.json" 2> "$LOGS/ranks-launch-$n.err"
    noted $? "launch --gpus $n run allreduce-overlap (stderr lines: $(wc -l < "$LOGS/ranks-launch-$n.err"))"
    figures "$LOGS/ranks-launch-$n.json" | grep -E "bus bandwidth|median|bound|checks|digest" | tee -a "$LOGS/summary.txt"
  done
  if (( gpus >= 4 )); then
    mkdir -p "$LOGS/launch4"
    timeout 240 "$BIN" launch --gpus 4 run allreduce-overlap --timeline --svg "$LOGS/launch4/allreduce-overlap-launch4.svg" \
      --trace "$LOGS/launch4/allreduce-overlap-launch4.json" > "$LOGS/launch4/report.txt" 2> "$LOGS/launch4/stderr.txt"
    noted $? "launch --gpus 4 run allreduce-overlap --timeline --svg"
  fi
fi
if has sockets; then
  read -ra socket_args <<<"${SOCKET_ARGS:-}"
  CUDA_VISIBLE_DEVICES=0,1 timeout 300 "$BIN" launch --gpus 2 run allreduce-overlap --json "${socket_args[@]}" \
    > "$LOGS/sockets-nvlink.json" 2> "$LOGS/sockets-nvlink.err"
  noted $? "sockets: launch --gpus 2 run allreduce-overlap ${SOCKET_ARGS:-}(GPUs 0, 1; NCCL's own choice of transport)"
  figures "$LOGS/sockets-nvlink.json" | grep -E "bus bandwidth|median|bound|checks|digest" | tee -a "$LOGS/summary.txt"
  # MASTER_PORT: rank 0 listens on the port above it, free a moment ago.
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1] - 1)')
  rm -f "$LOGS"/sockets-nccl-rank*.log
  nodes=()
  for r in 0 1; do
    env -u STREAMLAB_RENDEZVOUS RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
      STREAMLAB_RENDEZVOUS_TOKEN="sockets-$$" CUDA_VISIBLE_DEVICES=$r \
      NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo \
      NCCL_DEBUG=INFO NCCL_DEBUG_FILE="$LOGS/sockets-nccl-rank$r.%p.log" \
      timeout 600 "$BIN" run allreduce-overlap --json "${socket_args[@]}" \
      > "$LOGS/sockets-rank$r.json" 2> "$LOGS/sockets-rank$r.err" &
    nodes+=($!)
  done
  for r in 0 1; do
    wait "${nodes[$r]}"
    noted $? "sockets: node $r of 2 (RANK=$r, GPU $r alone, NCCL over sockets on lo): run allreduce-overlap ${SOCKET_ARGS:-}"
  done
  figures "$LOGS/sockets-rank0.json" | grep -E "bus bandwidth|median|bound|checks|digest" | tee -a "$LOGS/summary.txt"
  digest_of() { figures "$1" | sed -n 's/^  digest: //p'; }
  nvlink=$(digest_of "$LOGS/sockets-nvlink.json")
  for r in 0 1; do
    over=$(digest_of "$LOGS/sockets-rank$r.json")
    if [[ -n $over && $over == "$nvlink" ]]; then note "sockets: rank $r's digest is NVLink's: $over"
    else status=1; note "sockets: rank $r's digest ${over:-(none)} is not NVLink's ${nvlink:-(none)}"; fi
  done
  # NCCL's own account of the transport: sockets, and neither peer copies nor shared memory.
  via=$(cat "$LOGS"/sockets-nccl-rank*.log 2>/dev/null | grep -oE "via (NET/[A-Za-z]+|P2P[^ ]*|SHM[^ ]*)" | sort | uniq -c | tr -s ' ' | paste -sd,)
  note "sockets: NCCL's connections:${via:- none logged}"
  [[ $via == *NET/Socket* && $via != *P2P* && $via != *SHM* ]] || status=1
fi
if has faults; then
  n=$(( gpus < 4 ? gpus : 4 ))
  victim=$(( n - 1 < 2 ? n - 1 : 2 ))
  # The pid of the rank whose RANK is $2 among the launcher $1's children.
  rank_pid() {
    for p in $(pgrep -P "$1"); do
      tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$2" && { echo "$p"; return; }
    done
  }
  "$BIN" launch --gpus "$n" run allreduce-overlap --reps 2000 > "$LOGS/fault-kill-rank.out" 2> "$LOGS/fault-kill-rank.err" &
  launcher=$!
  sleep 8
  victim_pid=$(rank_pid "$launcher" "$victim")
  start=$(date +%s.%N)
  [[ -n $victim_pid ]] && kill -9 "$victim_pid"
  wait "$launcher"; rc=$?
  took=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
  note "fault: rank $victim (pid ${victim_pid:-none}) of $n killed with SIGKILL: launcher exit $rc after $took s; its stderr:"
  [[ $rc == 137 ]] || status=1
  sed 's/^/    /' "$LOGS/fault-kill-rank.err" | tail -8 | tee -a "$LOGS/summary.txt"

  "$BIN" launch --gpus "$n" run allreduce-overlap --reps 2000 > /dev/null 2> "$LOGS/fault-kill-launcher.err" &
  launcher=$!
  sleep 8
  ranks_before=$(pgrep -P "$launcher" | tr '\n' ' ')
  kill -9 "$launcher"
  sleep 15
  left=0; for p in $ranks_before; do kill -0 "$p" 2>/dev/null && left=$((left + 1)); done
  note "fault: launcher killed with SIGKILL: ranks ${ranks_before}still running 15 s later: $left"
  [[ $left == 0 ]] || status=1
  for p in $ranks_before; do kill -9 "$p" 2>/dev/null; done

  "$BIN" launch --gpus "$n" run allreduce-overlap --reps 2000 > /dev/null 2> "$LOGS/fault-sigterm-launcher.err" &
  launcher=$!
  sleep 8
  kill -TERM "$launcher"; wait "$launcher"; rc=$?
  note "fault: SIGTERM to the launcher: exit $rc; its stderr:"
  [[ $rc == 143 ]] || status=1
  sed 's/^/    /' "$LOGS/fault-sigterm-launcher.err" | tail -6 | tee -a "$LOGS/summary.txt"

  scratch=$(mktemp -d)
  for r in 0 1; do
    start=$(date +%s)
    RANK=$r WORLD_SIZE=2 STREAMLAB_RENDEZVOUS="file:$scratch/id-$r" STREAMLAB_RENDEZVOUS_TIMEOUT=10 \
      timeout 60 "$BIN" run allreduce-overlap --device 0 > /dev/null 2> "$LOGS/fault-alone-$r.err"
    rc=$?
    note "fault: rank $r of 2 started alone: exit $rc after $(( $(date +%s) - start )) s: $(tail -1 "$LOGS/fault-alone-$r.err")"
    # Rank 0 gives up in ncclCommInitRank (4), rank 1 waiting for the id (3).
    [[ $rc == 3 || $rc == 4 ]] || status=1
  done
  rm -rf "$scratch"
fi
if has tests; then
  export STREAMLAB_BIN="$BIN"
  for t in "$G"/tests/test-multi_gpu "$G"/tests/test-launch; do
    [[ -x $t ]] || continue
    log=$LOGS/test-$(basename "$t").txt
    timeout 600 "$t" --include-ignored --test-threads=1 > "$log" 2>&1
    rc=$?
    # A test short of GPUs wrote "skipped: TEST: needs N GPUs, found M" and passed.
    skipped=$(grep -cE 'skipped: [^ ]+: needs [0-9]+ GPUs, found [0-9]+' "$log")
    apart=""; (( skipped > 0 )) && apart=" ($skipped of the passed skipped for want of GPUs)"
    note "test $(basename "$t"): exit $rc, $(grep -h '^test result' "$log" | tail -1)$apart"
    [[ $rc == 0 ]] || { status=1; grep -E "FAILED|panicked" -A4 "$log" | head -30; }
  done
fi
exit $status
