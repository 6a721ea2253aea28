#!/usr/bin/env bash
# usage: docs_test.sh DOCS_TEST_PY [docs_test.py flags]
# Runs docs_test.py with Debian's /usr/bin/python3 (no module beyond the standard library).
set -euo pipefail
python=/usr/bin/python3
if [ ! -x "$python" ]; then
  echo "FAIL: $python is required (Debian's python3)" >&2
  exit 1
fi
export PYTHONDONTWRITEBYTECODE=1
exec "$python" "$@"
