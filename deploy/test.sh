#!/usr/bin/env bash
# Runs every test (README command 2): set-up, `bazel test //...`, then one closing line
# "N passed, N failed" counted over individual test cases (gtest cases; one per shell test).
# Extra arguments go to `bazel test` (e.g. a narrower target pattern).
set -uo pipefail
cd "$(dirname "$0")/.."
deploy/setup.sh

targets=("$@")
if ((${#targets[@]} == 0)); then targets=(//...); fi

bazel test --keep_going "${targets[@]}"
bazel_rc=$?

testlogs=$(bazel info bazel-testlogs 2>/dev/null)
mapfile -t tests < <(bazel query "tests(set(${targets[*]}))" 2>/dev/null)
python3 deploy/count_test_results.py "$testlogs" "${tests[@]}"
count_rc=$?
if [ "$bazel_rc" != 0 ] && [ "$count_rc" == 0 ]; then
  # A build failure with no failing test case still fails the run.
  echo "bazel test exited with $bazel_rc" >&2
  exit "$bazel_rc"
fi
exit "$count_rc"
