"""Checks what `streamlab trace` reported of scripts/trace-examples/ddp_late_rank.py under
torchrun on two GPUs against what the ranks measured of themselves (issue 27). Reads the folder
scripts/trace-examples-ddp.sh wrote and prints one row per check: name | expected | measured |
status (ok, FAILED, or info for a figure that is shown and not judged). Exit 1 when a check
FAILED, 2 on bad arguments.

    python3 trace_ddp_check.py OUTPUT_FOLDER [--only late,buckets]

The folder holds, for each run NAME: NAME.stdout (torchrun's, which the ranks share: each
rank's own figures are one JSON object with "program": "ddp_late_rank" on a line of its own),
NAME.stderr (the trace's report), NAME.exit, NAME.wall_ns and NAME.json (`streamlab trace
--json`). The runs: late (--bucket-cap-mb 25, rank 1 late; a shape where the all-reduces set
the pace), bucket-1 and bucket-1000 (--bucket-cap-mb 1 and 1000, --late-ms 0).

The checks, every run: it exited 0; its ranks ran with NCCL_NVLS_ENABLE=0 (the project's
rule: NVLink multicast off); the report holds each rank's process (the pids the ranks
print) and one more, torchrun's launcher (its command line names torchrun), which did no GPU
work: no window is its.
- late: one straggler (none when the ranks say late_ms 0): the process of the rank that says
  it is late_rank, on the GPU it says it used; late in as many collectives as the steps the
  ranks list as late (late_steps: the timed steps, counted after the warm-up, in which that
  rank slept), +-1: the weights' broadcast at DDP's construction or a warm-up step may add
  one where that rank happened to start last; by a median within 5% of late_ms. A
  "late_rank" finding across windows. Shown beside them: the lateness the program timed
  itself (on each rank that was on time, the median of its first all-reduce's time in the
  late steps less that in the others: how long it waited), and how long the others waited in
  all.
- buckets: in each rank's window with collectives, the "step" range's (or, where either run
  lacks one for a rank, the "rest" part's, in both runs), hidden_ms + exposed_ms =
  collective_ms, hidden_share = hidden_ms / collective_ms, none below 0; the share of the
  collectives' time under compute (summed over the ranks) higher with the smaller
  --bucket-cap-mb: its buckets are all-reduced while the backward goes on, where the one
  large bucket starts after it. Shown: each rank's figures, window_if_hidden_ms beside the
  window's span, the buckets each run all-reduced a step, and the median step time beside
  the exposed time per step.

Every read of the report's JSON goes through one small function per field (here and in
trace_examples_check.py), so a change of the report's shape is one edit.
"""
import json
import os
import sys

from trace_examples_check import check as check_of
from trace_examples_check import (Missing, across_window_findings, finding_rule, fmt, info,
                                  launched_span_ms, median, process_pid, processes, read_report,
                                  read_text, row, run_checks, run_exit, window_occurrences,
                                  window_part, window_process, window_range, windows)

PROGRAM = "ddp_late_rank"
LATE_TOLERANCE = 0.05
LATE_IN_SLACK = 1
COMM_SLACK_MS = 0.01
BUCKET_RUNS = ("bucket-1", "bucket-1000")
CHECKS = ["late", "buckets"]


# --- The report's fields, one function each (the others are trace_examples_check's). ----

def process_args(process):
    return process["args"]


def stragglers(report):
    return report["overlap"]["stragglers"]


def straggler_pid(straggler):
    return straggler["pid"]


def straggler_device(straggler):
    return straggler["device"]


def straggler_late_in(straggler):
    return straggler["late_in"]


def straggler_of(straggler):
    return straggler["of"]


def straggler_median_late_ms(straggler):
    return straggler["median_late_ms"]


def straggler_others_waited_ms(straggler):
    return straggler["others_waited_ms"]


def straggler_matched_by(straggler):
    return straggler["matched_by"]


def window_device(window):
    return window["window"]["device"]


def window_comm(window):
    """The window's collectives' figures; None for a window without collectives."""
    return window.get("comm")


def comm_collective_ms(comm):
    return comm["collective_ms"]


def comm_hidden_ms(comm):
    return comm["hidden_ms"]


def comm_exposed_ms(comm):
    return comm["exposed_ms"]


def comm_hidden_share(comm):
    return comm["hidden_share"]


def comm_window_if_hidden_ms(comm):
    return comm["window_if_hidden_ms"]


