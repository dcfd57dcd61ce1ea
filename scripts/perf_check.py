#!/usr/bin/env python3
"""The reading and comparing half of scripts/perf-check.sh: the lessons' timings against the
targets of scripts/perf-targets.tsv (the one file that holds them).

  perf_check.py plan TARGETS          the runs the targets need, one a line, tab-separated:
                                        lesson <TAB> LESSON <TAB> FLAGS <TAB> NAME
                                        twin   <TAB> PROGRAM <TAB> -     <TAB> NAME
  perf_check.py check TARGETS DIR [--strict]
                                      reads what perf-check.sh left in DIR for each run (NAME.json
                                      or NAME.txt, NAME.rc, NAME.err), prints a table with ok or
                                      missed per row, and exits 0 unless a run failed, a check of a
                                      lesson failed, or a row's figure is missing (1); with
                                      --strict a missed target fails too. A malformed targets file
                                      or bad arguments: 2.

A row's figure is a figure of the lesson's `--json` report, by name, or a line of a C++ twin's
output (`twin:PROGRAM:KEY`, the twin printing `KEY: VALUE`); with a second column it is the
ratio of the two. A row whose lesson needs more GPUs than the machine has (exit 3, "needs N
GPUs"), or whose twin could not be built or run for want of nvcc or GPUs, is "not run": neither
ok nor missed, and no failure.
"""
import json
import math
import operator
import re
import sys

COLUMNS = ["lesson", "flags", "figure", "over", "target", "recorded", "run"]
OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}
TWIN = "twin:"
# Exit 3 with this in the one-line error: a lesson that needs more GPUs than there are.
NEEDS_GPUS = re.compile(r"needs (\d+) GPUs, found (\d+)")
# A twin's figure line: "KEY: VALUE", VALUE a plain decimal number.
TWIN_LINE = re.compile(r"^(.+): (-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*$")


class TargetsError(Exception):
    pass


class Row:
    def __init__(self, line_no, lesson, flags, figure, over, target, recorded, run):
        self.line_no = line_no
        self.lesson = lesson
        self.flags = "" if flags == "-" else flags
        self.figure = figure
        self.over = "" if over == "-" else over
        m = re.fullmatch(r"(>=|<=|>|<)\s*(-?\d+(?:\.\d+)?)", target.strip())
        if not m:
            raise TargetsError(f"line {line_no}: target {target!r} is not like '>= 1.1' or '<= 1.20'")
        self.op, self.bound = m.group(1), float(m.group(2))
        self.target = f"{self.op} {m.group(2)}"
        self.recorded = recorded
        self.run = run
        for operand in (figure, self.over):
            if operand.startswith(TWIN) and len(operand.split(":", 2)) != 3:
                raise TargetsError(f"line {line_no}: {operand!r} is not twin:PROGRAM:KEY")

    def what(self):
        return f"{self.figure} / {self.over}" if self.over else self.figure


def read_targets(path):
    """The rows of a targets file: tab-separated COLUMNS, '#' comments and blank lines skipped."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            cells = line.split("\t")
            if cells == COLUMNS:
                continue
            if len(cells) != len(COLUMNS) or any(not c.strip() for c in cells):
                raise TargetsError(
                    f"line {n}: {len(cells)} tab-separated cells, want {len(COLUMNS)} non-empty ones "
                    f"({', '.join(COLUMNS)}; '-' for no flags or no second figure)")
            rows.append(Row(n, *[c.strip() for c in cells]))
    if not rows:
        raise TargetsError("no targets")
    return rows


def slug(text):
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-") or "defaults"


def lesson_run(row):
    """The file name of the run of `row`'s lesson with its flags."""
    return f"lesson-{row.lesson}-{slug(row.flags) if row.flags else 'defaults'}"


def twin_run(program):
    return f"twin-{slug(program)}"


def plan(rows):
    """(kind, what, flags, name) for every run the rows need, each once, in file order."""
    runs = []
    for row in rows:
        runs.append(("lesson", row.lesson, row.flags or "-", lesson_run(row)))
        for operand in (row.figure, row.over):
            if operand.startswith(TWIN):
                program = operand.split(":", 2)[1]
                runs.append(("twin", program, "-", twin_run(program)))
    seen, unique = set(), []
    for run in runs:
        if run[3] not in seen:
            seen.add(run[3])
            unique.append(run)
    return unique


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


class Run:
    """What one run left: its exit code, stderr, and the report (lesson) or figures (twin)."""

    def __init__(self, directory, name, kind):
        self.name = name
        rc = read_text(f"{directory}/{name}.rc")
        self.rc = int(rc.strip()) if rc and rc.strip().lstrip("-").isdigit() else None
        self.err = (read_text(f"{directory}/{name}.err") or "").strip()
        self.report, self.twin, self.problem, self.not_run = None, {}, None, None
        if kind == "lesson":
            self._read_lesson(f"{directory}/{name}.json")
        else:
            self._read_twin(read_text(f"{directory}/{name}.txt"))

    def _read_lesson(self, path):
        needs = NEEDS_GPUS.search(self.err)
        if self.rc == 3 and needs:
            self.not_run = f"needs {needs.group(1)} GPUs, found {needs.group(2)}"
            return
        if self.rc is None:
            self.problem = "did not run"
            return
        text = read_text(path)
        try:
            self.report = json.loads(text) if text else None
        except ValueError as e:
            self.problem = f"exit {self.rc}, its JSON does not parse: {e}"
            return
        failed = [c.get("name") for c in (self.report or {}).get("checks", [])
                  if c.get("verdict") == "failed"]
        last = self.err.splitlines()[-1] if self.err else ""
        if self.rc != 0:
            self.problem = f"exit {self.rc}" + (f": {last}" if last else "")
        elif self.report is None:
            self.problem = "exit 0 but no report"
        if failed:
            self.problem = f"check failed: {failed[0]}" + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else "")

    def _read_twin(self, text):
        if self.rc is None or text is None:
            self.not_run = self.err.splitlines()[-1] if self.err else "not built (no nvcc)"
            return
        needs = NEEDS_GPUS.search(text)
        if needs:
            self.not_run = f"needs {needs.group(1)} GPUs, found {needs.group(2)}"
            return
        if self.rc != 0:
            last = self.err.splitlines()[-1] if self.err else ""
            self.problem = f"exit {self.rc}" + (f": {last}" if last else "")
        for line in text.splitlines():
            if line.startswith("check ") and "FAILED" in line:
                self.problem = line.strip()
            m = TWIN_LINE.match(line.strip())
            if m:
                self.twin[m.group(1)] = float(m.group(2))


