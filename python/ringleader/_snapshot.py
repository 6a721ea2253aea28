"""Snapshots in the worker's memory for a command job: save the training state after a step,
resume from it after a restart without reading a checkpoint from disk.

    import ringleader.torch as rl

    dist.init_process_group("gloo")              # restore() agrees on one step across ranks
    model, optimizer = build()
    start = rl.restore(model, optimizer)         # 0 when there is nothing to resume from
    ddp = DistributedDataParallel(model)
    for step in range(start + 1, steps + 1):
        ...
        optimizer.step()
        rl.snapshot(ddp, optimizer, step)        # $RINGLEADER_SNAPSHOT_DIR/rank-R/step-N.pt

The worker daemon gives each rank of a job a directory in its memory (its --snapshot_dir, on
/dev/shm by default; RINGLEADER_SNAPSHOT_DIR). It outlives the rank's process, so the next
attempt of the job on the same worker finds it, but not the host. The launcher removes it when
the command exits 0; the daemon empties it when it starts and stops and when another job comes.

With DistributedDataParallel every rank holds the whole state, so each rank saves and restores
its own copy. Unlike ringleader's own trainer, a command job's rank that finds no snapshot (a
replaced host, a rank placed on another worker) is not sent one by its peers: restore() then
agrees on the newest step every rank holds, and on 0 (start over, or from the script's own
checkpoint) when there is none.
"""
from __future__ import annotations

import os
import pickle
import re
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

__all__ = ["snapshot", "restore", "load_snapshot", "snapshot_dir", "KEEP"]

# Snapshots kept per rank: the newest and the one before it (the newest may be torn by a crash
# while it was written; a rank may also be one step ahead of its peers).
KEEP = 2

_NAME = re.compile(r"step-(\d+)\.pt")
_TEMP_SUFFIX = ".tmp"


def snapshot_dir() -> str | None:
    """This rank's snapshot directory ($RINGLEADER_SNAPSHOT_DIR/rank-<RANK>), or None when the
    job has none (outside ringleader, or a worker started with --snapshot_dir=none)."""
    root = os.environ.get("RINGLEADER_SNAPSHOT_DIR", "")
    if not root:
        return None
    rank = os.environ.get("RINGLEADER_RANK") or os.environ.get("RANK") or "0"
    return os.path.join(root, f"rank-{int(rank)}")


def _module(model: nn.Module) -> nn.Module:
    """The module whose state is saved: a DDP (or DataParallel) wrapper's inner module, so that a
    snapshot of the wrapped model restores into the bare one and back."""
    inner = getattr(model, "module", None)
    if isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)) and isinstance(
            inner, nn.Module):
        return inner
    return model