# --- The ranks' own figures. ------------------------------------------------------------

def json_objects(line):
    """The JSON objects on a line: each from a "{" that starts one, whatever stands around
    them (a prefix such as torchrun's "[rank0]:", another rank's line written into it)."""
    decoder = json.JSONDecoder()
    found, at = [], line.find("{")
    while at >= 0:
        try:
            value, end = decoder.raw_decode(line, at)
        except json.JSONDecodeError:
            at = line.find("{", at + 1)
            continue
        found.append(value)
        at = line.find("{", end)
    return found


def rank_figures(folder, run):
    """Each rank's own figures, in rank order: the program's JSON objects on the run's
    stdout. Missing unless every rank of the world size printed one."""
    found = {}
    for line in read_text(folder, f"{run}.stdout").splitlines():
        for value in json_objects(line):
            if isinstance(value, dict) and value.get("program") == PROGRAM:
                found[value["rank"]] = value
    if not found:
        raise Missing(f"{run}.stdout: no line of the ranks' own figures")
    world = max(f["world_size"] for f in found.values())
    if sorted(found) != list(range(world)):
        raise Missing(f"{run}.stdout: figures of ranks {sorted(found)}, of a world of {world}")
    return [found[r] for r in range(world)]


def late_rank_figures(ranks, run):
    """The figures of the rank that says it is the late one."""
    for figures in ranks:
        if figures["rank"] == figures["late_rank"]:
            return figures
    raise Missing(f"{run}.stdout: no rank says it is late_rank {ranks[0]['late_rank']}")


def waited_ms(figures):
    """How long this rank's first all-reduce of the late steps took, at the median, beyond
    that of the other steps; None where either set of steps has no figure."""
    late = set(figures["late_steps"])
    times = figures["first_allreduce_ms"]
    in_late = [t for i, t in enumerate(times) if i in late and t is not None]
    on_time = [t for i, t in enumerate(times) if i not in late and t is not None]
    if not in_late or not on_time:
        return None
    return median(in_late) - median(on_time)


# --- Helpers over the report. -----------------------------------------------------------

def is_torchrun(args):
    return any(os.path.basename(a) == "torchrun" or "torch.distributed.run" in a for a in args)


def launcher_rows(run, report, ranks):
    """The ranks' processes are in the report, and one more: torchrun's, with no window."""
    rows = []
    rank_pids = [f["pid"] for f in ranks]
    found = {process_pid(p): p for p in processes(report)}
    missing = [pid for pid in rank_pids if pid not in found]
    rows.append(row(f"{run}.processes", f"the ranks' pids {', '.join(map(str, rank_pids))}",
                    f"pids {', '.join(map(str, sorted(found)))}"
                    + (f"; missing {', '.join(map(str, missing))}" if missing else ""),
                    not missing))
    others = [p for pid, p in found.items() if pid not in rank_pids]
    if len(others) != 1:
        rows.append(row(f"{run}.launcher", "one more process: torchrun's, no window",
                        f"{len(others)} more processes", False))
        return rows
    launcher = others[0]
    pid, args = process_pid(launcher), process_args(launcher)
    own = [w for w in windows(report) if window_process(w) == pid]
    shown = " ".join(os.path.basename(a) for a in args)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    rows.append(row(f"{run}.launcher", "one more process: torchrun's, no window",
                    f"pid {pid} ({shown}), {len(own)} window(s)",
                    is_torchrun(args) and not own))
    return rows


def common_rows(folder, run, rows):
    """The run's exit code and its processes; returns its ranks' figures and report."""
    code = run_exit(folder, run)
    rows.append(row(f"{run}.exit", 0, code, code == 0))
    ranks = rank_figures(folder, run)
    nvls = sorted({str(f.get("nccl_nvls_enable")) for f in ranks})
    rows.append(row(f"{run}.nvls", "NCCL_NVLS_ENABLE=0 in every rank",
                    f"NCCL_NVLS_ENABLE {', '.join(nvls)}", nvls == ["0"]))
    report = read_report(folder, run)
    rows.extend(launcher_rows(run, report, ranks))
    return ranks, report


def comm_windows(report, ranks, part):
    """Each rank's windows with collectives of `part`: "step" (the NVTX range) or "rest";
    a list of (rank figures, window) in rank order."""
    chosen = []
    for figures in ranks:
        for w in windows(report):
            if window_process(w) != figures["pid"] or window_comm(w) is None:
                continue
            if part == "step" and (window_part(w), window_range(w)) == ("range", "step"):
                chosen.append((figures, w))
            elif part == "rest" and window_part(w) == "rest":
                chosen.append((figures, w))
    return chosen


