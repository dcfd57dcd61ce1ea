#!/usr/bin/env bash
# Redraws the pictures in docs/img/ from the recorded runs in docs/recorded/, on any machine
# (no GPU): after a change to how pictures are drawn, this is the whole redraw. Both guides
# show docs/img/ (scripts/guide.sh copies it into each book), so they stay in step.
#
#   scripts/redraw-pictures.sh              every recorded lesson: docs/img/<lesson>.svg, and
#                                           <lesson>-plot.svg where the lesson draws a plot
#   scripts/redraw-pictures.sh --png DIR    also renders each picture to DIR/<name>.png
#                                           (rsvg-convert), to look at them
#
# Each picture is `streamlab run <lesson> --recorded --svg docs/img/<lesson>.svg`. New runs
# on a GPU are scripts/pictures.sh's work; docs/img/allreduce-overlap-launch4.svg comes from
# scripts/multi-gpu-run.sh (`launch --gpus 4`), which keeps no recorded run to redraw it from.
# docs/img/trace-pytorch-*.svg are `streamlab trace --svg` pictures from scripts/trace-check.sh
# (run 26-C), which keeps no recorded run either.
set -euo pipefail
cd "$(dirname "$0")/.."
png=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --png) png=${2:?--png needs a folder}; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "scripts/redraw-pictures.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
cargo build -q -p streamlab
target=$(cargo metadata -q --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
bin="$target/debug/streamlab"
drawn=0
for run in docs/recorded/*.json; do
  lesson=$(basename "$run" .json)
  "$bin" run "$lesson" --recorded --svg "docs/img/$lesson.svg" > /dev/null
  drawn=$((drawn + 1))
done
if [[ -n $png ]]; then
  mkdir -p "$png"
  for svg in docs/img/*.svg; do
    rsvg-convert -b white "$svg" -o "$png/$(basename "$svg" .svg).png"
  done
fi
echo "scripts/redraw-pictures.sh: $drawn lessons redrawn into docs/img/${png:+, rendered into $png/}"
