#!/usr/bin/env bash
# usage: safetensors_python_cross_check_test.sh WRITER CHECKER_PY
# Our C++ writer exports a known model; an independent reader in Python (standard library
# only) checks names, shapes, dtype, metadata and values. python3 is required (deploy/setup.sh
# installs it): without it the test fails, it does not skip.
set -euo pipefail
writer=$1 checker=$2
python=/usr/bin/python3
if [ ! -x "$python" ]; then
  echo "FAIL: $python is required for this cross-check (install Debian's python3)" >&2
  exit 1
fi
out="${TEST_TMPDIR:?TEST_TMPDIR is not set; run under bazel test}/cross_check.safetensors"
"$writer" "$out"
"$python" "$checker" "$out"
