"""Checks what `streamlab trace` reported of the programs in scripts/trace-examples/ against
what each program measured of itself (issue 26). Reads the folder scripts/trace-examples.sh
wrote and prints one row per check: name | expected | measured | status (ok, FAILED, or info
for a figure that is shown and not judged). Exit 1 when a check FAILED, 2 on bad arguments.

    python3 trace_examples_check.py OUTPUT_FOLDER [--only small,ahead,crash,capture,cost,long]

The folder holds, for each run NAME: NAME.stdout (the program's; its own figures are the
JSON objects with a "program" key on their own lines, the last one unless said), NAME.stderr
(the trace's report), NAME.exit (the exit code), NAME.wall_ns (the runner's clock around the
command) and NAME.json (`streamlab trace --json`). The runs: small, ahead, crash, capture,
cost-1..R and profiler-1..R, long (and long.time, /usr/bin/time -v's output).

The checks:
- small: the "last" range's window launched exactly the program's kernels (2,000), and no
  range is said to have "never ended" (the report's header lines, and each process's
  "unclosed" list).
- ahead: the "step" window's span_ms (of the work launched in it) within 2% of the program's event-timed GPU
  time of the same steps: the report sums every occurrence of the range it holds, so the
  program's figure is its sum over ALL steps, warm-up included (where the report holds fewer
  occurrences, the steps ranges_whole names); its kernels are occurrences x kernels per
  step; a "cpu_ahead" finding; the "sync" range launched nothing while kernels ran.
- crash: the trace's exit code is 128 + the program's signal (139, or 134 for SIGABRT), the
  process's ending is "crashed" with that signal, and the "work" window launched the
  program's own kernel count.
- capture: the "step" window has exactly 10 occurrences (the runner's --capture-count), and
  its kernels are the count of 10 consecutive steps.
- cost (info): medians over the repeats of the process's wall time plain, traced (both from
  `--cost`'s report) and under torch.profiler (the runner's clock), the ratios traced/plain
  and profiler/plain, and the same for the loop's own time; FAILED only where a run failed.
- long: the trace command's wall time minus the program's own (the report's delay): FAILED
  over 10 s.

Every read of the report's JSON goes through one small function per field (below), so a
change of the report's shape is one edit.
"""
import argparse
import glob
import json
import os
import re
import statistics
import sys

CAPTURE_COUNT = 10
SPAN_TOLERANCE = 0.02
DELAY_LIMIT_S = 10.0
CHECKS = ["small", "ahead", "crash", "capture", "cost", "long"]


# --- The report's fields, one function each. ---------------------------------------------

def exit_code(report):
    return report["exit_code"]


def header_lines(report):
    return report["header"]


def processes(report):
    return report["processes"]


def process_pid(process):
    return process["pid"]


def ending_how(process):
    return process["ending"]["how"]


def ending_signal(process):
    return process["ending"].get("signal")


def unclosed_ranges(process):
    return process.get("unclosed", [])


def record_count(report):
    return report["records"]


def dropped_count(report):
    return report.get("dropped")


def windows(report):
    return report["overlap"]["windows"]


def window_process(window):
    return window["window"]["process"]


def window_range(window):
    return window["window"].get("range")


def window_part(window):
    return window["window"]["part"]


def window_occurrences(window):
    return window["window"]["occurrences"]


def launched_kernels(window):
    # A window's own figures are those of the work launched in it.
    return window["kernels"]


def launched_span_ms(window):
    return window["span_ms"]


def ran_during_kernels(window):
    return window["ran_during"]["kernels"]


def window_findings(window):
    return window["findings"]


def across_window_findings(report):
    return report["overlap"].get("across_windows", [])


def finding_rule(finding):
    return finding["rule"]


def ranges_whole(report):
    return report["overlap"]["ranges_whole"]


def whole_range(entry):
    return entry["range"]


def whole_process(entry):
    return entry["process"]


def whole_first(entry):
    # Numbered from 1 among the occurrences recorded: a 0-based step index here.
    return entry["first"] - 1


def whole_last(entry):
    return entry["last"] - 1


def cost_untraced_ms(report):
    return report["cost"]["untraced_ms"]


def cost_traced_ms(report):
    return report["cost"]["traced_ms"]


