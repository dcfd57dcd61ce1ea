"""Compares what `streamlab trace` measured of a program's NVTX phases with what a lesson's
own run measured (issue 20's GPU check): the engine busy times of cuda-reference/overlap.cu's
"one stream" windows, per occurrence, against `streamlab run overlap`'s H, C and D medians,
and the K-stream window's copy time under compute.

    python3 trace_compare.py overlap TRACE_REPORT.json LESSON_REPORT.json [K]

Exit 1 when a phase differs by more than 5%, or the K-stream phase shows no copies under
compute. Prints one line per comparison.
"""
import json
import sys


def windows(report):
    return [w for w in report["overlap"]["windows"]]


def lesson_parts(lesson):
    for version in lesson["details"]["versions"]:
        if version["name"] == "one stream":
            return {name: stats["median"] for name, stats in version["parts"]}
    raise SystemExit("the lesson's report has no one-stream version with parts")


def overlap(trace_path, lesson_path, k):
    report = json.load(open(trace_path))
    lesson = json.load(open(lesson_path))
    if isinstance(lesson, list):
        lesson = lesson[0]
    parts = lesson_parts(lesson)
    by_range = {w["window"].get("range"): w for w in windows(report)}
    one = by_range.get("one stream")
    many = by_range.get(f"{k} streams")
    if one is None or many is None:
        print(f"FAIL: windows found: {sorted(str(r) for r in by_range)}")
        return 1
    n = one["window"]["occurrences"]
    status = 0
    for name, key in [("H", "copy_in_ms"), ("C", "compute_ms"), ("D", "copy_out_ms")]:
        traced = one["busy"][key] / n
        ratio = traced / parts[name]
        ok = abs(ratio - 1) <= 0.05
        status |= not ok
        print(f"{'ok' if ok else 'FAIL'}: {name}: traced {traced:.4f} ms per occurrence "
              f"({n} occurrences) vs the lesson's median {parts[name]:.4f} ms: {ratio:.3f}x")
    under = many["copy_under_compute"]
    ok = under is not None and under > 0.5
    status |= not ok
    print(f"{'ok' if ok else 'FAIL'}: {k} streams: {many['copy_and_compute_ms']:.3f} ms of copies "
          f"under compute, {100 * (under or 0):.0f}% of the copy time; measured over bound "
          f"{many['measured_over_bound']:.3f} (one stream: {one['measured_over_bound']:.3f})")
    return status


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] != "overlap":
        raise SystemExit(__doc__)
    sys.exit(overlap(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 8))
