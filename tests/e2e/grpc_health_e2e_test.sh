#!/usr/bin/env bash
# usage: grpc_health_e2e_test.sh TEST_PY COORDINATOR WORKER RANK
# Runs grpc_health_e2e_test.py (a generic gRPC client asking the real coordinator and worker
# daemon for health and reflection) with Debian's /usr/bin/python3, not the first python3 on
# PATH. Fails, never skips, when a package it needs is missing.
set -euo pipefail
test_py=$1
shift
python=/usr/bin/python3
missing=()
[ -x "$python" ] || missing+=("$python (python3)")
[ -x /usr/bin/protoc ] || missing+=("/usr/bin/protoc (protobuf-compiler)")
for proto in grpc/health/v1/health.proto grpc/reflection/v1alpha/reflection.proto; do
  [ -f "/usr/share/grpc-proto/$proto" ] || missing+=("/usr/share/grpc-proto/$proto (grpc-proto)")
done
if [ -x "$python" ]; then
  "$python" -c 'import grpc' 2>/dev/null || missing+=("Python module grpc (python3-grpcio)")
  "$python" -c 'from google.protobuf import message_factory' 2>/dev/null ||
    missing+=("Python module google.protobuf (python3-protobuf)")
fi
if ((${#missing[@]})); then
  printf 'FAIL: missing %s\n' "${missing[@]}" >&2
  echo "FAIL: install the Debian packages named above (deploy/setup.sh)" >&2
  exit 1
fi
export PYTHONDONTWRITEBYTECODE=1
exec "$python" "$test_py" "$@"