def ranks_with(report, ranks, part):
    return {figures["rank"] for figures, _ in comm_windows(report, ranks, part)}


# --- The checks: each appends rows (name, expected, measured, status) to `rows`. ----------

def check_late(folder, rows):
    ranks, report = common_rows(folder, "late", rows)
    late = late_rank_figures(ranks, "late")
    found = stragglers(report)
    described = "; ".join(f"pid {straggler_pid(s)} GPU {straggler_device(s)}, late in "
                          f"{straggler_late_in(s)}" for s in found) or "none"
    if late["late_ms"] <= 0:
        rows.append(row("late.stragglers", "none (late_ms 0)", described, not found))
        return
    rows.append(row("late.stragglers", "exactly one", f"{len(found)}: {described}",
                    len(found) == 1))
    if not found:
        return
    # The late rank's own entry where there is one; else the first, which the rows fail.
    straggler = next((s for s in found if straggler_pid(s) == late["pid"]), found[0])
    pid = straggler_pid(straggler)
    named = next((f"rank {f['rank']}" for f in ranks if f["pid"] == pid), "no rank's")
    rows.append(row("late.straggler", f"pid {late['pid']} (rank {late['rank']})",
                    f"pid {pid} ({named})", pid == late["pid"]))
    device = straggler_device(straggler)
    rows.append(row("late.device", f"GPU {late['device']} (rank {late['rank']}'s own)",
                    f"GPU {device}", device == late["device"]))
    steps = len(late["late_steps"])
    late_in, of = straggler_late_in(straggler), straggler_of(straggler)
    rows.append(row("late.late_in",
                    f"{steps} +-{LATE_IN_SLACK} (late steps of {late['steps']} timed, after "
                    f"{late['warmup']} warm-up)",
                    f"{late_in} of {of} collectives, matched by {straggler_matched_by(straggler)}",
                    abs(late_in - steps) <= LATE_IN_SLACK))
    want, got = late["late_ms"], straggler_median_late_ms(straggler)
    timed = [f"rank {f['rank']} {fmt(waited_ms(f))} ms" for f in ranks if f is not late]
    rows.append(row("late.median_ms", f"{fmt(want)} ms +-{LATE_TOLERANCE:.0%}",
                    f"{fmt(got)} ms ({got / want:.4f}x); the program's own: waited "
                    + ", ".join(timed),
                    abs(got / want - 1) <= LATE_TOLERANCE))
    rows.append(info("late.others_waited", f"about {steps} x {fmt(want, 1)} ms "
                     f"= {fmt(steps * want, 1)} ms",
                     f"{fmt(straggler_others_waited_ms(straggler), 1)} ms"))
    where = [finding_rule(f) for f in across_window_findings(report)]
    rows.append(row("late.finding", "a late_rank finding across windows",
                    ", ".join(where) or "none", "late_rank" in where))


def comm_rows(run, chosen, part):
    """Each rank's figures (info), and the sums that hold by definition."""
    rows = []
    broken = []
    for figures, w in chosen:
        comm = window_comm(w)
        collective, hidden = comm_collective_ms(comm), comm_hidden_ms(comm)
        exposed, share = comm_exposed_ms(comm), comm_hidden_share(comm)
        span = launched_span_ms(w)
        rows.append(info(f"{run}.rank{figures['rank']}",
                         f"{part} window, GPU {window_device(w)}, "
                         f"{window_occurrences(w)} occurrence(s)",
                         f"collective {fmt(collective)} ms, hidden {fmt(hidden)} "
                         f"(share {fmt(share)}), exposed {fmt(exposed)}; span {fmt(span)} ms, "
                         f"if hidden {fmt(comm_window_if_hidden_ms(comm))} ms"))
        slack = COMM_SLACK_MS + 1e-3 * collective
        if min(hidden, exposed) < 0 or not 0 <= share <= 1:
            broken.append(f"rank {figures['rank']}: hidden {fmt(hidden)}, exposed "
                          f"{fmt(exposed)}, share {fmt(share)}: below 0 or a share over 1")
        elif abs(hidden + exposed - collective) > slack:
            broken.append(f"rank {figures['rank']}: {fmt(hidden)} + {fmt(exposed)} != "
                          f"{fmt(collective)}")
        elif collective > 0 and abs(share - hidden / collective) > 1e-3:
            broken.append(f"rank {figures['rank']}: share {fmt(share)} != "
                          f"{fmt(hidden / collective)}")
    rows.append(row(f"{run}.comm_sums",
                    "hidden + exposed = collective, share = hidden / collective, none below 0",
                    "; ".join(broken) or "so in every rank's window", not broken))
    return rows


