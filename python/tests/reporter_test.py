"""The report channel (ringleader._reporter) and the collective digest, against a fake
coordinator."""
from __future__ import annotations

import time
import unittest

import grpc

from fake_coordinator import FakeCoordinator
from ringleader import _digest, _env
from ringleader._proto import ringleader_pb2 as pb
from ringleader._reporter import Reporter
from ringleader._trace import CollectiveTrace


class ReporterTest(unittest.TestCase):
    fake: FakeCoordinator

    @classmethod
    def setUpClass(cls) -> None:
        cls.fake = FakeCoordinator()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.fake.stop()

    def reporter(self, job: str, **kwargs: object) -> Reporter:
        reporter = Reporter(self.fake.address, job, 3, 0, **kwargs)  # type: ignore[arg-type]
        self.addCleanup(reporter.close, 1.0)
        return reporter

    def test_batches_reports_in_order(self) -> None:
        self.fake.configure("batch", world_size=1)
        reporter = self.reporter("batch", min_interval_s=0.2)
        for step in range(1, 101):
            reporter.add(pb.StepReport(step=step, loss=step / 10))
        self.assertTrue(reporter.flush(10))
        self.assertEqual([s.step for s in self.fake.steps("batch", 0)], list(range(1, 101)))
        requests = self.fake.requests("batch")
        self.assertLessEqual(len(requests), 3)
        self.assertEqual({(r.job_id, r.generation, r.rank) for r in requests}, {("batch", 3, 0)})
        self.assertEqual(reporter.steps_judged, 100)
        self.assertIsNone(reporter.stop_reason)

    def test_epoch_reports_travel_with_the_steps(self) -> None:
        self.fake.configure("epochs", world_size=1)
        reporter = self.reporter("epochs")
        reporter.add(pb.StepReport(step=1))
        reporter.add_epoch(pb.EpochReport(epoch=0, test_accuracy=0.75, train_loss=0.5))
        self.assertTrue(reporter.flush(10))
        reporter.add_epoch(pb.EpochReport(epoch=1, test_accuracy=0.8))
        self.assertTrue(reporter.flush(10))
        self.assertEqual([(e.epoch, e.test_accuracy) for e in self.fake.epochs("epochs", 0)],
                         [(0, 0.75), (1, 0.8)])
        self.assertEqual([s.step for s in self.fake.steps("epochs", 0)], [1])
        self.assertEqual(reporter.dropped, 0)

    def test_an_idle_rank_keeps_alive_and_sends_its_ring_when_asked(self) -> None:
        # A script blocked in a collective adds no reports: the keepalive carries its counts,
        # and the answer asking for the ring makes the next request carry it.
        self.fake.configure("trace", world_size=1, want_trace=True)
        trace = CollectiveTrace(capacity=3)
        for bucket in range(4):
            trace.add("all_reduce", "fp32", 4096, bucket, step=5)
        trace.finish(0, ok=True)
        trace.finish(2, ok=True)
        trace.finish(3, ok=False)
        self.reporter("trace", trace=trace, keepalive_s=0.05)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
                r.has_trace for r in self.fake.requests("trace")):
            time.sleep(0.01)
        requests = self.fake.requests("trace")
        sent = [r for r in requests if r.has_trace]
        self.assertEqual(len(sent), 1)
        self.assertFalse(requests[0].has_trace)  # the first keepalive was answered "send it"
        self.assertEqual(requests[0].activity.collectives_issued, 4)
        self.assertEqual(requests[0].activity.collectives_completed, 1)  # #1 is not done
        self.assertEqual([(e.sequence, e.bucket, e.state) for e in sent[0].trace],
                         [(1, 1, pb.CollectiveTraceEntry.ENQUEUED),
                          (2, 2, pb.CollectiveTraceEntry.COMPLETED),
                          (3, 3, pb.CollectiveTraceEntry.FAILED)])  # the ring keeps 3
        self.assertEqual(trace.durations_us(2), [e.completed_us - e.enqueued_us
                                                 for e in sent[0].trace[1:]])
        self.assertEqual(trace.durations_us(1), [])  # #1 is not done
        self.assertEqual(trace.durations_us(0), [])  # evicted

    def test_unavailable_is_retried(self) -> None:
        self.fake.configure("flaky", world_size=1, fail_code=grpc.StatusCode.UNAVAILABLE,
                            fail_count=3)
        reporter = self.reporter("flaky")
        reporter.add(pb.StepReport(step=1))
        self.assertTrue(reporter.flush(10))
        self.assertEqual([s.step for s in self.fake.steps("flaky", 0)], [1])
        self.assertEqual(reporter.dropped, 0)

    def test_resource_exhausted_keeps_the_batch_and_retries_it(self) -> None:
        # The coordinator's per-rank rate limit refuses a call without recording it.
        self.fake.configure("limited", world_size=1,
                            fail_code=grpc.StatusCode.RESOURCE_EXHAUSTED, fail_count=2)
        reporter = self.reporter("limited")
        for step in (1, 2, 3):
            reporter.add(pb.StepReport(step=step))
        self.assertTrue(reporter.flush(10))
        self.assertEqual([s.step for s in self.fake.steps("limited", 0)], [1, 2, 3])
        # The refused batch went again as it was (the first batch may hold fewer steps).
        batches = [[s.step for s in r.steps] for r in self.fake.requests("limited")]
        self.assertGreaterEqual(len(batches), 3)
        self.assertEqual(batches[0], batches[1])
        self.assertEqual(batches[1], batches[2])
        self.assertEqual(reporter.dropped, 0)
        self.assertIsNone(reporter.stop_reason)

    def test_poll_refused_over_the_rate_limit_is_false_without_stopping(self) -> None:
        self.fake.configure("limited-poll", world_size=1,
                            fail_code=grpc.StatusCode.RESOURCE_EXHAUSTED, fail_count=1)
        reporter = self.reporter("limited-poll")
        self.assertFalse(reporter.poll())
        self.assertTrue(reporter.poll())
        self.assertIsNone(reporter.stop_reason)

    def test_stale_generation_stops_the_attempt(self) -> None:
        self.fake.configure("stale", world_size=1,
                            fail_code=grpc.StatusCode.FAILED_PRECONDITION, fail_count=1)
        reporter = self.reporter("stale")
        reporter.add(pb.StepReport(step=1))
        self.assertTrue(reporter.flush(10))
        self.assertIn("refused this attempt's reports", reporter.stop_reason or "")
        self.assertEqual(reporter.dropped, 1)

    def test_stop_answer(self) -> None:
        self.fake.configure("stop", world_size=1, stop_after_step=2, stop_reason="cancelled")
        reporter = self.reporter("stop")
        reporter.add(pb.StepReport(step=1))
        self.assertTrue(reporter.flush(10))
        self.assertIsNone(reporter.stop_reason)
        reporter.add(pb.StepReport(step=2))
        self.assertTrue(reporter.flush(10))
        self.assertEqual(reporter.stop_reason, "cancelled")

    def test_poll_reads_steps_judged(self) -> None:
        self.fake.configure("poll", world_size=2)
        reporter = self.reporter("poll")
        reporter.add(pb.StepReport(step=1))
        self.assertTrue(reporter.flush(10))
        self.assertEqual(reporter.steps_judged, 0)  # rank 1 has not reported step 1
        other = Reporter(self.fake.address, "poll", 3, 1)
        other.add(pb.StepReport(step=1))
        other.close(5)
        self.assertTrue(reporter.poll())
        self.assertEqual(reporter.steps_judged, 1)

    def test_bounded_queue_drops_the_oldest(self) -> None:
        self.fake.configure("full", world_size=1)
        # A long linger: reports pile up behind the first batch.
        reporter = self.reporter("full", max_queue=5, min_interval_s=30)
        for step in range(1, 21):
            reporter.add(pb.StepReport(step=step))
        self.assertTrue(reporter.flush(10))
        steps = [s.step for s in self.fake.steps("full", 0)]
        self.assertEqual(steps[-5:], [16, 17, 18, 19, 20])
        self.assertEqual(len(steps) + reporter.dropped, 20)
        self.assertGreaterEqual(reporter.dropped, 10)

    def test_unreachable_coordinator_never_blocks_training(self) -> None:
        reporter = Reporter("127.0.0.1:1", "nobody", 1, 0, retry_for_s=0.2, rpc_timeout_s=0.5)
        for step in range(1, 4):
            reporter.add(pb.StepReport(step=step))
        self.assertFalse(reporter.poll())
        self.assertTrue(reporter.flush(10))
        self.assertEqual(reporter.dropped, 3)
        reporter.close(1)


