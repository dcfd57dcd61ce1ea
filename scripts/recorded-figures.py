#!/usr/bin/env python3
"""Prints the section of docs/measurements.md that holds the recorded runs' figures.

The recorded runs (docs/recorded/<lesson>.json) are the runs the pictures in docs/img/ show and
`streamlab run <lesson> --recorded` prints; the guide's chapters quote them. This script turns
each run's report into Markdown: its parameters, every figure, every version's median and
parts, what recording cost, its checks and the report's own explanation. After re-recording
(scripts/pictures.sh), run

    python3 scripts/recorded-figures.py > /tmp/recorded.md

and put its output in place of the lessons of the section "The recorded runs" of
docs/measurements.md (from its first "### " heading to the next "## " heading);
tests/figures.rs then checks that the chapters still
quote figures the record holds.
"""
import glob
import json
import os
import sys

# Which run of docs/measurements.md made each recording (see its table of runs).
RUN_OF = {
    "p2p": "28-D",
    "pipeline-parallel": "28-D",
    "allreduce-overlap": "28-D",
    "mixed-precision": "28-D",
    "implicit-sync": "28-A",
    "pinned-vs-pageable": "28-F",
}
DEFAULT_RUN = "28-C"
# The graph lesson's sweep: 120 shapes, printed as tables instead of 360 lines.
SWEEP_MODES = ["memcpy", "copy kernels", "no copies"]
SWEEP_SIZES = ["1K", "4K", "16K", "64K", "256K", "1M", "4M", "16M"]
SWEEP_CHAINS = [1, 4, 16, 64, 256]


def number(v):
    """A value to 4 decimals, trailing zeros dropped: the precision the chapters may round. A
    value whose last printed decimal is a 5 gets the decimals that decide its rounding (up to 8):
    1.81749 prints as such, not as 1.8175, which would round to 1.817 or to 1.818 alike."""
    for places in range(4, 9):
        text = f"{v:.{places}f}".rstrip("0").rstrip(".")
        if not ("." in text and text.endswith("5")):
            break
    return "0" if text == "-0" else text


def is_sweep(name):
    """A figure or version of one of the sweep's shapes: "graph: 1K x 4 kernels, memcpy, median"."""
    return " x " in name and any(f"kernels, {m}" in name for m in SWEEP_MODES)


def sweep_tables(lesson, out):
    figures = {f["name"]: f["value"] for f in lesson["report"]["figures"]}
    for mode in SWEEP_MODES:
        out.append(f"Sweep, {mode}: graph time over streams+events time per iteration "
                   f"(wall clock, medians), and below it the two times in µs "
                   f"(streams+events / graph):")
        out.append("")
        out.append("| kernels per side | " + " | ".join(SWEEP_SIZES) + " |")
        out.append("|---" * (len(SWEEP_SIZES) + 1) + "|")
        for chain in SWEEP_CHAINS:
            cells = [number(figures[f"graph / streams, {s} x {chain} kernels, {mode}"]) for s in SWEEP_SIZES]
            out.append(f"| {chain} | " + " | ".join(cells) + " |")
        out.append("")
        out.append("| kernels per side | " + " | ".join(SWEEP_SIZES) + " |")
        out.append("|---" * (len(SWEEP_SIZES) + 1) + "|")
        for chain in SWEEP_CHAINS:
            cells = []
            for s in SWEEP_SIZES:
                by_stream = figures[f"streams+events: {s} x {chain} kernels, {mode}, median"]
                graph = figures[f"graph: {s} x {chain} kernels, {mode}, median"]
                cells.append(f"{by_stream * 1e3:.1f} / {graph * 1e3:.1f}")
            out.append(f"| {chain} | " + " | ".join(cells) + " |")
        out.append("")


def events_trace_rows(lesson):
    """The events lesson's consumer kernel as CUPTI recorded it in the drawn run: when it started
    and ended after the version's first GPU activity, in ms (the picture draws these spans)."""
    rows = []
    spans = [e for e in lesson["trace"]["traceEvents"] if e.get("ph") == "X" and e.get("pid") != 1]
    for version in [v["name"] for v in lesson["report"]["details"]["versions"]][:2]:
        mine = [e for e in spans if e.get("args", {}).get("version") == version]
        if not mine:
            continue
        first = min(e["ts"] for e in mine)
        for e in mine:
            if e["name"] == "vector_add_kernel":
                start, end = (e["ts"] - first) / 1e3, (e["ts"] + e["dur"] - first) / 1e3
                rows.append(f"| {version}: the drawn run's consumer kernel (trace), start / end "
                            f"| {number(start)} / {number(end)} ms, {number(e['dur'])} µs long |")
    return rows


def section(paths):
    out = []
    for path in paths:
        lesson = json.load(open(path, encoding="utf-8"))
        name, report = lesson["lesson"], lesson["report"]
        run = RUN_OF.get(name, DEFAULT_RUN)
        out.append(f"### {name} (run {run})")
        out.append("")
        out.append(f"`docs/recorded/{os.path.basename(path)}`: {lesson['gpu']}, {lesson['date']}, "
                   f"`{lesson['command']}`.")
        out.append("")
        params = ", ".join(f"{k}={v}" for k, v in report["parameters"].items() if v is not None)
        out.append(f"Parameters: {params}.")
        out.append("")
        out.append("| figure | value |")
        out.append("|---|---|")
        for f in report["figures"]:
            if not is_sweep(f["name"]):
                out.append(f"| {f['name']} | {number(f['value'])} {f['unit']} |")
        for v in report["details"].get("versions", []):
            if is_sweep(v["name"]):
                continue
            for part, stats in v.get("parts", []):
                out.append(f"| {v['name']}: {part} (median) | {number(stats['median'])} |")
        if name == "events":
            out.extend(events_trace_rows(lesson))
        cost = report["details"].get("recorder_cost")
        if cost:
            out.append(f"| {cost['version']}: recorder off / on ({cost['recorder']}, medians of "
                       f"{cost['rounds']}) | {number(cost['off_ms'])} / {number(cost['on_ms'])} ms |")
        out.append("")
        if any(is_sweep(f["name"]) for f in report["figures"]):
            sweep_tables(lesson, out)
        out.append("Its checks:")
        out.append("")
        for c in report["checks"]:
            out.append(f"- {c['verdict']}: {c['name']}: {c['detail']}")
        out.append("")
        out.append("The report's explanation:")
        out.append("")
        for line in report["interpretation"]:
            out.append(f"> {line}")
            out.append(">")
        out.pop()
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    paths = sorted(glob.glob(os.path.join(root, "docs", "recorded", "*.json")))
    if not paths:
        print("scripts/recorded-figures.py: no docs/recorded/*.json", file=sys.stderr)
        sys.exit(1)
    print(section(paths), end="")