def summed_share(chosen):
    collective = sum(comm_collective_ms(window_comm(w)) for _, w in chosen)
    hidden = sum(comm_hidden_ms(window_comm(w)) for _, w in chosen)
    return hidden / collective if collective > 0 else None


def exposed_per_step(chosen):
    """The exposed time per occurrence of the window, at the median over the ranks."""
    return median([comm_exposed_ms(window_comm(w)) / max(window_occurrences(w), 1)
                   for _, w in chosen])


class BucketRun:
    """One bucket run's ranks, report and bucket cap, and its windows with collectives."""

    def __init__(self, name, ranks, report):
        self.name, self.ranks, self.report = name, ranks, report
        self.cap = ranks[0]["bucket_cap_mb"]
        self.chosen = []

    def median_step_ms(self):
        return median([median(f["step_ms"]) for f in self.ranks])


def check_buckets(folder, rows):
    runs = []
    for name in BUCKET_RUNS:
        ranks, report = common_rows(folder, name, rows)
        caps = sorted({f["bucket_cap_mb"] for f in ranks})
        late = sorted({f["late_ms"] for f in ranks})
        rows.append(row(f"{name}.program", f"{len(ranks)} ranks, one bucket_cap_mb, late_ms 0",
                        f"bucket_cap_mb {caps}, late_ms {late}",
                        len(caps) == 1 and late == [0]))
        runs.append(BucketRun(name, ranks, report))
    # The step range's windows where both runs have one with collectives for every rank;
    # else the rest of each process.
    every = [{f["rank"] for f in run.ranks} for run in runs]
    part = "step"
    if any(ranks_with(run.report, run.ranks, "step") != want for run, want in zip(runs, every)):
        part = "rest"
    complete = True
    for run, want in zip(runs, every):
        run.chosen = comm_windows(run.report, run.ranks, part)
        have = {f["rank"] for f, _ in run.chosen}
        if have != want:
            rows.append(row(f"{run.name}.windows", f"a {part} window with collectives a rank",
                            f"ranks {sorted(have)}", False))
            complete = False
            continue
        rows.extend(comm_rows(run.name, run.chosen, part))
    if not complete:
        return
    small, large = sorted(runs, key=lambda run: run.cap)
    small_share, large_share = summed_share(small.chosen), summed_share(large.chosen)
    rows.append(row("buckets.hidden_share",
                    f"{fmt(small.cap, 0)} MB > {fmt(large.cap, 0)} MB (small buckets are "
                    "all-reduced during the backward, one large one after it)",
                    f"{fmt(small_share)} vs {fmt(large_share)} ({part} windows, the ranks "
                    "summed)",
                    small_share is not None and large_share is not None
                    and small_share > large_share))
    rows.append(info("buckets.count", "buckets all-reduced in a step (the program's comm hook; "
                     "sizes as DDP logged them)",
                     "; ".join(f"{fmt(run.cap, 0)} MB: {run.ranks[0]['buckets']} "
                               f"{sizes_mib(run.ranks[0]['bucket_sizes'])}"
                               for run in (small, large))))
    rows.append(info("buckets.step_ms", "the program's median step, beside the report's "
                     "exposed time a step",
                     "; ".join(f"{fmt(run.cap, 0)} MB: step {fmt(run.median_step_ms())} ms, "
                               f"exposed {fmt(exposed_per_step(run.chosen))}"
                               for run in (small, large))))


def sizes_mib(sizes):
    if not sizes:
        return "(sizes not logged)"
    return "(" + ", ".join(f"{s / 2**20:.0f}" for s in sizes) + " MiB)"


RUNNERS = {"late": check_late, "buckets": check_buckets}


def check(folder, name):
    """The rows of one of this file's checks (see trace_examples_check.check)."""
    return check_of(folder, name, RUNNERS)


def main(argv):
    description = __doc__.split("\n")[0]
    return run_checks(argv, description, CHECKS, RUNNERS, "scripts/trace-examples-ddp.sh")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
