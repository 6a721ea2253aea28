#!/usr/bin/env bash
# Finds the CUDA toolkit and NCCL for the @cuda repository (//third_party:repositories.bzl runs
# it while fetching @cuda; deploy/setup.sh runs it to print the same verdict).
#
# usage: find_cuda.sh [--cuda_path=DIR|none] [--nccl_path=DIR] [--system_include_dirs=D:D...]
#                     [--system_lib_dirs=D:D...]
#
#   --cuda_path   the toolkit root ($RINGLEADER_CUDA_PATH; default /usr/local/cuda). "none" (what
#                 --config=cpu_only passes) asks for the CPU-only build: nothing is searched.
#   --nccl_path   an NCCL prefix ($RINGLEADER_NCCL_PATH; default unset) holding include/nccl.h and
#                 lib/libnccl.so or lib64/libnccl.so.
#   --system_include_dirs, --system_lib_dirs
#                 where a system-wide NCCL is looked for (default /usr/include, and
#                 /usr/lib/<machine>-linux-gnu:/usr/lib64:/usr/lib); the test passes fake ones.
#
# The toolkit is where it always was: <cuda_path>/bin/nvcc and <cuda_path>/include/cuda_runtime.h.
# NCCL is looked for separately, first match wins, each place needing both nccl.h and libnccl.so:
#   1. $RINGLEADER_NCCL_PATH (when set it must hold NCCL: nothing else is searched),
#   2. the toolkit's include/ and lib64/,
#   3. the system include dirs and library dirs (NVIDIA's libnccl-dev, NGC images).
#
# Prints KEY=VALUE lines on stdout, "status" first:
#   status=cpu_only     the CPU-only build was asked for (cuda_path none)
#   status=no_toolkit   no toolkit at cuda_path: the CPU-only build (a one-line note on stderr)
#   status=cuda         toolkit and NCCL found; also cuda_path, nccl_include_dir, nccl_lib_dir
#                       and nccl_found_in (RINGLEADER_NCCL_PATH, toolkit or system)
#   status=no_nccl      nvcc found but no NCCL: stderr says what was searched and the fixes;
#                       the repository rule stops the build with it
# and exits 0; 2 on a usage error.
set -uo pipefail

cuda_path=/usr/local/cuda
nccl_path=
system_include_dirs=/usr/include
system_lib_dirs="/usr/lib/$(uname -m)-linux-gnu:/usr/lib64:/usr/lib"

for arg in "$@"; do
  case "$arg" in
    --cuda_path=*) cuda_path=${arg#*=} ;;
    --nccl_path=*) nccl_path=${arg#*=} ;;
    --system_include_dirs=*) system_include_dirs=${arg#*=} ;;
    --system_lib_dirs=*) system_lib_dirs=${arg#*=} ;;
    *) echo "find_cuda.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
cuda_path=${cuda_path%/}
nccl_path=${nccl_path%/}

if [ "$cuda_path" = none ]; then
  echo "status=cpu_only"
  exit 0
fi

missing=()
[ -e "$cuda_path/bin/nvcc" ] || missing+=(bin/nvcc)
[ -e "$cuda_path/include/cuda_runtime.h" ] || missing+=(include/cuda_runtime.h)
if ((${#missing[@]})); then
  echo "status=no_toolkit"
  echo "cuda_path=$cuda_path"
  joined=$(printf '%s, ' "${missing[@]}")
  echo "no CUDA toolkit at $cuda_path (${joined%, } not found): CPU-only build," \
    "without the GPU worker (RINGLEADER_CUDA_PATH names the toolkit)" >&2
  exit 0
fi

# found INCLUDE_DIR LIB_DIR SOURCE: prints the verdict and exits.
found() {
  echo "status=cuda"
  echo "cuda_path=$cuda_path"
  echo "nccl_include_dir=$1"
  echo "nccl_lib_dir=$2"
  echo "nccl_found_in=$3"
  exit 0
}

searched=()   # lines for the message: what was looked at, and what was half there
# try SOURCE INCLUDE_DIRS LIB_DIRS (colon-separated): the first dir of each holding the file.
try() {
  local source=$1 inc="" lib="" d
  local -a incs libs
  IFS=: read -r -a incs <<<"$2"
  IFS=: read -r -a libs <<<"$3"
  for d in "${incs[@]}"; do
    if [ -n "$d" ] && [ -f "$d/nccl.h" ]; then inc=${d%/}; break; fi
  done
  for d in "${libs[@]}"; do
    if [ -n "$d" ] && [ -e "$d/libnccl.so" ]; then lib=${d%/}; break; fi
  done
  if [ -n "$inc" ] && [ -n "$lib" ]; then found "$inc" "$lib" "$source"; fi
  local what="nccl.h in ${2//:/, }; libnccl.so in ${3//:/, }"
  if [ -n "$inc" ]; then what+=" (found $inc/nccl.h but no libnccl.so)"; fi
  if [ -n "$lib" ]; then what+=" (found $lib/libnccl.so but no nccl.h)"; fi
  searched+=("  $source: $what")
}

if [ -n "$nccl_path" ]; then
  try RINGLEADER_NCCL_PATH "$nccl_path/include" "$nccl_path/lib:$nccl_path/lib64"
else
  searched+=("  RINGLEADER_NCCL_PATH: not set")
  try toolkit "$cuda_path/include" "$cuda_path/lib64"
  try system "$system_include_dirs" "$system_lib_dirs"
fi

echo "status=no_nccl"
echo "cuda_path=$cuda_path"
{
  echo "The CUDA toolkit is at $cuda_path (bin/nvcc, include/cuda_runtime.h) but NCCL was not found,"
  echo "so the GPU worker cannot be built. Searched, in this order:"
  printf '%s\n' "${searched[@]}"
  if [ -n "$nccl_path" ]; then
    echo "(RINGLEADER_NCCL_PATH is set, so nothing else was searched.)"
  fi
  echo "Fix one of:"
  echo "  * install NCCL's headers and library: apt-get install libnccl-dev (NVIDIA's CUDA"
  echo "    repository; NGC images have it);"
  echo "  * point RINGLEADER_NCCL_PATH at an NCCL prefix holding include/nccl.h and"
  echo "    lib/libnccl.so or lib64/libnccl.so (bazel build --repo_env=RINGLEADER_NCCL_PATH=DIR);"
  echo "  * or build CPU-only on purpose, without the GPU worker: bazel build --config=cpu_only"
  echo "    (or RINGLEADER_CUDA_PATH=none in the environment)."
} >&2
exit 0
