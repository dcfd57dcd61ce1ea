"""Tests of scripts/perf_check.py on made-up runs, and of scripts/perf-targets.tsv against
docs/measurements.md (run by scripts/test.sh: python3 -m unittest discover -s scripts)."""
import contextlib
import io
import json
import os
import re
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import perf_check  # noqa: E402

TARGETS = os.path.join(HERE, "perf-targets.tsv")
MEASUREMENTS = os.path.join(HERE, "..", "docs", "measurements.md")

MADE_UP = "\n".join([
    "# a comment, then the header, then rows",
    "lesson\tflags\tfigure\tover\ttarget\trecorded\trun",
    "overlap\t-\tspeed-up (first / second)\t-\t>= 1.1\t2.1891\t23-E",
    "overlap\t-\tmeasured / bound\t-\t<= 1.20\t1.0062\t23-E",
    "overlap\t-\t8 streams, median\ttwin:overlap:cuda_overlap_8_streams\t<= 1.10\t1.7816 / 1.9121\t26-D",
    "p2p\t-\tspeed-up (first / second)\t-\t>= 1.5\t14.2438\t18-B",
    "basics\t--iters 5\tasync / blocking GPU time\t-\t<= 1.3\t0.9907\t23-E",
    "",
])


def report(figures, failed=()):
    """A lesson's --json report with `figures` (name: value) and a check per name in `failed`."""
    checks = [{"name": "bit for bit", "verdict": "passed", "detail": "all identical"}]
    checks += [{"name": n, "verdict": "failed", "detail": "no"} for n in failed]
    return {"lesson": "x", "figures": [{"name": k, "value": v, "unit": "x"} for k, v in figures.items()],
            "checks": checks}


