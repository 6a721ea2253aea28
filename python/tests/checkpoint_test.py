"""ringleader.checkpoint_dir() and latest_checkpoint()."""
from __future__ import annotations

import os
import shutil
import tempfile
import unittest
from unittest import mock

import ringleader
from ringleader._checkpoint import step_of


def touch(directory: str, name: str, mtime: int) -> str:
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(b"x")
    os.utime(path, (mtime, mtime))
    return path


class CheckpointTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)

    def test_checkpoint_dir_from_the_environment(self) -> None:
        with mock.patch.dict(os.environ, {"RINGLEADER_CHECKPOINT_DIR": self.dir}):
            self.assertEqual(ringleader.checkpoint_dir(), self.dir)
            self.assertEqual(ringleader.checkpoint_dir("/elsewhere"), self.dir)
        with mock.patch.dict(os.environ, {"RINGLEADER_CHECKPOINT_DIR": ""}):
            self.assertIsNone(ringleader.checkpoint_dir())
            self.assertEqual(ringleader.checkpoint_dir("/elsewhere"), "/elsewhere")
            self.assertIsNone(ringleader.latest_checkpoint())

    def test_step_of(self) -> None:
        self.assertEqual(step_of("step-120.pt"), 120)
        self.assertEqual(step_of("epoch2_step120.ckpt"), 120)
        self.assertEqual(step_of("ckpt-7"), 7)
        self.assertIsNone(step_of("final.pt"))
        self.assertIsNone(step_of("model.pt2"))

    def test_highest_step_wins_over_mtime(self) -> None:
        touch(self.dir, "step-9.pt", 3000)
        best = touch(self.dir, "step-10.pt", 1000)
        touch(self.dir, "final.pt", 5000)  # no step: below any numbered file
        touch(self.dir, "step-11.pt.tmp", 6000)  # being written
        touch(self.dir, ".step-12.pt", 6000)  # hidden
        os.mkdir(os.path.join(self.dir, "step-13"))
        self.assertEqual(ringleader.latest_checkpoint(self.dir), best)
        with mock.patch.dict(os.environ, {"RINGLEADER_CHECKPOINT_DIR": self.dir}):
            self.assertEqual(ringleader.latest_checkpoint(), best)

    def test_mtime_without_step_numbers(self) -> None:
        touch(self.dir, "a.pt", 1000)
        newest = touch(self.dir, "b.pt", 2000)
        self.assertEqual(ringleader.latest_checkpoint(self.dir), newest)

    def test_none_when_empty_or_missing(self) -> None:
        self.assertIsNone(ringleader.latest_checkpoint(self.dir))
        self.assertIsNone(ringleader.latest_checkpoint(os.path.join(self.dir, "missing")))


if __name__ == "__main__":
    unittest.main()
