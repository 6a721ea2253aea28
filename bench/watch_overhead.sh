#!/usr/bin/env bash
# Overhead of ringleader.torch.watch(): examples/pytorch/train.py (2 ranks, gloo, CPU) under
# torchrun, plain DDP (no RINGLEADER_* environment: watch() is a no-op) vs watched (reporting
# every step to a fake coordinator on 127.0.0.1), runs alternated. Prints train samples/s of
# both and the overhead (target <= 3%).
#
#   bench/watch_overhead.sh [--pairs 8] [--steps 500] [--batch-size 64] [--drift-every 50]
#                           [--no-pin-cpu]
#
# Each rank is pinned to its own CPU (train.py --pin-cpu) unless --no-pin-cpu: on a 2-CPU
# machine floating ranks make run-to-run noise (+-10%) larger than the effect measured.
#
# Needs Debian's python3-torch, python3-grpcio, python3-protobuf (deploy/setup.sh). Builds
# //python:ringleader_pkg first, unless RINGLEADER_PY_PKG names an already built package root
# (e.g. bazel-bin/python/pkg) to use instead.
set -euo pipefail
cd "$(dirname "$0")/.."
/usr/bin/python3 -c "import torch, grpc" 2>/dev/null || {
  echo "watch_overhead: python3-torch or python3-grpcio is missing: run deploy/setup.sh" >&2
  exit 1; }
if [ -n "${RINGLEADER_PY_PKG:-}" ]; then
  pkg=$(cd "$RINGLEADER_PY_PKG" && pwd)
else
  bazel build //python:ringleader_pkg >/dev/null 2>&1 || {
    echo "watch_overhead: bazel build //python:ringleader_pkg failed" >&2; exit 1; }
  pkg="$(bazel info bazel-bin 2>/dev/null)/python/pkg"
fi
[ -f "$pkg/ringleader/_proto/ringleader_pb2.py" ] || {
  echo "watch_overhead: $pkg holds no built ringleader package" >&2; exit 1; }
exec /usr/bin/python3 bench/watch_overhead.py --pkg "$pkg" "$@"