def value(operand, lesson, twins):
    """(value, None), or (None, why not) for one operand of a row."""
    if operand.startswith(TWIN):
        _, program, key = operand.split(":", 2)
        run = twins[program]
        if run.not_run:
            return None, f"twin {program}: {run.not_run}"
        if run.problem and key not in run.twin:
            return None, f"twin {program}: {run.problem}"
        if key not in run.twin:
            return None, f"twin {program} printed no {key!r}"
        return run.twin[key], None
    figures = {f["name"]: f["value"] for f in (lesson.report or {}).get("figures", [])}
    if operand not in figures:
        return None, f"no figure {operand!r} in the report"
    return figures[operand], None


def check(rows, directory):
    """Each row with its value and verdict: 'ok', 'missed', 'not run' or 'failed'."""
    lessons = {}
    twins = {}
    for kind, what, _flags, name in plan(rows):
        if kind == "lesson":
            lessons[name] = Run(directory, name, "lesson")
        else:
            twins[what] = Run(directory, name, "twin")
    results = []
    for row in rows:
        lesson = lessons[lesson_run(row)]
        if lesson.not_run:
            results.append((row, None, "not run", lesson.not_run))
            continue
        if lesson.problem:
            results.append((row, None, "failed", f"{row.lesson}: {lesson.problem}"))
            continue
        got, why = [], None
        for operand in filter(None, (row.figure, row.over)):
            v, why = value(operand, lesson, twins)
            if why:
                break
            got.append(v)
        if why:
            twin_missing = any(o.startswith(TWIN) and twins[o.split(":", 2)[1]].not_run
                               for o in (row.figure, row.over))
            results.append((row, None, "not run" if twin_missing else "failed", why))
            continue
        v = got[0] / got[1] if len(got) == 2 and got[1] != 0 else (got[0] if len(got) == 1 else math.nan)
        if math.isnan(v):
            results.append((row, None, "failed", "division by zero"))
            continue
        verdict = "ok" if OPS[row.op](v, row.bound) else "missed"
        results.append((row, v, verdict, ""))
    for program, run in twins.items():
        if run.problem and not run.not_run:
            # A twin whose own check failed fails the run even where its figures printed.
            results.append((None, None, "failed", f"twin {program}: {run.problem}"))
    return results


def shown(operand):
    """How the table names an operand: a twin's by its key."""
    return f"C++ {operand.split(':', 2)[2]}" if operand.startswith(TWIN) else operand


def table(results):
    """The table, as lines: the verdict first, the figure last (names run long), and why a row
    is not run or failed after it."""
    header = ("verdict", "lesson", "got", "target", "recorded (run)", "figure")
    body = []
    for row, v, verdict, why in results:
        if row is None:
            body.append((verdict, "-", "-", "-", "-", why))
            continue
        lesson = f"{row.lesson} {row.flags}" if row.flags else row.lesson
        figure = shown(row.figure) + (f" / {shown(row.over)}" if row.over else "")
        got = f"{v:.4g}" if v is not None else "-"
        body.append((verdict, lesson, got, row.target, f"{row.recorded} ({row.run})",
                     figure + (f"  [{why}]" if why else "")))
    widths = [max(len(r[i]) for r in [header] + body) for i in range(len(header) - 1)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in [header] + body]


def summary(results):
    counts = {k: 0 for k in ("ok", "missed", "not run", "failed")}
    for _row, _v, verdict, _why in results:
        counts[verdict] += 1
    return counts


def main(argv):
    if len(argv) >= 2 and argv[1] == "plan" and len(argv) == 3:
        try:
            rows = read_targets(argv[2])
        except (OSError, TargetsError) as e:
            print(f"perf-check: {argv[2]}: {e}", file=sys.stderr)
            return 2
        for run in plan(rows):
            print("\t".join(run))
        return 0
    if len(argv) >= 4 and argv[1] == "check" and set(argv[4:]) <= {"--strict"}:
        strict = "--strict" in argv[4:]
        try:
            rows = read_targets(argv[2])
        except (OSError, TargetsError) as e:
            print(f"perf-check: {argv[2]}: {e}", file=sys.stderr)
            return 2
        results = check(rows, argv[3])
        for line in table(results):
            print(line)
        c = summary(results)
        print(f"perf-check: {c['ok']} ok, {c['missed']} missed, {c['not run']} not run, "
              f"{c['failed']} failed, of {len(rows)} targets in {argv[2]}"
              + (" (--strict: a miss fails)" if strict else ""))
        return 1 if c["failed"] or (strict and c["missed"]) else 0
    print("usage: perf_check.py plan TARGETS | check TARGETS DIR [--strict]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