def _steps(directory: str) -> list[int]:
    """The steps of the snapshot files in `directory`, newest first."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    steps = []
    for name in names:
        match = _NAME.fullmatch(name)
        if match:
            steps.append(int(match.group(1)))
    return sorted(steps, reverse=True)


def _path(directory: str, step: int) -> str:
    return os.path.join(directory, f"step-{step}.pt")


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def snapshot(model: nn.Module, optimizer: torch.optim.Optimizer | None, step: int,
             extra: Any = None) -> str | None:
    """Saves the model's and the optimizer's state dicts, `step` and `extra` to
    $RINGLEADER_SNAPSHOT_DIR/rank-<RANK>/step-<step>.pt and returns that path; None (nothing
    written) when RINGLEADER_SNAPSHOT_DIR is unset, so the same script runs anywhere.

    Call it after `optimizer.step()` of step `step` (1-based: the steps done). The file is
    written to a temporary name in the same directory, flushed and fsynced, then renamed: a crash
    leaves the previous snapshot whole. The newest KEEP (2) are kept, older ones removed.
    `extra` (e.g. the data position, an RNG state) should be plain data: tensors, numbers,
    strings, None, and lists, tuples and dicts of them (what torch.load(weights_only=True) reads
    back; restore() reads with it where the installed torch can).
    """
    directory = snapshot_dir()
    if directory is None:
        return None
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"ringleader.torch.snapshot: step must be an int >= 0, got {step!r}")
    os.makedirs(directory, mode=0o700, exist_ok=True)
    state = {
        "step": step,
        "model": _module(model).state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "extra": extra,
    }
    path = _path(directory, step)
    temp = os.path.join(directory, f".step-{step}.pt.{os.getpid()}{_TEMP_SUFFIX}")
    try:
        with open(temp, "wb") as out:
            torch.save(state, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.remove(temp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)
    _prune(directory, keep_temp=temp)
    return path


def _prune(directory: str, keep_temp: str) -> None:
    """Removes all but the newest KEEP snapshots, and temporary files a crashed writer left."""
    for step in _steps(directory)[KEEP:]:
        try:
            os.remove(_path(directory, step))
        except FileNotFoundError:
            pass
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for name in names:
        path = os.path.join(directory, name)
        if name.startswith(".step-") and name.endswith(_TEMP_SUFFIX) and path != keep_temp:
            try:
                os.remove(path)
            except FileNotFoundError:
                pass


def _load(path: str, step: int, map_location: Any) -> dict[str, Any]:
    """The snapshot in `path`, checked; raises with why when it does not load whole."""
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError:
        # An older torch's weights-only reader lacks some of what a state dict holds (torch 1.13:
        # floats). The full unpickler runs code a file names: only for this user's own files.
        if os.stat(path).st_uid != os.getuid():
            raise
        state = torch.load(path, map_location=map_location, weights_only=False)
    if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
        raise ValueError("not a ringleader snapshot (no model state dict)")
    if state.get("step") != step:
        raise ValueError(f"it holds step {state.get('step')!r}, its name says {step}")
    return state


def _gather(value: Any) -> list[Any]:
    """`value` of every rank of the default process group (just this one's without one)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [value]
    values: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(values, value)
    return values


def _agree(candidates: list[int], try_load: Callable[[int], bool]) -> int | None:
    """The newest step every rank holds and loads whole, or None: each round the ranks share the
    steps they may still load, try the newest common one, and drop it where it fails to load."""
    pending = sorted(set(candidates), reverse=True)
    while True:
        common = set.intersection(*(set(steps) for steps in _gather(pending)))
        if not common:
            return None
        step = max(common)
        loaded = try_load(step)
        if not loaded:
            pending.remove(step)
        if all(_gather(loaded)):
            return step


def load_snapshot(map_location: Any = None) -> dict[str, Any] | None:
    """The snapshot to resume from, as saved ({"step", "model", "optimizer", "extra"} plus "path"),
    or None: RINGLEADER_SNAPSHOT_DIR unset, or no step that every rank holds whole.

    The newest file of this rank that loads whole is taken; a torn or corrupt one is skipped
    with a warning naming it (and the next older one tried). With the default process group
    initialised (call it after `dist.init_process_group`) every rank of the group must call it:
    they agree on the newest step each of them holds, so that no rank resumes a step ahead of
    the others (a crash may come after some ranks saved a step and before others did). Without
    one each rank takes its own newest. `map_location` is torch.load's (e.g. "cpu", or the
    rank's device).
    """
    directory = snapshot_dir()
    if (directory is None and not (dist.is_available() and dist.is_initialized())):
        return None
    steps = _steps(directory) if directory is not None else []
    if (not (dist.is_available() and dist.is_initialized())
            and int(os.environ.get("WORLD_SIZE", "1") or 1) > 1 and steps):
        warnings.warn("ringleader.torch.restore before dist.init_process_group: each rank takes "
                      "its own newest snapshot, which may differ from its peers' step; call it "
                      "after init_process_group", RuntimeWarning, stacklevel=3)
    loaded: dict[int, dict[str, Any]] = {}

    def try_load(step: int) -> bool:
        if step in loaded:
            return True
        path = _path(directory, step)
        try:
            state = _load(path, step, map_location)
        except Exception as error:  # a torn file raises whatever the unpickler meets
            warnings.warn(f"ringleader.torch.restore: skipping the snapshot {path}, which does "
                          f"not load whole ({type(error).__name__}: {error})", RuntimeWarning,
                          stacklevel=4)
            return False
        loaded.clear()  # one snapshot in memory at a time
        state["path"] = path
        loaded[step] = state
        return True

    step = _agree(steps, try_load)
    return None if step is None else loaded[step]


def restore(model: nn.Module, optimizer: torch.optim.Optimizer | None = None,
            map_location: Any = None) -> int:
    """Loads the snapshot load_snapshot() picks into `model` (or a DDP wrapper's module) and
    `optimizer`, and returns its step: the steps already done, so training goes on with step
    + 1. Returns 0 and changes nothing when there is none (or RINGLEADER_SNAPSHOT_DIR is unset).

    Call it before the first step, after dist.init_process_group (every rank calls it). Restoring
    the bare model before wrapping it in DDP works too (DDP then broadcasts rank 0's weights,
    which are the same). The saved `extra` is in load_snapshot()'s answer.
    """
    state = load_snapshot(map_location)
    if state is None:
        return 0
    _module(model).load_state_dict(state["model"])
    if optimizer is not None and state.get("optimizer") is not None:
        optimizer.load_state_dict(state["optimizer"])
    return int(state["step"])
