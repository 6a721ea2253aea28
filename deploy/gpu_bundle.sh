#!/usr/bin/env bash
# Builds the GPU checklist's programs on a build host (this checkout, CUDA 13 toolkit + NCCL
# headers) and packs them for a GPU node that has the NVIDIA driver and the CUDA runtime libraries
# but no Bazel and none of the Debian libraries ringleader links against (an NGC or PyTorch image):
#
#   deploy/gpu_bundle.sh OUT.tar.gz      # then, on the GPU node:
#   tar xzf OUT.tar.gz && ringleader-gpu/gpu_check.sh --bundle ringleader-gpu
#
# The bundle holds bin/ (the four programs, the GPU test suites, the all-reduce benchmark, the
# cuBLAS initcheck probe), lib/ (every shared library they need except the C/C++ runtime and the
# CUDA ones: libcuda comes with the driver; libcudart, libcublas and libnccl are found on the node
# by gpu_check.sh), and gpu_check.sh. The node needs glibc >= the build host's and a libstdc++ at least as new.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: deploy/gpu_bundle.sh OUT.tar.gz}
case $out in /*) ;; *) out=$PWD/$out ;; esac

# Every executable gpu_check.sh runs (keep in step with its SUITES and PROGRAMS).
targets=(
  //coordinator:ringleader-coordinator //worker:ringleader-worker //worker:ringleader-rank
  //client:ringleader //worker/collective/gpu:nccl_allreduce_benchmark
  //worker/trainer/gpu:cublas_initcheck_probe
  //common/gpu:gpu_devices_test //common/gpu:gpu_test_util_test
  //worker/trainer/gpu:gpu_mlp_test //worker/trainer/gpu:gpu_trainer_suite_test
  //worker/trainer/gpu:gpu_sharded_suite_test //worker/collective/gpu:nccl_suite_test
  //worker/sync/gpu:cuda_memory_suite_test //worker/rank/gpu:gpu_training_suite_test
)
bazel build -c opt "${targets[@]}"
bazel_bin=$(bazel info -c opt bazel-bin 2>/dev/null)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/ringleader-gpu
mkdir -p "$root/bin" "$root/lib"
for t in "${targets[@]}"; do
  path=${t#//}
  cp "$bazel_bin/${path%%:*}/${path##*:}" "$root/bin/"
done
cp deploy/gpu_check.sh "$root/"

# Shared libraries, resolved here as the loader would; the node's C/C++ runtime and CUDA libraries
# stay the node's own (a copied libc or libcuda would not match the node's kernel or driver).
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libresolv\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libnccl|libnvidia)'
# (ldd on Bazel's own outputs: their RUNPATH finds the libraries Bazel built, under _solib_*.)
originals=()
for t in "${targets[@]}"; do path=${t#//}; originals+=("$bazel_bin/${path%%:*}/${path##*:}"); done
for exe in "${originals[@]}"; do
  ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u | while read -r so; do
  base=$(basename "$so")
  if ! grep -Eq "$skip" <<<"$base"; then cp -L "$so" "$root/lib/$base"; fi
done
missing=$(for exe in "$root"/bin/*; do LD_LIBRARY_PATH=$root/lib ldd "$exe" | grep "not found" || true; done | sort -u)
if [ -n "$missing" ]; then
  echo "gpu_bundle: libraries not found on this build host:" >&2
  echo "$missing" >&2
  exit 1
fi
tar -C "$stage" -czf "$out" ringleader-gpu
echo "gpu_bundle: $out ($(du -h "$out" | cut -f1); $(ls "$root/bin" | wc -l) programs," \
  "$(ls "$root/lib" | wc -l) libraries)"
