#!/usr/bin/env bash
# The mixed-precision lesson against its C++ twin and its bound (issue 22), on a GPU machine,
# from the bundle scripts/gpu-bundle.sh makes (no Rust there; nvcc for the twin). From the
# repository root:
#   bash .gpu/gpu-mp-check.sh
# 1. cuda-reference/mixed_precision.cu built with nvcc -O3 for this GPU and run.
# 2. Bench `mixed_precision` (bf16 and f16, one stream and side stream), each version's ratio
#    to the twin's, and the overlap probe it prints after them: each kernel's time alone and
#    beside the other kernel, and the bound computed from each (why measured/bound > 1).
# 3. `streamlab run mixed-precision --json` at the defaults, in f16, and with the layer on 25%
#    and 100% of the GPU's blocks (how the SMs are shared): layer step and update+cast against
#    the twin's, bound, measured/bound.
# 4. The mixed-precision GPU tests as the GPU loads its PTX and with STREAMLAB_GPU_ARCH=sm_75;
#    the master copy's checksums compared with each other and with the twin's.
# Logs go to $LOGS (default: $OUT if set, else ./mp-logs); the end of stdout is the summary,
# also in $LOGS/summary.txt. Exit 1 if anything failed (a missed target is reported, not failed).
# BENCH_ARGS passes criterion flags (e.g. "--warm-up-time 1 --measurement-time 3").
set -uo pipefail
G=$(cd "$(dirname "$0")" && pwd)
LOGS=${LOGS:-${OUT:-./mp-logs}}
mkdir -p "$LOGS" "$G/ref"
SL=$G/streamlab
status=0
note() { echo "== $*" | tee -a "$LOGS/summary.txt"; }
bad() { status=1; note "FAILED: $*"; }

# --- 1. the C++ twin
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv | tee "$LOGS/nvidia-smi.txt"
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
if command -v nvcc >/dev/null; then
  (cd "$G/cuda-reference" && nvcc -O3 -arch="sm_$cap" mixed_precision.cu -o "$G/ref/mixed_precision") \
    >"$LOGS/nvcc.txt" 2>&1 || bad "nvcc: $(tail -3 "$LOGS/nvcc.txt")"
  "$G/ref/mixed_precision" >"$LOGS/ref-mixed_precision.txt" 2>&1 || bad "cuda-reference/mixed_precision: exit $?"
else
  bad "no nvcc: the C++ twin was not built"
fi
"$SL" info 2>&1 | grep 'PTX loaded' | tee -a "$LOGS/summary.txt"

# --- 2. bench and overlap probe
read -ra bench_args <<<"${BENCH_ARGS:-}"
"$G/benches/mixed_precision" --bench "${bench_args[@]}" >"$LOGS/bench-mixed_precision.txt" 2>&1 ||
  bad "bench mixed_precision: exit $?"
grep -h "^overlap " "$LOGS/bench-mixed_precision.txt" | tee -a "$LOGS/summary.txt"

