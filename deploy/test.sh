#!/usr/bin/env bash
# Runs every test (README command 2): set-up, `bazel test //...`, then one closing line
# "N passed, N failed" counted over individual test cases (gtest cases; one per shell test).
# Extra arguments go to `bazel test` (e.g. a narrower target pattern).
#
# A whole run (no arguments) on a machine with the CUDA toolkit then checks the CPU-only build:
# with the toolkit variable pointed elsewhere (as on a machine without CUDA) everything but the
# GPU code must build, and the checks below must pass there too; their cases count in the total.
#
# A whole run then fuzzes (fuzz/run_short.sh, docs/testing.md "Fuzzing"): each fuzz target, built with
# clang-14, libFuzzer, ASan and UBSan, runs on its seed corpus and for $RINGLEADER_FUZZ_SECONDS
# (10) seconds more; each target is one case. Without clang-14 or libFuzzer they fail, not skip.
set -uo pipefail
cd "$(dirname "$0")/.."
deploy/setup.sh

targets=("$@")
whole_run=0
if ((${#targets[@]} == 0)); then
  targets=(//...)
  whole_run=1
fi

testlogs=$(bazel info bazel-testlogs 2>/dev/null)

# run_phase NAME BAZEL_FLAGS... -- TARGETS...: tests, then counts; sets phase_passed/phase_failed.
run_phase() {
  local name=$1 flags=() pattern=()
  shift
  while (($#)) && [ "$1" != "--" ]; do flags+=("$1"); shift; done
  shift
  pattern=("$@")
  echo "=== $name: bazel test ${flags[*]} ${pattern[*]}"
  bazel test --keep_going "${flags[@]}" "${pattern[@]}"
  local bazel_rc=$?
  # The pattern's tests this build can run: without the CUDA toolkit, those that need it
  # (target_compatible_with @cuda//:cuda_toolkit_present) are skipped by Bazel, not failed.
  local all="tests(set(${pattern[*]}))" tests=()
  mapfile -t tests < <(bazel query "${flags[@]}" \
    "$all except attr(target_compatible_with, cuda_toolkit_present, $all)" 2>/dev/null)
  local summary
  summary=$(python3 deploy/count_test_results.py "$testlogs" "${tests[@]}")
  local count_rc=$?
  echo "$summary" | sed '$d'
  read -r phase_passed _ phase_failed _ <<<"$(echo "$summary" | tail -n 1)"
  if [ "$bazel_rc" != 0 ] && [ "$count_rc" == 0 ]; then
    # A build failure with no failing test case still fails the run.
    echo "$name: bazel test exited with $bazel_rc" >&2
    phase_failed=$((phase_failed + 1))
  fi
  echo "$name: $phase_passed passed, $phase_failed failed"
}

run_phase "all tests" -- "${targets[@]}"
passed=$phase_passed failed=$phase_failed

if ((whole_run)) && grep -q "CUDA_AVAILABLE = True" "$(bazel info output_base)/external/cuda/defs.bzl" 2>/dev/null; then
  # The CPU-only build, as a machine without CUDA gets it (the toolkit "hidden" elsewhere).
  cpu_only=(--repo_env=RINGLEADER_CUDA_PATH=/nonexistent/cuda)
  echo "=== CPU-only build: bazel build ${cpu_only[*]} //..."
  if ! bazel build --keep_going "${cpu_only[@]}" //...; then
    echo "CPU-only build: bazel build failed" >&2
    failed=$((failed + 1))
  fi
  run_phase "CPU-only build" "${cpu_only[@]}" -- //tests/build:cuda_linkage_test \
    //common/gpu:gpu_devices_test //common/gpu:gpu_test_util_test \
    //worker/rank:training_loop_nccl_test //tests/e2e:training_e2e_test_grpc
  passed=$((passed + phase_passed)) failed=$((failed + phase_failed))
fi

if ((whole_run)); then
  echo "=== fuzz: fuzz/run_short.sh"
  fuzz_output=$(mktemp)
  fuzz/run_short.sh | tee "$fuzz_output"
  fuzz_summary=$(tail -n 1 "$fuzz_output")
  rm -f "$fuzz_output"
  read -r phase_passed _ phase_failed _ <<<"$fuzz_summary"
  if ! [[ "$phase_passed" =~ ^[0-9]+$ && "$phase_failed" =~ ^[0-9]+$ ]]; then
    echo "fuzz: no result line from fuzz/run_short.sh" >&2
    phase_passed=0 phase_failed=1
  fi
  echo "fuzz: $phase_passed passed, $phase_failed failed"
  passed=$((passed + phase_passed)) failed=$((failed + phase_failed))
fi

echo "$passed passed, $failed failed"
((failed == 0))
