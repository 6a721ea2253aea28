#!/usr/bin/python3
"""The tables of bench/strategy_compare.sh, from the JSON it saved for each job.

--dir holds `done` (one line per finished job: "LABEL STRATEGY RANKS ROUND NAME", LABEL big or
small) and, per NAME, `ringleader plan --output json` (NAME.plan.json), `ringleader status --output
json` (NAME.status.json) and `ringleader metrics --format json` (NAME.metrics.json).
"""
import argparse
import collections
import json
import os
import statistics
import sys


def load(directory, name, kind):
    with open(os.path.join(directory, f"{name}.{kind}.json")) as f:
        return json.load(f)


def mib(value):
    return f"{value / 2**20:,.1f} MiB" if value else "-"


def predicted(plan, strategy):
    """The plan's bytes for the rank holding the most (0 when the plan has no such row)."""
    for row in plan.get("strategies", []):
        if row.get("strategy") == strategy:
            return int(row.get("memory", {}).get("total_bytes", 0))
    return 0


def measured(status):
    """Each figure of RankMemory, the largest over the ranks that reported one."""
    most = collections.Counter()
    for rank in status.get("ranks", []):
        for field, value in rank.get("memory", {}).items():
            most[field] = max(most[field], int(value))
    return most


def samples_per_second(metrics, batch_size, ranks):
    """batch x ranks / the median over the steps after the first of the slowest rank's step
    time (the median: a step slowed by another program on the machine does not count)."""
    slowest = collections.defaultdict(float)
    for point in metrics.get("points", []):
        step = int(point.get("step", 0))
        if step >= 2:
            slowest[step] = max(slowest[step], float(point.get("step_ms", 0)))
    step_ms = statistics.median(slowest.values()) if slowest else 0
    return batch_size * ranks / (step_ms / 1000) if step_ms > 0 else 0.0


def rates(rounds, base_rounds):
    """The median samples/s over the rounds and the median of each round's ratio to the same
    round's base (ddp), as table cells."""
    rate = statistics.median(run["rate"] for run in rounds.values())
    ratios = [run["rate"] / base_rounds[r]["rate"] for r, run in rounds.items()
              if base_rounds.get(r, {}).get("rate")]
    return f"{rate:,.0f}", f"{statistics.median(ratios):.2f}x" if ratios else "-"


def print_table(header, rows):
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    for row in [header] + rows:
        print("  ".join(str(cell).rjust(width) for cell, width in zip(row, widths)).rstrip())


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--batch_size", type=int, required=True)
    args = parser.parse_args()

    runs = collections.defaultdict(dict)  # (label, strategy, ranks) -> round -> figures
    with open(os.path.join(args.dir, "done")) as f:
        for line in f:
            label, strategy, ranks, round_number, name = line.split()
            ranks = int(ranks)
            memory = measured(load(args.dir, name, "status"))
            runs[(label, strategy, ranks)][round_number] = {
                "predicted": predicted(load(args.dir, name, "plan"), strategy),
                "components": memory["total_bytes"],
                "allocator": memory["allocator_bytes"],
                "grad_opt": memory["gradient_bytes"] + memory["optimizer_bytes"],
                "rate": samples_per_second(load(args.dir, name, "metrics"), args.batch_size,
                                           ranks),
            }

    print("\nmemory per rank (the rank holding the most) and train samples/s (medians)")
    rows = []
    for (label, strategy, ranks), rounds in runs.items():
        if label != "big":
            continue
        run = max(rounds.values(), key=lambda run: run["allocator"])  # the same but for noise
        ddp_rounds = runs.get(("big", "ddp", ranks), {})
        ddp_grad_opt = max((ddp["grad_opt"] for ddp in ddp_rounds.values()), default=0)
        rows.append([strategy, ranks, mib(run["predicted"]), mib(run["components"]),
                     mib(run["allocator"]),
                     f"{100 * run['grad_opt'] / ddp_grad_opt:.0f}%" if ddp_grad_opt else "-",
                     *rates(rounds, ddp_rounds)])
    rows.sort(key=lambda row: (row[1], row[0] != "ddp"))
    print_table(["strategy", "ranks", "predicted", "buffers", "heap growth", "grad+opt vs ddp",
                 "samples/s", "vs ddp"], rows)

    print("\ndefault model (784-256-128-10), 2 ranks: train samples/s (medians)")
    rows = []
    for (label, strategy, ranks), rounds in runs.items():
        if label == "small":
            rows.append([strategy, ranks, *rates(rounds, runs.get(("small", "ddp", 2), {}))])
    rows.sort(key=lambda row: row[0] != "ddp")
    print_table(["strategy", "ranks", "samples/s", "vs ddp"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
