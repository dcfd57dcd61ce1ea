"""Tests of trace_ddp_check.py on made-up output folders (reports in the shape `streamlab
trace --json` writes for torchrun's launcher and two ranks, beside the ranks' own figures),
and of scripts/trace-examples-ddp.sh with stand-ins for streamlab, torchrun, PyTorch's Python
and nvidia-smi.

Run from the repository root: python3 -m unittest discover -s scripts -p 'test_*.py'
"""
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import trace_ddp_check as tdc  # noqa: E402
from run_folder_fixture import RunFolder, RunFolderTest  # noqa: E402

SCRIPT = os.path.join(HERE, "trace_ddp_check.py")
LAUNCHER = 5000
PIDS = (5001, 5002)
LAUNCHER_ARGS = ["/opt/torch/.venv/bin/python", "/opt/torch/.venv/bin/torchrun", "--standalone",
                 "--nproc-per-node", "2", "ddp_late_rank.py", "--bucket-cap-mb", "25"]


def rank(r, late_ms=20.0, cap=25.0, steps=10, late_every=2, late_rank=1, buckets=4,
         step_ms=None, first=None):
    """Rank r's own figures: steps 1, 3, 5, ... late; its first all-reduce 1 ms, 21 ms in a
    late step where it waited for the late rank."""
    late_steps = [i for i in range(steps) if late_ms > 0 and (i + 1) % late_every == 0]
    waits = r != late_rank
    return {"program": "ddp_late_rank", "rank": r, "world_size": 2, "pid": PIDS[r],
            "local_rank": r, "device": r, "gpu": "H100", "nccl_nvls_enable": "0",
            "steps": steps, "warmup": 2,
            "late_rank": late_rank, "late_ms": late_ms, "late_every": late_every,
            "late_steps": late_steps, "bucket_cap_mb": cap, "buckets": buckets,
            "bucket_sizes": [1 << 28] * buckets, "weights_mib": 1024.0,
            "step_ms": step_ms or [6.0 + (late_ms if i in late_steps else 0.0)
                                   for i in range(steps)],
            "first_allreduce_ms": first or [1.0 + (late_ms if waits and i in late_steps else 0.0)
                                            for i in range(steps)],
            "wall_ms": 9000.0}


def comm(collective, exposed, span):
    hidden = collective - exposed
    return {"collective_ms": collective, "hidden_ms": hidden, "exposed_ms": exposed,
            "hidden_share": hidden / collective, "window_if_hidden_ms": span - exposed}


def window(pid, device, part="range", range_name="step", occurrences=10, span_ms=200.0,
           figures=None):
    value = {"window": {"process": pid, "device": device, "part": part, "range": range_name,
                        "occurrences": occurrences},
             "span_ms": span_ms, "kernels": 100, "copies": 0, "memsets": 0,
             "ran_during": {"span_ms": 0.0, "kernels": 0}, "findings": []}
    if figures is not None:
        value["comm"] = figures
    return value


def straggler(pid=PIDS[1], device=1, late_in=5, of=52, late_ms=20.2, waited=101.0):
    return {"pid": pid, "device": device, "late_in": late_in, "of": of,
            "median_late_ms": late_ms, "others_waited_ms": waited, "matched_by": "order"}


def report(windows=(), stragglers=(), across=("late_rank",), launcher_args=LAUNCHER_ARGS,
           extra_processes=(), pids=PIDS):
    procs = [{"pid": LAUNCHER, "args": list(launcher_args), "ending": {"how": "exit"}}]
    procs += [{"pid": pid, "args": ["/opt/torch/.venv/bin/python", "-u", "ddp_late_rank.py"],
               "ending": {"how": "exit"}} for pid in pids]
    procs += [{"pid": pid, "args": ["sh"], "ending": {"how": "exit"}} for pid in extra_processes]
    return {"exit_code": 0, "header": [], "records": 1000, "dropped": 0, "processes": procs,
            "overlap": {"windows": list(windows), "stragglers": list(stragglers),
                        "across_windows": [{"rule": r, "count": 5, "cost_ms": 100.0}
                                           for r in across],
                        "ranges_whole": []}}


