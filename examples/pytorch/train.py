#!/usr/bin/python3
"""Fashion-MNIST MLP (784-256-128-10) with PyTorch DDP over gloo on CPU: an ordinary torchrun
script that also runs as a ringleader command job (examples/pytorch/job.yaml).

    # torchrun (Python 3.11 needs non-default --redirects/--tee: see ../../python/README.md)
    /usr/bin/python3 -m torch.distributed.run --redirects 1 --tee 2 --log_dir /tmp/tr \
        --nproc_per_node 2 examples/pytorch/train.py --epochs 1

    # ringleader (from the repository root)
    ringleader submit examples/pytorch/job.yaml --set workdir=$PWD

The only ringleader-specific lines are `rl.watch(...)`, `watcher.report_loss(loss)`, the
checkpoint helpers and, with --snapshot-every, `rl.snapshot`/`rl.load_snapshot` (the worker's
memory); outside ringleader watch() warns once and changes nothing, and the snapshot calls do
nothing.

Prints one line per step: `step N loss <float.hex(loss)>` on rank 0 and `[rank R] step N ...`
on the others, so that two runs can be compared bit for bit; at the end rank 0 prints
`done steps S samples_per_second R cpu_us_per_step C` (training steps after the first: the
slowest rank's rate, and rank 0's CPU time per step over all its threads).
"""
from __future__ import annotations

import argparse
import gzip
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DistributedSampler

import ringleader.torch as rl

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def read_idx(path: str, limit: int = 0) -> np.ndarray:
    """A gzipped IDX file (uint8 data), at most `limit` items (0 = all)."""
    with gzip.open(path, "rb") as f:
        magic = f.read(4)
        if len(magic) != 4 or magic[:2] != b"\0\0" or magic[2] != 0x08:
            raise ValueError(f"{path}: not an IDX file of uint8")
        dims = struct.unpack(">" + "I" * magic[3], f.read(4 * magic[3]))
        count = dims[0] if limit <= 0 else min(limit, dims[0])
        item = int(np.prod(dims[1:], dtype=np.int64))
        data = f.read(count * item)
    if len(data) != count * item:
        raise ValueError(f"{path}: truncated")
    return np.frombuffer(data, dtype=np.uint8).reshape((count, *dims[1:]))


def load(directory: str, limit: int) -> tuple[torch.Tensor, torch.Tensor]:
    images = read_idx(os.path.join(directory, "train-images-idx3-ubyte.gz"), limit)
    labels = read_idx(os.path.join(directory, "train-labels-idx1-ubyte.gz"), limit)
    x = torch.from_numpy(images.reshape(len(images), -1).astype(np.float32) / 255.0)
    return x, torch.from_numpy(labels.astype(np.int64))


def attempt_number() -> int:
    """1 for the first attempt (ringleader generation or torchrun restart count + 1)."""
    generation = os.environ.get("RINGLEADER_GENERATION", "")
    if generation:
        return int(generation)
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0) + 1


