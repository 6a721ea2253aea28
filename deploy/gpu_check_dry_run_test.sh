#!/usr/bin/env bash
# deploy/gpu_check.sh --dry_run runs nothing and prints every step's commands, on a machine
# without a GPU: built here and from a bundle, with the cuBLAS initcheck probe before initcheck on
# the trainer suite (its bf16 tests left out when the probe shows initcheck's blind spot) and the
# rank's training suite under memcheck one process per test.
set -euo pipefail
script=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check() {  # check OUTPUT EXPECTED...: every EXPECTED string is a line fragment of OUTPUT
  local out=$1; shift
  for want in "$@"; do
    grep -qF -- "$want" <<<"$out" || { echo "FAIL: expected '$want' in:"; echo "$out"; exit 1; }
  done
}

out=$("$script" --dry_run --out "$tmp/built" 2>&1) || { echo "FAIL: exit $?"; echo "$out"; exit 1; }
check "$out" \
  "+ nvidia-smi --query-gpu=" \
  "+ bazel build -c opt " "//worker/trainer/gpu:cublas_initcheck_probe" \
  "+ RL_REQUIRE_GPU=1 timeout 900 bazel-bin/worker/rank/gpu/gpu_training_suite_test > " \
  "+ cuobjdump --list-elf --list-ptx bazel-bin/worker/ringleader-rank" \
  "nccl_allreduce_benchmark --sizes_mib=1,16,64,256" \
  "+ ringleader submit --set name=wide-bf16-nccl-2 " \
  "+ timeout 1800 compute-sanitizer --tool initcheck bazel-bin/worker/trainer/gpu/cublas_initcheck_probe bf16 > $tmp/built/initcheck_cublas_probe.log" \
  "compute-sanitizer --tool initcheck --report-api-errors explicit --error-exitcode 1 bazel-bin/worker/trainer/gpu/gpu_trainer_suite_test --gtest_filter=-*Bf16* > " \
  "compute-sanitizer --tool initcheck --report-api-errors explicit --error-exitcode 1 bazel-bin/worker/trainer/gpu/gpu_sharded_suite_test " \
  "compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 bazel-bin/worker/collective/gpu/nccl_suite_test " \
  "+ bazel-bin/worker/rank/gpu/gpu_training_suite_test --gtest_list_tests" \
  "+ for each test T, 8 at once: RL_REQUIRE_GPU=1 RL_GPU_TEST_DEADLINE_SCALE=20 timeout 1800 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 bazel-bin/worker/rank/gpu/gpu_training_suite_test --gtest_filter=T > $tmp/built/memcheck_nccl_gpu_training_suite_test/T.log" \
  "0 failed"
# The training suite is no longer run under memcheck as one process.
if grep -qE 'memcheck .*gpu_training_suite_test *>' <<<"$out"; then
  echo "FAIL: gpu_training_suite_test runs under memcheck as one process"; exit 1
fi

mkdir -p "$tmp/bundle/bin" "$tmp/bundle/lib"
out=$("$script" --dry_run --bundle "$tmp/bundle" --sanitizer_jobs 3 --sanitizer_timeout 60 \
  --out "$tmp/bundled" 2>&1) || { echo "FAIL: exit $?"; echo "$out"; exit 1; }
check "$out" \
  "LD_LIBRARY_PATH=$tmp/bundle/lib" \
  "+ timeout 60 compute-sanitizer --tool initcheck $tmp/bundle/bin/cublas_initcheck_probe bf16" \
  "+ for each test T, 3 at once: " "timeout 60 compute-sanitizer --tool memcheck" \
  "0 failed"
if grep -qF "bazel build" <<<"$out"; then echo "FAIL: a bundle run builds"; exit 1; fi

out=$("$script" --dry_run --skip_sanitizer --out "$tmp/skipped" 2>&1) || { echo "FAIL: exit $?"; exit 1; }
check "$out" "compute-sanitizer                            not run (--skip_sanitizer)"
if grep -qF "cublas_initcheck_probe bf16" <<<"$out"; then echo "FAIL: --skip_sanitizer ran step 7"; exit 1; fi
echo PASS