class MadeUpRuns(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.d = self.dir.name
        self.targets = os.path.join(self.d, "targets.tsv")
        with open(self.targets, "w") as f:
            f.write(MADE_UP)

    def tearDown(self):
        self.dir.cleanup()

    def lesson(self, name, rc, figures=None, err="", failed=()):
        with open(os.path.join(self.d, name + ".rc"), "w") as f:
            f.write(f"{rc}\n")
        with open(os.path.join(self.d, name + ".err"), "w") as f:
            f.write(err)
        if figures is not None:
            with open(os.path.join(self.d, name + ".json"), "w") as f:
                json.dump(report(figures, failed), f)

    def twin(self, name, rc, text):
        with open(os.path.join(self.d, name + ".rc"), "w") as f:
            f.write(f"{rc}\n")
        with open(os.path.join(self.d, name + ".txt"), "w") as f:
            f.write(text)

    def run_check(self, *extra):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = perf_check.main(["perf_check.py", "check", self.targets, self.d, *extra])
        return code, out.getvalue()

    def all_good(self):
        self.lesson("lesson-overlap-defaults", 0, {"speed-up (first / second)": 2.0,
                                                   "measured / bound": 1.05,
                                                   "8 streams, median": 1.80})
        self.twin("twin-overlap", 0, "cuda_overlap_H: 1.2\ncuda_overlap_8_streams: 1.9000\n")
        self.lesson("lesson-p2p-defaults", 3, err="streamlab: p2p: needs 2 GPUs, found 1\n")
        self.lesson("lesson-basics-iters-5", 0, {"async / blocking GPU time": 0.99})

    def verdicts(self, out):
        """The verdict column of each table row, by its figure."""
        rows = {}
        for line in out.splitlines()[1:-1]:
            for what in ("speed-up", "measured / bound", "8 streams", "async / blocking"):
                if what in line:
                    verdict = re.match(r"(ok|missed|not run|failed) ", line).group(1)
                    why = re.search(r"\[(.*)\]$", line)
                    rows.setdefault(what, verdict + (f": {why.group(1)}" if why else ""))
        return rows

    def test_the_plan_names_each_run_once_with_its_flags(self):
        runs = perf_check.plan(perf_check.read_targets(self.targets))
        self.assertEqual(runs, [
            ("lesson", "overlap", "-", "lesson-overlap-defaults"),
            ("twin", "overlap", "-", "twin-overlap"),
            ("lesson", "p2p", "-", "lesson-p2p-defaults"),
            ("lesson", "basics", "--iters 5", "lesson-basics-iters-5"),
        ])

    def test_every_row_ok_and_a_lesson_short_of_gpus_not_run(self):
        self.all_good()
        code, out = self.run_check()
        self.assertEqual(code, 0, out)
        v = self.verdicts(out)
        self.assertEqual(v["measured / bound"], "ok")
        self.assertEqual(v["8 streams"], "ok")  # 1.80 / 1.90 = 0.947
        self.assertEqual(v["speed-up"], "ok")
        self.assertIn("[needs 2 GPUs, found 1]", out)
        self.assertTrue(out.splitlines()[-1].startswith("perf-check: 4 ok, 0 missed, 1 not run, 0 failed"), out)
        self.assertIn("0.9474", out)

    def test_a_miss_is_reported_and_fails_only_under_strict(self):
        self.all_good()
        self.lesson("lesson-basics-iters-5", 0, {"async / blocking GPU time": 1.31})
        code, out = self.run_check()
        self.assertEqual(code, 0, out)
        self.assertEqual(self.verdicts(out)["async / blocking"], "missed")
        code, out = self.run_check("--strict")
        self.assertEqual(code, 1, out)
        self.assertIn("1 missed", out.splitlines()[-1])

    def test_a_failed_run_or_check_fails(self):
        self.all_good()
        self.lesson("lesson-basics-iters-5", 5, {"async / blocking GPU time": 0.99},
                    err="streamlab: basics: a check failed\n", failed=["async calls freed the host"])
        code, out = self.run_check()
        self.assertEqual(code, 1, out)
        self.assertIn("[basics: check failed: async calls freed the host]", out)
        os.remove(os.path.join(self.d, "lesson-basics-iters-5.json"))
        self.lesson("lesson-basics-iters-5", 2, err="streamlab: bad flag\n")
        code, out = self.run_check()
        self.assertEqual(code, 1, out)
        self.assertIn("[basics: exit 2: streamlab: bad flag]", out)

    def test_a_figure_the_report_lacks_fails(self):
        self.all_good()
        self.lesson("lesson-basics-iters-5", 0, {"something else": 1.0})
        code, out = self.run_check()
        self.assertEqual(code, 1, out)
        self.assertIn("no figure 'async / blocking GPU time' in the report", out)

    def test_a_twin_not_built_is_not_run_and_a_twin_whose_check_failed_fails(self):
        self.all_good()
        os.remove(os.path.join(self.d, "twin-overlap.txt"))
        os.remove(os.path.join(self.d, "twin-overlap.rc"))
        code, out = self.run_check()
        self.assertEqual(code, 0, out)
        self.assertEqual(self.verdicts(out)["8 streams"], "not run: twin overlap: not built (no nvcc)")
        self.twin("twin-overlap", 0, "cuda_overlap_8_streams: 1.9\ncheck overlap: FAILED\n")
        code, out = self.run_check()
        self.assertEqual(code, 1, out)
        self.assertIn("twin overlap: check overlap: FAILED", out)

    def test_a_malformed_targets_file_is_refused_with_exit_2(self):
        for bad in ("overlap\t-\tspeed-up\t-\tabout 1.1\t2.1\t23-E\n",
                    "overlap\t-\tspeed-up\t>= 1.1\n",
                    "overlap\t-\tx\ttwin:overlap\t<= 1.1\t1\t26-D\n",
                    "# only a comment\n"):
            with open(self.targets, "w") as f:
                f.write(bad)
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                self.assertEqual(perf_check.main(["perf_check.py", "plan", self.targets]), 2, bad)
            self.assertIn("perf-check: ", err.getvalue())
        with contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(perf_check.main(["perf_check.py", "check", self.targets]), 2)


class TheTargetsFile(unittest.TestCase):
    """scripts/perf-targets.tsv parses, and each row's recorded figure is in
    docs/measurements.md as the row says, under a run that its table of runs names."""

    def test_every_recorded_figure_is_in_the_measurements_with_its_run(self):
        rows = perf_check.read_targets(TARGETS)
        with open(MEASUREMENTS, encoding="utf-8") as f:
            text = f.read()
        runs_table = text.split("**The runs.**")[1].split("\n\n")[1]
        runs = {run for line in runs_table.splitlines()[2:] for run in line.split("|")[1].strip().split(", ")}
        self.assertIn("26-D", runs)
        for r in rows:
            self.assertIn(r.run, runs, f"line {r.line_no}: run {r.run}")
            recorded = [x.strip() for x in r.recorded.split(" / ")]
            twin = any(o.startswith(perf_check.TWIN) for o in (r.figure, r.over))
            if twin:
                # Run 26-D's table: | technique | Rust | CUDA C++ | difference |
                self.assertIn(f"| {recorded[0]} | {recorded[1]} |", text, f"line {r.line_no}")
            else:
                names = [r.figure] + ([r.over] if r.over else [])
                self.assertEqual(len(names), len(recorded), f"line {r.line_no}")
                for name, figure in zip(names, recorded):
                    self.assertIn(f"| {name} | {figure} ", text, f"line {r.line_no}: {name}")

    def test_every_lesson_and_twin_is_one_there_is(self):
        lessons = {os.path.splitext(f)[0] for f in os.listdir(os.path.join(HERE, "..", "docs", "recorded"))}
        twins = {os.path.splitext(f)[0] for f in os.listdir(os.path.join(HERE, "..", "cuda-reference"))}
        for kind, what, _flags, _name in perf_check.plan(perf_check.read_targets(TARGETS)):
            self.assertIn(what, lessons if kind == "lesson" else twins)


if __name__ == "__main__":
    unittest.main()
