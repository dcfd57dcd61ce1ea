#!/usr/bin/env python3
"""Reads the trace files the injected recorder wrote for cuda-reference/trace_probe.cu and
checks what they must hold (scripts/inject-check.sh runs it on a GPU machine).

    python3 scripts/inject_check.py ok DIR      a full run: every phase, then Exit
    python3 scripts/inject_check.py abort DIR   the abort() run: the first phases, then Crashed (6)
    python3 scripts/inject_check.py segv DIR    the segv run, crashed before any periodic flush:
                                                the first phases, then Crashed (11)
    python3 scripts/inject_check.py two DIR     two runs in one shell: two files
    python3 scripts/inject_check.py capture DIR capture range "alloc" (count 1): that phase only
    python3 scripts/inject_check.py last DIR    --when-full last with a limit of 10: the last ones
    python3 scripts/inject_check.py show DIR    counts and notes only, nothing checked

Prints one line per check and exits 1 when one fails.
"""
import collections
import json
import pathlib
import sys

MIB64 = 64 << 20
failed = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failed.append(what)


def read(folder):
    """{pid: [line, ...]} for each <pid>.jsonl, its segments <pid>.<seq>.jsonl after it in seq
    order; a cut last line is skipped. SEGMENTS[pid] lists the segments' seqs."""
    files = {}
    def order(path):
        parts = path.name.split(".")
        return (int(parts[0]), -1 if len(parts) == 2 else int(parts[1]))
    for path in sorted(pathlib.Path(folder).glob("*.jsonl"), key=order):
        pid, seq = order(path)
        lines = []
        for text in path.read_text().splitlines():
            try:
                lines.append(json.loads(text))
            except json.JSONDecodeError:
                pass
        files.setdefault(pid, []).extend(lines)
        if seq >= 0:
            SEGMENTS.setdefault(pid, []).append(seq)
    return files


SEGMENTS = {}


