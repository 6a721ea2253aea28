#!/usr/bin/env bash
# usage: run_unittest.sh PKG_INIT TEST_PY
#   PKG_INIT: <root>/ringleader/__init__.py of the generated package (//python:ringleader_pkg)
#   TEST_PY:  the unittest module to run (python/tests/<name>.py)
# Runs Debian's /usr/bin/python3 (python3-torch, python3-grpcio and python3-protobuf are
# required: without them the test fails, it does not skip).
set -euo pipefail
pkg_init=$1 test_py=$2
python=/usr/bin/python3
if [ ! -x "$python" ]; then
  echo "FAIL: $python is required (Debian's python3 with python3-torch, python3-grpcio)" >&2
  exit 1
fi
if ! missing=$("$python" - <<'PY' 2>&1
import importlib
missing = []
for name, package in [("torch", "python3-torch"), ("grpc", "python3-grpcio"),
                      ("google.protobuf", "python3-protobuf"), ("numpy", "python3-numpy")]:
    try:
        importlib.import_module(name)
    except Exception as error:
        missing.append(f"{name} ({package}): {error}")
if missing:
    raise SystemExit("; ".join(missing))
PY
); then
  echo "FAIL: $python cannot import what these tests need: $missing (install the Debian packages: deploy/setup.sh)" >&2
  exit 1
fi
root=$(cd "$(dirname "$pkg_init")/.." && pwd)
tests=$(cd "$(dirname "$test_py")" && pwd)
module=$(basename "$test_py" .py)
export PYTHONPATH="$root:$tests${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
# One BLAS/OpenMP thread per rank process, as torchrun and ringleader set it.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export RL_TEST_EXAMPLES_DIR="$PWD/examples/pytorch"
# Temporary files (tempfile.mkdtemp) inside the test's own directory.
export TMPDIR="${TEST_TMPDIR:-$(mktemp -d)}"
cd "$TMPDIR"
exec "$python" -m unittest -v "$module"
