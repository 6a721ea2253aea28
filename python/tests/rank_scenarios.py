"""One rank of a test world (see world.py): runs several training scenarios in one gloo process
group and writes what it saw as JSON (`--result FILE`).

Scenarios, in order (each its own RINGLEADER_JOB, so the fake coordinator answers each its way):
  plain     N steps of DDP without watch(): the reference losses and parameters
  watched   the same N steps with watch() (drift_every=D)
  drift     watch(); after step P rank 1 adds DELTA to fc2.bias[0]
  stop      the loss computed on ddp_model.module (the classic bug): expects JobStopped
  warn      the same bug under a coordinator that judges the step and lets the job go on
"""
from __future__ import annotations

import argparse
import json
import os
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import ringleader.torch as rl


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 32)
        self.fc3 = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def batch(rank: int, step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g)


def make(seed: int) -> tuple[DistributedDataParallel, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    # Small buckets (the first one included): several collectives per step.
    dist._DEFAULT_FIRST_BUCKET_BYTES = 4096
    ddp = DistributedDataParallel(Mlp(), bucket_cap_mb=0.005)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    return ddp, optimizer


def train(ddp: DistributedDataParallel, optimizer: torch.optim.Optimizer, steps: int,
          watcher: rl.Watcher | None = None, unwrapped: bool = False,
          perturb_after: int = 0, delta: float = 0.0) -> dict[str, Any]:
    rank = dist.get_rank()
    loss_fn = nn.CrossEntropyLoss()
    losses: list[str] = []
    grad_norms: list[float] = []
    out: dict[str, Any] = {}
    try:
        for step in range(1, steps + 1):
            optimizer.zero_grad(set_to_none=True)
            x, y = batch(rank, step)
            model = ddp.module if unwrapped else ddp
            loss = loss_fn(model(x), y)
            loss.backward()
            grad_norms.append(float(torch.sqrt(sum(p.grad.double().square().sum()
                                                   for p in ddp.parameters()))))
            if watcher is not None and step % 2 == 0:
                watcher.report_loss(loss)  # before optimizer.step()
            optimizer.step()
            if watcher is not None and step % 2 == 1:
                watcher.report_loss(loss)  # after optimizer.step(): the step just closed
            losses.append(float(loss).hex())
            if perturb_after and step == perturb_after and rank == 1:
                with torch.no_grad():
                    ddp.module.fc2.bias[0] += delta
    except rl.JobStopped as stopped:
        out["stopped_at"] = len(losses) + 1
        out["stop_reason"] = stopped.reason
    out["losses"] = losses
    out["grad_norms"] = grad_norms
    out["params"] = {name: p.detach().double().sum().item().hex()
                     for name, p in ddp.module.named_parameters()}
    if watcher is not None:
        watcher.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--drift-every", type=int, default=3)
    parser.add_argument("--perturb-after", type=int, default=3)
    parser.add_argument("--delta", type=float, default=0.5)
    parser.add_argument("--scenarios", default="plain,watched,drift,stop,warn")
    parser.add_argument("--result", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    results: dict[str, Any] = {"rank": dist.get_rank()}
    for name in args.scenarios.split(","):
        os.environ["RINGLEADER_JOB"] = name
        ddp, optimizer = make(seed=7)
        if name == "plain":
            results[name] = train(ddp, optimizer, args.steps)
        elif name == "watched":
            watcher = rl.watch(ddp, optimizer, drift_every=args.drift_every,
                               total_steps=args.steps)
            watcher.set_epoch(3)
            results[name] = train(ddp, optimizer, args.steps, watcher)
        elif name == "drift":
            watcher = rl.watch(ddp, optimizer, drift_every=args.perturb_after + 1)
            results[name] = train(ddp, optimizer, args.perturb_after + 1, watcher,
                                  perturb_after=args.perturb_after, delta=args.delta)
        elif name in ("stop", "warn"):
            watcher = rl.watch(ddp, optimizer, drift_every=0)
            results[name] = train(ddp, optimizer, 3, watcher, unwrapped=True)
        else:
            raise SystemExit(f"unknown scenario {name}")
        dist.barrier()
        del ddp
    dist.barrier()
    dist.destroy_process_group()
    with open(args.result, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