class DigestTest(unittest.TestCase):
    def test_fnv1a_reference_values(self) -> None:
        self.assertEqual(_digest.fnv1a64(b""), 0xCBF29CE484222325)
        self.assertEqual(_digest.fnv1a64(b"a"), 0xAF63DC4C8601EC8C)
        self.assertEqual(_digest.fnv1a64(b"foobar"), 0x85944171F73967E8)

    def test_digest_depends_on_every_field_and_the_order(self) -> None:
        base = [("allreduce", 0, 1000, "float32"), ("allreduce", 1, 500, "float32")]
        digest = _digest.collective_digest(base)
        self.assertEqual(digest, _digest.collective_digest(list(base)))
        variants = [
            list(reversed(base)),
            [("broadcast", 0, 1000, "float32"), base[1]],
            [("allreduce", 2, 1000, "float32"), base[1]],
            [("allreduce", 0, 1001, "float32"), base[1]],
            [("allreduce", 0, 1000, "bfloat16"), base[1]],
            base[:1],
        ]
        digests = {_digest.collective_digest(v) for v in variants}
        self.assertEqual(len(digests), len(variants))
        self.assertNotIn(digest, digests)
        self.assertLess(digest, 1 << 64)


class EnvTest(unittest.TestCase):
    def test_outside_ringleader(self) -> None:
        self.assertIsNone(_env.from_environ({"RANK": "1"}))

    def test_inside(self) -> None:
        env = _env.from_environ({"RINGLEADER_COORDINATOR": "h:1", "RINGLEADER_JOB": "job-7",
                                 "RINGLEADER_GENERATION": "2", "RINGLEADER_RANK": "3",
                                 "RANK": "9"})
        self.assertEqual(env, _env.RingleaderEnv("h:1", "job-7", 2, 3))
        env = _env.from_environ({"RINGLEADER_COORDINATOR": "h:1", "RINGLEADER_JOB": "j",
                                 "RANK": "1"})
        self.assertEqual((env.generation, env.rank), (1, 1))

    def test_malformed(self) -> None:
        with self.assertRaisesRegex(ValueError, "RINGLEADER_JOB is not set"):
            _env.from_environ({"RINGLEADER_COORDINATOR": "h:1"})
        with self.assertRaisesRegex(ValueError, "RINGLEADER_GENERATION='x' is not an integer"):
            _env.from_environ({"RINGLEADER_COORDINATOR": "h:1", "RINGLEADER_JOB": "j",
                               "RINGLEADER_GENERATION": "x"})

    def test_drift_interval_is_the_jobs(self) -> None:
        self.assertEqual(_env.drift_interval_from_environ({}), 50)
        self.assertEqual(
            _env.drift_interval_from_environ({"RINGLEADER_DRIFT_INTERVAL_STEPS": "10"}), 10)
        with self.assertRaisesRegex(ValueError, "RINGLEADER_DRIFT_INTERVAL_STEPS='x'"):
            _env.drift_interval_from_environ({"RINGLEADER_DRIFT_INTERVAL_STEPS": "x"})


if __name__ == "__main__":
    unittest.main()
