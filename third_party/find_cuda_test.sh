#!/usr/bin/env bash
# usage: find_cuda_test.sh FIND_CUDA_SH
# Drives //third_party:find_cuda.sh (the search behind @cuda) over fake toolkit, NCCL and
# system trees in a temporary dir, always with fake system dirs, so the machine's own /usr and
# /usr/local/cuda never matter. One line per case; exits 1 when any case fails.
set -uo pipefail
find_cuda=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
root=$(mktemp -d "${TEST_TMPDIR:-/tmp}/find_cuda_test.XXXXXX")
trap 'rm -rf "$root"' EXIT
failures=0

# toolkit DIR [nccl]: bin/nvcc, include/cuda_runtime.h, lib64/ (+ include/nccl.h, lib64/libnccl.so).
toolkit() {
  mkdir -p "$1/bin" "$1/include" "$1/lib64"
  printf '#!/bin/sh\n' >"$1/bin/nvcc" && chmod +x "$1/bin/nvcc"
  : >"$1/include/cuda_runtime.h"
  if [ "${2:-}" = nccl ]; then nccl_in "$1/include" "$1/lib64"; fi
}
# nccl_in INCLUDE_DIR LIB_DIR: headers as libnccl-dev installs them, the .so as a link.
nccl_in() {
  mkdir -p "$1/nccl_device" "$2"
  : >"$1/nccl.h"
  : >"$1/nccl_device/core.h"
  : >"$2/libnccl.so.2"
  ln -sf libnccl.so.2 "$2/libnccl.so"
}
# A fake system: include dir, and the three library dirs the real search uses.
system() {
  mkdir -p "$1/usr/include" "$1/usr/lib/x86_64-linux-gnu" "$1/usr/lib64" "$1/usr/lib"
}
sys_args() {
  echo "--system_include_dirs=$1/usr/include"
  echo "--system_lib_dirs=$1/usr/lib/x86_64-linux-gnu:$1/usr/lib64:$1/usr/lib"
}

# run NAME ARGS...: runs the search; its stdout in $out, its stderr in $err. A case is the
# run and the checks after it, until the next run (report says "ok" when none failed).
name="" start=0
report() { if [ -n "$name" ] && ((failures == start)); then echo "ok: $name"; fi; }
run() {
  report
  name=$1 start=$failures
  shift
  out=$(bash "$find_cuda" "$@" 2>"$root/stderr")
  rc=$?
  err=$(cat "$root/stderr")
  if [ "$rc" != 0 ]; then
    fail "exit status $rc: $err"
  fi
}
fail() {
  echo "FAIL: $name: $*" >&2
  echo "  stdout: $(echo "$out" | tr '\n' ' ')" >&2
  echo "  stderr: $err" >&2
  failures=$((failures + 1))
}
# expect KEY=VALUE...: each line is in the output.
expect() {
  local line
  for line in "$@"; do
    grep -qxF -- "$line" <<<"$out" || fail "expected '$line'"
  done
}
# says TEXT...: stderr says each.
says() {
  local text
  for text in "$@"; do
    grep -qF -- "$text" <<<"$err" || fail "stderr should say '$text'"
  done
}
# quiet: nothing on stderr.
quiet() { [ -z "$err" ] || fail "stderr should be empty"; }
# no_key KEY: the output has no KEY= line.
no_key() { ! grep -q "^$1=" <<<"$out" || fail "unexpected '$1=' in the output"; }

# 1. The toolkit with NCCL inside (the CUDA images, /usr/local/cuda here).
t=$root/1; toolkit "$t/cuda" nccl; system "$t/sys"
run "toolkit with nccl.h" --cuda_path="$t/cuda" $(sys_args "$t/sys")
expect status=cuda "cuda_path=$t/cuda" "nccl_include_dir=$t/cuda/include" \
  "nccl_lib_dir=$t/cuda/lib64" nccl_found_in=toolkit
quiet

