"""Tests of trace_examples_check.py on made-up output folders: reports in the shape
`streamlab trace --json` writes, beside the programs' own figures.

Run from the repository root: python3 -m unittest discover -s scripts -p 'test_*.py'
"""
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import trace_examples_check as tec  # noqa: E402
from run_folder_fixture import RunFolder, RunFolderTest  # noqa: E402

SCRIPT = os.path.join(HERE, "trace_examples_check.py")
PID = 4242


def window(range_name, kernels=0, span_ms=0.0, occurrences=1, findings=(), pid=PID,
           part="range", ran_during=0):
    return {
        "window": {"process": pid, "device": 0, "range": range_name, "part": part,
                   "occurrences": occurrences},
        "span_ms": span_ms, "kernels": kernels, "copies": 0, "memsets": 0,
        "ran_during": {"span_ms": 0.0, "kernels": ran_during},
        "findings": [{"rule": rule, "count": 1, "cost_ms": 1.0} for rule in findings],
    }


def report(windows, exit_code=0, ending=None, header=(), unclosed=(), ranges_whole=(),
           across=(), cost=None):
    value = {
        "exit_code": exit_code,
        "header": list(header),
        "records": 1000,
        "dropped": 0,
        "processes": [{"pid": PID, "ending": ending or {"how": "exit", "at_ms": 1.0},
                       "unclosed": list(unclosed)}],
        "overlap": {
            "windows": [window(None, part="whole")] + list(windows),
            "across_windows": [{"rule": rule, "count": 1, "cost_ms": 1.0} for rule in across],
            "ranges_whole": list(ranges_whole),
        },
    }
    if cost is not None:
        value["cost"] = cost
    return value


class Folder(RunFolder):
    """A temporary output folder, written the way scripts/trace-examples.sh writes it."""

    def __init__(self):
        super().__init__("trace-examples-check-", tec.check)

    def run(self, name, own=(), report_value=None, exit_code=0, wall_ms=1000.0,
            stdout_before="some output of the program\n"):
        """Run `name`'s files: stdout with the own figures (each a JSON line), its exit
        code, its wall time, and its report."""
        lines = stdout_before + "".join(json.dumps(o) + "\n" for o in own)
        self.write_run(name, lines, exit_code, int(wall_ms * 1e6), report_value)


class Base(RunFolderTest):
    def make_folder(self):
        return Folder()


SMALL_OWN = {"program": "small_kernels", "pid": PID, "kernels": {"step": 300000, "last": 2000},
             "steps": 300, "per_step": 1000, "wall_ms": 3000.0}


class Small(Base):
    def test_the_last_range_whole_and_nothing_unended_passes(self):
        self.folder.run("small", [SMALL_OWN], report([
            window("step", kernels=120000, occurrences=120),
            window("last", kernels=2000)]))
        self.assertEqual(self.statuses("small"), {
            "small.exit": "ok", "small.last": "ok", "small.never_ended": "ok",
            "small.kept": "info"})
        self.assertIn("120 steps, 120000 kernels",
                      self.folder.rows("small")["small.kept"][2])

    def test_one_kernel_short_in_last_fails(self):
        self.folder.run("small", [SMALL_OWN], report([window("last", kernels=1999)]))
        row = self.folder.rows("small")["small.last"]
        self.assertEqual(row[1:], ("2000 kernels", "1999 kernels, 1 occurrence(s)", "FAILED"))

    def test_a_range_said_never_to_end_fails(self):
        line = 'pid 4242 · python: the NVTX range "step" never ended: it is drawn up to 9 ms'
        self.folder.run("small", [SMALL_OWN], report([window("last", kernels=2000)],
                                                     header=["the program exited 0", line]))
        row = self.folder.rows("small")["small.never_ended"]
        self.assertEqual(row[3], "FAILED")
        self.assertIn("1 line(s)", row[2])
        self.assertIn(line, row[2])
        # The process's own list of unclosed ranges counts too.
        self.folder.run("small", [SMALL_OWN], report([window("last", kernels=2000)],
                                                     unclosed=["step"]))
        self.assertEqual(self.folder.rows("small")["small.never_ended"][3], "FAILED")

    def test_no_last_window_names_the_ranges_found(self):
        self.folder.run("small", [SMALL_OWN], report([window("step", kernels=5)]))
        row = self.folder.rows("small")["small.last"]
        self.assertEqual(row[3], "FAILED")
        self.assertIn("no 'last' window (ranges: None, step)", row[2])

    def test_the_programs_pid_picks_its_window_and_devices_add_up(self):
        self.folder.run("small", [SMALL_OWN], report([
            window("last", kernels=2000, pid=999),
            window("last", kernels=1500), window("last", kernels=500)]))
        self.assertEqual(self.folder.rows("small")["small.last"][2],
                         "2000 kernels, 1 occurrence(s)")

    def test_a_nonzero_exit_fails_and_a_whole_window_of_that_name_is_not_the_range(self):
        self.folder.run("small", [SMALL_OWN], report([window("last", kernels=2000,
                                                             part="whole")]), exit_code=1)
        statuses = self.statuses("small")
        self.assertEqual((statuses["small.exit"], statuses["small.last"]), ("FAILED", "FAILED"))