def show(files):
    for pid, lines in files.items():
        counts = collections.Counter(l["type"] for l in lines)
        print(f"{pid}.jsonl: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        for l in lines:
            if l["type"] == "process":
                print(f"  cupti {l['cupti']} ({l['cupti_version']}), missing: {l.get('missing', [])}")
            if l["type"] in ("note", "dropped"):
                print(f"  {l['type']}: {l}")


def ranges(lines):
    """{name: (start, end)} of the NVTX ranges, paired by id."""
    starts = {l["id"]: l for l in lines if l["type"] == "marker" and l["phase"] == "start"}
    out = {}
    for l in lines:
        if l["type"] == "marker" and l["phase"] == "end" and l["id"] in starts:
            s = starts[l["id"]]
            out[s["name"]] = (s["time"], l["time"])
    return out


def copies(lines, src):
    return [l for l in lines if l["type"] == "copy" and l["src"] == src and l["bytes"] == MIB64]


def inside(span, window):
    return window is not None and window[0] <= span["start"] and span["end"] <= window[1]


def common(lines):
    check(lines[0]["type"] == "process", "the first line is the process")
    p = lines[0]
    check(p["cupti_version"] >= 130000, f"CUPTI 13 loaded ({p['cupti']}, {p['cupti_version']})")
    check(not p.get("missing"), f"every kind turned on (missing: {p.get('missing')})")
    named = {l["id"]: l["name"] for l in lines if l["type"] == "name" and l["object"] == "stream"}
    check(sorted(named.values()) == ["compute", "copy"], f"streams named through NVTX: {named}")
    streams = {l["stream"]: l for l in lines if l["type"] == "stream"}
    for sid, name in named.items():
        check(sid in streams and streams[sid]["non_blocking"], f"stream {name} ({sid}) non-blocking")
    r = ranges(lines)
    pageable, pinned = copies(lines, "pageable"), copies(lines, "pinned")
    check(len(pageable) == 1 and pageable[0]["direction"] == "host_to_device", "one pageable H2D copy of 64 MiB")
    check(len(pinned) == 1 and pinned[0]["direction"] == "host_to_device", "one pinned H2D copy of 64 MiB")
    check(pageable and inside(pageable[0], r.get("pageable")), "the pageable copy inside the 'pageable' range")
    check(pinned and inside(pinned[0], r.get("pinned")), "the pinned copy inside the 'pinned' range")
    check(pageable and named.get(pageable[0]["stream"]) == "copy", "the copies on stream 'copy'")
    syncs = collections.Counter(l["kind"] for l in lines if l["type"] == "sync")
    check(syncs["stream"] >= 2, f"stream synchronizations recorded: {dict(syncs)}")
    instants = [l["name"] for l in lines if l["type"] == "marker" and l["phase"] == "instant"]
    check("probe start" in instants, f"the instant marker: {instants}")
    devices = [l for l in lines if l["type"] == "device"]
    check(devices and devices[0]["multiprocessors"] > 0, f"the device: {devices[:1]}")
    check(any(l["type"] == "context" for l in lines), "a context line (null stream)")
    return named, r


def full(files):
    check(len(files) == 1, f"one trace file: {list(files)}")
    lines = next(iter(files.values()))
    named, r = common(lines)
    check(lines[-1]["type"] == "exit", "the last line is Exit")
    check(sorted(r) == ["alloc", "compute", "default", "pageable", "pinned", "readback"], f"the six ranges: {sorted(r)}")
    kernels = [l for l in lines if l["type"] == "kernel"]
    check(len(kernels) == 4, f"four kernels: {len(kernels)}")
    null = {l["context"]: l["null_stream"] for l in lines if l["type"] == "context"}
    on_null = [k for k in kernels if null.get(k["context"]) == k["stream"]]
    check(len(on_null) == 1 and inside(on_null[0], r.get("default")), "one kernel on the legacy default stream, in 'default'")
    check(sum(named.get(k["stream"]) == "compute" for k in kernels) == 3, "three kernels on 'compute'")
    check(any(l["type"] == "memset" for l in lines), "the memset")
    back = [l for l in lines if l["type"] == "copy" and l["direction"] == "device_to_host"]
    check(len(back) == 1 and back[0]["dst"] == "pinned", "the pinned D2H copy")
    syncs = collections.Counter(l["kind"] for l in lines if l["type"] == "sync")
    check(syncs["event"] >= 1 and syncs["context"] >= 1, f"event and device synchronizations: {dict(syncs)}")
    calls = [l["name"] for l in lines if l["type"] == "api"]
    # cudaMallocHost is recorded as the runtime's own cudaHostAlloc, which it calls.
    for prefix in ["cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaMemcpyAsync", "cudaLaunchKernel", "cudaStreamSynchronize", "cudaMemsetAsync"]:
        check(any(c.startswith(prefix) for c in calls), f"a {prefix} call recorded")
    frees = [l for l in lines if l["type"] == "api" and l["name"].startswith("cudaFree") and inside(l, r.get("alloc"))]
    check(len(frees) == 1, "the cudaFree inside 'alloc'")
    check(not any(c.startswith(("cudaGetLastError", "cuDriverGetVersion", "cudaDeviceGetStreamPriorityRange")) for c in calls), "calls off the list left out")
    check(not any(l["type"] == "dropped" for l in lines), "nothing dropped")
    notes = [l["text"] for l in lines if l["type"] == "note"]
    check(not notes, f"no notes: {notes}")


def crashed(files, signal):
    check(len(files) == 1, f"one trace file: {list(files)}")
    lines = next(iter(files.values()))
    common(lines)
    check(not any(l["type"] == "exit" for l in lines), "no Exit (a fatal signal skips the exit handlers)")
    last = lines[-1]
    check(last["type"] == "crashed" and last["signal"] == signal, f"ends with Crashed, signal {signal}: {last}")
    flushed = any(l["type"] == "flushed" for l in lines)
    if signal == 6:
        check(flushed, "at least one periodic flush written")
    else:
        check(not flushed, "no periodic flush before the crash: the handler wrote every record")


def captured(files):
    check(len(files) == 1, f"one trace file: {list(files)}")
    lines = next(iter(files.values()))
    check(lines[-1]["type"] == "exit", "the last line is Exit")
    keep = lines[0].get("keep", {})
    check(keep.get("capture_range") == "alloc" and keep.get("capture_count") == 1, f"keep said: {keep}")
    r = ranges(lines)
    check(sorted(r) == ["alloc"], f"only the 'alloc' range kept: {sorted(r)}")
    gates = [(l["open"], l["why"]) for l in lines if l["type"] == "gate"]
    check(gates == [(True, 'capture range "alloc" #1 started'), (False, 'capture range "alloc": 1 ended')], f"the gate lines: {gates}")
    kernels = [l for l in lines if l["type"] == "kernel"]
    check(len(kernels) == 2, f"the two kernels launched in 'alloc': {len(kernels)}")
    copies_kept = [l for l in lines if l["type"] == "copy"]
    check(not copies_kept, f"no copy (they are in other phases): {len(copies_kept)}")
    frees = [l for l in lines if l["type"] == "api" and l["name"].startswith("cudaFree")]
    check(len(frees) == 1 and inside(frees[0], r.get("alloc")), "the cudaFree inside 'alloc', the only one")
    outside = sum(l["count"] for l in lines if l["type"] == "dropped" and l["why"].startswith("outside the capture window"))
    check(outside > 0, f"the records outside counted: {outside}")


def kept_last(files):
    check(len(files) == 1, f"one trace file: {list(files)}")
    pid, lines = next(iter(files.items()))
    check(lines[0].get("keep", {}).get("when_full") == "last", "keep said: last")
    check(bool(SEGMENTS.get(pid)), f"segments written: {SEGMENTS.get(pid)}")
    records = [l for l in lines if l["type"] in ("kernel", "copy", "memset", "sync", "api", "marker")]
    check(0 < len(records) <= 10, f"at most 10 records kept: {len(records)}")
    dropped = [l for l in lines if l["type"] == "dropped" and l["why"].startswith("the oldest records")]
    check(dropped and all(l.get("before") for l in dropped), f"oldest dropped, with before: {dropped}")
    starts = [l["name"] for l in lines if l["type"] == "marker" and l["phase"] in ("start", "instant")]
    check("probe start" not in starts and "pageable" not in starts, f"the first records deleted: {starts}")


def two(files):
    check(len(files) == 2, f"two trace files, one per process: {list(files)}")
    for pid, lines in files.items():
        check(lines[0]["type"] == "process" and lines[0]["pid"] == pid, f"{pid}: its own process line")
        check(lines[-1]["type"] == "exit", f"{pid}: ends with Exit")


def main():
    mode, folder = sys.argv[1], sys.argv[2]
    files = read(folder)
    show(files)
    if not files:
        check(False, f"trace files in {folder}")
    elif mode == "ok":
        full(files)
    elif mode == "abort":
        crashed(files, 6)
    elif mode == "segv":
        crashed(files, 11)
    elif mode == "capture":
        captured(files)
    elif mode == "last":
        kept_last(files)
    elif mode == "two":
        two(files)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