# 1b. A trailing slash in the path changes nothing.
run "toolkit path with a trailing slash" --cuda_path="$t/cuda/" $(sys_args "$t/sys")
expect status=cuda "cuda_path=$t/cuda" "nccl_include_dir=$t/cuda/include" nccl_found_in=toolkit

# 2. The toolkit without NCCL, NCCL from the system (libnccl-dev, NGC images).
t=$root/2; toolkit "$t/cuda"; system "$t/sys"
nccl_in "$t/sys/usr/include" "$t/sys/usr/lib/x86_64-linux-gnu"
run "toolkit without nccl.h, NCCL in the system dirs" --cuda_path="$t/cuda" $(sys_args "$t/sys")
expect status=cuda "cuda_path=$t/cuda" "nccl_include_dir=$t/sys/usr/include" \
  "nccl_lib_dir=$t/sys/usr/lib/x86_64-linux-gnu" nccl_found_in=system
quiet

# 2b. The library in a later system dir (/usr/lib64, as on RPM systems).
t=$root/2b; toolkit "$t/cuda"; system "$t/sys"
nccl_in "$t/sys/usr/include" "$t/sys/usr/lib64"
run "NCCL in the second system library dir" --cuda_path="$t/cuda" $(sys_args "$t/sys")
expect status=cuda "nccl_include_dir=$t/sys/usr/include" "nccl_lib_dir=$t/sys/usr/lib64" \
  nccl_found_in=system

# 2c. The toolkit's NCCL comes before the system's.
t=$root/2c; toolkit "$t/cuda" nccl; system "$t/sys"
nccl_in "$t/sys/usr/include" "$t/sys/usr/lib/x86_64-linux-gnu"
run "the toolkit's NCCL before the system's" --cuda_path="$t/cuda" $(sys_args "$t/sys")
expect status=cuda "nccl_include_dir=$t/cuda/include" "nccl_lib_dir=$t/cuda/lib64" \
  nccl_found_in=toolkit

# 2d. Half an NCCL in the toolkit (nccl.h, no libnccl.so) does not count: the system's is used.
t=$root/2d; toolkit "$t/cuda"; system "$t/sys"; : >"$t/cuda/include/nccl.h"
nccl_in "$t/sys/usr/include" "$t/sys/usr/lib"
run "nccl.h without libnccl.so in the toolkit" --cuda_path="$t/cuda" $(sys_args "$t/sys")
expect status=cuda "nccl_include_dir=$t/sys/usr/include" "nccl_lib_dir=$t/sys/usr/lib" \
  nccl_found_in=system

# 3. RINGLEADER_NCCL_PATH comes before the toolkit's and the system's NCCL: lib64/ ...
t=$root/3; toolkit "$t/cuda" nccl; system "$t/sys"
nccl_in "$t/sys/usr/include" "$t/sys/usr/lib/x86_64-linux-gnu"
nccl_in "$t/nccl/include" "$t/nccl/lib64"
run "RINGLEADER_NCCL_PATH (lib64) overrides" --cuda_path="$t/cuda" --nccl_path="$t/nccl" \
  $(sys_args "$t/sys")
expect status=cuda "nccl_include_dir=$t/nccl/include" "nccl_lib_dir=$t/nccl/lib64" \
  nccl_found_in=RINGLEADER_NCCL_PATH
quiet

# 3b. ... or lib/.
t=$root/3b; toolkit "$t/cuda" nccl; system "$t/sys"
nccl_in "$t/nccl/include" "$t/nccl/lib"
run "RINGLEADER_NCCL_PATH (lib) overrides" --cuda_path="$t/cuda" --nccl_path="$t/nccl/" \
  $(sys_args "$t/sys")
expect status=cuda "nccl_include_dir=$t/nccl/include" "nccl_lib_dir=$t/nccl/lib" \
  nccl_found_in=RINGLEADER_NCCL_PATH