AHEAD_OWN = {"program": "cpu_ahead", "pid": PID, "steps": 4, "kernels_per_step": 200,
             "kernel_ms": 0.2, "ahead": 3, "warmup": 1,
             "gpu_ms_all_steps": 160.0, "gpu_ms_after_warmup": 120.0,
             "per_step_ms": [40.0, 41.0, 39.0, 40.0]}


def ahead_report(span_ms, occurrences=4, findings=("cpu_ahead",), across=(), whole=(),
                 sync=True):
    windows = [window("step", kernels=occurrences * 200, span_ms=span_ms,
                      occurrences=occurrences, findings=findings)]
    if sync:
        windows.append(window("sync", kernels=0, ran_during=600))
    return report(windows, across=across, ranges_whole=whole)


class Ahead(Base):
    def test_within_two_percent_of_every_steps_event_time(self):
        self.folder.run("ahead", [AHEAD_OWN], ahead_report(160.0 * 1.019))
        self.assertEqual(self.statuses("ahead"), {
            "ahead.exit": "ok", "ahead.span": "ok", "ahead.kernels": "ok",
            "ahead.cpu_ahead": "ok", "ahead.sync": "ok", "ahead.figures": "info"})
        row = self.folder.rows("ahead")["ahead.span"]
        self.assertEqual(row[1], "160.000 ms +-2% (all 4 steps, its 1 warm-up steps included)")
        self.assertEqual(row[2], "163.040 ms (1.0190x)")

    def test_off_by_more_than_two_percent_fails_either_way(self):
        for span in (160.0 * 1.021, 160.0 * 0.979, 120.0):
            self.folder.run("ahead", [AHEAD_OWN], ahead_report(span))
            self.assertEqual(self.statuses("ahead")["ahead.span"], "FAILED", span)

    def test_fewer_occurrences_are_matched_by_the_steps_kept_whole(self):
        whole = [{"process": PID, "range": "step", "first": 2, "last": 3, "whole": 2,
                  "total": 4}]
        self.folder.run("ahead", [AHEAD_OWN], ahead_report(80.0, occurrences=2, whole=whole))
        row = self.folder.rows("ahead")["ahead.span"]
        self.assertEqual(row[1:], ("80.000 ms +-2% (steps 1..2, the ones kept whole)",
                                   "80.000 ms (1.0000x)", "ok"))
        # Without an entry that says which, no comparison is made up.
        self.folder.run("ahead", [AHEAD_OWN], ahead_report(80.0, occurrences=2))
        row = self.folder.rows("ahead")["ahead.span"]
        self.assertEqual(row[3], "FAILED")
        self.assertIn("2 occurrences of 4 steps", row[2])

    def test_the_cpu_ahead_finding_is_looked_for_in_every_window_and_across(self):
        self.folder.run("ahead", [AHEAD_OWN], ahead_report(160.0, findings=("launch_gaps",)))
        self.assertEqual(self.folder.rows("ahead")["ahead.cpu_ahead"][2:], ("none", "FAILED"))
        self.folder.run("ahead", [AHEAD_OWN], ahead_report(160.0, findings=(),
                                                           across=("cpu_ahead",)))
        self.assertEqual(self.folder.rows("ahead")["ahead.cpu_ahead"][2:],
                         ("in across windows", "ok"))

    def test_a_sync_range_that_launched_or_saw_nothing_fails(self):
        value = ahead_report(160.0, sync=False)
        value["overlap"]["windows"].append(window("sync", kernels=3, ran_during=600))
        self.folder.run("ahead", [AHEAD_OWN], value)
        self.assertEqual(self.statuses("ahead")["ahead.sync"], "FAILED")
        self.folder.run("ahead", [AHEAD_OWN], ahead_report(160.0, sync=False))
        self.assertEqual(self.statuses("ahead")["ahead.sync"], "FAILED")


