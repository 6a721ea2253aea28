"""ringleader.torch.snapshot() / restore(): a command job's snapshots in the worker's memory."""
from __future__ import annotations

import os
import shutil
import tempfile
import textwrap
import unittest
from unittest import mock

import torch
from torch import nn

import ringleader.torch as rl
from ringleader import _snapshot
from world import WorldError, run_world


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 8)
        self.norm = nn.BatchNorm1d(8)  # a buffer too (running stats)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.norm(self.fc1(x))))


def make(seed: int) -> tuple[Net, torch.optim.SGD]:
    torch.manual_seed(seed)
    model = Net()
    return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)


def train(model: Net, optimizer: torch.optim.SGD, first: int, last: int,
          save: bool = True) -> list[str]:
    """Steps first..last (each a fixed batch of its step), a snapshot after each; the paths."""
    paths = []
    for step in range(first, last + 1):
        g = torch.Generator().manual_seed(step)
        x, y = torch.randn(4, 6, generator=g), torch.randint(0, 3, (4,), generator=g)
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        if save:
            paths.append(rl.snapshot(model, optimizer, step, extra={"seen": step * 4}))
    return paths


def assert_same_state(test: unittest.TestCase, a: Net, oa: torch.optim.SGD, b: Net,
                      ob: torch.optim.SGD) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    test.assertEqual(list(sa), list(sb))
    for name in sa:
        test.assertTrue(torch.equal(sa[name], sb[name]), name)
    test.assertEqual(oa.state_dict()["param_groups"], ob.state_dict()["param_groups"])
    ma, mb = oa.state_dict()["state"], ob.state_dict()["state"]
    test.assertEqual(sorted(ma), sorted(mb))
    for index in ma:
        test.assertTrue(torch.equal(ma[index]["momentum_buffer"], mb[index]["momentum_buffer"]))