def rank_windows(collective=24.0, exposed=3.0, part="range", range_name="step"):
    """A whole window and a window with collectives for each rank."""
    found = []
    for r, pid in enumerate(PIDS):
        found.append(window(pid, r, part="whole", range_name=None))
        found.append(window(pid, r, part=part, range_name=range_name,
                            figures=comm(collective, exposed, 200.0)))
    return found


class Folder(RunFolder):
    """A temporary output folder, written the way scripts/trace-examples-ddp.sh writes it."""

    def __init__(self):
        super().__init__("trace-ddp-check-", tdc.check)

    def run(self, name, ranks, report_value=None, exit_code=0, stdout=None):
        """Run `name`'s files: stdout with each rank's figures on a line (among torchrun's
        own lines), its exit code and wall time, and its report."""
        if stdout is None:
            stdout = "W1127 torchrun: Setting OMP_NUM_THREADS\n" + "".join(
                json.dumps(r) + "\n" for r in ranks)
        self.write_run(name, stdout, exit_code, 9000000000, report_value)


class Base(RunFolderTest):
    def make_folder(self):
        return Folder()


LATE_RANKS = [rank(0), rank(1)]


class Late(Base):
    def late(self, stragglers=(straggler(),), ranks=LATE_RANKS, **kwargs):
        self.folder.run("late", ranks, report(rank_windows(), stragglers, **kwargs))
        return self.folder.rows("late")

    def test_the_late_rank_named_within_the_bounds_passes(self):
        rows = self.late()
        self.assertEqual({k: r[3] for k, r in rows.items()}, {
            "late.exit": "ok", "late.nvls": "ok", "late.processes": "ok", "late.launcher": "ok",
            "late.stragglers": "ok", "late.straggler": "ok", "late.device": "ok",
            "late.late_in": "ok", "late.median_ms": "ok", "late.others_waited": "info",
            "late.finding": "ok"})
        self.assertEqual(rows["late.late_in"][1:3], (
            "5 +-1 (late steps of 10 timed, after 2 warm-up)",
            "5 of 52 collectives, matched by order"))
        self.assertEqual(rows["late.median_ms"][1:3], (
            "20.000 ms +-5%",
            "20.200 ms (1.0100x); the program's own: waited rank 0 20.000 ms"))
        self.assertEqual(rows["late.others_waited"][1:3], (
            "about 5 x 20.0 ms = 100.0 ms", "101.0 ms"))
        self.assertEqual(rows["late.straggler"][1:3], ("pid 5002 (rank 1)", "pid 5002 (rank 1)"))

    def test_the_wrong_rank_or_gpu_fails(self):
        rows = self.late(stragglers=[straggler(pid=PIDS[0], device=0)])
        self.assertEqual(rows["late.straggler"][2:], ("pid 5001 (rank 0)", "FAILED"))
        self.assertEqual(rows["late.device"][2:], ("GPU 0", "FAILED"))
        rows = self.late(stragglers=[straggler(device=0)])
        self.assertEqual((rows["late.straggler"][3], rows["late.device"][3]), ("ok", "FAILED"))
        rows = self.late(stragglers=[straggler(pid=LAUNCHER)])
        self.assertEqual(rows["late.straggler"][2:], ("pid 5000 (no rank's)", "FAILED"))

    def test_rank_zero_late_is_named_by_its_own_figures(self):
        ranks = [rank(0, late_rank=0), rank(1, late_rank=0)]
        rows = self.late(stragglers=[straggler(pid=PIDS[0], device=0)], ranks=ranks)
        self.assertEqual((rows["late.straggler"][3], rows["late.device"][3]), ("ok", "ok"))
        self.assertIn("waited rank 1 20.000 ms", rows["late.median_ms"][2])

    def test_none_or_two_stragglers_fail(self):
        rows = self.late(stragglers=[])
        self.assertEqual(rows["late.stragglers"][2:], ("0: none", "FAILED"))
        self.assertNotIn("late.straggler", rows)
        rows = self.late(stragglers=[straggler(), straggler(pid=PIDS[0], device=0, late_in=1)])
        self.assertEqual(rows["late.stragglers"][2:], (
            "2: pid 5002 GPU 1, late in 5; pid 5001 GPU 0, late in 1", "FAILED"))
        # The late rank's entry is the one judged, wherever it stands in the list.
        rows = self.late(stragglers=[straggler(pid=PIDS[0], device=0, late_in=1), straggler()])
        self.assertEqual((rows["late.straggler"][3], rows["late.late_in"][3]), ("ok", "ok"))

    def test_late_in_within_one_of_the_late_steps(self):
        for late_in, status in ((4, "ok"), (6, "ok"), (3, "FAILED"), (7, "FAILED")):
            rows = self.late(stragglers=[straggler(late_in=late_in)])
            self.assertEqual(rows["late.late_in"][3], status, late_in)

    def test_the_median_within_five_percent(self):
        for late_ms, status in ((20.99, "ok"), (19.01, "ok"), (21.01, "FAILED"),
                                (18.99, "FAILED"), (1.1, "FAILED")):
            rows = self.late(stragglers=[straggler(late_ms=late_ms)])
            self.assertEqual(rows["late.median_ms"][3], status, late_ms)

    def test_no_late_rank_finding_fails(self):
        rows = self.late(across=())
        self.assertEqual(rows["late.finding"][2:], ("none", "FAILED"))
        rows = self.late(across=("cpu_ahead",))
        self.assertEqual(rows["late.finding"][2:], ("cpu_ahead", "FAILED"))

    def test_no_lateness_planted_wants_no_straggler(self):
        ranks = [rank(0, late_ms=0.0), rank(1, late_ms=0.0)]
        rows = self.late(stragglers=[], ranks=ranks)
        self.assertEqual(rows["late.stragglers"][1:], ("none (late_ms 0)", "none", "ok"))
        rows = self.late(stragglers=[straggler()], ranks=ranks)
        self.assertEqual(rows["late.stragglers"][3], "FAILED")

    def test_a_report_without_stragglers_fails_in_one_row_naming_it(self):
        value = report(rank_windows(), [straggler()])
        del value["overlap"]["stragglers"]
        self.folder.run("late", LATE_RANKS, value)
        rows = self.folder.rows("late")
        self.assertEqual(rows["late"][2:], ("cannot check: KeyError 'stragglers'", "FAILED"))
        self.assertEqual(rows["late.launcher"][3], "ok")  # the rows made before it are kept

    def test_nvlink_multicast_left_on_in_a_rank_fails(self):
        ranks = [rank(0), dict(rank(1), nccl_nvls_enable=None)]
        self.folder.run("late", ranks, report(rank_windows(), [straggler()]))
        self.assertEqual(self.folder.rows("late")["late.nvls"][2:],
                         ("NCCL_NVLS_ENABLE 0, None", "FAILED"))

    def test_a_failed_run_fails_its_exit_row(self):
        self.folder.run("late", LATE_RANKS, report(rank_windows(), [straggler()]), exit_code=1)
        self.assertEqual(self.statuses("late")["late.exit"], "FAILED")