# 3c. A RINGLEADER_NCCL_PATH without NCCL is an error, not a quiet fall back to another NCCL.
t=$root/3c; toolkit "$t/cuda" nccl; system "$t/sys"; mkdir -p "$t/nccl/include"
run "RINGLEADER_NCCL_PATH without NCCL" --cuda_path="$t/cuda" --nccl_path="$t/nccl" \
  $(sys_args "$t/sys")
expect status=no_nccl
says "RINGLEADER_NCCL_PATH: nccl.h in $t/nccl/include; libnccl.so in $t/nccl/lib, $t/nccl/lib64" \
  "RINGLEADER_NCCL_PATH is set, so nothing else was searched"
no_key nccl_include_dir

# 4. nvcc but no NCCL anywhere: the loud message, naming every place searched and the fixes.
t=$root/4; toolkit "$t/cuda"; system "$t/sys"
run "nvcc but no NCCL anywhere" --cuda_path="$t/cuda" $(sys_args "$t/sys")
expect status=no_nccl "cuda_path=$t/cuda"
no_key nccl_include_dir
says "The CUDA toolkit is at $t/cuda (bin/nvcc, include/cuda_runtime.h) but NCCL was not found" \
  "RINGLEADER_NCCL_PATH: not set" \
  "toolkit: nccl.h in $t/cuda/include; libnccl.so in $t/cuda/lib64" \
  "system: nccl.h in $t/sys/usr/include; libnccl.so in $t/sys/usr/lib/x86_64-linux-gnu, $t/sys/usr/lib64, $t/sys/usr/lib" \
  "apt-get install libnccl-dev" "--repo_env=RINGLEADER_NCCL_PATH=DIR" "--config=cpu_only"

# 4b. Half an NCCL in the system (headers, no library: libnccl2 without libnccl-dev's link).
t=$root/4b; toolkit "$t/cuda"; system "$t/sys"; : >"$t/sys/usr/include/nccl.h"
: >"$t/sys/usr/lib/x86_64-linux-gnu/libnccl.so.2"
run "nccl.h but no libnccl.so in the system" --cuda_path="$t/cuda" $(sys_args "$t/sys")
expect status=no_nccl
says "(found $t/sys/usr/include/nccl.h but no libnccl.so)" "libnccl-dev"

# 5. No toolkit: the CPU-only build, with a one-line note; NCCL alone does not matter.
t=$root/5; system "$t/sys"; nccl_in "$t/sys/usr/include" "$t/sys/usr/lib/x86_64-linux-gnu"
run "no toolkit" --cuda_path="$t/cuda" $(sys_args "$t/sys")
expect status=no_toolkit "cuda_path=$t/cuda"
no_key nccl_include_dir
says "no CUDA toolkit at $t/cuda (bin/nvcc, include/cuda_runtime.h not found): CPU-only build"

# 5b. cuda_runtime.h without nvcc is no toolkit either (the toolkit test is unchanged).
t=$root/5b; toolkit "$t/cuda" nccl; rm "$t/cuda/bin/nvcc"; system "$t/sys"
run "no nvcc" --cuda_path="$t/cuda" $(sys_args "$t/sys")
expect status=no_toolkit
says "(bin/nvcc not found)"

# 6. RINGLEADER_CUDA_PATH=none (--config=cpu_only): CPU-only on purpose, silently, whatever is
# installed.
t=$root/6; toolkit "$t/cuda" nccl; system "$t/sys"
run "RINGLEADER_CUDA_PATH=none" --cuda_path=none $(sys_args "$t/sys")
expect status=cpu_only
quiet

# 7. A usage error is an exit status, not a verdict.
report
name="unknown argument"
if bash "$find_cuda" --cuda_pth=x >/dev/null 2>&1; then
  echo "FAIL: $name: exit status 0" >&2; failures=$((failures + 1))
else
  echo "ok: $name"
fi

if ((failures)); then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "all cases passed"
