#!/usr/bin/env bash
# Makes the pictures and the recorded runs from real runs, on a GPU machine, from a bundle
# made by scripts/gpu-bundle.sh (no Rust needed there; python3 assembles the recordings).
#
#   bash .gpu/pictures.sh [lesson ...]        default: every lesson `streamlab list` names
#
# For each lesson: `streamlab run <lesson> --timeline --trace … --svg … --json`, then
#   $OUT/img/<lesson>.svg          the picture (and <lesson>-plot.svg for a sweeping lesson)
#   $OUT/recorded/<lesson>.json    the recorded run the binary embeds: {lesson, gpu, date,
#                                  command, report, trace}; report.kernels names the kernels
#                                  that ran (a digest of the PTX the binary embeds), so a
#                                  binary built with other kernels says so under --recorded
#   $OUT/traces/<lesson>.json      the trace alone (ui.perfetto.dev)
#   $OUT/reports/<lesson>.txt      the run's report as text (timeline, recording cost)
#   $OUT/pictures.log              what ran, exit codes, libcupti used, recording costs
#   $OUT/pictures.md               the Markdown that shows the pictures, with captions
# $OUT defaults to ./pictures-out. Back on the build machine: copy img/* to docs/img/ and
# recorded/* to docs/recorded/, then rebuild: the binary embeds docs/recorded/*.json.
# STREAMLAB names the binary (default: the bundle's); LESSON_ARGS adds flags to every run.
# A few lessons get flags of their own (lesson_flags below) to keep their recorded run small:
#   graph  --iters 20   each replay of the DAG is recorded; 1000 (the default) made 8.5 MB
#   unified-memory  --chunks 8   half the default chunks: each stream's row stays legible
#          --sweep      every DAG shape, for docs/img/graph-plot.svg (graph over streams time
#                       against the size, by chain length); it adds about 10 s to the run
# LESSON_ARGS wins where it names the same flag (clap refuses a flag given twice).
set -uo pipefail
G=$(cd "$(dirname "$0")" && pwd)
BIN=${STREAMLAB:-$G/streamlab}
O=${OUT:-./pictures-out}
mkdir -p "$O/img" "$O/recorded" "$O/traces" "$O/reports"
LOG="$O/pictures.log"
: > "$LOG"
log() { echo "$*" | tee -a "$LOG"; }
# Whether LESSON_ARGS names flag $1.
given() { [[ " ${LESSON_ARGS:-} " =~ [[:space:]]$1[[:space:]=] ]]; }
# The flags lesson $1 gets of its own (see the header).
lesson_flags() {
  case $1 in
    graph)
      local f=""
      given --iters || f="--iters 20"
      given --sweep || f="$f --sweep"
      echo $f
      ;;
    unified-memory) given --chunks || echo "--chunks 8" ;;
  esac
}

if [[ $# -gt 0 ]]; then
  lessons=("$@")
else
  mapfile -t lessons < <("$BIN" list --json | python3 -c 'import json,sys; print("\n".join(l["name"] for l in json.load(sys.stdin)))')
fi
log "== $(date -u +%FT%TZ) pictures for: ${lessons[*]}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader >> "$LOG" 2>&1
"$BIN" info >> "$LOG" 2>&1
status=0
for lesson in "${lessons[@]}"; do
  flags="$(lesson_flags "$lesson")${LESSON_ARGS:+ $LESSON_ARGS}"
  flags=${flags# }
  cmd="streamlab run $lesson --timeline --trace $lesson.json --svg $lesson.svg${flags:+ $flags}"
  # One run gives the report (stdout), the trace and the picture: the recording embeds them
  # together, so they must come from the same run.
  "$BIN" run "$lesson" --timeline $flags \
    --trace "$O/traces/$lesson.json" --svg "$O/img/$lesson.svg" \
    --json > "$O/reports/$lesson.json" 2> "$O/reports/$lesson.err"
  rc=$?
  log "$cmd: exit $rc"
  if [[ $rc == 3 ]] && grep -q "needs 2 GPUs" "$O/reports/$lesson.err"; then
    log "    $lesson: not drawn: it needs two GPUs (run this script on a two-GPU machine)"
    continue
  fi
  [[ $rc == 0 ]] || status=1
  if [[ $rc != 0 && $rc != 5 ]]; then
    sed 's/^/    /' "$O/reports/$lesson.err" | tee -a "$LOG"
    continue
  fi
  python3 - "$lesson" "$O" "$cmd" "$rc" <<'PY' 2>&1 | tee -a "$LOG" || status=1
import datetime, json, sys
lesson, out, cmd, rc = sys.argv[1:]
# A failed check (exit 5) prints the report, then the error as a second JSON object.
report, _ = json.JSONDecoder().raw_decode(open(f"{out}/reports/{lesson}.json").read())
trace = json.load(open(f"{out}/traces/{lesson}.json"))
date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
recs = report.get("details", {}).get("recording", [])
# The trace holds the recorded spans: the embedded report need not repeat them.
embedded = dict(report, details={k: v for k, v in report.get("details", {}).items() if k != "recording"})
run = {"lesson": lesson, "gpu": report["device"], "date": date,
       "command": cmd, "report": embedded, "trace": trace}
json.dump(run, open(f"{out}/recorded/{lesson}.json", "w"), separators=(",", ":"))
source = recs[0]["source"] if recs else {}
where = source.get("library") or source.get("why", "?")
cost = [f for f in report["figures"] if f["name"].startswith("recording cost")]
costs = ", ".join(f'{f["name"]} {f["value"]:+.2f}%' for f in cost) or "no cost figure"
checks = "all checks passed" if rc == "0" else "A CHECK FAILED (exit 5): the recording shows it"
kernels = report.get("kernels") or "NO KERNELS ID (a binary older than the id)"
print(f"    {lesson}: {source.get('recorder', '?')} ({where}); {costs}; kernels {kernels}; {checks}")
with open(f"{out}/reports/{lesson}.txt", "w") as text:
    text.write(f"== {lesson} on {report['device']}\n")
    for f in report["figures"]:
        text.write(f"  {f['name']:<44} {f['value']:>12.4f} {f['unit']}\n")
    text.write(report.get("timeline") or "")
    for c in report["checks"]:
        text.write(f"  [{c['verdict']}] {c['name']}: {c['detail']}\n")
    for line in report["interpretation"]:
        text.write(f"  > {line}\n")
PY
done

# The Markdown that shows the pictures, each captioned with its GPU and run.
python3 - "$O" <<'PY' | tee "$O/pictures.md" >/dev/null
import glob, json, os, sys
out = sys.argv[1]
for path in sorted(glob.glob(f"{out}/recorded/*.json")):
    run = json.load(open(path))
    lesson = run["lesson"]
    for svg in (f"{lesson}.svg", f"{lesson}-plot.svg"):
        if os.path.exists(f"{out}/img/{svg}"):
            print(f"![{lesson}](docs/img/{svg})\n")
            print(f"*{lesson}: `{run['command']}` on {run['gpu']}, {run['date']}.*\n")
PY
log "== done: exit $status; pictures in $O/img, recordings in $O/recorded, Markdown in $O/pictures.md"
exit $status
