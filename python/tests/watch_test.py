"""watch() in this process: a 1-rank gloo world, a fake coordinator, the model checks."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
import warnings
from typing import Any
from unittest import mock

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import ringleader.torch as rl
from fake_coordinator import FakeCoordinator
from world import rank_env, free_port


def model_and_optimizer(seed: int = 3, **ddp_kwargs: Any) -> tuple[DistributedDataParallel,
                                                                    torch.optim.Optimizer]:
    torch.manual_seed(seed)
    ddp = DistributedDataParallel(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)),
                                  **ddp_kwargs)
    return ddp, torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)


def one_step(ddp: nn.Module, optimizer: torch.optim.Optimizer, step: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(4, 8, generator=g), torch.randint(0, 3, (4,), generator=g)
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(ddp(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach()


class WatchTest(unittest.TestCase):
    fake: FakeCoordinator

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.mkdtemp()
        dist.init_process_group("gloo", init_method=f"file://{cls.tmp}/store", rank=0,
                                world_size=1)
        cls.fake = FakeCoordinator()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.fake.stop()
        dist.destroy_process_group()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self) -> None:
        self.environ = mock.patch.dict(os.environ, {"WORLD_SIZE": "1", "RANK": "0"})
        self.environ.start()
        for name in list(os.environ):
            if name.startswith("RINGLEADER_"):
                del os.environ[name]
        self.watchers: list[rl.Watcher] = []

    def tearDown(self) -> None:
        for watcher in self.watchers:
            watcher.close(1.0)
        self.environ.stop()

    def inside(self, job: str, **config: Any) -> None:
        self.fake.configure(job, world_size=1, **config)
        os.environ.update(self.fake.env(job, rank=0))

    def watch(self, *args: Any, **kwargs: Any) -> rl.Watcher:
        watcher = rl.watch(*args, **kwargs)
        self.watchers.append(watcher)
        return watcher

    # -- outside ringleader -------------------------------------------------------------------

    def test_outside_ringleader_watch_is_a_no_op(self) -> None:
        reference, ref_opt = model_and_optimizer()
        expected = [one_step(reference, ref_opt, s) for s in range(1, 4)]

        ddp, optimizer = model_and_optimizer()
        step_before = optimizer.step
        rl._warned_outside = False
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            watcher = self.watch(ddp, optimizer)
            self.watch(ddp, optimizer)  # warns once per process
        self.assertEqual([str(w.message) for w in caught if "RINGLEADER_COORDINATOR" in
                          str(w.message)].__len__(), 1)
        self.assertFalse(watcher.active)
        self.assertNotIn("step", optimizer.__dict__)
        self.assertEqual(optimizer.step, step_before)
        watcher.report_loss(1.0)
        watcher.set_epoch(1)
        watcher.note_checkpoint("x")
        self.assertTrue(watcher.flush())
        losses = [one_step(ddp, optimizer, s) for s in range(1, 4)]
        self.assertTrue(all(torch.equal(a, b) for a, b in zip(losses, expected)))
        # No comm hook was taken: the script can still register its own.
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)

    # -- model checks -------------------------------------------------------------------------

    def test_plain_module_with_world_size_2_is_a_type_error(self) -> None:
        os.environ["WORLD_SIZE"] = "2"
        model = nn.Linear(4, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for inside in (False, True):
            if inside:
                self.inside("type-error")
            with self.assertRaises(TypeError) as raised:
                self.watch(model, optimizer)
            message = str(raised.exception)
            self.assertIn("Linear, not a DistributedDataParallel", message)
            self.assertIn("WORLD_SIZE is 2", message)
            self.assertIn("DistributedDataParallel(model)", message)
        self.assertEqual(self.fake.requests("type-error"), [])

    def test_bool_buffers_over_nccl_are_refused_before_the_first_step(self) -> None:
        class WithMasks(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.fc = nn.Linear(4, 2)
                # uint8 while DDP is built: gloo cannot broadcast bool tensors at all (DDP's
                # constructor fails with "Invalid scalar type"); bool afterwards, as a model
                # whose masks turn bool on the GPU would have them.
                self.register_buffer("mask", torch.ones(4, dtype=torch.uint8))
                self.inner = nn.Module()
                self.inner.register_buffer("flag", torch.zeros(1, dtype=torch.uint8))
                self.inner.register_buffer("count", torch.zeros(1))

            def to_bool(self) -> None:
                self.mask = self.mask.bool()
                self.inner.flag = self.inner.flag.bool()

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.fc(x * self.mask)

        ddp = DistributedDataParallel(WithMasks())
        ddp.module.to_bool()
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
        self.assertEqual(rl._get_backend(ddp), "gloo")
        self.watch(ddp, optimizer)  # checked for nccl only
        with mock.patch.object(rl, "_get_backend", lambda model: "nccl"):
            with self.assertRaises(ValueError) as raised:
                rl.watch(ddp, optimizer)
            message = str(raised.exception)
            self.assertIn("bool buffers (mask, inner.flag)", message)
            self.assertNotIn("count", message)
            self.assertIn("broadcast_buffers=False", message)
            self.assertIn("torch.uint8", message)
            quiet = DistributedDataParallel(WithMasks(), broadcast_buffers=False)
            quiet.module.to_bool()
            self.watch(quiet, torch.optim.SGD(quiet.parameters(), lr=0.1))

    def test_watching_a_model_twice_is_refused(self) -> None:
        self.inside("twice")
        ddp, optimizer = model_and_optimizer()
        self.watch(ddp, optimizer)
        with self.assertRaisesRegex(RuntimeError, "already watched"):
            rl.watch(ddp, optimizer)

    def test_second_comm_hook_is_explained(self) -> None:
        self.inside("two-hooks")
        ddp, optimizer = model_and_optimizer()
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
        with self.assertRaises(RuntimeError) as raised:
            rl.watch(ddp, optimizer)
        self.assertIn("watch(..., comm_hook=hook, comm_state=state)", str(raised.exception))

    # -- inside ringleader --------------------------------------------------------------------

    def test_reports_every_step_and_wraps_the_given_hook(self) -> None:
        self.inside("custom-hook")
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        calls: list[int] = []

        def counting_hook(state: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
            calls.append(bucket.index())
            return default_hooks.allreduce_hook(state, bucket)

        ddp, optimizer = model_and_optimizer()
        watcher = self.watch(ddp, optimizer, drift_every=2, comm_hook=counting_hook,
                             total_steps=3)
        losses = [one_step(ddp, optimizer, s) for s in range(1, 4)]
        self.assertTrue(watcher.flush())
        self.assertEqual(len(calls), 3)
        reports = self.fake.steps("custom-hook", 0)
        self.assertEqual([r.step for r in reports], [1, 2, 3])
        self.assertEqual(watcher.step_count, 3)
        for report, loss in zip(reports, losses):
            self.assertEqual(report.collectives, 1)
            self.assertEqual(report.total_steps, 3)
            # One rank: the all-reduce changes nothing.
            self.assertEqual(report.local_grad_norm, report.synced_grad_norm)
            self.assertEqual(report.loss, 0.0)  # never reported
        # One rank: no drift broadcast (nothing to compare).
        self.assertFalse(any(r.has_drift for r in reports))

    def test_stop_answer_raises_at_the_next_step(self) -> None:
        self.inside("cancelled", stop_after_step=2, stop_reason="cancelled by alice")
        ddp, optimizer = model_and_optimizer()
        watcher = self.watch(ddp, optimizer)
        one_step(ddp, optimizer, 1)
        self.assertTrue(watcher.flush())
        self.assertIsNone(watcher.stop_reason)
        one_step(ddp, optimizer, 2)
        self.assertTrue(watcher.flush())
        self.assertEqual(watcher.stop_reason, "cancelled by alice")
        with self.assertRaises(rl.JobStopped) as raised:
            one_step(ddp, optimizer, 3)
        self.assertEqual(raised.exception.reason, "cancelled by alice")
        self.assertEqual(watcher.step_count, 2)

    def test_resume_checkpoint_and_late_loss_annotations(self) -> None:
        self.inside("resume")
        ddp, optimizer = model_and_optimizer()
        watcher = self.watch(ddp, optimizer)
        watcher.note_resume(10, "/ckpt/step-10.pt", ["/ckpt/step-12.pt: truncated"])
        watcher.set_epoch(2)
        loss = one_step(ddp, optimizer, 11)
        watcher.report_loss(loss)  # after optimizer.step(): step 11's
        watcher.note_checkpoint("/ckpt/step-11.pt")
        one_step(ddp, optimizer, 12)
        watcher.report_epoch(2, train_loss=0.25)
        self.assertTrue(watcher.flush())
        self.assertEqual([(e.epoch, e.train_loss) for e in self.fake.epochs("resume", 0)],
                         [(2, 0.25)])
        first, second = self.fake.steps("resume", 0)
        self.assertEqual((first.step, second.step), (11, 12))
        self.assertEqual(first.resumed_from_step, 10)
        self.assertEqual(first.resumed_from, "/ckpt/step-10.pt")
        self.assertEqual(list(first.skipped_checkpoints), ["/ckpt/step-12.pt: truncated"])
        self.assertEqual(first.checkpoint_written, "/ckpt/step-11.pt")
        self.assertEqual(first.loss, float(loss))
        self.assertEqual(first.epoch, 2)
        self.assertEqual(second.resumed_from, "")
        self.assertEqual(second.checkpoint_written, "")

    def test_lr_scheduler_before_and_after_watch(self) -> None:
        self.inside("scheduler")
        for scheduler_first in (True, False):
            ddp, optimizer = model_and_optimizer()
            if scheduler_first:
                scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
            watcher = self.watch(ddp, optimizer)
            if not scheduler_first:
                scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # "optimizer.step() overridden", order warnings
                one_step(ddp, optimizer, 1)
                scheduler.step()
            self.assertEqual(watcher.step_count, 1)

    def test_plain_module_in_a_one_rank_job_reports_without_waiting(self) -> None:
        self.inside("single", judge=False)  # a verdict never comes: must not be awaited
        torch.manual_seed(0)
        model = nn.Linear(8, 3)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        watcher = self.watch(model, optimizer)
        for s in range(1, 3):
            one_step(model, optimizer, s)
        self.assertTrue(watcher.flush())
        reports = self.fake.steps("single", 0)
        self.assertEqual([r.collectives for r in reports], [0, 0])
        expected = torch.sqrt(sum(p.grad.square().sum() for p in model.parameters()))
        self.assertAlmostEqual(reports[-1].local_grad_norm, float(expected), places=5)
        self.assertEqual(reports[-1].local_grad_norm, reports[-1].synced_grad_norm)

    def test_reports_are_flushed_at_exit(self) -> None:
        self.fake.configure("at-exit", world_size=1)
        script = textwrap.dedent("""
            import torch, torch.distributed as dist
            from torch import nn
            import ringleader.torch as rl
            dist.init_process_group("gloo")
            ddp = nn.parallel.DistributedDataParallel(nn.Linear(4, 2))
            optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
            watcher = rl.watch(ddp, optimizer)
            for _ in range(5):
                optimizer.zero_grad()
                ddp(torch.ones(2, 4)).sum().backward()
                optimizer.step()
            dist.barrier()
            del ddp
            dist.destroy_process_group()
        """)
        env = rank_env(0, 1, free_port())
        env.update(self.fake.env("at-exit", rank=0))
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                              text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual([r.step for r in self.fake.steps("at-exit", 0)], [1, 2, 3, 4, 5])


if __name__ == "__main__":
    unittest.main()
