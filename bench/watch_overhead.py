#!/usr/bin/python3
"""Driver of bench/watch_overhead.sh: alternates plain and watched torchrun runs of
examples/pytorch/train.py and prints samples/s of both and the overhead.

Each run's rate is train.py's own figure (rank 0's `done ... samples_per_second`): training steps
after the first, data in memory, the slowest rank's time. Runs alternate (plain, watched, plain,
...) so that drifting machine load hits both alike; the figure is the ratio of the medians, with
the median and quartiles of the pairs' ratios to show the noise.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "examples", "pytorch", "train.py")
FAKE = os.path.join(ROOT, "python", "tests", "fake_coordinator.py")
DONE = re.compile(r"done steps (\d+) samples_per_second ([0-9.]+) cpu_us_per_step ([0-9.]+)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args: argparse.Namespace, env: dict[str, str]) -> tuple[float, float]:
    """One torchrun run: (samples/s, rank 0's CPU microseconds per step)."""
    log_dir = tempfile.mkdtemp(prefix="watch-overhead-")
    command = [sys.executable, "-m", "torch.distributed.run", "--redirects", "1", "--tee", "2",
               "--log_dir", log_dir, "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
               "--master_port", str(free_port()), TRAIN, "--epochs", "1000", "--max-steps", str(args.steps),
               "--batch-size", str(args.batch_size), "--drift-every", str(args.drift_every)]
    if args.pin_cpu:
        command.append("--pin-cpu")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    stdout = ""
    for directory, _, files in os.walk(log_dir):
        if "stdout.log" in files:
            with open(os.path.join(directory, "stdout.log")) as f:
                stdout += f.read()
    shutil.rmtree(log_dir, ignore_errors=True)
    match = DONE.search(stdout)
    if done.returncode != 0 or match is None:
        sys.exit(f"watch_overhead: run failed (exit {done.returncode}):\n{done.stderr[-4000:]}"
                 f"\n{stdout[-2000:]}")
    if int(match.group(1)) != args.steps:
        sys.exit(f"watch_overhead: ran {match.group(1)} steps, not {args.steps}")
    return float(match.group(2)), float(match.group(3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pkg", required=True, help="the ringleader package root (PYTHONPATH)")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--drift-every", type=int, default=50)
    parser.add_argument("--no-pin-cpu", dest="pin_cpu", action="store_false",
                        help="let the ranks float over the CPUs (noisier on a small machine)")
    args = parser.parse_args()

    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("RINGLEADER_", "TORCHELASTIC_"))}
    base["PYTHONPATH"] = args.pkg + (os.pathsep + base["PYTHONPATH"]
                                     if base.get("PYTHONPATH") else "")
    base["OMP_NUM_THREADS"] = "1"
    base["PYTHONWARNINGS"] = "ignore::RuntimeWarning"

    work = tempfile.mkdtemp(prefix="watch-overhead-fake-")
    address_file, summary_file = os.path.join(work, "address"), os.path.join(work, "summary")
    fake = subprocess.Popen([sys.executable, FAKE, "--address-file", address_file,
                             "--summary-file", summary_file],
                            env={**base, "PYTHONPATH": base["PYTHONPATH"] + os.pathsep +
                                 os.path.dirname(FAKE)})
    try:
        for _ in range(200):
            if os.path.exists(address_file):
                break
            time.sleep(0.05)
        with open(address_file) as f:
            address = f.read().strip()
        print(f"2 ranks (gloo, CPU, 1 thread each{', pinned to a CPU each' if args.pin_cpu else ''}), "
              f"{args.steps} steps of batch "
              f"{args.batch_size} per rank, drift every {args.drift_every}; fake coordinator "
              f"{address}; {args.pairs} alternating pairs", flush=True)
        plain: list[float] = []
        watched: list[float] = []
        plain_cpu: list[float] = []
        watched_cpu: list[float] = []
        for i in range(args.pairs):
            rate, cpu = run(args, base)
            plain.append(rate)
            plain_cpu.append(cpu)
            env = {**base, "RINGLEADER_COORDINATOR": address, "RINGLEADER_JOB": f"bench-{i}",
                   "RINGLEADER_GENERATION": "1"}
            rate, cpu = run(args, env)
            watched.append(rate)
            watched_cpu.append(cpu)
            print(f"pair {i + 1}: plain {plain[-1]:8.0f} samples/s {plain_cpu[-1]:6.0f} us CPU/step"
                  f"   watched {watched[-1]:8.0f} samples/s {watched_cpu[-1]:6.0f} us CPU/step"
                  f"   ({watched[-1] / plain[-1] - 1:+.1%})", flush=True)
    finally:
        fake.send_signal(signal.SIGTERM)
        fake.wait(timeout=30)
    with open(summary_file) as f:
        summary = json.load(f)
    shutil.rmtree(work, ignore_errors=True)
    for i in range(args.pairs):
        ranks = summary.get(f"bench-{i}", {}).get("ranks", {})
        got = [ranks.get(str(r), {}).get("reports", 0) for r in (0, 1)]
        if got != [args.steps, args.steps]:
            sys.exit(f"watch_overhead: watched run {i + 1} reported {got} steps per rank, "
                     f"not {args.steps}")
    requests = sum(job["requests"] for job in summary.values()) / max(len(summary), 1)
    p, w = statistics.median(plain), statistics.median(watched)
    ratios = [b / a for a, b in zip(plain, watched)]
    print(f"plain DDP      median {p:8.0f} samples/s  (min {min(plain):.0f}, max {max(plain):.0f})")
    print(f"with watch()   median {w:8.0f} samples/s  (min {min(watched):.0f}, "
          f"max {max(watched):.0f}); every step reported "
          f"({requests:.0f} ReportProgress calls per run, 2 ranks)")
    quartiles = statistics.quantiles([1 - r for r in ratios], n=4) if len(ratios) > 1 else \
        [1 - ratios[0]] * 3
    pc, wc = statistics.median(plain_cpu), statistics.median(watched_cpu)
    print(f"CPU per step   plain median {pc:.0f} us, watched median {wc:.0f} us: {wc - pc:+.0f} us "
          f"({wc / pc - 1:+.1%}) of rank 0's CPU time (all threads; less noisy than throughput)")
    print(f"overhead       {1 - w / p:+.1%} of median throughput (paired runs: median "
          f"{1 - statistics.median(ratios):+.1%}, quartiles {quartiles[0]:+.1%} .. "
          f"{quartiles[2]:+.1%}); target <= 3%")


if __name__ == "__main__":
    main()
