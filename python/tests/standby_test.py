"""The reporter over a list of coordinators: a standby naming the leader, the leader (the fake
coordinator), a port nobody listens on; and RINGLEADER_COORDINATOR as a list."""
from __future__ import annotations

import contextlib
import io
import socket
import unittest

from fake_coordinator import FakeCoordinator, StandbyCoordinator
from ringleader import _env
from ringleader._proto import ringleader_pb2 as pb
from ringleader._reporter import Reporter


def dead_address() -> str:
    """A port on 127.0.0.1 nobody listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


class StandbyTest(unittest.TestCase):
    fake: FakeCoordinator
    standby: StandbyCoordinator

    @classmethod
    def setUpClass(cls) -> None:
        cls.fake = FakeCoordinator()
        cls.standby = StandbyCoordinator(leader=cls.fake.address)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.standby.stop()
        cls.fake.stop()

    def setUp(self) -> None:
        self.standby.leader = self.fake.address
        self.standby.refused = 0

    def reporter(self, address: str, job: str, **kwargs: object) -> Reporter:
        reporter = Reporter(address, job, 1, 0, **kwargs)  # type: ignore[arg-type]
        self.addCleanup(reporter.close, 1.0)
        return reporter

    def test_reports_refused_by_a_standby_land_on_the_leader_once(self) -> None:
        self.fake.configure("follow", world_size=1)
        reporter = self.reporter(f"{self.standby.address},{self.fake.address}", "follow")
        for step in range(1, 6):
            reporter.add(pb.StepReport(step=step))
        self.assertTrue(reporter.flush(10))
        self.assertEqual([s.step for s in self.fake.steps("follow", 0)], [1, 2, 3, 4, 5])
        self.assertEqual(self.standby.refused, 1)  # then the reporter stays with the leader
        reporter.add(pb.StepReport(step=6))
        self.assertTrue(reporter.flush(10))
        self.assertEqual([s.step for s in self.fake.steps("follow", 0)], [1, 2, 3, 4, 5, 6])
        self.assertEqual(self.standby.refused, 1)
        self.assertEqual(reporter.dropped, 0)

    def test_a_leader_outside_the_list_is_followed_too(self) -> None:
        self.fake.configure("outside", world_size=1)
        reporter = self.reporter(self.standby.address, "outside")
        self.assertTrue(reporter.poll())
        self.assertEqual(len(self.fake.requests("outside")), 1)

    def test_without_a_leader_the_poll_fails_without_looping(self) -> None:
        self.standby.leader = ""
        reporter = self.reporter(self.standby.address, "nobody", retry_for_s=0.0)
        with contextlib.redirect_stderr(io.StringIO()):  # its one-line warning is expected
            self.assertFalse(reporter.poll())
        self.assertEqual(self.standby.refused, 1)

    def test_a_dead_first_address_moves_on_to_the_second(self) -> None:
        self.fake.configure("dead-first", world_size=1)
        reporter = self.reporter(f"{dead_address()},{self.fake.address}", "dead-first")
        reporter.add(pb.StepReport(step=1))
        self.assertTrue(reporter.flush(10))
        self.assertEqual([s.step for s in self.fake.steps("dead-first", 0)], [1])
        self.assertEqual(reporter.dropped, 0)


class CoordinatorListTest(unittest.TestCase):
    def test_parses_a_list(self) -> None:
        self.assertEqual(_env.parse_coordinator_addresses("h:1"), ["h:1"])
        self.assertEqual(_env.parse_coordinator_addresses(" a:1 ,b:2, [::1]:3"),
                         ["a:1", "b:2", "[::1]:3"])

    def test_refuses_what_is_not_a_list(self) -> None:
        for text, why in [("", "no address"), ("a:1,,b:2", "empty entry"),
                          ("a:1,b", "'b' has no port"), ("::1:7", "has no port"),
                          ("a:http", "no numeric port"), ("a:1, a:1", "given twice")]:
            with self.subTest(text=text):
                with self.assertRaisesRegex(ValueError, why):
                    _env.parse_coordinator_addresses(text)

    def test_environment_with_a_list(self) -> None:
        env = _env.from_environ({"RINGLEADER_COORDINATOR": "a:1,b:2", "RINGLEADER_JOB": "j"})
        assert env is not None
        self.assertEqual(env.coordinator, "a:1,b:2")  # as given: the reporter parses it
        self.assertEqual(env.coordinators, ["a:1", "b:2"])
        with self.assertRaisesRegex(ValueError, "RINGLEADER_COORDINATOR: .*empty entry"):
            _env.from_environ({"RINGLEADER_COORDINATOR": "a:1,", "RINGLEADER_JOB": "j"})


if __name__ == "__main__":
    unittest.main()
