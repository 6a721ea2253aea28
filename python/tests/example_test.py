"""examples/pytorch/train.py under torchrun (2 ranks, gloo): with and without ringleader's
environment, the unwrapped-model bug, and a crash resumed from a checkpoint."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

from fake_coordinator import FakeCoordinator
from world import free_port

EXAMPLES = os.environ.get("RL_TEST_EXAMPLES_DIR") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "pytorch")
TRAIN = os.path.join(EXAMPLES, "train.py")
STEPS = 12
COMMON = ["--max-steps", str(STEPS), "--max-train-examples", "2048", "--batch-size", "32",
          "--drift-every", "5"]
LINE = re.compile(r"(?:\[rank (\d+)\] )?step (\d+) loss (\S+)$")


def torchrun(args: list[str], env_extra: dict[str, str] | None = None,
             max_restarts: int = 0) -> tuple[int, str, dict[tuple[int, int], set[str]]]:
    """Runs train.py on 2 local ranks; returns exit code, output and {(rank, step): losses}."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RINGLEADER_", "TORCHELASTIC_"))}
    env.update(env_extra or {})
    log_dir = tempfile.mkdtemp(prefix="torchrun-")
    # Python 3.11 needs non-zero, single-flag --redirects/--tee (torchrun's IntFlag parsing
    # fails on 0 and on 3): stdout goes to <log_dir>/<run>/attempt_<n>/<rank>/stdout.log only.
    command = [sys.executable, "-m", "torch.distributed.run", "--redirects", "1", "--tee", "2",
               "--log_dir", log_dir, "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
               "--master_port", str(free_port()), "--max_restarts", str(max_restarts),
               "--monitor_interval", "0.2", TRAIN, *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    output = done.stdout + done.stderr
    stdout = []
    for directory, _, files in sorted(os.walk(log_dir)):
        if "stdout.log" in files:
            with open(os.path.join(directory, "stdout.log"), errors="replace") as f:
                text = f.read()
            stdout.append(text)
            output += f"\n--- {os.path.relpath(directory, log_dir)}/stdout.log ---\n{text}"
    shutil.rmtree(log_dir, ignore_errors=True)
    losses: dict[tuple[int, int], set[str]] = {}
    for line in "\n".join(stdout).splitlines():
        text = line.split("]:", 1)[1] if line.startswith("[default") else line
        match = LINE.match(text.strip())
        if match:
            rank = int(match.group(1) or 0)
            losses.setdefault((rank, int(match.group(2))), set()).add(match.group(3))
    return done.returncode, f"$ {shlex.join(command)}\n{output}", losses


class ExampleTest(unittest.TestCase):
    fake: FakeCoordinator
    plain: tuple[int, str, dict[tuple[int, int], set[str]]]

    @classmethod
    def setUpClass(cls) -> None:
        cls.fake = FakeCoordinator()
        cls.plain = torchrun(COMMON)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.fake.stop()

    def test_plain_torchrun_run(self) -> None:
        rc, output, losses = self.plain
        self.assertEqual(rc, 0, output)
        self.assertEqual(sorted(losses), [(r, s) for r in (0, 1) for s in range(1, STEPS + 1)],
                         output)
        self.assertIn("RINGLEADER_COORDINATOR is not set", output)
        self.assertRegex(output, r"done steps 12 samples_per_second \d")

    def test_under_ringleader_bit_identical_and_reported(self) -> None:
        self.fake.configure("example")
        rc, output, losses = torchrun(COMMON, {**self.fake.env("example", 0),
                                               "RINGLEADER_RANK": ""})
        self.assertEqual(rc, 0, output)
        self.assertEqual(losses, self.plain[2], output)
        r0, r1 = self.fake.steps("example", 0), self.fake.steps("example", 1)
        self.assertEqual([s.step for s in r0], list(range(1, STEPS + 1)))
        self.assertEqual([s.step for s in r1], list(range(1, STEPS + 1)))
        for a, b in zip(r0, r1):
            self.assertEqual(a.synced_grad_norm, b.synced_grad_norm)
            self.assertEqual(a.collective_digest, b.collective_digest)
            self.assertNotEqual(a.local_grad_norm, a.synced_grad_norm)
            self.assertEqual(a.total_steps, STEPS)
            self.assertEqual({float(a.loss).hex()}, losses[(0, a.step)])
        self.assertEqual([(s.step, s.drift) for s in r1 if s.has_drift], [(5, 0.0), (10, 0.0),
                                                                          (12, 0.0)])

    def test_unwrapped_model_fails_at_step_one(self) -> None:
        self.fake.configure("unwrapped", stop_on_unsynced=(
            "step %d: NOT_SYNCHRONIZED on rank(s) %s: synced gradient norm equals the local "
            "one"))
        rc, output, losses = torchrun([*COMMON, "--bug", "unwrapped"],
                                      {**self.fake.env("unwrapped", 0), "RINGLEADER_RANK": ""})
        self.assertNotEqual(rc, 0, output)
        self.assertIn("JobStopped: step 1: NOT_SYNCHRONIZED on rank(s) 0, 1", output)
        self.assertEqual(losses, {}, "no step completed")
        for rank in (0, 1):
            self.assertEqual([(s.step, s.collectives) for s in self.fake.steps("unwrapped", rank)],
                             [(1, 0)])

    def test_crash_restarts_and_resumes_bit_identically(self) -> None:
        checkpoints = tempfile.mkdtemp(prefix="ckpt-")
        self.addCleanup(shutil.rmtree, checkpoints, True)
        rc, output, losses = torchrun(
            [*COMMON, "--checkpoint-every", "4", "--checkpoint-dir", checkpoints,
             "--raise-on-rank", "1", "--raise-at-step", "7"], max_restarts=1)
        self.assertEqual(rc, 0, output)
        self.assertIn("ValueError: injected failure at step 7 on rank 1", output)
        self.assertRegex(output, r"resumed from \S+/step-4\.pt after step 4")
        self.assertEqual(sorted(losses), sorted(self.plain[2]), output)
        for key, values in losses.items():
            self.assertEqual(values, self.plain[2][key], f"(rank, step) {key}")
        self.assertEqual(sorted(os.listdir(checkpoints)), ["step-4.pt", "step-8.pt"])

    def test_job_spec_runs_this_script(self) -> None:
        with open(os.path.join(EXAMPLES, "job.yaml")) as f:
            spec = f.read()
        self.assertRegex(spec, r"(?m)^world_size: 2$")
        self.assertRegex(spec, r"(?m)^backend: gloo$")
        command = re.search(r"(?m)^command: \[(.*)\]$", spec)
        self.assertIsNotNone(command)
        argv = [a.strip().strip('"') for a in command.group(1).split(",")]
        self.assertEqual(argv[:2], ["/usr/bin/python3", "examples/pytorch/train.py"])
        # train.py accepts the flags.
        done = subprocess.run([sys.executable, TRAIN, "--help"], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        for flag in argv[2::2]:
            self.assertIn(flag, done.stdout)


if __name__ == "__main__":
    unittest.main()
