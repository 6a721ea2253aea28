#!/usr/bin/env python3
"""Counts test cases from Bazel's test.xml files and prints "N passed, N failed".

usage: count_test_results.py TESTLOGS_DIR //pkg:test ...

A test target without a test.xml (it failed to build, or did not run) counts as one failure; a
sharded target (shard_count) has one test.xml per shard, under shard_K_of_N/, each counted
(a missing shard counts as one failure).
Skipped cases (e.g. the GPU suite on a machine without a GPU) are listed but count as neither.
"""
import os
import sys
import xml.etree.ElementTree as ET


def result_files(testlogs, targets):
    """(target, test.xml path) pairs: one per target, or one per shard of a sharded target."""
    for target in targets:
        rel = target.lstrip("/").replace(":", "/")
        directory = os.path.join(testlogs, rel)
        shards = sorted(d for d in (os.listdir(directory) if os.path.isdir(directory) else [])
                        if d.startswith("shard_"))
        if not shards:
            yield target, os.path.join(directory, "test.xml")
            continue
        total = int(shards[0].rsplit("_of_", 1)[1])
        for k in range(1, total + 1):
            yield f"{target} (shard {k} of {total})", os.path.join(
                directory, f"shard_{k}_of_{total}", "test.xml")


def main():
    testlogs, targets = sys.argv[1], sys.argv[2:]
    passed = failed = skipped = 0
    failures = []
    for target, path in result_files(testlogs, targets):
        if not os.path.exists(path):
            failed += 1
            failures.append(f"{target} (no result: it did not build or did not run)")
            continue
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as e:
            failed += 1
            failures.append(f"{target} (unreadable test.xml: {e})")
            continue
        cases = list(root.iter("testcase"))
        if not cases:
            failed += 1
            failures.append(f"{target} (no test cases in test.xml)")
            continue
        for case in cases:
            name = f"{target} {case.get('classname', '')}.{case.get('name', '')}"
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
                failures.append(name)
            elif case.find("skipped") is not None or case.get("result") == "skipped" \
                    or case.get("status") == "notrun":
                skipped += 1
            else:
                passed += 1
    for f in failures:
        print(f"FAILED: {f}")
    if skipped:
        print(f"{skipped} skipped (e.g. GPU tests on a machine without a GPU)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
