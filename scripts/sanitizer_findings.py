#!/usr/bin/env python3
"""Splits one compute-sanitizer log into findings and tells NCCL's from streamlab's.

Usage: sanitizer_findings.py LOG [--show N] [--nccl-out FILE]
  LOG         a log of any of the four tools (memcheck, racecheck, synccheck, initcheck),
              or - for standard input
  --show N    also print the first N of ours, one line each (the kernel, or the library
              that made the call)
  --nccl-out  append NCCL's findings, whole, to FILE

Prints one line, `ours N, nccl M[, unlisted K]`. Exit 0 when ours and unlisted are both 0,
1 otherwise, 2 when the log cannot be read or has no summary line (the tool did not finish).

A finding starts at an unindented line after the `=========` prefix that names an error, a
hazard or a leak; the indented lines below it (`at ...`, `by thread ...`, `Device Frame:`,
`Saved host backtrace ...`, `Host Frame: ...`) belong to it. It is NCCL's when
  - the kernel it names (the `at` line, the outermost device frame, or a racecheck access) is
    one of NCCL's (`ncclDevKernel_*`, `ncclKernel*`), or
  - it names no kernel (an API error, a leak, a host-side access) and the innermost host frame
    outside CUDA's own libraries (libcuda, libcudart, the sanitizer's injection) lies in
    libnccl: NCCL made the failing call or the allocation. Frames below it (the thread start
    in libc, or streamlab calling into NCCL) do not change that: every NCCL call begins in
    streamlab, so "all frames in libnccl" would call NCCL's own errors ours.
Everything else is ours, including a finding that names no kernel and has no host frame with
a library: what cannot be attributed counts against us.

Not findings: racecheck's warnings and infos (the summary counts errors apart; the stage has
always passed on 0 errors), the tool's own notes, and "Target application returned an error"
(the program's exit code, which the caller judges from the exit status).

Unlisted: when --print-limit cut the listing, the summary counts more errors than were
printed ("N errors were not printed"). Those are unknown, and they count against the run
(exit 1) even when every printed one was NCCL's: a kernel that errs on every launch (NCCL's
LL protocol reads its flag words uninitialized on each all-reduce) fills the listing first,
and one of ours behind it would be hidden. Run again with --print-limit 0 to attribute them.
"""
import os
import re
import sys

PREFIX = "========="

# Indented lines and these keywords belong to the finding above; the keywords are also
# matched unindented, for logs whose whitespace was squeezed.
DETAIL = re.compile(
    r"^(at |by thread|Address |Access |and is |and Read |and Write |and \w+ access|"
    r"Device Frame|Saved host backtrace|Host Frame|in |Uninitialized access|"
    r"(Write|Read) Thread|Current Value|Not written|These unused|\d+% of)"
)
ERROR_SUMMARY = re.compile(r"^ERROR SUMMARY: (\d+) errors?$")
NOT_PRINTED = re.compile(r"^ERROR SUMMARY: (\d+) errors? (?:was|were) not printed")
RACECHECK_SUMMARY = re.compile(
    r"^RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, \d+ warnings?\)")
LEAK_SUMMARY = re.compile(r"^LEAK SUMMARY:")
# The program's own exit status: counted by ERROR SUMMARY, judged by the caller.
EXIT_NOTES = re.compile(
    r"^(Target application returned an error|Error: process didn't terminate successfully)")
# Lines of the tool that are neither findings nor summaries.
TOOL_NOTES = re.compile(r"^(COMPUTE-SANITIZER|CUDA-MEMCHECK|No (errors|CUDA))")
# Below error level (racecheck's warnings and infos, the tools' own warnings): not counted as
# errors by the summary.
BELOW_ERROR = re.compile(r"^(WARNING|Warning|INFO|Info)\b")