CRASH_OWN = {"program": "crash_after_work", "pid": PID, "kernels": {"work": 1130},
             "gpu_ms": 99.0, "signal": 11, "expected_exit": 139}


class Crash(Base):
    def crashed(self, signal=11, exit_code=139, how="crashed", kernels=1130, own=CRASH_OWN):
        self.folder.run("crash", [own], report([window("work", kernels=kernels)],
                                               exit_code=exit_code,
                                               ending={"how": how, "signal": signal}),
                        exit_code=exit_code)
        return self.statuses("crash")

    def test_a_segfault_after_the_work_is_reported_whole(self):
        self.assertEqual(self.crashed(), {"crash.exit": "ok", "crash.report_exit": "ok",
                                          "crash.ending": "ok", "crash.work": "ok"})

    def test_an_abort_wants_134_and_signal_6(self):
        own = dict(CRASH_OWN, signal=6, expected_exit=134)
        self.assertEqual(set(self.crashed(signal=6, exit_code=134, own=own).values()), {"ok"})
        self.assertEqual(self.crashed(signal=11, exit_code=139, own=own)["crash.exit"],
                         "FAILED")

    def test_an_ending_at_the_last_flush_or_lost_kernels_fail(self):
        statuses = self.crashed(how="last_flush", signal=None)
        self.assertEqual(statuses["crash.ending"], "FAILED")
        self.assertEqual(self.folder.rows("crash")["crash.ending"][2], "last_flush, signal None")
        self.assertEqual(self.crashed(kernels=1120)["crash.work"], "FAILED")

    def test_without_the_programs_figures_the_check_fails_in_one_row(self):
        self.folder.run("crash", [], report([]), exit_code=139)
        rows = self.folder.rows("crash")
        self.assertEqual(list(rows), ["crash"])
        self.assertEqual(rows["crash"][2:], (
            "cannot check: crash.stdout: no line of the program's own figures", "FAILED"))


CAPTURE_OWN = {"program": "capture_loop", "pid": PID, "steps": 1000,
               "kernels": {"step": 2500}, "kernels_per_step": [1 + i % 4 for i in range(1000)]}


class Capture(Base):
    def test_ten_steps_from_the_first(self):
        self.folder.run("capture", [CAPTURE_OWN], report([window("step", kernels=23,
                                                                 occurrences=10)]))
        rows = self.folder.rows("capture")
        self.assertEqual([r[3] for r in rows.values()], ["ok", "ok", "ok"])
        self.assertEqual(rows["capture.kernels"][2], "23 (steps from 0, 4, 8, 12, ...)")

    def test_eleven_occurrences_or_a_count_no_ten_steps_make_fail(self):
        self.folder.run("capture", [CAPTURE_OWN], report([window("step", kernels=25,
                                                                 occurrences=11)]))
        self.assertEqual(self.statuses("capture")["capture.steps"], "FAILED")
        self.assertEqual(self.statuses("capture")["capture.kernels"], "ok")  # steps from 1
        self.folder.run("capture", [CAPTURE_OWN], report([window("step", kernels=24,
                                                                 occurrences=10)]))
        self.assertEqual(self.statuses("capture")["capture.kernels"], "FAILED")

    def test_consecutive_starts(self):
        self.assertEqual(tec.consecutive_starts([1, 2, 3, 4, 1, 2], 3, 6), [0])
        self.assertEqual(tec.consecutive_starts([1, 2, 3, 4, 1, 2], 3, 7), [3])
        self.assertEqual(tec.consecutive_starts([1, 2, 3, 4, 1, 2, 3], 3, 6), [0, 4])
        self.assertEqual(tec.consecutive_starts([1, 2], 3, 3), [])


