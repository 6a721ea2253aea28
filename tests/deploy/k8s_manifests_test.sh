#!/usr/bin/env bash
# usage: k8s_manifests_test.sh K8S_MANIFESTS_TEST_PY [k8s_manifests_test.py flags]
# Runs k8s_manifests_test.py with Debian's /usr/bin/python3 (and its python3-yaml).
set -euo pipefail
python=/usr/bin/python3
if [ ! -x "$python" ]; then
  echo "FAIL: $python is required (Debian's python3)" >&2
  exit 1
fi
export PYTHONDONTWRITEBYTECODE=1
exec "$python" "$@"
