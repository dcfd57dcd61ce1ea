#!/usr/bin/env bash
# PTX per architecture (issue 22), checked on a GPU machine from the bundle scripts/gpu-bundle.sh
# makes (no Rust there; nvcc for the C++ twins). From the repository root:
#   bash .gpu/gpu-arch-check.sh
# 1. `streamlab info`: which PTX the GPU loads and why; STREAMLAB_GPU_ARCH=sm_75 forces the oldest;
#    names the build lacks are refused (exit 2, one line).
# 2. The C++ twins (nvcc -O3 for this GPU): kernels.cu (sinf*cosf and sincosf, both unrolled by 16
#    as the Rust kernel is) and mixed_precision.cu.
# 3. Benches `kernels` (Rust from every embedded PTX this GPU runs, beside nvcc's cubins, all bit
#    for bit) and `mixed_precision` (as loaded, and forced to sm_75), with the ratios to C++.
# 4. Every GPU test as the GPU loads its PTX; the mixed-precision tests again with sm_75 forced,
#    their checksums compared with each other and with the C++ twin's.
# 5. `run all --json` as loaded and with sm_75 forced: the same checks, every one passed.
# Logs go to $LOGS (default: $OUT if set, else ./arch-logs); the end of stdout is the summary.
# BENCH_ARGS passes criterion flags (e.g. "--warm-up-time 1 --measurement-time 3").
set -uo pipefail
G=$(cd "$(dirname "$0")" && pwd)
LOGS=${LOGS:-${OUT:-./arch-logs}}
mkdir -p "$LOGS" "$G/ref"
SL=$G/streamlab
status=0
note() { echo "== $*" | tee -a "$LOGS/summary.txt"; }
bad() { status=1; note "FAILED: $*"; }

# --- 1. which PTX, and why
nvidia-smi --query-gpu=name,compute_cap,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$LOGS/nvidia-smi.txt"
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
"$SL" info >"$LOGS/info.txt" 2>&1 || bad "streamlab info: exit $?"
STREAMLAB_GPU_ARCH=sm_75 "$SL" info >"$LOGS/info-sm_75.txt" 2>&1 || bad "STREAMLAB_GPU_ARCH=sm_75 streamlab info: exit $?"
"$SL" info --json >"$LOGS/info.json" 2>&1
loaded=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ptx_arch"])' "$LOGS/info.json" 2>/dev/null)
note "info: $(grep 'PTX loaded' "$LOGS/info.txt")"
note "info, STREAMLAB_GPU_ARCH=sm_75: $(grep 'PTX loaded' "$LOGS/info-sm_75.txt")"
grep -q "PTX loaded *sm_75 (of .*: forced by STREAMLAB_GPU_ARCH=sm_75)" "$LOGS/info-sm_75.txt" ||
  bad "sm_75 was not loaded when forced"
[[ -n $loaded && $loaded != sm_75 ]] || note "note: this GPU loads $loaded by itself: forcing sm_75 changes nothing here"
for name in sm_86 sm_100 hopper; do
  STREAMLAB_GPU_ARCH=$name "$SL" info >"$LOGS/refused.out" 2>&1; rc=$?
  line=$(cat "$LOGS/refused.out")
  if [[ $rc == 2 && $(wc -l <"$LOGS/refused.out") == 1 && $line == "streamlab: STREAMLAB_GPU_ARCH=$name "* ]]; then
    note "refused as it should be, exit 2: $line"
  else
    bad "STREAMLAB_GPU_ARCH=$name streamlab info: exit $rc: $line"
  fi
done

# --- 2. the C++ twins, for this GPU
if command -v nvcc >/dev/null; then
  (cd "$G/cuda-reference" &&
    nvcc -O3 -arch=sm_$cap -cubin kernels.cu -o "$G/ref/kernels.cubin" &&
    nvcc -O3 -arch=sm_$cap -cubin -DSTREAMLAB_SINCOSF kernels.cu -o "$G/ref/kernels-sincosf.cubin" &&
    nvcc -O3 -arch=sm_$cap mixed_precision.cu -o "$G/ref/mixed_precision") >"$LOGS/nvcc.txt" 2>&1 ||
    bad "nvcc: $(tail -3 "$LOGS/nvcc.txt")"
  "$G/ref/mixed_precision" >"$LOGS/ref-mixed_precision.txt" 2>&1 || bad "cuda-reference/mixed_precision: exit $?"