NCCL_KERNEL = re.compile(r"nccl(?:Dev)?Kernel")
# Libraries whose frames say nothing about who made the call: the driver, the runtime and the
# sanitizer's injection sit between every caller and the error.
CUDA_LIBS = ("libcuda.so", "libcudart", "libcudadebugger", "libsanitizer", "libTreeLauncher",
             "libInterceptorInjection", "libcupti")


class Finding:
    def __init__(self, headline, raw):
        self.headline = headline
        self.lines = [headline]  # as printed, less the prefix and the indentation
        self.raw = [raw]  # as printed, for the listing of NCCL's

    def kernel(self):
        """The kernel (or device function) this finding names, or None."""
        device = [b for b in self.device_part() if b.startswith("Device Frame")]
        if device:
            # The outermost device frame is the kernel itself.
            name = function_name(device[-1].split(":", 1)[1])
            if name:
                return name
        for body in self.device_part():
            m = re.match(r"^(?:at|(?:Write|Read) Thread \([^)]*\) at) (.+)$", body)
            if m:
                name = function_name(m.group(1))
                if name:
                    return name
        # racecheck's analysis report names the accesses in its first line.
        m = re.search(r"\baccess at (.+?)(?: and \w+ access at |$)", self.headline)
        if m:
            return function_name(m.group(1))
        m = re.search(r"\bin kernel ([A-Za-z_$][\w$:<>]*)", " ".join(self.lines))
        return m.group(1) if m else None

    def device_part(self):
        out = []
        for body in self.lines[1:]:
            if body.startswith("Saved host backtrace"):
                break
            out.append(body)
        return out

    def libraries(self):
        """The library of each host frame that names one, innermost first."""
        libs = []
        frames = self.lines
        for i, body in enumerate(frames):
            if not body.startswith("Host Frame"):
                continue
            rest = body[len("Host Frame"):].lstrip(":").strip()
            # CUDA 12.8 and later: `Host Frame: name in file:line [0x...] in libfoo.so`.
            m = re.search(r"\[0x[0-9a-fA-F]+\]\s+in\s+(\S.*?)\s*$", rest)
            if m:
                libs.append(os.path.basename(m.group(1)))
                continue
            # Before: the library on the next line, `in /path/libfoo.so` (empty if unknown).
            if i + 1 < len(frames) and re.match(r"^in(\s|$)", frames[i + 1]):
                lib = frames[i + 1][2:].strip()
                if lib:
                    libs.append(os.path.basename(lib))
                continue
            # cuda-memcheck: `Host Frame:/path/libfoo.so (symbol + 0x1) [0x...]`.
            m = re.match(r"^(\.?/\S+?)\s*(?:\(|\[|$)", rest)
            if m:
                libs.append(os.path.basename(m.group(1)))
        return libs

    def caller(self):
        """The innermost library outside CUDA's own, or None."""
        for lib in self.libraries():
            if not lib.startswith(CUDA_LIBS):
                return lib
        return None

    def is_nccl(self):
        kernel = self.kernel()
        if kernel:
            return bool(NCCL_KERNEL.search(kernel))
        caller = self.caller()
        return caller is not None and caller.startswith("libnccl")

    def describe(self):
        kernel = self.kernel()
        if kernel:
            where = f"in kernel {kernel}"
        else:
            where = f"called from {self.caller() or 'an unknown frame'}"
        return f"{self.headline} [{where}]"


def function_name(location):
    """`compute_kernel+0x1b0 in f.cu:3`, `k(int *)+0x70`, `k():0x160 in f.cu:6`,
    `0x88 in k(float *)`, `0x0c8 in f.cuh:75:void k<double>(double*, int)` -> the name."""
    loc = location.strip()
    m = re.match(r"^0x[0-9a-fA-F]+ in (.+)$", loc)
    if m:
        loc = re.sub(r"^[^\s()]*:\d+:", "", m.group(1).strip())
    elif re.match(r"^0x[0-9a-fA-F]+$", loc):
        return None  # a bare PC (malloc/free errors): the device frames name the function
    else:
        loc = re.split(r"(?:\(\))?(?:\+|:)0x[0-9a-fA-F]+", loc, maxsplit=1)[0]
        loc = re.sub(r"\s+in\s+\S+:\d+$", "", loc)
    loc = re.sub(r"^void ", "", loc.strip())
    # Drop the argument list, keeping template arguments: `k<T>(int *)` -> `k<T>`.
    depth = 0
    for i, ch in enumerate(loc):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0:
            loc = loc[:i]
            break
    return loc.strip() or None