class SnapshotTest(unittest.TestCase):
    def setUp(self) -> None:
        self.root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.root, True)
        env = {"RINGLEADER_SNAPSHOT_DIR": self.root, "RINGLEADER_RANK": "1", "RANK": "1",
               "WORLD_SIZE": "1"}
        patcher = mock.patch.dict(os.environ, env)
        patcher.start()
        self.addCleanup(patcher.stop)
        self.dir = os.path.join(self.root, "rank-1")

    def test_round_trip_restores_model_and_momentum(self) -> None:
        model, optimizer = make(1)
        paths = train(model, optimizer, 1, 3)
        self.assertEqual(paths[-1], os.path.join(self.dir, "step-3.pt"))
        fresh, fresh_optimizer = make(2)  # other weights, no momentum yet
        self.assertEqual(rl.restore(fresh, fresh_optimizer), 3)
        assert_same_state(self, model, optimizer, fresh, fresh_optimizer)
        state = rl.load_snapshot()
        self.assertEqual(state["extra"], {"seen": 12})
        self.assertEqual(state["path"], paths[-1])
        # Training on from the restored state is the same as training on from the original.
        train(model, optimizer, 4, 5, save=False)
        train(fresh, fresh_optimizer, 4, 5, save=False)
        assert_same_state(self, model, optimizer, fresh, fresh_optimizer)

    def test_a_ddp_wrapper_saves_and_restores_its_module(self) -> None:
        model, optimizer = make(1)
        wrapper = mock.Mock(spec=nn.parallel.DistributedDataParallel)
        wrapper.module = model
        train(model, optimizer, 1, 1, save=False)
        rl.snapshot(wrapper, optimizer, 1)
        state = torch.load(os.path.join(self.dir, "step-1.pt"))
        self.assertIn("fc1.weight", state["model"])  # no "module." prefix
        fresh, fresh_optimizer = make(2)
        fresh_wrapper = mock.Mock(spec=nn.parallel.DistributedDataParallel)
        fresh_wrapper.module = fresh
        self.assertEqual(rl.restore(fresh_wrapper, fresh_optimizer), 1)
        assert_same_state(self, model, optimizer, fresh, fresh_optimizer)

    def test_keeps_the_newest_two_and_no_temporary_files(self) -> None:
        model, optimizer = make(1)
        os.makedirs(self.dir)
        leftover = os.path.join(self.dir, ".step-9.pt.12345.tmp")  # a crashed writer's
        with open(leftover, "wb") as out:
            out.write(b"half")
        train(model, optimizer, 1, 4)
        self.assertEqual(sorted(os.listdir(self.dir)), ["step-3.pt", "step-4.pt"])

    def test_a_corrupt_newest_snapshot_is_skipped_with_a_warning(self) -> None:
        model, optimizer = make(1)
        train(model, optimizer, 1, 2)
        expected, expected_optimizer = make(3)
        expected.load_state_dict(model.state_dict())
        expected_optimizer.load_state_dict(optimizer.state_dict())
        train(model, optimizer, 3, 3)
        newest = os.path.join(self.dir, "step-3.pt")
        with open(newest, "r+b") as f:  # torn: the write stopped half way
            f.truncate(os.path.getsize(newest) // 2)
        fresh, fresh_optimizer = make(2)
        with self.assertWarnsRegex(RuntimeWarning, "skipping the snapshot .*step-3.pt"):
            self.assertEqual(rl.restore(fresh, fresh_optimizer), 2)
        assert_same_state(self, expected, expected_optimizer, fresh, fresh_optimizer)

    def test_a_file_whose_step_disagrees_with_its_name_is_skipped(self) -> None:
        model, optimizer = make(1)
        train(model, optimizer, 1, 2)
        shutil.copy(os.path.join(self.dir, "step-1.pt"), os.path.join(self.dir, "step-7.pt"))
        with self.assertWarnsRegex(RuntimeWarning, "step-7.pt.*holds step 1"):
            self.assertEqual(rl.restore(*make(2)), 2)

    def test_nothing_to_restore_is_step_zero_and_changes_nothing(self) -> None:
        model, optimizer = make(1)
        before = {k: v.clone() for k, v in model.state_dict().items()}
        self.assertEqual(rl.restore(model, optimizer), 0)
        self.assertIsNone(rl.load_snapshot())
        for name, value in model.state_dict().items():
            self.assertTrue(torch.equal(value, before[name]), name)

    def test_no_snapshot_dir_is_a_no_op(self) -> None:
        model, optimizer = make(1)
        with mock.patch.dict(os.environ, {"RINGLEADER_SNAPSHOT_DIR": ""}):
            self.assertIsNone(rl.snapshot_dir())
            self.assertIsNone(rl.snapshot(model, optimizer, 1))
            self.assertEqual(rl.restore(model, optimizer), 0)
        del os.environ["RINGLEADER_SNAPSHOT_DIR"]
        self.assertIsNone(rl.snapshot(model, optimizer, 1))
        self.assertEqual(os.listdir(self.root), [])

    def test_a_bad_step_is_refused(self) -> None:
        model, optimizer = make(1)
        for step in (-1, 1.5, True):
            with self.assertRaises(ValueError):
                rl.snapshot(model, optimizer, step)


# One rank of a 2-rank gloo world: ranks hold different snapshots (written by the test), each
# restores after init_process_group and reports the step; with --train N it trains steps
# restored+1..N with a snapshot after each, exiting with 3 right after the snapshot of --crash_at.
RANK_PROGRAM = textwrap.dedent("""
    import argparse, json, os
    import torch, torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel
    import ringleader.torch as rl

    parser = argparse.ArgumentParser()
    parser.add_argument("--result")
    parser.add_argument("--train", type=int, default=0)
    parser.add_argument("--crash_at", type=int, default=0)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(5)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    restored = rl.restore(model, optimizer)
    ddp = DistributedDataParallel(model)
    for step in range(restored + 1, args.train + 1):
        g = torch.Generator().manual_seed(100 * step + rank)
        optimizer.zero_grad()
        ddp(torch.randn(8, 4, generator=g)).square().mean().backward()
        optimizer.step()
        rl.snapshot(ddp, optimizer, step)
        if step == args.crash_at:
            os._exit(3)
    with open(args.result, "w") as out:
        json.dump({"restored": restored,
                   "weights": [float(v) for v in model.weight.detach().flatten()]}, out)
    dist.barrier()
    del ddp
    dist.destroy_process_group()
""")


class SnapshotWorldTest(unittest.TestCase):
    def setUp(self) -> None:
        self.root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.root, True)
        self.program = os.path.join(self.root, "rank.py")
        with open(self.program, "w") as out:
            out.write(RANK_PROGRAM)

    def world(self, *args: str) -> list[dict]:
        def env(rank: int) -> dict[str, str]:
            return {"RINGLEADER_SNAPSHOT_DIR": os.path.join(self.root, f"worker{rank}")}
        return run_world([self.program, *args], extra_env=env)

    def put(self, rank: int, step: int, corrupt: bool = False) -> None:
        directory = os.path.join(self.root, f"worker{rank}", f"rank-{rank}")
        os.makedirs(directory, exist_ok=True)
        model = nn.Linear(4, 2)
        path = os.path.join(directory, f"step-{step}.pt")
        torch.save({"step": step, "model": model.state_dict(), "optimizer": None,
                    "extra": None}, path)
        if corrupt:
            with open(path, "r+b") as f:
                f.truncate(100)

    def test_the_ranks_agree_on_the_newest_step_they_all_hold(self) -> None:
        # Rank 0 saved step 12 before the crash, rank 1 did not get to it.
        self.put(0, 11), self.put(0, 12)
        self.put(1, 10), self.put(1, 11)
        self.assertEqual([r["restored"] for r in self.world()], [11, 11])

    def test_a_step_torn_on_one_rank_is_given_up_by_all(self) -> None:
        self.put(0, 10), self.put(0, 11)
        self.put(1, 10), self.put(1, 11, corrupt=True)
        results = self.world()
        self.assertEqual([r["restored"] for r in results], [10, 10])
        self.assertIn("skipping the snapshot", results[1]["_output"])

    def test_a_rank_without_snapshots_makes_every_rank_start_over(self) -> None:
        self.put(0, 11)
        self.assertEqual([r["restored"] for r in self.world()], [0, 0])

    def test_a_crashed_world_resumes_where_it_stopped_and_ends_the_same(self) -> None:
        reference = os.path.join(self.root, "reference")
        os.makedirs(reference)
        plain = run_world([self.program, "--train", "8"], extra_env=lambda rank: {
            "RINGLEADER_SNAPSHOT_DIR": os.path.join(reference, f"worker{rank}")})
        with self.assertRaises(WorldError):  # every rank exits right after step 5's snapshot
            self.world("--train", "8", "--crash_at", "5")
        resumed = self.world("--train", "8")
        self.assertEqual([r["restored"] for r in resumed], [5, 5])
        # Bit for bit the uninterrupted run's weights (CPU, gloo).
        self.assertEqual([r["weights"] for r in resumed], [r["weights"] for r in plain])


if __name__ == "__main__":
    unittest.main()
