"""For the checkers' tests: a temporary output folder holding runs as trace-examples.sh and
trace-examples-ddp.sh write them (NAME.stdout, .stderr, .exit, .wall_ns and the report
NAME.json), and a test case that makes one per test and reads a checker's rows from it."""
import json
import os
import shutil
import tempfile
import unittest


class RunFolder:
    """The folder; `check(path, name)` is the checker whose rows `rows` returns by key."""

    def __init__(self, prefix, check):
        self.path = tempfile.mkdtemp(prefix=prefix)
        self.check = check

    def write(self, name, text):
        with open(os.path.join(self.path, name), "w", encoding="utf-8") as f:
            f.write(text)

    def write_run(self, name, stdout, exit_code, wall_ns, report_value):
        self.write(f"{name}.stdout", stdout)
        self.write(f"{name}.stderr", "the report\n")
        self.write(f"{name}.exit", f"{exit_code}\n")
        self.write(f"{name}.wall_ns", f"{wall_ns}\n")
        if report_value is not None:
            self.write(f"{name}.json", json.dumps(report_value))

    def rows(self, name):
        return {r[0]: r for r in self.check(self.path, name)}

    def remove(self):
        shutil.rmtree(self.path)


class RunFolderTest(unittest.TestCase):
    """A test with a fresh folder of `make_folder()` in `self.folder`, removed afterwards."""

    def make_folder(self):
        raise NotImplementedError

    def setUp(self):
        self.folder = self.make_folder()
        self.addCleanup(self.folder.remove)

    def statuses(self, name):
        return {key: r[3] for key, r in self.folder.rows(name).items()}