# --- 3. the lesson: defaults, f16, and the layer's share of the GPU
runs=("bf16 50:" "f16 50:--format f16" "bf16 25:--layer-share 25" "bf16 100:--layer-share 100")
for r in "${runs[@]}"; do
  tag=${r%%:*} flags=${r#*:}
  out=$LOGS/run-${tag// /-}.json
  # shellcheck disable=SC2086 # flags are words
  "$SL" run mixed-precision $flags --json >"$out" 2>"${out%.json}.err" ||
    bad "streamlab run mixed-precision $flags: exit $?"
done

python3 - "$LOGS" <<'EOF' | tee -a "$LOGS/summary.txt" || status=1
import glob, json, re, sys
logs = sys.argv[1]
unit = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1e3}
twin = {}
try:
    for line in open(f"{logs}/ref-mixed_precision.txt", errors="replace"):
        m = re.match(r"mixed-precision (\w+) (one stream|side stream|layer step|update \+ cast)[^:]*: ([\d.]+)", line)
        if m:
            twin[(m.group(1), m.group(2))] = float(m.group(3))
        if line.startswith("check") and "FAILED" in line:
            print(f"C++ twin: {line.strip()}")
except OSError:
    pass
failed = False
for fmt in ("bf16", "f16"):
    c, u, side = (twin.get((fmt, k)) for k in ("layer step", "update + cast", "side stream"))
    if c and u and side:
        bound = c + 7 * max(c, u) + u  # B = 8, the defaults the twin runs
        print(f"C++ twin {fmt}: layer step {c:.4f} ms, update+cast {u:.4f} ms, bound {bound:.4f} ms, "
              f"side stream {side:.4f} ms, measured/bound {side / bound:.3f}x")
# Criterion's middle estimate per benchmark: "time:   [low unit middle unit high unit]".
name = None
for line in open(f"{logs}/bench-mixed_precision.txt", errors="replace"):
    if line[:1].strip() and "/" in line and not line.startswith("Benchmarking"):
        name = line.split("time:")[0].strip() or name
    t = re.search(r"time:\s+\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", line)
    if t and name:
        ms = float(t.group(1)) * unit[t.group(2)]
        fmt = "bf16" if "bf16" in name else "f16"
        c = twin.get((fmt, "one stream" if "one_stream" in name else "side stream"))
        text = f"bench {name}: {ms:.3f} ms"
        if c:
            text += f", {ms / c:.3f}x C++ ({c:.3f} ms)"
            if fmt == "bf16":
                text += " [ok]" if ms / c <= 1.02 else " [MISSED: target <= 1.02x]"
        print(text)
        name = None
for path in sorted(glob.glob(f"{logs}/run-*.json")):
    try:
        reports = json.load(open(path))
    except (OSError, ValueError) as e:
        print(f"{path}: unreadable ({e})")
        failed = True
        continue
    for r in reports if isinstance(reports, list) else [reports]:
        fig = {f["name"]: f["value"] for f in r["figures"]}
        p = r["parameters"]
        fmt, share = p.get("format", "bf16"), p.get("layer_share")
        c = (fig.get(f"layer step in {fmt}, per step") or fig.get(f"layer step in {fmt}, per micro-batch"))
        u = (fig.get("FP32 update + cast, per step") or fig.get("FP32 update + cast, per micro-batch"))
        tc, tu = twin.get((fmt, "layer step")), twin.get((fmt, "update + cast"))
        vs_c = f" ({c / tc:.3f}x C++ {tc:.4f})" if c and tc and share == 50 else ""
        vs_u = f" ({u / tu:.3f}x C++ {tu:.4f})" if u and tu and share == 50 else ""
        ratio = fig.get("measured / bound")
        mark = "" if share != 50 or fmt != "bf16" or ratio is None else (" [ok]" if ratio <= 1.10 else " [MISSED: target <= 1.10]")
        print(f"run {fmt} layer-share {share}%: layer step {c:.4f} ms{vs_c}, update+cast {u:.4f} ms{vs_u}, "
              f"bound {fig.get('bound c + (B-1) max(c, u) + u'):.4f} ms, measured/bound {ratio:.3f}x{mark}")
        bad_checks = [ch["name"] for ch in r["checks"] if ch["verdict"] == "failed"]
        if bad_checks:
            print(f"run {fmt} layer-share {share}%: FAILED checks {bad_checks}")
            failed = True
sys.exit(1 if failed else 0)
EOF

# --- 4. the mixed-precision GPU tests, as loaded and with sm_75 forced
mp=$G/tests/test-mixed_precision
for arch in loaded sm_75; do
  out=$LOGS/test-mixed_precision-$arch.txt
  if [[ $arch == loaded ]]; then
    "$mp" --include-ignored --test-threads=1 --nocapture >"$out" 2>&1
  else
    STREAMLAB_GPU_ARCH=$arch "$mp" --include-ignored --test-threads=1 --nocapture >"$out" 2>&1
  fi
  rc=$?; note "test mixed_precision ($arch): exit $rc, $(grep -h '^test result' "$out" | tail -1)"
  [[ $rc == 0 ]] || { status=1; grep -E "FAILED|panicked" -A4 "$out" | head -20; }
done
sums() { grep -ho "mixed-precision [a-z0-9]* checksum of the master copy: [0-9a-f]*" "$@" | sort; }
a=$(sums "$LOGS/test-mixed_precision-loaded.txt") b=$(sums "$LOGS/test-mixed_precision-sm_75.txt")
c=$(sums "$LOGS/ref-mixed_precision.txt" 2>/dev/null)
if [[ -n $a && $a == "$b" && $a == "$c" ]]; then
  note "same bits: the master copy's checksums agree as loaded, with sm_75 forced, and in the C++ twin"
else
  bad "checksums differ: as loaded [$a], sm_75 [$b], C++ [$c]"
fi
note "gpu-mp-check: exit $status (logs in $LOGS)"
exit $status
