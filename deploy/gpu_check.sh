#!/usr/bin/env bash
# The GPU checklist, for a machine with NVIDIA GPUs (CUDA 13 driver) and the CUDA 13 toolkit with
# NCCL. Prints every figure and ends with "N passed, N failed" over its checks:
#   1. the driver and the devices (nvidia-smi);
#   2. each GPU test suite alone (bazel test --config=gpu: one at a time, failing rather than
#      skipping without a usable GPU);
#   3. compute-sanitizer memcheck and racecheck on the suites that run the CUDA kernels;
#   4. cuobjdump --list-elf on the rank binary: the kernels carry sm_80 and sm_90 code;
#   5. the NCCL backend's all-reduce bandwidth against a raw ncclAllReduce loop, same run.
# Usage: deploy/gpu_check.sh   (CUDA_VISIBLE_DEVICES, if set, picks the GPUs; default all)
set -uo pipefail
cd "$(dirname "$0")/.."
CUDA_HOME=${RINGLEADER_CUDA_PATH:-/usr/local/cuda}
export PATH="$CUDA_HOME/bin:$PATH"
passed=0 failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*" >&2; failed=$((failed + 1)); }
finish() {
  bazel shutdown >/dev/null 2>&1
  echo "$passed passed, $failed failed"
  ((failed == 0))
  exit
}

echo "=== 1. driver and devices"
if ! command -v nvidia-smi >/dev/null; then
  fail "nvidia-smi not found: no NVIDIA driver on this machine"
  finish
fi
nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
if ((gpus == 0)); then
  fail "the driver sees no GPU"
  finish
fi
pass "$gpus GPU(s) visible to the driver"
if [ -z "${CUDA_VISIBLE_DEVICES:-}" ]; then
  CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((gpus - 1)))
fi
export CUDA_VISIBLE_DEVICES
echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"

deploy/setup.sh || { fail "set-up"; finish; }

echo "=== 2. GPU test suites, one at a time"
SUITES=(
  //common/gpu:gpu_devices_test
  //common/gpu:gpu_test_util_test
  //worker/trainer/gpu:gpu_mlp_test
  //worker/trainer/gpu:gpu_trainer_suite_test
  //worker/trainer/gpu:gpu_sharded_suite_test
  //worker/collective/gpu:nccl_suite_test
  //worker/sync/gpu:cuda_memory_suite_test
  //worker/rank/gpu:gpu_training_suite_test
)
for t in "${SUITES[@]}"; do
  # --config=gpu filters on the gpu tag; the first two are plain tests that also touch the GPU.
  if bazel test --config=gpu --test_tag_filters= "$t"; then pass "$t"; else fail "$t"; fi
done

echo "=== 3. compute-sanitizer on the kernel suites"
if command -v compute-sanitizer >/dev/null; then
  for t in //worker/trainer/gpu:gpu_trainer_suite_test //worker/trainer/gpu:gpu_sharded_suite_test \
      //worker/sync/gpu:cuda_memory_suite_test; do
    bin="bazel-bin/$(echo "${t#//}" | tr : /)"
    for tool in memcheck racecheck; do
      if RL_REQUIRE_GPU=1 compute-sanitizer --tool "$tool" --error-exitcode 1 "$bin" \
          > "/tmp/gpu_check_${tool}_$(basename "$bin").log" 2>&1; then
        pass "compute-sanitizer $tool $t"
      else
        fail "compute-sanitizer $tool $t (log: /tmp/gpu_check_${tool}_$(basename "$bin").log)"
        tail -n 20 "/tmp/gpu_check_${tool}_$(basename "$bin").log"
      fi
    done
  done
else
  fail "compute-sanitizer not found in $CUDA_HOME/bin or PATH (install the toolkit's sanitizer)"
fi

echo "=== 4. device code for sm_80 and sm_90"
if command -v cuobjdump >/dev/null; then
  # The rank binary links the kernels statically. (A cc_test's device code lives in a shared
  # library under bazel-bin/_solib_*, which cuobjdump on the test executable does not see; those
  # libraries are searched too when the binary holds none.)
  if bazel build --config=gpu //worker:ringleader-rank; then
    elves=$(cuobjdump --list-elf bazel-bin/worker/ringleader-rank 2>&1)
    if ! grep -q "sm_" <<<"$elves"; then
      for so in bazel-bin/_solib_*/*.so; do
        [ -e "$so" ] && elves+=$'\n'$(cuobjdump --list-elf "$so" 2>/dev/null)
      done
    fi
    echo "$elves"
    for arch in sm_80 sm_90; do
      if grep -q "$arch" <<<"$elves"; then pass "kernels built for $arch"; else fail "no $arch code"; fi
    done
  else
    fail "bazel build --config=gpu //worker:ringleader-rank"
  fi
else
  fail "cuobjdump not found in $CUDA_HOME/bin or PATH"
fi

echo "=== 5. all-reduce bandwidth: NCCL backend vs raw ncclAllReduce"
if bazel run -c opt //worker/collective/gpu:nccl_allreduce_benchmark; then
  pass "all-reduce benchmark"
else
  fail "all-reduce benchmark"
fi
finish
