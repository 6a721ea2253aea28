"""watch() in a real 2-rank gloo world (subprocesses), reporting to a fake coordinator.

One world runs every scenario of rank_scenarios.py (one process-group start for all of them);
each test checks one scenario's reports and results.
"""
from __future__ import annotations

import math
import unittest
from typing import Any

from fake_coordinator import FakeCoordinator
from world import run_world

STEPS = 6
DRIFT_EVERY = 3
PERTURB_AFTER = 3
DELTA = 0.5


class WatchWorldTest(unittest.TestCase):
    fake: FakeCoordinator
    results: list[dict[str, Any]]

    @classmethod
    def setUpClass(cls) -> None:
        cls.fake = FakeCoordinator()
        cls.fake.configure("plain")
        cls.fake.configure("watched")
        cls.fake.configure("drift")
        cls.fake.configure("stop", stop_on_unsynced=(
            "step %d: gradients not synchronised on rank(s) %s (synced grad norm equals the local "
            "one and no collective was issued)"))
        cls.fake.configure("warn")
        cls.results = run_world(
            ["-m", "rank_scenarios", "--steps", str(STEPS), "--drift-every", str(DRIFT_EVERY),
             "--perturb-after", str(PERTURB_AFTER), "--delta", str(DELTA)],
            extra_env=lambda rank: cls.fake.env("plain", rank))

    @classmethod
    def tearDownClass(cls) -> None:
        cls.fake.stop()

    def steps(self, job: str, rank: int) -> list[Any]:
        return self.fake.steps(job, rank)

    def test_plain_ddp_reports_nothing(self) -> None:
        self.assertEqual(self.fake.requests("plain"), [])

    def test_watch_changes_no_numerics(self) -> None:
        for result in self.results:
            self.assertEqual(result["watched"]["losses"], result["plain"]["losses"])
            self.assertEqual(result["watched"]["params"], result["plain"]["params"])
            self.assertEqual(len(result["plain"]["losses"]), STEPS)

    def test_one_report_per_step_with_equal_synced_norms(self) -> None:
        r0, r1 = self.steps("watched", 0), self.steps("watched", 1)
        self.assertEqual([s.step for s in r0], list(range(1, STEPS + 1)))
        self.assertEqual([s.step for s in r1], list(range(1, STEPS + 1)))
        for a, b in zip(r0, r1):
            self.assertEqual(a.synced_grad_norm, b.synced_grad_norm, f"step {a.step}")
            self.assertGreater(a.synced_grad_norm, 0)
            self.assertNotEqual(a.local_grad_norm, a.synced_grad_norm)
            self.assertNotEqual(b.local_grad_norm, b.synced_grad_norm)
            # The mean of two gradients is no longer than the mean of their lengths.
            self.assertLessEqual(a.synced_grad_norm,
                                 (a.local_grad_norm + b.local_grad_norm) / 2 * (1 + 1e-6))
            self.assertEqual(a.epoch, 3)
            self.assertEqual(a.total_steps, STEPS)
            self.assertGreater(a.step_ms, 0)
            self.assertGreaterEqual(a.comm_ms, a.overlapped_comm_ms)
        # The synced norm is the norm of the gradients the optimizer used.
        for rank, reports in enumerate((r0, r1)):
            grad_norms = self.results[rank]["watched"]["grad_norms"]
            for report, expected in zip(reports, grad_norms):
                self.assertTrue(math.isclose(report.synced_grad_norm, expected, rel_tol=1e-5),
                                f"step {report.step}: {report.synced_grad_norm} vs {expected}")

    def test_losses_reported_before_and_after_optimizer_step(self) -> None:
        for rank in (0, 1):
            reported = [float(s.loss).hex() for s in self.steps("watched", rank)]
            self.assertEqual(reported, self.results[rank]["watched"]["losses"])

    def test_collective_digests_equal_across_ranks(self) -> None:
        r0, r1 = self.steps("watched", 0), self.steps("watched", 1)
        for a, b in zip(r0, r1):
            self.assertGreaterEqual(a.collectives, 1)
            self.assertEqual(a.collectives, b.collectives)
            self.assertNotEqual(a.collective_digest, 0)
            self.assertEqual(a.collective_digest, b.collective_digest, f"step {a.step}")
        # DDP rebuilds its buckets after step 1 (small buckets here: several per step).
        self.assertGreater(r0[1].collectives, 1)
        self.assertNotEqual(r0[0].collective_digest, r0[1].collective_digest)
        self.assertEqual(len({s.collective_digest for s in r0[1:]}), 1)

    def test_drift_zero_in_a_correct_run(self) -> None:
        for rank in (0, 1):
            reports = self.steps("watched", rank)
            with_drift = [s.step for s in reports if s.has_drift]
            self.assertEqual(with_drift, [3, 6])
            for s in reports:
                if s.has_drift:
                    self.assertEqual(s.drift, 0.0)

    def test_drift_names_the_perturbed_tensor(self) -> None:
        rank1 = self.steps("drift", 1)
        last = rank1[-1]
        self.assertEqual(last.step, PERTURB_AFTER + 1)
        self.assertTrue(last.has_drift)
        self.assertEqual(last.drift_parameter, "fc2.bias")
        self.assertAlmostEqual(last.drift, DELTA, places=5)
        rank0 = self.steps("drift", 0)[-1]
        self.assertTrue(rank0.has_drift)
        self.assertEqual(rank0.drift, 0.0)
        # The drift broadcast is not a training collective: synced norms still agree.
        self.assertEqual(rank0.synced_grad_norm, last.synced_grad_norm)

    def test_unwrapped_model_is_stopped_at_step_one(self) -> None:
        for rank in (0, 1):
            result = self.results[rank]["stop"]
            self.assertEqual(result.get("stopped_at"), 1, result)
            self.assertIn("step 1: gradients not synchronised on rank(s) 0, 1",
                          result["stop_reason"])
            reports = self.steps("stop", rank)
            self.assertEqual([s.step for s in reports], [1])
            self.assertEqual(reports[0].collectives, 0)
            self.assertEqual(reports[0].collective_digest, 0)
            self.assertEqual(reports[0].local_grad_norm, reports[0].synced_grad_norm)
            self.assertGreater(reports[0].local_grad_norm, 0)
            self.assertIn("issued no gradient collective", self.results[rank]["_output"])

    def test_unwrapped_model_goes_on_under_warn(self) -> None:
        for rank in (0, 1):
            result = self.results[rank]["warn"]
            self.assertNotIn("stopped_at", result)
            self.assertEqual(len(result["losses"]), 3)
            reports = self.steps("warn", rank)
            self.assertEqual([s.step for s in reports], [1, 2, 3])
            for s in reports:
                self.assertEqual(s.collectives, 0)
                self.assertEqual(s.local_grad_norm, s.synced_grad_norm)
        # Unsynchronised: the ranks' gradients differ.
        self.assertNotEqual(self.steps("warn", 0)[0].synced_grad_norm,
                            self.steps("warn", 1)[0].synced_grad_norm)
        self.assertIn("lets the job run on", self.results[0]["_output"])


if __name__ == "__main__":
    unittest.main()
