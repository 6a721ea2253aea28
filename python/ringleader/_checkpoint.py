"""Where a command job keeps its checkpoints, and which one to resume from."""
from __future__ import annotations

import os
import re

_DIGITS = re.compile(r"\d+")
# Names of files still being written (write to a temporary name, then os.replace()).
_PARTIAL_SUFFIXES = (".tmp", ".partial", ".part", ".lock")


def checkpoint_dir(default: str | None = None) -> str | None:
    """The job's checkpoint directory (RINGLEADER_CHECKPOINT_DIR), else `default`.

    Empty or unset means the job has none (outside ringleader, or no checkpoint_dir in the job
    spec). The directory may not exist yet: create it before writing.
    """
    directory = os.environ.get("RINGLEADER_CHECKPOINT_DIR", "")
    return directory or default


def step_of(name: str) -> int | None:
    """The step number in a checkpoint's file name: the last run of digits before the
    extension ("step-120.pt" -> 120, "epoch2_step120.ckpt" -> 120); None when there is none."""
    stem = name.rsplit(".", 1)[0] if "." in name[1:] else name
    numbers = _DIGITS.findall(stem)
    return int(numbers[-1]) if numbers else None


def latest_checkpoint(directory: str | None = None) -> str | None:
    """The newest checkpoint file in `directory` (default: checkpoint_dir()), or None.

    Newest = highest step number in the name (see step_of); files without one rank below any
    numbered file, by modification time. Hidden files, sub-directories and names ending in
    .tmp/.partial/.part/.lock (files being written) are ignored.
    """
    directory = directory or checkpoint_dir()
    if not directory or not os.path.isdir(directory):
        return None
    best: tuple[int, int, str] | None = None
    best_path: str | None = None
    with os.scandir(directory) as entries:
        for entry in entries:
            name = entry.name
            if name.startswith(".") or name.endswith(_PARTIAL_SUFFIXES):
                continue
            try:
                if not entry.is_file():
                    continue
                mtime = entry.stat().st_mtime_ns
            except FileNotFoundError:  # deleted meanwhile (an old checkpoint being pruned)
                continue
            step = step_of(name)
            key = (-1 if step is None else step, mtime, name)
            if best is None or key > best:
                best, best_path = key, entry.path
    return best_path