def save_checkpoint(directory: str, step: int, epoch: int, model: nn.Module,
                    optimizer: torch.optim.Optimizer, keep: int) -> str:
    """Writes <directory>/step-<step>.pt atomically; keeps the newest `keep` checkpoints."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"step-{step}.pt")
    tmp = path + ".tmp"
    torch.save({"step": step, "epoch": epoch, "model": model.state_dict(),
                "optimizer": optimizer.state_dict()}, tmp)
    os.replace(tmp, path)
    old = sorted((f for f in os.listdir(directory) if f.startswith("step-") and f.endswith(".pt")),
                 key=lambda f: int(f[5:-3]) if f[5:-3].isdigit() else -1)
    for name in old[:-keep]:
        try:
            os.remove(os.path.join(directory, name))
        except FileNotFoundError:
            pass
    return path


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=0, help="stop after N steps (0 = all)")
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=0.0005)
    p.add_argument("--data", default=DEFAULT_DATA)
    p.add_argument("--max-train-examples", type=int, default=0, help="0 = all")
    p.add_argument("--drift-every", type=int, default=None,
                   help="default: the job's drift_interval_steps (50 outside ringleader)")
    p.add_argument("--bug", choices=["none", "unwrapped"], default="none",
                   help="unwrapped: compute the loss on ddp_model.module (no gradient sync)")
    p.add_argument("--raise-on-rank", type=int, default=-1)
    p.add_argument("--raise-at-step", type=int, default=0)
    p.add_argument("--raise-every-attempt", action="store_true",
                   help="raise in every attempt, not only the first")
    p.add_argument("--checkpoint-every", type=int, default=0,
                   help="rank 0 saves every N steps; a restarted attempt resumes (0 = never)")
    p.add_argument("--checkpoint-dir", default="",
                   help="default: the job's (RINGLEADER_CHECKPOINT_DIR)")
    p.add_argument("--keep-checkpoints", type=int, default=2)
    p.add_argument("--snapshot-every", type=int, default=0,
                   help="every rank saves its state to the worker's memory every N steps "
                        "(RINGLEADER_SNAPSHOT_DIR); a restarted attempt resumes from the newer "
                        "of the snapshot and the checkpoint (0 = never)")
    p.add_argument("--pin-cpu", action="store_true",
                   help="pin this rank to one CPU (LOCAL_RANK-th of the allowed ones)")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    if args.pin_cpu:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[int(os.environ.get("LOCAL_RANK", "0")) % len(cpus)]})
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    prefix = "" if rank == 0 else f"[rank {rank}] "
    torch.manual_seed(args.seed)
    x, y = load(args.data, args.max_train_examples)

    model = Mlp()
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    loss_fn = nn.CrossEntropyLoss()
    sampler = DistributedSampler(range(len(x)), num_replicas=world, rank=rank, shuffle=True,
                                 seed=args.seed, drop_last=True)
    steps_per_epoch = len(sampler) // args.batch_size
    total = args.epochs * steps_per_epoch
    if args.max_steps > 0:
        total = min(total, args.max_steps)
    watcher = rl.watch(ddp, optimizer, drift_every=args.drift_every, total_steps=total)

    checkpoints = args.checkpoint_dir or rl.checkpoint_dir() or ""
    step = 0
    resume, resume_path = None, ""
    if args.checkpoint_every > 0 and checkpoints:
        latest = rl.latest_checkpoint(checkpoints)
        if latest is not None:
            resume, resume_path = torch.load(latest, map_location="cpu"), latest
    if args.snapshot_every > 0:
        # Every rank calls it (the ranks agree on one step); the newer of it and the checkpoint.
        snapshot = rl.load_snapshot(map_location="cpu")
        if snapshot is not None and (resume is None or snapshot["step"] >= resume["step"]):
            resume, resume_path = snapshot, snapshot["path"]
    if resume is not None:
        model.load_state_dict(resume["model"])
        optimizer.load_state_dict(resume["optimizer"])
        step = int(resume["step"])
        watcher.note_resume(step, resume_path)
        print(f"{prefix}resumed from {resume_path} after step {step}", flush=True)

    inject = (rank == args.raise_on_rank and args.raise_at_step > 0 and
              (args.raise_every_attempt or attempt_number() == 1))
    started = cpu_started = 0.0
    timed_steps = 0
    for epoch in range(step // max(steps_per_epoch, 1), args.epochs):
        if step >= total:
            break
        sampler.set_epoch(epoch)
        watcher.set_epoch(epoch)
        order = torch.tensor(list(sampler))
        loss_sum, losses = 0.0, 0
        for i in range(step - epoch * steps_per_epoch, steps_per_epoch):
            if step >= total:
                break
            step += 1
            index = order[i * args.batch_size:(i + 1) * args.batch_size]
            optimizer.zero_grad(set_to_none=True)
            forward = ddp.module if args.bug == "unwrapped" else ddp
            loss = loss_fn(forward(x[index]), y[index])
            if inject and step == args.raise_at_step:
                raise ValueError(f"injected failure at step {step} on rank {rank}")
            loss.backward()
            watcher.report_loss(loss)
            optimizer.step()
            value = loss.item()
            loss_sum, losses = loss_sum + value, losses + 1
            print(f"{prefix}step {step} loss {value.hex()}")
            if started == 0.0:
                started = time.perf_counter()  # the clock starts after the first step
                cpu_started = time.process_time()
            else:
                timed_steps += 1
            if rank == 0 and args.checkpoint_every > 0 and checkpoints and \
                    step % args.checkpoint_every == 0 and step < total:
                path = save_checkpoint(checkpoints, step, epoch, model, optimizer,
                                       args.keep_checkpoints)
                watcher.note_checkpoint(path)
            if args.snapshot_every > 0 and step % args.snapshot_every == 0 and step < total:
                rl.snapshot(ddp, optimizer, step)
        if rank == 0 and losses and step == (epoch + 1) * steps_per_epoch:
            watcher.report_epoch(epoch, train_loss=loss_sum / losses)  # rank 0's mean

    elapsed = torch.tensor([time.perf_counter() - started if started else 0.0],
                           dtype=torch.float64)
    cpu_us = (time.process_time() - cpu_started) / timed_steps * 1e6 if timed_steps else 0.0
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    if rank == 0:
        rate = timed_steps * args.batch_size * world / elapsed.item() if elapsed.item() else 0.0
        # CPU time of this process (all its threads) per step: the work, without the waiting.
        print(f"done steps {step} samples_per_second {rate:.1f} cpu_us_per_step {cpu_us:.0f}")
    sys.stdout.flush()
    watcher.close()
    # Ending a gloo job cleanly: every rank here, the DDP model (and its comm hook) gone, then
    # the process group (a bare destroy_process_group() can abort at exit).
    dist.barrier()
    del ddp, watcher
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