else
  bad "no nvcc: the C++ twins were not built"
fi

# --- 3. benches
export STREAMLAB_NVCC_KERNELS=$G/ref/kernels.cubin
export STREAMLAB_EXTRA_KERNELS=nvcc-sincosf=$G/ref/kernels-sincosf.cubin
"$G/benches/kernels" --bench ${BENCH_ARGS:-} >"$LOGS/bench-kernels.txt" 2>&1 || bad "bench kernels: exit $?"
"$G/benches/mixed_precision" --bench ${BENCH_ARGS:-} >"$LOGS/bench-mixed_precision.txt" 2>&1 ||
  bad "bench mixed_precision: exit $?"
STREAMLAB_GPU_ARCH=sm_75 "$G/benches/mixed_precision" --bench ${BENCH_ARGS:-} \
  >"$LOGS/bench-mixed_precision-sm_75.txt" 2>&1 || bad "bench mixed_precision (sm_75): exit $?"
unset STREAMLAB_NVCC_KERNELS STREAMLAB_EXTRA_KERNELS
grep -h "identical\|: PTX " "$LOGS"/bench-*.txt | tee -a "$LOGS/summary.txt"
# Criterion's middle estimate per benchmark, and the ratios the issue sets targets for.
python3 - "$LOGS" <<'EOF' | tee -a "$LOGS/summary.txt" || status=1
import re, sys
logs = sys.argv[1]
unit = {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1.0, "s": 1e3}
def bench(path):
    # Criterion prints a benchmark's id at the start of a line, and its time on the same line
    # or the next: "time:   [low unit middle unit high unit]".
    times, name = {}, None
    for line in open(path, errors="replace"):
        if line[:1].strip() and "/" in line and not line.startswith("Benchmarking"):
            name = line.split("time:")[0].strip() or name
        t = re.search(r"time:\s+\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", line)
        if t and name:
            times[name] = float(t.group(1)) * unit[t.group(2)]
            name = None
    return times
def twin(path):
    out = {}
    for line in open(path, errors="replace"):
        m = re.match(r"mixed-precision (\w+) (one stream|side stream): ([\d.]+)", line)
        if m:
            out[(m.group(1), m.group(2))] = float(m.group(3))
    return out
failed = False
k = bench(f"{logs}/bench-kernels.txt")
for name, ms in sorted(k.items()):
    print(f"bench {name}: {ms * 1000:.1f} µs")
rust = [ms for n, ms in k.items() if n.startswith("compute_kernel/rust/")]
nvcc = [ms for n, ms in k.items() if n.startswith("compute_kernel/nvcc-sincosf/")]
if rust and nvcc:
    ratio = rust[0] / nvcc[0]
    ok = ratio < 1.0
    failed |= not ok
    print(f"target compute kernel, Rust / nvcc (sincosf, both unrolled by 16): {ratio:.3f}x [{'ok' if ok else 'MISSED'}: under 1]")
ref = twin(f"{logs}/ref-mixed_precision.txt")
for label, path in [("as loaded", "bench-mixed_precision.txt"), ("sm_75", "bench-mixed_precision-sm_75.txt")]:
    m = bench(f"{logs}/{path}")
    for name, ms in sorted(m.items()):
        fmt = "bf16" if "bf16" in name else "f16"
        version = "one stream" if "one_stream" in name else "side stream"
        c = ref.get((fmt, version))
        ratio = f"{ms / c:.3f}x C++ ({c:.3f} ms)" if c else "no C++ figure"
        line = f"bench {name} ({label}): {ms:.3f} ms, {ratio}"
        if label == "as loaded" and fmt == "bf16" and c:
            ok = ms / c <= 1.02
            failed |= not ok
            line += f" [{'ok' if ok else 'MISSED'}: target <= 1.02x]"
        print(line)
sys.exit(1 if failed else 0)
EOF

# --- 4. every GPU test as loaded; the mixed-precision ones again with sm_75 forced
export STREAMLAB_BIN=$SL
visible=$(nvidia-smi -L | grep -c '^GPU')
[[ -n ${CUDA_VISIBLE_DEVICES:-} ]] && visible=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
skip=()
for need in 2:two_gpus 3:three_gpus 4:four_gpus; do
  if ((visible < ${need%%:*})); then skip+=(--skip "${need#*:}"); fi