class Launcher(Base):
    def rows(self, **kwargs):
        self.folder.run("late", LATE_RANKS, report(rank_windows(), [straggler()], **kwargs))
        return self.folder.rows("late")

    def test_the_launcher_is_named_by_its_command_line(self):
        self.assertEqual(self.rows()["late.launcher"][2], (
            "pid 5000 (python torchrun --standalone --nproc-per-node 2 ddp_late_rank.py "
            "--bucket-cap...), 0 window(s)"))
        args = ["/usr/bin/python3", "-m", "torch.distributed.run", "--nproc-per-node", "2"]
        self.assertEqual(self.rows(launcher_args=args)["late.launcher"][3], "ok")
        rows = self.rows(launcher_args=["/usr/bin/python3", "ddp_late_rank.py"])
        self.assertEqual(rows["late.launcher"][3], "FAILED")

    def test_a_launcher_with_a_window_fails(self):
        windows = rank_windows() + [window(LAUNCHER, 0, part="whole", range_name=None)]
        self.folder.run("late", LATE_RANKS, report(windows, [straggler()]))
        row = self.folder.rows("late")["late.launcher"]
        self.assertEqual(row[3], "FAILED")
        self.assertTrue(row[2].endswith(", 1 window(s)"), row[2])

    def test_a_rank_missing_or_another_process_fails(self):
        rows = self.rows(pids=PIDS[:1])
        self.assertEqual(rows["late.processes"][2:], ("pids 5000, 5001; missing 5002", "FAILED"))
        rows = self.rows(extra_processes=[6000])
        self.assertEqual(rows["late.launcher"][2:], ("2 more processes", "FAILED"))


