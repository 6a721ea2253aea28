"""ringleader.JobError: an uncaught one tells the launcher the failure is the job's."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import unittest


def run_script(code: str, failure_file: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env["RINGLEADER_FAILURE_FILE"] = failure_file
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


class JobErrorTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.failure_file = os.path.join(self.dir, "rank_failure")

    def test_an_uncaught_job_error_writes_job_error_and_keeps_the_traceback(self) -> None:
        done = run_script("import ringleader\nraise ringleader.JobError('labels out of range')",
                          self.failure_file)
        self.assertEqual(done.returncode, 1)
        self.assertIn("JobError: labels out of range", done.stderr)
        with open(self.failure_file, encoding="ascii") as f:
            self.assertEqual(f.read(), "JOB_ERROR\n")

    def test_any_other_exception_writes_nothing(self) -> None:
        done = run_script("import ringleader\nraise ValueError('a bug, or the machine')",
                          self.failure_file)
        self.assertEqual(done.returncode, 1)
        self.assertIn("ValueError: a bug, or the machine", done.stderr)
        self.assertFalse(os.path.exists(self.failure_file))


if __name__ == "__main__":
    unittest.main()