# --- The folder's files. ----------------------------------------------------------------

class Missing(Exception):
    """A file a check needs is not there, or not what it should be."""


def path(folder, name):
    return os.path.join(folder, name)


def read_text(folder, name):
    try:
        with open(path(folder, name), encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as e:
        raise Missing(f"{name}: {e.strerror}") from None


def read_report(folder, run):
    try:
        return json.loads(read_text(folder, f"{run}.json"))
    except json.JSONDecodeError as e:
        raise Missing(f"{run}.json: not JSON ({e})") from None


def read_int(folder, name):
    text = read_text(folder, name).strip()
    try:
        return int(text)
    except ValueError:
        raise Missing(f"{name}: not a number: {text[:40]!r}") from None


def run_exit(folder, run):
    return read_int(folder, f"{run}.exit")


def run_wall_ms(folder, run):
    return read_int(folder, f"{run}.wall_ns") / 1e6


def all_own_figures(folder, run):
    """The program's own figures: every JSON object with a "program" key on a line of its
    stdout, in order (a `--cost` run prints two: the untraced run's, then the traced one's)."""
    found = []
    for line in read_text(folder, f"{run}.stdout").splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and "program" in value:
            found.append(value)
    if not found:
        raise Missing(f"{run}.stdout: no line of the program's own figures")
    return found


def own_figures(folder, run):
    return all_own_figures(folder, run)[-1]


# --- Helpers over the report. -----------------------------------------------------------

def process_of(report, pid):
    """The process with this pid, or the only one; None when neither."""
    every = processes(report)
    for process in every:
        if process_pid(process) == pid:
            return process
    return every[0] if len(every) == 1 else None


def range_window(report, name, pid):
    """The window of NVTX range `name` of process `pid` (of any process where that pid has
    none), its devices' windows merged: kernels and spans summed, the most occurrences.
    None when the report has no such window."""
    named = [w for w in windows(report) if window_range(w) == name and window_part(w) == "range"]
    mine = [w for w in named if window_process(w) == pid]
    chosen = mine or named
    if not chosen:
        return None
    return {
        "occurrences": max(window_occurrences(w) for w in chosen),
        "kernels": sum(launched_kernels(w) for w in chosen),
        "span_ms": sum(launched_span_ms(w) for w in chosen),
        "ran_during_kernels": sum(ran_during_kernels(w) for w in chosen),
        "findings": [f for w in chosen for f in window_findings(w)],
        "windows": len(chosen),
    }


def range_names(report):
    return sorted({str(window_range(w)) for w in windows(report)})


def never_ended(report):
    """The header's lines that say a range never ended, and the processes' unclosed ranges."""
    lines = [line for line in header_lines(report) if "never ended" in line]
    unclosed = [name for p in processes(report) for name in unclosed_ranges(p)]
    return lines, unclosed


def has_finding(report, rule):
    """Where a finding of `rule` is: the names of the windows (or "across windows")."""
    where = []
    for w in windows(report):
        if any(finding_rule(f) == rule for f in window_findings(w)):
            where.append(str(window_range(w) or window_part(w)))
    if any(finding_rule(f) == rule for f in across_window_findings(report)):
        where.append("across windows")
    return where


def whole_occurrences(report, name, pid):
    """ranges_whole's entry for range `name` of process `pid` (or of any process)."""
    entries = [e for e in ranges_whole(report) if whole_range(e) == name]
    mine = [e for e in entries if whole_process(e) == pid]
    return (mine or entries or [None])[0]


def median(values):
    return statistics.median(values) if values else None


def fmt(value, digits=3):
    return "-" if value is None else f"{value:.{digits}f}"


# --- The checks: each appends rows (name, expected, measured, status) to `rows`. ----------

def row(name, expected, measured, ok):
    return (name, str(expected), str(measured), "ok" if ok else "FAILED")


def info(name, expected, measured):
    return (name, str(expected), str(measured), "info")


def exit_row(folder, run, expected):
    code = run_exit(folder, run)
    return row(f"{run}.exit", expected, code, code == expected)


def check_small(folder, rows):
    rows.append(exit_row(folder, "small", 0))
    own = own_figures(folder, "small")
    report = read_report(folder, "small")
    pid = own.get("pid")
    last = range_window(report, "last", pid)
    want = own["kernels"]["last"]
    if last is None:
        rows.append(row("small.last", f"{want} kernels", f"no 'last' window (ranges: "
                        f"{', '.join(range_names(report))})", False))
    else:
        rows.append(row("small.last", f"{want} kernels",
                        f"{last['kernels']} kernels, {last['occurrences']} occurrence(s)",
                        last["kernels"] == want))
    lines, unclosed = never_ended(report)
    said = lines[0] if lines else (f"unclosed: {', '.join(unclosed)}" if unclosed else "none")
    rows.append(row("small.never_ended", "no range said never to end",
                    f"{len(lines)} line(s), {len(unclosed)} unclosed; {said}",
                    not lines and not unclosed))
    step = range_window(report, "step", pid)
    kept = "-" if step is None else f"{step['occurrences']} steps, {step['kernels']} kernels"
    rows.append(info("small.kept", f"of {own['steps']} steps, {own['kernels']['step']} kernels",
                     f"{kept}; records {record_count(report)}, dropped {dropped_count(report)}"))


def expected_gpu_ms(own, report, window, pid):
    """The program's GPU time for the steps the report's window covers, and which those are.
    All steps (warm-up included: the report cannot leave occurrences out) where the window
    holds every step; else the occurrences ranges_whole names as recorded whole, taken as
    0-based step indices first..last. None where neither fits."""
    per_step = own["per_step_ms"]
    n = window["occurrences"]
    if n == len(per_step):
        return sum(per_step), f"all {n} steps, its {own['warmup']} warm-up steps included"
    entry = whole_occurrences(report, "step", pid)
    if entry is not None and whole_last(entry) - whole_first(entry) + 1 == n:
        first, last = whole_first(entry), whole_last(entry)
        return sum(per_step[first:last + 1]), f"steps {first}..{last}, the ones kept whole"
    return None, f"{n} occurrences of {len(per_step)} steps, and no ranges_whole entry to match"


def check_ahead(folder, rows):
    rows.append(exit_row(folder, "ahead", 0))
    own = own_figures(folder, "ahead")
    report = read_report(folder, "ahead")
    pid = own.get("pid")
    step = range_window(report, "step", pid)
    if step is None:
        rows.append(row("ahead.span", "a 'step' window",
                        f"none (ranges: {', '.join(range_names(report))})", False))
        return
    want, which = expected_gpu_ms(own, report, step, pid)
    if want is None:
        rows.append(row("ahead.span", "the program's GPU ms of the same steps", which, False))
    else:
        ratio = step["span_ms"] / want if want > 0 else float("inf")
        rows.append(row("ahead.span", f"{fmt(want)} ms +-{SPAN_TOLERANCE:.0%} ({which})",
                        f"{fmt(step['span_ms'])} ms ({ratio:.4f}x)",
                        abs(ratio - 1) <= SPAN_TOLERANCE))
    per = own["kernels_per_step"]
    rows.append(row("ahead.kernels", f"{step['occurrences']} x {per} kernels",
                    f"{step['kernels']} kernels", step["kernels"] == step["occurrences"] * per))
    where = has_finding(report, "cpu_ahead")
    rows.append(row("ahead.cpu_ahead", "a cpu_ahead finding",
                    f"in {', '.join(where)}" if where else "none", bool(where)))
    sync = range_window(report, "sync", pid)
    if sync is None:
        rows.append(row("ahead.sync", "a 'sync' window", "none", False))
    else:
        rows.append(row("ahead.sync", "launched 0 kernels, kernels ran during it",
                        f"launched {sync['kernels']}, {sync['ran_during_kernels']} ran during it",
                        sync["kernels"] == 0 and sync["ran_during_kernels"] > 0))
    rows.append(info("ahead.figures", f"kernel {own['kernel_ms']} ms, ahead {own['ahead']}",
                     f"after warm-up {fmt(own['gpu_ms_after_warmup'])} ms "
                     f"({own['steps'] - own['warmup']} steps)"))


def check_crash(folder, rows):
    own = own_figures(folder, "crash")
    report = read_report(folder, "crash")
    signal = own["signal"]
    rows.append(exit_row(folder, "crash", 128 + signal))
    rows.append(row("crash.report_exit", 128 + signal, exit_code(report),
                    exit_code(report) == 128 + signal))
    pid = own.get("pid")
    process = process_of(report, pid)
    if process is None:
        rows.append(row("crash.ending", f"crashed, signal {signal}", f"no process {pid}", False))
    else:
        how, got = ending_how(process), ending_signal(process)
        rows.append(row("crash.ending", f"crashed, signal {signal}", f"{how}, signal {got}",
                        how == "crashed" and got == signal))
    work = range_window(report, "work", pid)
    want = own["kernels"]["work"]
    if work is None:
        rows.append(row("crash.work", f"{want} kernels", "no 'work' window", False))
    else:
        rows.append(row("crash.work", f"{want} kernels", f"{work['kernels']} kernels",
                        work["kernels"] == want))


def consecutive_starts(per_step, count, kernels):
    """The first steps of the runs of `count` consecutive steps that launched `kernels`."""
    return [i for i in range(len(per_step) - count + 1)
            if sum(per_step[i:i + count]) == kernels]


def check_capture(folder, rows):
    rows.append(exit_row(folder, "capture", 0))
    own = own_figures(folder, "capture")
    report = read_report(folder, "capture")
    step = range_window(report, "step", own.get("pid"))
    if step is None:
        rows.append(row("capture.steps", f"{CAPTURE_COUNT} occurrences", "no 'step' window",
                        False))
        return
    rows.append(row("capture.steps", f"{CAPTURE_COUNT} occurrences",
                    f"{step['occurrences']} occurrences", step["occurrences"] == CAPTURE_COUNT))
    per_step = own["kernels_per_step"]
    starts = consecutive_starts(per_step, CAPTURE_COUNT, step["kernels"])
    shown = ", ".join(str(s) for s in starts[:4]) + (", ..." if len(starts) > 4 else "")
    rows.append(row("capture.kernels",
                    f"{sum(per_step[:CAPTURE_COUNT])} for steps 0..{CAPTURE_COUNT - 1} "
                    f"(or another {CAPTURE_COUNT} consecutive steps' count)",
                    f"{step['kernels']}" + (f" (steps from {shown})" if starts else
                                            " (no 10 consecutive steps launched that)"),
                    bool(starts)))


def repeats(folder, prefix):
    """The runs prefix-1, prefix-2, ... that the folder holds, by number."""
    found = []
    for name in glob.glob(path(folder, f"{prefix}-*.exit")):
        m = re.fullmatch(rf"{re.escape(prefix)}-(\d+)\.exit", os.path.basename(name))
        if m:
            found.append(int(m.group(1)))
    return [f"{prefix}-{n}" for n in sorted(found)]


def check_cost(folder, rows):
    traced_runs, profiler_runs = repeats(folder, "cost"), repeats(folder, "profiler")
    if not traced_runs or not profiler_runs:
        raise Missing("no cost-N or profiler-N runs")
    failed = [f"{r} exit {run_exit(folder, r)}" for r in traced_runs + profiler_runs
              if run_exit(folder, r) != 0]
    if failed:
        rows.append(row("cost.runs", "every run exits 0", "; ".join(failed), False))
    plain, traced, profiler = [], [], []
    plain_loop, traced_loop, profiler_loop, steps = [], [], [], set()
    for run in traced_runs:
        report = read_report(folder, run)
        plain.append(cost_untraced_ms(report))
        traced.append(cost_traced_ms(report))
        figures = all_own_figures(folder, run)
        if len(figures) >= 2:
            plain_loop.append(figures[-2]["loop_ms"])
        traced_loop.append(figures[-1]["loop_ms"])
        steps.update(f["steps"] for f in figures)
    for run in profiler_runs:
        profiler.append(run_wall_ms(folder, run))
        figures = own_figures(folder, run)
        profiler_loop.append(figures["loop_ms"])
        steps.add(figures["steps"])
    if len(steps) != 1:
        rows.append(row("cost.steps", "the same steps in every run", sorted(steps), False))
    medians = [median(v) for v in (plain, traced, profiler)]
    rows.append(info("cost.process_ms", f"median of {len(traced_runs)}/{len(profiler_runs)} "
                     "runs: plain, traced, profiler", ratios(*medians)))
    loops = [median(v) for v in (plain_loop, traced_loop, profiler_loop)]
    rows.append(info("cost.loop_ms", "the program's own loop time, same medians",
                     ratios(*loops)))


def ratios(plain, traced, profiler):
    def over(a):
        return "-" if a is None or not plain else f"{a / plain:.3f}"
    return (f"plain {fmt(plain, 1)}, traced {fmt(traced, 1)}, profiler {fmt(profiler, 1)}; "
            f"traced/plain {over(traced)}, profiler/plain {over(profiler)}")


def time_v(folder, run):
    """/usr/bin/time -v's wall time (s) and maximum resident set (KiB), None where absent."""
    try:
        text = read_text(folder, f"{run}.time")
    except Missing:
        return None, None
    wall = rss = None
    m = re.search(r"Elapsed \(wall clock\) time.*?\):\s*(?:(\d+):)?(\d+):([\d.]+)", text)
    if m:
        wall = int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
    m = re.search(r"Maximum resident set size \(kbytes\):\s*(\d+)", text)
    if m:
        rss = int(m.group(1))
    return wall, rss


def check_long(folder, rows):
    rows.append(exit_row(folder, "long", 0))
    own = own_figures(folder, "long")
    trace_s = run_wall_ms(folder, "long") / 1e3
    program_s = own["wall_ms"] / 1e3
    delay = trace_s - program_s
    rows.append(row("long.delay", f"<= {DELAY_LIMIT_S:.0f} s (trace wall - program's own)",
                    f"{delay:.2f} s ({trace_s:.2f} - {program_s:.2f})", delay <= DELAY_LIMIT_S))
    wall, rss = time_v(folder, "long")
    report = read_report(folder, "long")
    step = range_window(report, "step", own.get("pid"))
    kept = "no 'step' window" if step is None else f"{step['occurrences']} steps in the report"
    rows.append(info("long.figures", f"{own['steps']} steps run",
                     f"{kept}; records {record_count(report)}, dropped {dropped_count(report)}; "
                     f"time -v: wall {fmt(wall, 2)} s, max RSS "
                     f"{'-' if rss is None else f'{rss / 1024:.0f} MiB'}"))


RUNNERS = {"small": check_small, "ahead": check_ahead, "crash": check_crash,
           "capture": check_capture, "cost": check_cost, "long": check_long}


def check(folder, name, runners=None):
    """The rows of one check (of `runners`, by default this file's): those made before a file
    was found missing or the report lacking a field it reads, then a FAILED row that says
    which."""
    rows = []
    try:
        (runners or RUNNERS)[name](folder, rows)
    except Missing as e:
        rows.append(row(name, "its files", f"cannot check: {e}", False))
    except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError) as e:
        rows.append(row(name, "the report's fields", f"cannot check: {type(e).__name__} {e}",
                        False))
    return rows