def bucket_runs(folder, small=(24.0, 3.0), large=(24.0, 20.0), part="range", range_name="step",
                large_part=None):
    for name, cap, (collective, exposed), where in (
            ("bucket-1", 1.0, small, part), ("bucket-1000", 1000.0, large, large_part or part)):
        ranks = [rank(r, late_ms=0.0, cap=cap, buckets=8 if cap < 64 else 2) for r in (0, 1)]
        windows = rank_windows(collective, exposed, part=where,
                               range_name=range_name if where == "range" else None)
        folder.run(name, ranks, report(windows, across=()))


class Buckets(Base):
    def test_more_hidden_with_small_buckets_passes(self):
        bucket_runs(self.folder)
        rows = self.folder.rows("buckets")
        self.assertEqual([k for k, r in rows.items() if r[3] not in ("ok", "info")], [])
        self.assertEqual(rows["buckets.hidden_share"][2],
                         "0.875 vs 0.167 (step windows, the ranks summed)")
        self.assertEqual(rows["bucket-1.rank0"][1:3], (
            "step window, GPU 0, 10 occurrence(s)",
            "collective 24.000 ms, hidden 21.000 (share 0.875), exposed 3.000; span 200.000 ms, "
            "if hidden 197.000 ms"))
        self.assertEqual(rows["buckets.count"][2], "1 MB: 8 (256, 256, 256, 256, 256, 256, "
                                                   "256, 256 MiB); 1000 MB: 2 (256, 256 MiB)")
        self.assertEqual(rows["buckets.step_ms"][2],
                         "1 MB: step 6.000 ms, exposed 0.300; 1000 MB: step 6.000 ms, "
                         "exposed 2.000")

    def test_the_same_or_less_hidden_with_small_buckets_fails(self):
        for small in ((24.0, 20.0), (24.0, 22.0)):
            bucket_runs(self.folder, small=small)
            self.assertEqual(self.statuses("buckets")["buckets.hidden_share"], "FAILED", small)

    def test_rest_windows_where_a_run_has_no_step_window_with_collectives(self):
        bucket_runs(self.folder, part="range", large_part="rest")
        rows = self.folder.rows("buckets")
        # Both runs are read from the same part, so the figures compare.
        self.assertEqual(rows["bucket-1.windows"][2:], ("ranks []", "FAILED"))
        bucket_runs(self.folder, part="rest")
        rows = self.folder.rows("buckets")
        self.assertEqual(rows["buckets.hidden_share"][2:], (
            "0.875 vs 0.167 (rest windows, the ranks summed)", "ok"))
        self.assertTrue(rows["bucket-1000.rank1"][1].startswith("rest window, GPU 1"))

    def test_figures_that_do_not_add_up_fail(self):
        bucket_runs(self.folder)
        value = report(rank_windows(24.0, 3.0), across=())
        value["overlap"]["windows"][1]["comm"]["hidden_ms"] = 20.0
        value["overlap"]["windows"][3]["comm"]["hidden_share"] = 0.5
        self.folder.write("bucket-1.json", json.dumps(value))
        row = self.folder.rows("buckets")["bucket-1.comm_sums"]
        self.assertEqual(row[2:], ("rank 0: 20.000 + 3.000 != 24.000; rank 1: share 0.500 != "
                                   "0.875", "FAILED"))
        value = report(rank_windows(24.0, 30.0), across=())  # hidden -6: below 0
        self.folder.write("bucket-1.json", json.dumps(value))
        row = self.folder.rows("buckets")["bucket-1.comm_sums"]
        self.assertEqual(row[3], "FAILED")
        self.assertIn("rank 0: hidden -6.000, exposed 30.000, share -0.250", row[2])

    def test_a_lateness_or_two_caps_in_a_run_fail(self):
        bucket_runs(self.folder)
        ranks = [rank(0, late_ms=20.0, cap=1.0), rank(1, late_ms=20.0, cap=25.0)]
        self.folder.run("bucket-1", ranks, report(rank_windows(), across=()))
        self.assertEqual(self.folder.rows("buckets")["bucket-1.program"][2:], (
            "bucket_cap_mb [1.0, 25.0], late_ms [20.0]", "FAILED"))

    def test_a_missing_run_fails_in_one_row(self):
        bucket_runs(self.folder)
        os.remove(os.path.join(self.folder.path, "bucket-1000.json"))
        rows = self.folder.rows("buckets")
        self.assertEqual(rows["buckets"][2:], (
            "cannot check: bucket-1000.json: No such file or directory", "FAILED"))


