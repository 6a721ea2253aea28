#!/usr/bin/env bash
# usage: cuda_linkage_test.sh cuda|cpu_only RANK_BINARY WORKER_BINARY
# The rank binary links libcudart and libnccl in the CUDA build and neither in the CPU-only
# build; the worker daemon links libcudart only in the CUDA build (GPU discovery). Checked with
# the dynamic section (readelf), so it also works where the libraries are absent.
set -uo pipefail
mode=$1 rank=$2 worker=$3
failures=0

needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

expect() {  # expect BINARY LIBRARY_PREFIX yes|no
  local binary=$1 lib=$2 want=$3 have=no
  if needed "$binary" | grep -q "^$lib"; then have=yes; fi
  if [ "$have" = "$want" ]; then
    echo "ok: $(basename "$binary") links $lib: $have"
  else
    echo "FAIL: $(basename "$binary") links $lib: $have, expected $want in the $mode build" >&2
    failures=$((failures + 1))
  fi
}

command -v readelf >/dev/null || { echo "FAIL: readelf (binutils) is required" >&2; exit 1; }
case "$mode" in
  cuda) want=yes ;;
  cpu_only) want=no ;;
  *) echo "FAIL: unknown mode '$mode' (cuda or cpu_only)" >&2; exit 2 ;;
esac
expect "$rank" libcudart "$want"
expect "$rank" libnccl "$want"
expect "$worker" libcudart "$want"
exit $((failures > 0))