def table(rows):
    header = ("check", "expected", "measured", "status")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    lines = []
    for r in [header, *rows]:
        lines.append(" | ".join(r[i].ljust(widths[i]) for i in range(3)) + " | " + r[3])
    return "\n".join(lines)


def run_checks(argv, description, checks, runners, written_by):
    """The command line of a checker: the folder `written_by` wrote, `--only` a subset of
    `checks`; prints the table and the count; 1 when a check failed."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("folder", help=f"the folder {written_by} wrote")
    parser.add_argument("--only", help=f"a comma-separated subset of {','.join(checks)}")
    args = parser.parse_args(argv)
    names = checks if not args.only else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in runners]
    if unknown:
        parser.error(f"unknown check(s) {', '.join(unknown)}: the checks are {', '.join(checks)}")
    if not os.path.isdir(args.folder):
        parser.error(f"{args.folder}: not a folder")
    rows = [r for name in names for r in check(args.folder, name, runners)]
    print(table(rows))
    failed = [r[0] for r in rows if r[3] == "FAILED"]
    print(f"{len(rows)} rows, {len(failed)} FAILED" + (f": {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


def main(argv):
    description = __doc__.split("\n")[0]
    return run_checks(argv, description, CHECKS, RUNNERS, "scripts/trace-examples.sh")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