class Reading(Base):
    def test_json_objects_around_prefixes_and_on_one_line(self):
        self.assertEqual(tdc.json_objects('[rank0]: {"a": 1}'), [{"a": 1}])
        self.assertEqual(tdc.json_objects('{"a": {"b": 2}}{"c": 3} tail'),
                         [{"a": {"b": 2}}, {"c": 3}])
        self.assertEqual(tdc.json_objects('{broken {"d": 4}'), [{"d": 4}])
        self.assertEqual(tdc.json_objects("no object"), [])

    def test_the_ranks_written_into_one_line_are_both_read(self):
        text = "starting\n" + json.dumps(rank(1)) + json.dumps(rank(0)) + "\n\n"
        self.folder.run("late", [], stdout=text)
        self.assertEqual([f["rank"] for f in tdc.rank_figures(self.folder.path, "late")], [0, 1])

    def test_a_rank_missing_is_said(self):
        self.folder.run("late", [rank(1)])
        with self.assertRaisesRegex(tdc.Missing, r"figures of ranks \[1\], of a world of 2"):
            tdc.rank_figures(self.folder.path, "late")
        self.folder.run("late", [])
        with self.assertRaisesRegex(tdc.Missing, "no line of the ranks' own figures"):
            tdc.rank_figures(self.folder.path, "late")

    def test_waited_is_the_median_late_less_the_median_on_time(self):
        figures = rank(0, steps=6, first=[1.0, 21.0, 1.5, 23.0, 2.0, 20.0])
        self.assertEqual(figures["late_steps"], [1, 3, 5])
        self.assertEqual(tdc.waited_ms(figures), 21.0 - 1.5)
        figures["first_allreduce_ms"][3] = None
        self.assertEqual(tdc.waited_ms(figures), 20.5 - 1.5)
        self.assertIsNone(tdc.waited_ms(rank(0, late_ms=0.0)))


class Command(Base):
    def command(self, *args):
        done = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                              check=False)
        return done.returncode, done.stdout, done.stderr

    def test_exit_0_when_every_check_passes_1_when_one_fails(self):
        bucket_runs(self.folder)
        code, out, _ = self.command(self.folder.path, "--only", "buckets")
        self.assertEqual(code, 0, out)
        lines = out.splitlines()
        self.assertEqual(lines[-1], "19 rows, 0 FAILED")
        self.assertTrue(all(line.count(" | ") == 3 for line in lines[:-1]), out)
        code, out, _ = self.command(self.folder.path)
        self.assertEqual(code, 1)
        self.assertEqual(out.splitlines()[-1], "20 rows, 1 FAILED: late")

    def test_bad_arguments_exit_2(self):
        code, _, err = self.command(self.folder.path, "--only", "late,nope")
        self.assertEqual(code, 2)
        self.assertIn("unknown check(s) nope", err)
        code, _, err = self.command(os.path.join(self.folder.path, "missing"))
        self.assertEqual(code, 2)
        self.assertIn("not a folder", err)


RUNNER = os.path.join(HERE, "trace-examples-ddp.sh")
STAND_INS = os.path.join(HERE, "testdata", "trace-examples")
PROGRAM = os.path.join(HERE, "trace-examples", "ddp_late_rank.py")