def training(steps, loop_ms, mode="plain", wall_ms=None):
    return {"program": "training_loop", "pid": PID, "mode": mode, "steps": steps,
            "loop_ms": loop_ms, "profiled_ms": None, "wall_ms": wall_ms or loop_ms + 3000}


class Cost(Base):
    def write_runs(self, untraced, traced, profiler_ms, steps=(500, 500, 500), fail=None):
        for i, (u, t, p) in enumerate(zip(untraced, traced, profiler_ms), start=1):
            cost = {"untraced_ms": u, "traced_ms": t, "untraced": {"code": 0},
                    "traced": {"code": 0}}
            self.folder.run(f"cost-{i}", [training(steps[i - 1], u - 3000),
                                          training(steps[i - 1], t - 3000)],
                            report([], cost=cost), exit_code=1 if fail == i else 0,
                            wall_ms=u + t + 50)
            self.folder.run(f"profiler-{i}", [training(500, p - 3500, mode="profiler")],
                            wall_ms=p)

    def test_medians_and_ratios_of_the_three_ways(self):
        self.write_runs([5000, 5500, 4500], [6000, 6500, 6250], [10000, 10500, 9500])
        rows = self.folder.rows("cost")
        self.assertEqual(list(rows), ["cost.process_ms", "cost.loop_ms"])
        self.assertEqual(rows["cost.process_ms"][2:], (
            "plain 5000.0, traced 6250.0, profiler 10000.0; traced/plain 1.250, "
            "profiler/plain 2.000", "info"))
        self.assertEqual(rows["cost.loop_ms"][2], (
            "plain 2000.0, traced 3250.0, profiler 6500.0; traced/plain 1.625, "
            "profiler/plain 3.250"))

    def test_a_failed_run_or_unequal_steps_fail(self):
        self.write_runs([5000] * 3, [6000] * 3, [9000] * 3, steps=(500, 500, 400), fail=2)
        rows = self.folder.rows("cost")
        self.assertEqual(rows["cost.runs"][2:], ("cost-2 exit 1", "FAILED"))
        self.assertEqual(rows["cost.steps"][2:], ("[400, 500]", "FAILED"))
        self.assertEqual(rows["cost.process_ms"][3], "info")

    def test_runs_are_found_by_number_not_by_name_order(self):
        for i in (1, 2, 10):
            self.folder.write(f"cost-{i}.exit", "0\n")
        self.folder.write("cost-x.exit", "0\n")
        self.assertEqual(tec.repeats(self.folder.path, "cost"), ["cost-1", "cost-2", "cost-10"])

    def test_no_runs_fail(self):
        self.assertEqual(self.folder.rows("cost")["cost"][2:],
                         ("cannot check: no cost-N or profiler-N runs", "FAILED"))


TIME_V = """\tCommand being timed: "streamlab trace --json long.json -- python training_loop.py"
\tElapsed (wall clock) time (h:mm:ss or m:ss): 5:03.21
\tMaximum resident set size (kbytes): 2097152
\tExit status: 0
"""


