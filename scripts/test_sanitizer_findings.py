"""Tests of sanitizer_findings.py on logs in compute-sanitizer's shape (testdata/sanitizer/).

Run from the repository root: python3 -m unittest discover -s scripts -p 'test_*.py'
"""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sanitizer_findings as sf  # noqa: E402

DATA = os.path.join(HERE, "testdata", "sanitizer")
SCRIPT = os.path.join(HERE, "sanitizer_findings.py")


def parse_file(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as f:
        return sf.parse(f)


def parse_text(text):
    return sf.parse(text.splitlines())


def run(*args, stdin=None):
    """The script's exit code and stdout, as gpu-run.sh sees them."""
    done = subprocess.run([sys.executable, SCRIPT, *args], input=stdin, capture_output=True,
                          text=True, check=False)
    return done.returncode, done.stdout


def counts(log):
    return len(log.ours()), len(log.nccl()), log.unlisted


class Classification(unittest.TestCase):
    def test_ncclS_api_errors_are_told_by_the_caller_library(self):
        log = parse_file("nccl-memcheck.log")
        self.assertEqual(counts(log), (0, 3, 0))
        # Two from NCCL's init thread (libc below it), one under streamlab's own call.
        for f in log.findings:
            self.assertIsNone(f.kernel())
            self.assertEqual(f.caller(), "libnccl.so.2")
        self.assertEqual(log.findings[2].libraries()[-1], "streamlab")
        self.assertEqual(run(os.path.join(DATA, "nccl-memcheck.log")), (0, "ours 0, nccl 3\n"))

    def test_ncclS_kernel_decides_whatever_the_host_frames(self):
        log = parse_file("nccl-initcheck.log")
        self.assertEqual(counts(log), (0, 2, 0))
        self.assertEqual(log.findings[0].kernel(), "ncclDevKernel_AllReduce_Sum_f32_RING_LL")
        self.assertIn("streamlab", log.findings[0].libraries())

    def test_the_outermost_device_frame_names_the_kernel(self):
        log = parse_file("nccl-synccheck.log")
        self.assertEqual(counts(log), (0, 1, 0))
        self.assertEqual(log.findings[0].kernel(), "ncclDevKernel_AllReduce_Sum_f32_RING_LL")

    def test_a_read_in_compute_kernel_is_ours_and_named(self):
        log = parse_file("ours-initcheck.log")
        self.assertEqual(counts(log), (2, 0, 0))
        code, out = run(os.path.join(DATA, "ours-initcheck.log"), "--show", "1")
        self.assertEqual(code, 1)
        lines = out.splitlines()
        self.assertEqual(lines[0], "ours 2, nccl 0")
        self.assertEqual(len(lines), 2)
        self.assertIn("Uninitialized __global__ memory read", lines[1])
        self.assertIn("in kernel compute_kernel", lines[1])

    def test_a_mixed_log_splits_kernel_errors_and_leaks_both_ways(self):
        log = parse_file("mixed-memcheck.log")
        self.assertEqual(counts(log), (2, 2, 0))
        ours = [f.headline.split(" at ")[0] for f in log.ours()]
        self.assertEqual(ours, ["Invalid __global__ write of size 4 bytes", "Leaked 262144 bytes"])
        nccl = [f.headline[:20] for f in log.nccl()]
        self.assertEqual(nccl, ["Program hit cudaErro", "Leaked 4096 bytes at"])
        self.assertEqual(log.ours()[0].kernel(), "chunk_kernel")

    def test_two_line_host_frames_of_older_releases(self):
        log = parse_file("cuda12-memcheck.log")
        self.assertEqual(counts(log), (1, 1, 0))
        first, second = log.findings
        # The driver frame is skipped; a frame with no library is left out.
        self.assertEqual(first.libraries(), ["libcuda.so.1", "libnccl.so.2", "streamlab"])
        self.assertTrue(first.is_nccl())
        self.assertEqual(second.libraries(), ["libcuda.so.1", "streamlab"])
        self.assertFalse(second.is_nccl())

    def test_racecheck_counts_errors_not_warnings(self):
        log = parse_file("racecheck.log")
        self.assertEqual(counts(log), (1, 0, 0))
        self.assertEqual(log.findings[0].kernel(), "chunk_kernel")
        self.assertEqual(run(os.path.join(DATA, "racecheck.log"))[0], 1)

    def test_clean_logs(self):
        for name in ("clean-memcheck.log", "clean-racecheck.log"):
            self.assertEqual(run(os.path.join(DATA, name)), (0, "ours 0, nccl 0\n"), name)

    def test_an_unknown_kind_of_finding_counts_as_ours(self):
        log = parse_text("========= Some new kind of error\n"
                         "=========     at 0x50 in mystery_kernel(int *)\n"
                         "========= ERROR SUMMARY: 1 error\n")
        self.assertEqual(counts(log), (1, 0, 0))
        self.assertEqual(log.findings[0].kernel(), "mystery_kernel")

    def test_a_finding_with_nothing_to_attribute_is_ours(self):
        log = parse_text("========= Program hit cudaErrorInvalidValue (error 1) due to \"invalid "
                         "argument\" on CUDA API call to cudaMemcpy.\n"
                         "========= ERROR SUMMARY: 1 error\n")
        self.assertEqual(counts(log), (1, 0, 0))

    def test_the_programs_exit_status_is_not_a_finding(self):
        log = parse_text("========= COMPUTE-SANITIZER\n"
                         "========= Target application returned an error\n"
                         "========= ERROR SUMMARY: 1 error\n")
        self.assertEqual(counts(log), (0, 0, 0))


class Truncation(unittest.TestCase):
    def test_unprinted_errors_are_unlisted_and_fail_even_behind_ncclS(self):
        path = os.path.join(DATA, "truncated-nccl-initcheck.log")
        self.assertEqual(counts(parse_file("truncated-nccl-initcheck.log")), (0, 2, 93610))
        self.assertEqual(run(path), (1, "ours 0, nccl 2, unlisted 93610\n"))

    def test_unlisted_from_the_total_when_the_tool_does_not_say(self):
        log = parse_text("========= Uninitialized __global__ memory read of size 4 bytes\n"
                         "=========     at compute_kernel+0x90\n"
                         "========= ERROR SUMMARY: 5 errors\n")
        self.assertEqual(counts(log), (1, 0, 4))

    def test_standard_input(self):
        with open(os.path.join(DATA, "truncated-nccl-initcheck.log"), encoding="utf-8") as f:
            text = f.read()
        self.assertEqual(run("-", stdin=text), (1, "ours 0, nccl 2, unlisted 93610\n"))


class Unreadable(unittest.TestCase):
    def test_a_log_without_a_summary_is_refused(self):
        code, out = run(os.path.join(DATA, "unfinished.log"))
        self.assertEqual((code, out), (2, ""))

    def test_a_missing_log_is_refused(self):
        self.assertEqual(run(os.path.join(DATA, "no-such.log")), (2, ""))


class NcclListing(unittest.TestCase):
    def test_only_ncclS_findings_go_to_the_file_whole(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "nccl.txt")
            code, _ = run(os.path.join(DATA, "mixed-memcheck.log"), "--nccl-out", out)
            self.assertEqual(code, 1)
            with open(out, encoding="utf-8") as f:
                text = f.read()
        self.assertEqual(text.count("Program hit cudaErrorNoKernelImageForDevice"), 1)
        self.assertEqual(text.count("Leaked 4096 bytes"), 1)
        self.assertNotIn("chunk_kernel", text)
        self.assertNotIn("Leaked 262144", text)
        self.assertIn("Host Frame: ncclInitKernelsForDevice", text)
        # As the tool printed them, prefix and indentation included.
        self.assertTrue(all(line.startswith("=========") for line in text.splitlines()), text)


class FunctionNames(unittest.TestCase):
    def test_each_location_form(self):
        cases = {
            "compute_kernel+0x90": "compute_kernel",
            "compute_kernel+0x90 in kernels.rs:74": "compute_kernel",
            "vectorAdd(int *)+0x70 in memset_error.cu:41": "vectorAdd",
            "unaligned_kernel():0x160 in memcheck_demo.cu:6": "unaligned_kernel",
            "0x88 in kernel(float *)": "kernel",
            "0x000000c8 in /src/my_helper.cuh:75:void vector_projection<double>(double*, int)":
                "vector_projection<double>",
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096UL>)+0x2b70":
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            "0x79d8": None,
        }
        for location, name in cases.items():
            self.assertEqual(sf.function_name(location), name, location)


if __name__ == "__main__":
    unittest.main()