done
for t in "$G"/tests/*; do
  out=$LOGS/test-$(basename "$t").txt
  "$t" --include-ignored --test-threads=1 "${skip[@]}" --nocapture >"$out" 2>&1
  rc=$?; note "test $(basename "$t"): exit $rc, $(grep -h '^test result' "$out" | tail -1)"
  [[ $rc == 0 ]] || { status=1; grep -E "FAILED|panicked" -A4 "$out" | head -20; }
done
mp=$G/tests/test-mixed_precision
STREAMLAB_GPU_ARCH=sm_75 "$mp" --include-ignored --test-threads=1 --nocapture >"$LOGS/test-mixed_precision-sm_75.txt" 2>&1
rc=$?; note "test test-mixed_precision, STREAMLAB_GPU_ARCH=sm_75: exit $rc, $(grep -h '^test result' "$LOGS/test-mixed_precision-sm_75.txt" | tail -1)"
[[ $rc == 0 ]] || bad "mixed-precision tests with sm_75"
sums() { grep -ho "mixed-precision [a-z0-9]* checksum of the master copy: [0-9a-f]*" "$@" | sort; }
a=$(sums "$LOGS/test-test-mixed_precision.txt") b=$(sums "$LOGS/test-mixed_precision-sm_75.txt")
c=$(sums "$LOGS/ref-mixed_precision.txt" 2>/dev/null)
echo "$a" | sed 's/^/as loaded: /' | tee -a "$LOGS/summary.txt"
if [[ -n $a && $a == "$b" && $a == "$c" ]]; then
  note "same bits: the master copy's checksums agree as loaded, with sm_75 forced, and in the C++ twin"
else
  bad "checksums differ: as loaded [$a], sm_75 [$b], C++ [$c]"
fi

# --- 5. run all, as loaded and with sm_75 forced: the same checks
"$SL" run all --json >"$LOGS/run-all.json" 2>"$LOGS/run-all.err"; rc=$?
note "streamlab run all --json: exit $rc"; [[ $rc == 0 ]] || status=1
STREAMLAB_GPU_ARCH=sm_75 "$SL" run all --json >"$LOGS/run-all-sm_75.json" 2>"$LOGS/run-all-sm_75.err"; rc=$?
note "STREAMLAB_GPU_ARCH=sm_75 streamlab run all --json: exit $rc"; [[ $rc == 0 ]] || status=1
python3 - "$LOGS/run-all.json" "$LOGS/run-all-sm_75.json" "$LOGS/ref-mixed_precision.txt" <<'EOF' | tee -a "$LOGS/summary.txt" || status=1
import json, re, sys
twin = {}
for line in open(sys.argv[3], errors="replace") if len(sys.argv) > 3 else []:
    m = re.match(r"mixed-precision (\w+) layer step \(one stream, per step\): ([\d.]+)", line)
    if m:
        twin[m.group(1)] = float(m.group(2))
def checks(path):
    reports = json.load(open(path))
    reports = reports if isinstance(reports, list) else [reports]
    out = {}
    for r in reports:
        for c in r["checks"]:
            out[(r["lesson"], c["name"])] = c["verdict"]
        if r["lesson"] == "mixed-precision":
            ptx = r.get("details", {}).get("ptx", {}).get("arch")
            fig = {f["name"]: f["value"] for f in r["figures"]}
            fmt = r["parameters"].get("format", "bf16")
            layer = (fig.get(f"layer step in {fmt}, per step") or fig.get(f"layer step in {fmt}, per micro-batch"))
            vs = f", {layer / twin[fmt]:.3f}x the C++ twin's {twin[fmt]:.4f} ms" if layer and fmt in twin else ""
            print(f"{path}: mixed-precision {fmt} (PTX {ptx}): layer step {layer} ms{vs}; measured / bound {fig.get('measured / bound')} (issue 22: <= 1.10)")
    return out
a, b = checks(sys.argv[1]), checks(sys.argv[2])
failed = [k for k, v in a.items() if v == "failed"] + [k for k, v in b.items() if v == "failed"]
differ = sorted(set(a) ^ set(b)) + [k for k in a if k in b and a[k] != b[k]]
print(f"run all: {len(a)} checks as loaded, {len(b)} with sm_75; failed {failed or 'none'}; differing {differ or 'none'}")
sys.exit(1 if failed or differ else 0)
EOF
note "gpu-arch-check: exit $status (logs in $LOGS)"
exit $status