class Long(Base):
    def test_the_delay_is_the_trace_wall_less_the_programs(self):
        self.folder.run("long", [training(250000, 299000, wall_ms=303000.0)],
                        report([window("step", kernels=10, occurrences=7000)]), wall_ms=305500.0)
        self.folder.write("long.time", TIME_V)
        rows = self.folder.rows("long")
        self.assertEqual(rows["long.delay"][2:], ("2.50 s (305.50 - 303.00)", "ok"))
        self.assertEqual(rows["long.figures"][2], (
            "7000 steps in the report; records 1000, dropped 0; time -v: wall 303.21 s, "
            "max RSS 2048 MiB"))

    def test_a_delay_over_ten_seconds_is_flagged(self):
        self.folder.run("long", [training(250000, 299000, wall_ms=300000.0)], report([]),
                        wall_ms=310500.0)
        rows = self.folder.rows("long")
        self.assertEqual(rows["long.delay"][2:], ("10.50 s (310.50 - 300.00)", "FAILED"))
        self.assertIn("no 'step' window", rows["long.figures"][2])
        self.assertIn("time -v: wall - s, max RSS -", rows["long.figures"][2])

    def test_time_v_with_hours(self):
        self.folder.write("x.time", "Elapsed (wall clock) time (h:mm:ss or m:ss): 1:02:03.5\n")
        self.assertEqual(tec.time_v(self.folder.path, "x"), (3723.5, None))
        self.folder.write("x.time", "Elapsed (wall clock) time (h:mm:ss or m:ss): 0:07.25\n")
        self.assertEqual(tec.time_v(self.folder.path, "x"), (7.25, None))

    def test_rows_made_before_a_missing_report_are_kept(self):
        self.folder.run("long", [training(10, 9000, wall_ms=12000.0)], wall_ms=13000.0)
        rows = self.folder.rows("long")
        self.assertEqual([r[3] for r in rows.values()], ["ok", "ok", "FAILED"])
        self.assertEqual(rows["long"][2], "cannot check: long.json: No such file or directory")


class Reading(Base):
    def test_own_figures_are_the_json_lines_with_a_program_key(self):
        self.folder.write("x.stdout", 'loss 0.1\n{"not": "figures"}\n{"program": "a", "n": 1}\n'
                                      '{broken\n{"program": "b", "n": 2}\n\n')
        self.assertEqual([f["program"] for f in tec.all_own_figures(self.folder.path, "x")],
                         ["a", "b"])
        self.assertEqual(tec.own_figures(self.folder.path, "x")["n"], 2)

    def test_a_report_without_a_field_fails_in_one_row_naming_it(self):
        value = report([window("last", kernels=2000)])
        for w in value["overlap"]["windows"]:
            del w["kernels"]
        self.folder.run("small", [SMALL_OWN], value)
        rows = self.folder.rows("small")
        self.assertEqual(rows["small"][2:], ("cannot check: KeyError 'kernels'", "FAILED"))

    def test_a_report_that_is_not_json(self):
        self.folder.run("small", [SMALL_OWN])
        self.folder.write("small.json", "{")
        self.assertIn("small.json: not JSON", self.folder.rows("small")["small"][2])


class Command(Base):
    def command(self, *args):
        done = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                              check=False)
        return done.returncode, done.stdout, done.stderr

    def test_exit_0_when_every_check_passes_1_when_one_fails(self):
        self.folder.run("capture", [CAPTURE_OWN], report([window("step", kernels=23,
                                                                 occurrences=10)]))
        code, out, _ = self.command(self.folder.path, "--only", "capture")
        self.assertEqual(code, 0, out)
        lines = out.splitlines()
        self.assertEqual(lines[0].split(" | ")[0].strip(), "check")
        self.assertEqual(lines[-1], "3 rows, 0 FAILED")
        # Every row has the four columns, the status last.
        self.assertTrue(all(line.count(" | ") == 3 for line in lines[:-1]), out)
        code, out, _ = self.command(self.folder.path, "--only", "capture,crash")
        self.assertEqual(code, 1)
        self.assertEqual(out.splitlines()[-1], "4 rows, 1 FAILED: crash")

    def test_bad_arguments_exit_2(self):
        code, _, err = self.command(self.folder.path, "--only", "small,nope")
        self.assertEqual(code, 2)
        self.assertIn("unknown check(s) nope", err)
        code, _, err = self.command(os.path.join(self.folder.path, "missing"))
        self.assertEqual(code, 2)
        self.assertIn("not a folder", err)


RUNNER = os.path.join(HERE, "trace-examples.sh")
STAND_INS = os.path.join(HERE, "testdata", "trace-examples")