class Runner(Base):
    """scripts/trace-examples-ddp.sh end to end, with stand-ins for streamlab, torchrun,
    PyTorch's Python and nvidia-smi (testdata/trace-examples/): the commands it runs, the
    files it writes, its exit."""

    def runner(self, *args, **env):
        log = os.path.join(self.folder.path, "standin.log")
        out = os.path.join(self.folder.path, "out")
        environment = dict(os.environ, STREAMLAB=os.path.join(STAND_INS, "streamlab"),
                           PYTHON=os.path.join(STAND_INS, "python"), STANDIN_LOG=log,
                           PATH=os.path.join(STAND_INS, "bin") + os.pathsep + os.environ["PATH"],
                           PYTHONDONTWRITEBYTECODE="1", **env)
        environment.pop("CUDA_VISIBLE_DEVICES", None)
        environment.pop("PYTHONUNBUFFERED", None)  # the stand-in torchrun sets it, as torchrun
        environment.update(env)
        done = subprocess.run(["bash", RUNNER, *args, out], capture_output=True, text=True,
                              check=False, env=environment)
        calls = []
        if os.path.exists(log):
            with open(log, encoding="utf-8") as f:
                calls = f.read().splitlines()
        return done, out, calls

    def test_three_runs_under_torchrun_and_their_check(self):
        done, out, calls = self.runner("--steps", "6")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        with open(os.path.join(out, "check.txt"), encoding="utf-8") as f:
            self.assertEqual(f.read().splitlines()[-1], "30 rows, 0 FAILED")
        torchrun = os.path.join(STAND_INS, "torchrun")
        self.assertEqual([c for c in calls if c.startswith("streamlab")], [
            f"streamlab trace --json {name}.json --svg {name}.svg -- {torchrun} --standalone "
            f"--nproc-per-node 2 {PROGRAM} {flags} --steps 6"
            for name, flags in (
                ("late", "--bucket-cap-mb 25 --width 8192 --layers 4 --batch 16"),
                ("bucket-1", "--bucket-cap-mb 1 --late-ms 0"),
                ("bucket-1000", "--bucket-cap-mb 1000 --late-ms 0"))])
        # Two ranks a run.
        self.assertEqual(len([c for c in calls if c.startswith("ddp_late_rank.py")]), 6)
        for run in ("late", "bucket-1", "bucket-1000"):
            for ext in ("stdout", "stderr", "exit", "wall_ns", "json"):
                self.assertTrue(os.path.isfile(os.path.join(out, f"{run}.{ext}")), (run, ext))
        with open(os.path.join(out, "late.stdout"), encoding="utf-8") as f:
            self.assertEqual(len([line for line in f if line.startswith("{")]), 2)

    def test_the_runs_get_nvlink_multicast_off_whatever_the_caller_set(self):
        done, out, _ = self.runner("--only", "buckets", NCCL_NVLS_ENABLE="1")
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        rows = {r[0]: r for r in tdc.check(out, "buckets")}
        for run in ("bucket-1", "bucket-1000"):
            self.assertEqual(rows[f"{run}.nvls"][2:], ("NCCL_NVLS_ENABLE 0", "ok"))

    def test_a_wrong_straggler_fails_the_runner_and_only_named_runs_run(self):
        done, out, calls = self.runner("--only", "late", "--late-rank-ms", "2.5",
                                       STANDIN_BREAK="ddp")
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("2 FAILED: late.straggler, late.device", done.stdout)
        self.assertEqual(sorted(n for n in os.listdir(out) if n.endswith(".exit")),
                         ["late.exit"])
        self.assertTrue(calls[0].startswith("streamlab trace --late-rank-ms 2.5 --json late.json"),
                        calls[0])

    def test_fewer_than_two_gpus_exit_3_before_anything_runs(self):
        for env in ({"STANDIN_GPUS": "1"}, {"CUDA_VISIBLE_DEVICES": "0"},
                    {"TORCHRUN": "/nonexistent/torchrun"}):
            done, out, calls = self.runner(**env)
            self.assertEqual(done.returncode, 3, env)
            self.assertTrue(done.stderr.startswith("trace-examples-ddp.sh: "), done.stderr)
            self.assertEqual(calls, [], env)
            self.assertFalse(os.path.exists(out), env)
        done, _, _ = self.runner(STANDIN_GPUS="1")
        self.assertEqual(done.stderr, "trace-examples-ddp.sh: needs two GPUs, this machine "
                                      "shows 1\n")

    def test_bad_arguments_exit_2_before_anything_runs(self):
        for args in (["--steps", "0"], ["--limit-s"], ["--only", "late,nope"],
                     ["--late-rank-ms", "-1"], ["--frobnicate"]):
            done, out, calls = self.runner(*args)
            self.assertEqual(done.returncode, 2, args)
            self.assertTrue(done.stderr.startswith("trace-examples-ddp.sh: "), done.stderr)
            self.assertEqual(calls, [], args)
            self.assertFalse(os.path.exists(out), args)


if __name__ == "__main__":
    unittest.main()
