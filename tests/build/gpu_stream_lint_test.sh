#!/usr/bin/env bash
# usage: gpu_stream_lint_test.sh FILE...
# Fails on a synchronous cudaMemcpy/cudaMemset (the legacy default stream) in GPU product code:
# use cudaMemcpyAsync/cudaMemsetAsync on the trainer's stream and synchronise that stream where
# the host reads the result.
set -uo pipefail
(($#)) || { echo "FAIL: no files given" >&2; exit 1; }
checked=0 found=0
for f in "$@"; do
  checked=$((checked + 1))
  # Code lines only (a comment may name the calls).
  if hits=$(grep -nE '\bcuda(Memcpy|Memset)[[:space:]]*\(' "$f" | grep -vE '^[0-9]+:[[:space:]]*//'); then
    echo "FAIL: $f uses the legacy default stream:" >&2
    echo "$hits" >&2
    found=$((found + 1))
  fi
done
echo "checked $checked files, $found with synchronous cudaMemcpy/cudaMemset"
((found == 0))