class Runner(Base):
    """scripts/trace-examples.sh end to end, with stand-ins for streamlab and PyTorch's
    Python (testdata/trace-examples/): the commands it runs, the files it writes, its exit."""

    def runner(self, *args, **env):
        log = os.path.join(self.folder.path, "standin.log")
        out = os.path.join(self.folder.path, "out")
        done = subprocess.run(
            ["bash", RUNNER, *args, out], capture_output=True, text=True, check=False,
            env=dict(os.environ, STREAMLAB=os.path.join(STAND_INS, "streamlab"),
                     PYTHON=os.path.join(STAND_INS, "python"), STANDIN_LOG=log,
                     PYTHONDONTWRITEBYTECODE="1", **env))
        calls = []
        if os.path.exists(log):
            with open(log, encoding="utf-8") as f:
                calls = f.read().splitlines()
        return done, out, calls

    def test_quick_runs_every_program_with_small_flags_and_checks_them(self):
        done, out, calls = self.runner("--quick")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        with open(os.path.join(out, "check.txt"), encoding="utf-8") as f:
            self.assertEqual(f.read().splitlines()[-1], "22 rows, 0 FAILED")
        traces = [c for c in calls if c.startswith("streamlab")]
        self.assertEqual(traces, [
            "streamlab trace --max-records 10000 --json small.json -- "
            f"{STAND_INS}/python {HERE}/trace-examples/small_kernels.py --kernels 20000",
            "streamlab trace --json ahead.json -- "
            f"{STAND_INS}/python {HERE}/trace-examples/cpu_ahead.py --steps 20 --warmup 2",
            "streamlab trace --json crash.json -- "
            f"{STAND_INS}/python {HERE}/trace-examples/crash_after_work.py",
            "streamlab trace --capture-range step --capture-count 10 --json capture.json -- "
            f"{STAND_INS}/python {HERE}/trace-examples/capture_loop.py",
            "streamlab trace --cost --json cost-1.json -- "
            f"{STAND_INS}/python {HERE}/trace-examples/training_loop.py --steps 50",
            "streamlab trace --json long.json -- "
            f"{STAND_INS}/python {HERE}/trace-examples/training_loop.py --seconds 10",
        ])
        programs = [c for c in calls if not c.startswith("streamlab")]
        self.assertIn("training_loop.py --steps 50 --profiler", programs)
        self.assertEqual(programs.count("training_loop.py --steps 50"), 2)  # --cost: twice
        with open(os.path.join(out, "crash.exit"), encoding="utf-8") as f:
            self.assertEqual(f.read(), "139\n")
        for run in ("small", "ahead", "crash", "capture", "cost-1", "profiler-1", "long"):
            for ext in ("stdout", "stderr", "exit", "wall_ns"):
                self.assertTrue(os.path.isfile(os.path.join(out, f"{run}.{ext}")), (run, ext))

    def test_a_failed_check_fails_the_runner_and_only_runs_what_it_names(self):
        done, out, calls = self.runner("--only", "small,cost", "--repeats", "2",
                                       "--cost-steps", "7", STANDIN_BREAK="small")
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("1 FAILED: small.last", done.stdout)
        self.assertEqual(sorted(n for n in os.listdir(out) if n.endswith(".exit")),
                         ["cost-1.exit", "cost-2.exit", "profiler-1.exit", "profiler-2.exit",
                          "small.exit"])
        self.assertIn("small_kernels.py", calls[1])
        self.assertEqual(len([c for c in calls if c.endswith("--steps 7 --profiler")]), 2)

    def test_bad_arguments_exit_2_before_anything_runs(self):
        for args in (["--repeats", "0"], ["--long-seconds"], ["--only", "small,nope"],
                     ["--frobnicate"]):
            done, out, calls = self.runner(*args)
            self.assertEqual(done.returncode, 2, args)
            self.assertTrue(done.stderr.startswith("trace-examples.sh: "), done.stderr)
            self.assertEqual(calls, [], args)
            self.assertFalse(os.path.exists(out), args)


if __name__ == "__main__":
    unittest.main()