class Log:
    def __init__(self):
        self.findings = []
        self.total = None  # errors the summary counts
        self.not_printed = None
        self.exit_notes = 0
        self.summarized = False

    @property
    def unlisted(self):
        if self.not_printed is not None:
            return self.not_printed
        if self.total is None:
            return 0
        return max(0, self.total - len(self.findings) - self.exit_notes)

    def ours(self):
        return [f for f in self.findings if not f.is_nccl()]

    def nccl(self):
        return [f for f in self.findings if f.is_nccl()]


def parse(lines):
    log = Log()
    current = None
    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line.startswith(PREFIX):
            continue  # program output can land anywhere; it belongs to no finding
        body = line[len(PREFIX):]
        text = body.strip()
        if not text:
            current = None  # a blank `=========` line closes a finding
            continue
        indented = body.startswith("  ") or body.startswith("\t")
        if indented or DETAIL.match(text):
            if current is not None:
                current.lines.append(text)
                current.raw.append(line)
            continue
        current = None
        if m := NOT_PRINTED.match(text):
            log.not_printed = int(m.group(1))
        elif m := ERROR_SUMMARY.match(text):
            log.total = int(m.group(1))
            log.summarized = True
        elif m := RACECHECK_SUMMARY.match(text):
            log.total = int(m.group(1))
            log.summarized = True
        elif LEAK_SUMMARY.match(text):
            pass
        elif EXIT_NOTES.match(text):
            log.exit_notes += 1
        elif TOOL_NOTES.match(text) or BELOW_ERROR.match(text):
            pass
        else:
            # Anything else the tool prints unindented is a finding: an unknown kind counts
            # (as ours, unless it names NCCL) rather than slipping through.
            current = Finding(text, line)
            log.findings.append(current)
    return log


def main(argv):
    args = list(argv)
    show = 0
    nccl_out = None
    path = None
    while args:
        a = args.pop(0)
        if a == "--show" and args and args[0].isdigit():
            show = int(args.pop(0))
        elif a == "--nccl-out" and args:
            nccl_out = args.pop(0)
        elif a in ("-h", "--help"):
            print(__doc__.split("\n\n")[0] + "\n" + __doc__.split("\n\n")[1])
            return 0
        elif path is None:
            path = a
        else:
            print(f"sanitizer_findings.py: unexpected argument '{a}' (try --help)", file=sys.stderr)
            return 2
    if path is None:
        print("sanitizer_findings.py: no log given (try --help)", file=sys.stderr)
        return 2
    try:
        if path == "-":
            log = parse(sys.stdin)
        else:
            with open(path, encoding="utf-8", errors="replace") as f:
                log = parse(f)
    except OSError as e:
        print(f"sanitizer_findings.py: cannot read {path}: {e.strerror}", file=sys.stderr)
        return 2
    if not log.summarized:
        print(f"sanitizer_findings.py: {path}: no ERROR SUMMARY or RACECHECK SUMMARY line, "
              "so the tool did not finish", file=sys.stderr)
        return 2
    ours, nccl = log.ours(), log.nccl()
    line = f"ours {len(ours)}, nccl {len(nccl)}"
    if log.unlisted:
        line += f", unlisted {log.unlisted}"
    print(line)
    for f in ours[:show]:
        print(f"  {f.describe()}")
    if nccl_out and nccl:
        with open(nccl_out, "a", encoding="utf-8") as out:
            for f in nccl:
                out.write("\n".join(f.raw) + "\n")
    return 0 if not ours and not log.unlisted else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
