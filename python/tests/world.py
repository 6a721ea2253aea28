"""Runs an N-rank gloo world of subprocesses (the environment torchrun gives) for tests."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank: int, world_size: int, port: int) -> dict[str, str]:
    """The torchrun-style variables of one rank (no RINGLEADER_* ones)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RINGLEADER_", "TORCHELASTIC_"))}
    env.update({"RANK": str(rank), "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(rank),
                "LOCAL_WORLD_SIZE": str(world_size), "GROUP_RANK": "0",
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
                "TORCHELASTIC_RUN_ID": "test", "OMP_NUM_THREADS": "1"})
    return env


class WorldError(AssertionError):
    pass


def run_world(argv: list[str], world_size: int = 2,
              extra_env: Callable[[int], Mapping[str, str]] | None = None,
              timeout_s: float = 120.0) -> list[dict[str, Any]]:
    """Runs `python3 <argv> --result FILE` once per rank; returns each rank's JSON result.

    Raises WorldError with every rank's output when a rank fails or the world times out.
    """
    tmp = tempfile.mkdtemp(prefix="world-")
    port = free_port()
    procs = []
    for rank in range(world_size):
        env = rank_env(rank, world_size, port)
        if extra_env is not None:
            env.update(extra_env(rank))
        log = open(os.path.join(tmp, f"rank{rank}.log"), "wb")
        procs.append((subprocess.Popen(
            [sys.executable, *argv, "--result", os.path.join(tmp, f"rank{rank}.json")],
            env=env, stdout=log, stderr=subprocess.STDOUT), log))
    deadline = time.monotonic() + timeout_s
    timed_out = False
    for proc, log in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    for proc, log in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()

    def outputs() -> str:
        text = []
        for rank in range(world_size):
            with open(os.path.join(tmp, f"rank{rank}.log"), errors="replace") as f:
                text.append(f"--- rank {rank} (exit {procs[rank][0].returncode}) ---\n{f.read()}")
        return "\n".join(text)

    try:
        if timed_out or any(proc.returncode != 0 for proc, _ in procs):
            why = f"timed out after {timeout_s:.0f} s" if timed_out else "a rank failed"
            raise WorldError(f"{why}:\n{outputs()}")
        results = []
        for rank in range(world_size):
            with open(os.path.join(tmp, f"rank{rank}.json")) as f:
                result = json.load(f)
            result["_output"] = outputs()
            results.append(result)
        return results
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
