#!/usr/bin/env bash
# The GPU checklist for a machine with NVIDIA GPUs (CUDA 13 driver). Prints every figure, a
# summary table, and ends with "N passed, N failed" over its checks:
#   1. the driver and the devices (nvidia-smi); fewer than 2 GPUs fails unless --allow_single_gpu;
#   2. the programs: built here (bazel -c opt, needs the CUDA 13 toolkit with NCCL), or taken from
#      a bundle made on a build host by deploy/gpu_bundle.sh (--bundle DIR); every shared library
#      must resolve;
#   3. each GPU test suite alone under RL_REQUIRE_GPU=1, counting tests passed and skipped;
#   4. cuobjdump --list-elf on the rank binary: sm_80 and sm_90 code and compute_90 PTX;
#   5. the NCCL backend's all-reduce bandwidth against a raw ncclAllReduce loop in the same run
#      (and NCCL's own all_reduce_perf when it is on PATH);
#   6. training samples/s of the demo model (and a wide one) on 1 GPU and on all of them: a
#      coordinator and one worker daemon per GPU on 127.0.0.1, synthetic data;
#   7. compute-sanitizer memcheck, racecheck and initcheck on the kernel-only tests; memcheck on
#      the NCCL tests with their deadlines scaled by RL_GPU_TEST_DEADLINE_SCALE, the rank's
#      training suite one process per test, several at once (the slowest step, so last). First
#      the cuBLAS initcheck probe: when initcheck reports reads of a bf16 GEMM's output whose
#      values are exact (it does not see cuBLAS's bf16 stores), the trainer suite's bf16 tests
#      are left out of initcheck and the summary says so.
#
# Usage: deploy/gpu_check.sh [--bundle DIR] [--allow_single_gpu] [--dry_run] [--out DIR]
#   --bundle DIR        run the programs in DIR/bin with DIR/lib (deploy/gpu_bundle.sh's output)
#   --allow_single_gpu  one GPU is enough; the summary names the tests that did not run
#   --skip_sanitizer    leave out step 7 (it takes the longest)
#   --dry_run           print each step and its exact commands; run nothing (works without a GPU)
#   --out DIR           keep the logs there (default: a new temporary directory)
#   --suite_timeout S   seconds each test suite may run (default 900)
#   --sanitizer_timeout S  seconds each compute-sanitizer run may take (default 1800)
#   --sanitizer_jobs N  training-suite tests run under memcheck at once (default 8)
# CUDA_VISIBLE_DEVICES, if set, picks the GPUs (default: all).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bundle="" allow_single=0 dry=0 out="" suite_timeout=900 sanitizer_timeout=1800 skip_sanitizer=0
sanitizer_jobs=8
while (($#)); do
  case $1 in
    --bundle) bundle=$(cd "${2:?--bundle needs a directory}" && pwd) || exit 2; shift 2 ;;
    --bundle=*) bundle=$(cd "${1#*=}" && pwd) || exit 2; shift ;;
    --allow_single_gpu) allow_single=1; shift ;;
    --skip_sanitizer) skip_sanitizer=1; shift ;;
    --dry_run) dry=1; shift ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --out=*) out=${1#*=}; shift ;;
    --suite_timeout) suite_timeout=${2:?}; shift 2 ;;
    --suite_timeout=*) suite_timeout=${1#*=}; shift ;;
    --sanitizer_timeout) sanitizer_timeout=${2:?}; shift 2 ;;
    --sanitizer_timeout=*) sanitizer_timeout=${1#*=}; shift ;;
    --sanitizer_jobs) sanitizer_jobs=${2:?}; shift 2 ;;
    --sanitizer_jobs=*) sanitizer_jobs=${1#*=}; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out=$(mktemp -d -t gpu_check.XXXXXX)
mkdir -p "$out"
: >"$out/summary.txt"
CUDA_HOME=${RINGLEADER_CUDA_PATH:-/usr/local/cuda}
export PATH="$CUDA_HOME/bin:$PATH"

passed=0 failed=0 summary=()
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
row() {
  summary+=("$(printf '%-44s %s' "$1" "$2")")
  printf '%-44s %s\n' "$1" "$2" >>"$out/summary.txt"  # kept even if the run is cut short
}
# run CMD...: prints the command; runs it unless --dry_run (then succeeds).
run() {
  echo "+ $*"
  ((dry)) && return 0
  "$@"
}
finish() {
  [ -z "$bundle" ] && ((!dry)) && bazel shutdown >/dev/null 2>&1
  echo
  echo "=== summary (logs in $out)"
  printf '%s\n' "${summary[@]}"
  echo "$passed passed, $failed failed"
  ((failed == 0))
  exit
}

SUITES=(
  common/gpu:gpu_devices_test common/gpu:gpu_test_util_test worker/trainer/gpu:gpu_mlp_test
  worker/trainer/gpu:gpu_trainer_suite_test worker/trainer/gpu:gpu_sharded_suite_test
  worker/collective/gpu:nccl_suite_test worker/sync/gpu:cuda_memory_suite_test
  worker/rank/gpu:gpu_training_suite_test
)
PROGRAMS=(
  coordinator:ringleader-coordinator worker:ringleader-worker worker:ringleader-rank
  client:ringleader worker/collective/gpu:nccl_allreduce_benchmark
  worker/trainer/gpu:cublas_initcheck_probe
)
# Tests that run only CUDA kernels and cuBLAS (no NCCL): all three sanitizer tools.
KERNEL_TESTS=(
  "worker/trainer/gpu:gpu_trainer_suite_test" "worker/trainer/gpu:gpu_sharded_suite_test"
  "worker/sync/gpu:cuda_memory_suite_test --gtest_filter=CudaMemorySuite.Operations*"
)
# Tests through NCCL: memcheck only, deadlines scaled for its slowdown.
NCCL_TESTS=(
  "worker/collective/gpu:nccl_suite_test"
  "worker/sync/gpu:cuda_memory_suite_test --gtest_filter=-CudaMemorySuite.Operations*"
)
# Too slow under memcheck as one process (it did not finish inside an H100 run's time limit;
# each test alone takes 24-32 s there): one process per test, --sanitizer_jobs at once.
NCCL_PARALLEL_TEST=worker/rank/gpu:gpu_training_suite_test
# The trainer suite's tests that run bf16 GEMMs: left out of initcheck when the probe shows that
# initcheck does not see cuBLAS's bf16 stores.
BF16_TRAINER_TEST=worker/trainer/gpu:gpu_trainer_suite_test
BF16_FILTER="*Bf16*"
SANITIZER_DEADLINE_SCALE=20

echo "=== 1. driver and devices"
gpus=0
if ((dry)); then
  echo "+ nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv"
  gpus=2
elif ! command -v nvidia-smi >/dev/null; then
  fail "nvidia-smi not found: no NVIDIA driver on this machine"
  finish
else
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    gpus=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
  else
    gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((gpus - 1)))
  fi
fi
export CUDA_VISIBLE_DEVICES
echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-} ($gpus GPU(s))"
if ((gpus == 0)); then
  fail "the driver sees no GPU"
  finish
elif ((gpus < 2 && !allow_single)); then
  fail "only $gpus GPU: the multi-GPU paths (NCCL between GPUs) would not run; use a machine" \
    "with 2 or more, or pass --allow_single_gpu to accept that"
  row "GPUs" "$gpus (need 2; the multi-GPU tests cannot run)"
else
  pass "$gpus GPU(s) visible"
  row "GPUs" "$gpus"
fi

echo "=== 2. programs"
if [ -n "$bundle" ]; then
  bin_of() { echo "$bundle/bin/${1##*:}"; }
  # The CUDA runtime libraries the bundle leaves to the node: the toolkit's, the system's, or
  # the NVIDIA Python wheels' (PyTorch images), whichever holds them.
  cuda_libs=$(
    for d in "$CUDA_HOME/lib64" /usr/lib/x86_64-linux-gnu /usr/local/lib; do
      [ -d "$d" ] && echo "$d"
    done
    python3 - 2>/dev/null <<'EOF'
import glob, site, sys
for p in site.getsitepackages() + [site.getusersitepackages()]:
    for d in sorted(glob.glob(p + "/nvidia/*/lib")):
        print(d)
EOF
  )
  LD_LIBRARY_PATH="$bundle/lib:$(paste -sd: <<<"$cuda_libs")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LD_LIBRARY_PATH
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
else
  bin_of() { echo "$bazel_bin/${1%%:*}/${1##*:}"; }
  cd "$here/.."
  run deploy/setup.sh || { fail "set-up (deploy/setup.sh)"; finish; }
  targets=()
  for t in "${PROGRAMS[@]}" "${SUITES[@]}"; do targets+=("//$t"); done
  if run bazel build -c opt "${targets[@]}"; then
    bazel_bin=$( ((dry)) && echo bazel-bin || bazel info -c opt bazel-bin 2>/dev/null)
  else
    fail "bazel build -c opt (the CUDA toolkit and NCCL must be found: docs/gpu.md)"
    finish
  fi
fi
unresolved=0
for t in "${PROGRAMS[@]}" "${SUITES[@]}"; do
  exe=$(bin_of "$t")
  ((dry)) && continue
  if [ ! -x "$exe" ]; then
    fail "$exe missing"; unresolved=1; continue
  fi
  missing=$(ldd "$exe" 2>&1 | grep "not found" | awk '{print $1}' | sort -u | paste -sd' ')
  if [ -n "$missing" ]; then
    fail "$(basename "$exe"): shared libraries not found: $missing"
    unresolved=1
  fi
done
((dry)) || { ((unresolved)) && row "programs" "FAIL (unresolved)" || { pass "every program and suite resolves its libraries"; row "programs" "ok"; }; }

echo "=== 3. GPU test suites, one at a time (RL_REQUIRE_GPU=1)"
export TEST_TMPDIR=${TEST_TMPDIR:-$out/test_tmp}
mkdir -p "$TEST_TMPDIR"
all_skipped=()
for t in "${SUITES[@]}"; do
  name=${t##*:}
  log=$out/$name.log
  echo "+ RL_REQUIRE_GPU=1 timeout $suite_timeout $(bin_of "$t") > $log"
  ((dry)) && continue
  RL_REQUIRE_GPU=1 timeout "$suite_timeout" "$(bin_of "$t")" >"$log" 2>&1
  rc=$?
  ran=$(grep -c '^\[       OK \]' "$log")
  bad=$(grep -c '^\[  FAILED  \] [A-Za-z0-9_]*\.[A-Za-z0-9_]* (' "$log")
  # Each skipped test with the reason gtest printed after "Skipped". A test that needs more GPUs
  # than the machine has says "no GPU: ..." (common/gpu/gpu_test_util.h); other skips are by
  # design (e.g. a no-GPU test on a GPU machine).
  mapfile -t skips < <(awk '/^\[ RUN      \]/ {t = $4} /: Skipped$/ {getline r; print t "\t" r}' "$log")
  short=()
  for s in "${skips[@]}"; do
    echo "  skipped: ${s/$'\t'/: }"
    [[ ${s#*$'\t'} == "no GPU"* ]] && short+=("${s%%$'\t'*}")
  done
  all_skipped+=("${short[@]}")
  figure="$ran passed, $bad failed, ${#skips[@]} skipped"
  ((${#short[@]})) && figure+=" (${#short[@]} for want of GPUs)"
  ((rc == 124)) && figure+=", timed out after $suite_timeout s"
  if ((rc == 0 && bad == 0)) && { ((${#short[@]} == 0)) || ((gpus < 2)); }; then
    pass "$name ($figure)"
    row "$name" "$figure"
  else
    fail "$name ($figure, exit $rc; log $log)"
    grep -A3 -E ': Failure$' "$log" | head -n 40
    row "$name" "FAIL: $figure"
  fi
done

echo "=== 4. device code in the rank binary"
rank=$(bin_of worker:ringleader-rank)
echo "+ cuobjdump --list-elf --list-ptx $rank"
if ((!dry)); then
  if command -v cuobjdump >/dev/null; then
    code=$(cuobjdump --list-elf --list-ptx "$rank" 2>&1)
    echo "$code" | head -n 20
    # cuobjdump names the machine code "ELF file N: NAME.sm_80.cubin" and the PTX "PTX file N:
    # NAME.sm_90.ptx" (PTX for the virtual compute_90 architecture).
    elf=$(grep '^ELF file' <<<"$code" | grep -oE 'sm_[0-9]+a?' | sort -u | paste -sd' ')
    ptx=$(grep '^PTX file' <<<"$code" | grep -oE 'sm_[0-9]+a?' | sort -u | paste -sd' ')
    for arch in sm_80 sm_90; do
      if grep -qw "$arch" <<<"$elf"; then pass "machine code for $arch"; else fail "no $arch machine code"; fi
    done
    if grep -qw sm_90 <<<"$ptx"; then pass "compute_90 PTX"; else fail "no compute_90 PTX"; fi
    row "device code" "machine code: ${elf:-none}; PTX: ${ptx:-none}"
  else
    fail "cuobjdump not found in $CUDA_HOME/bin or PATH"
  fi
fi

echo "=== 5. all-reduce bandwidth: NCCL backend vs raw ncclAllReduce (same run)"
log=$out/allreduce.log
echo "+ $(bin_of worker/collective/gpu:nccl_allreduce_benchmark) --sizes_mib=1,16,64,256 > $log"
if ((!dry)); then
  if timeout 600 "$(bin_of worker/collective/gpu:nccl_allreduce_benchmark)" \
      --sizes_mib=1,16,64,256 >"$log" 2>&1; then
    cat "$log"
    pass "all-reduce benchmark"
    if grep -q '^one GPU' "$log"; then
      row "all-reduce 256 MiB, 1 GPU: us/call raw, rl" "$(awk '$1 == 256 {print $2 ", " $3}' "$log")"
    else
      row "all-reduce 256 MiB: busbw raw, rl; rl/raw" "$(awk '$1 == 256 {print $3 ", " $5 " GB/s; " $6}' "$log")"
    fi
  else
    cat "$log"
    fail "all-reduce benchmark (log $log)"
    row "all-reduce" "FAIL"
  fi
fi
if command -v all_reduce_perf >/dev/null; then
  run all_reduce_perf -b 1M -e 256M -f 4 -g "$gpus" | tee "$out/all_reduce_perf.log"
  row "NCCL all_reduce_perf 256 MiB busbw" \
    "$(awk '$1 == 268435456 {print $(NF-2) " GB/s"}' "$out/all_reduce_perf.log" | tail -n1)"
else
  echo "(NCCL's all_reduce_perf is not on PATH: no NCCL reference figure)"
fi

echo "=== 6. training samples/s: the demo model and a wide one; CPU, 1 GPU and $gpus"
# A coordinator and one CPU worker daemon first (the CPU reference, one rank over gloo, same
# machine), then one GPU worker daemon per GPU. Synthetic data; each job's samples/s is the
# coordinator's figure from its verdict line.
declare -A sps_of
# train LABEL BACKEND WORLD LAYERS BATCH STEPS [PRECISION]: one job, watched to its end.
train() {
  local label=$1 backend=$2 world=$3 layers=$4 batch=$5 steps=$6 precision=${7:-}
  local where; [ "$backend" = nccl ] && where="$world GPU(s)" || where="CPU, $world rank"
  local log=$out/train_${label}_${backend}_${world}.log
  local sets=(--set name="$label-$backend-$world" --set backend="$backend"
    --set world_size="$world" --set data.dataset=synthetic --set model.layers="$layers"
    --set batch_size="$batch" --set max_steps="$steps" --set checkpoint_dir="$fleet/ckpt")
  [ -n "$precision" ] && sets+=(--set mixed_precision="$precision")
  echo "+ ringleader submit ${sets[*]} --watch > $log"
  ((dry)) && return 0
  if timeout 300 "${cli[@]}" submit "${sets[@]}" --watch >"$log" 2>&1; then
    local sps
    sps=$(grep -oE '[0-9]+ train samples/s' "$log" | tail -n1 | cut -d' ' -f1)
    sps_of[$label/$backend/$world]=$sps
    local ratio="" cpu=${sps_of[${label%-*}/gloo/1]:-}
    [ "$backend" = nccl ] && [ -n "$cpu" ] && ratio=$(awk -v a="$sps" -v b="$cpu" \
      'BEGIN {printf " (%.1fx the CPU rank)", a / b}')
    pass "training $label on $where: $sps samples/s$ratio"
    row "train $label, $where" "$sps samples/s$ratio"
  else
    tail -n 20 "$log"
    fail "training $label on $where (log $log)"
    row "train $label, $where" "FAIL"
  fi
}
# await_workers N: waits (bounded) until N workers are idle; sets n.
await_workers() {
  for _ in $(seq 1 100); do
    n=$("${cli[@]}" workers 2>/dev/null | grep -c " IDLE " || true)
    ((n >= $1)) && return 0
    sleep 0.1
  done
  return 1
}
fleet=$out/fleet
fleet_pids=() n=0
stop_fleet() { for p in "${fleet_pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; }
# start_worker NAME [FLAGS...]
start_worker() {
  local name=$1; shift
  "$(bin_of worker:ringleader-worker)" --coordinator="$addr" --name="$name" "$@" --insecure \
    --work_dir="$fleet/$name" --rank_binary="$(bin_of worker:ringleader-rank)" \
    --allowed_roots="$fleet" 2>"$fleet/$name.log" &
  fleet_pids+=($!)
}
demo="[784,256,128,10]" wide="[784,4096,4096,4096,10]"
if ((!dry)); then
  mkdir -p "$fleet"
  trap stop_fleet EXIT
  "$(bin_of coordinator:ringleader-coordinator)" --listen=127.0.0.1:0 --http_listen= --insecure \
    --state_dir="$fleet/state" --port_file="$fleet/addr" 2>"$fleet/coordinator.log" &
  fleet_pids+=($!)
  for _ in $(seq 1 100); do [ -s "$fleet/addr" ] && break; sleep 0.1; done
  addr=$(cat "$fleet/addr" 2>/dev/null)
  cli=("$(bin_of client:ringleader)" --coordinator="$addr" --insecure)
  start_worker cpu0
  await_workers 1
fi
if ((!dry && n < 1)); then
  fail "the CPU worker daemon did not register (logs in $fleet)"
else
  train demo gloo 1 "$demo" 64 600
  train wide gloo 1 "$wide" 1024 20  # a few steps: the CPU takes about a second each
fi
if ((!dry)); then
  for i in $(seq 0 $((gpus - 1))); do start_worker "gpu$i" --gpu="$i"; done
  await_workers $((gpus + 1))
  "${cli[@]}" workers
fi
if ((!dry && n < gpus + 1)); then
  fail "only $((n - 1)) of $gpus GPU worker daemons registered; no GPU training (logs in $fleet)"
  tail -n 5 "$fleet"/gpu*.log
  row "training on GPUs" "FAIL: $((n - 1)) of $gpus workers registered"
else
  for world in $(printf '%s\n' 1 "$gpus" | sort -un); do
    train demo nccl "$world" "$demo" 64 600
    train wide nccl "$world" "$wide" 1024 600
    train wide-bf16 nccl "$world" "$wide" 1024 600 bf16
  done
fi
((!dry)) && stop_fleet

echo "=== 7. compute-sanitizer"
if ((skip_sanitizer)); then
  echo "(skipped: --skip_sanitizer)"
  row "compute-sanitizer" "not run (--skip_sanitizer)"
elif ((dry)) || command -v compute-sanitizer >/dev/null; then
  sanitize() {  # sanitize TOOL GROUP TEST [ARGS...]
    local tool=$1 group=$2 t=$3; shift 3
    local log=$out/${tool}_${group}_${t##*:}.log
    echo "+ RL_REQUIRE_GPU=1 RL_GPU_TEST_DEADLINE_SCALE=$SANITIZER_DEADLINE_SCALE" \
      "compute-sanitizer --tool $tool --report-api-errors $([ "$group" = nccl ] && echo no || echo explicit)" \
      "--error-exitcode 1 $(bin_of "$t") $* > $log"
    ((dry)) && return 0
    # NCCL probes its kernels with cudaFuncGetAttributes and handles "no kernel image" itself;
    # the NCCL group reports memory errors only. API errors in the kernel group are ours.
    local api=explicit
    [ "$group" = nccl ] && api=no
    if RL_REQUIRE_GPU=1 RL_GPU_TEST_DEADLINE_SCALE=$SANITIZER_DEADLINE_SCALE timeout "$sanitizer_timeout" \
        compute-sanitizer --tool "$tool" --report-api-errors "$api" --error-exitcode 1 \
        "$(bin_of "$t")" "$@" >"$log" 2>&1; then
      pass "compute-sanitizer $tool ${t##*:} $*"
      row "$tool ${t##*:} $*" "clean"
    else
      fail "compute-sanitizer $tool ${t##*:} $* (log $log)"
      grep -E 'ERROR SUMMARY|Invalid|Race|Uninitialized|FAILED' "$log" | head -n 12
      row "$tool ${t##*:} $*" "FAIL: $(grep -oE 'ERROR SUMMARY: [0-9]+ errors?$' "$log" | tail -n1)"
    fi
  }
  # Does initcheck see cuBLAS's bf16 GEMM stores? The probe writes a bf16 GEMM's fp32 output
  # into never-written memory and a kernel reads all of it. Exact values with initcheck reports
  # mean the tool missed the GEMM's stores (on an H100 it does): the trainer suite's bf16 tests,
  # whose kernels read such outputs, would be reported for the tool's blind spot, not ours.
  probe=$(bin_of worker/trainer/gpu:cublas_initcheck_probe)
  log=$out/initcheck_cublas_probe.log
  echo "+ timeout $sanitizer_timeout compute-sanitizer --tool initcheck $probe bf16 > $log"
  skip_bf16_initcheck=0
  if ((dry)); then
    skip_bf16_initcheck=1
    echo "(values exact and initcheck reports: the bf16 tests are left out of initcheck, as" \
      "below; the probe clean: initcheck runs the whole trainer suite)"
  else
    # No --error-exitcode: the exit status is the probe's (0 exact, 1 wrong values, 2 a CUDA error).
    timeout "$sanitizer_timeout" compute-sanitizer --tool initcheck "$probe" bf16 >"$log" 2>&1
    rc=$?
    grep -E 'max \|C|ERROR SUMMARY' "$log"
    reports=$(grep -oE 'ERROR SUMMARY: [0-9]+' "$log" | tail -n1 | grep -oE '[0-9]+$')
    if ((rc != 0)) || [ -z "$reports" ]; then
      fail "cuBLAS initcheck probe (exit $rc: 1 wrong GEMM values, 2 a CUDA error; log $log)"
      row "initcheck cuBLAS bf16 probe" "FAIL: exit $rc"
    elif ((reports > 0)); then
      skip_bf16_initcheck=1
      pass "cuBLAS initcheck probe: values exact, yet initcheck reports $reports uninitialized" \
        "reads: it does not see cuBLAS's bf16 GEMM stores"
      row "initcheck cuBLAS bf16 probe" "values exact, $reports reads reported (the tool's blind spot)"
    else
      pass "cuBLAS initcheck probe: values exact, initcheck clean"
      row "initcheck cuBLAS bf16 probe" "clean: initcheck sees cuBLAS's bf16 stores"
    fi
  fi
  for spec in "${KERNEL_TESTS[@]}"; do
    for tool in memcheck racecheck initcheck; do
      if [ "$tool" = initcheck ] && [ "$spec" = "$BF16_TRAINER_TEST" ] && ((skip_bf16_initcheck)); then
        # shellcheck disable=SC2086
        sanitize "$tool" kernels $spec "--gtest_filter=-$BF16_FILTER"
        ((dry)) || row "initcheck ${spec##*:} bf16 tests" \
          "not run: initcheck does not see cuBLAS bf16 GEMM stores (the probe; docs/gpu.md)"
      else
        # shellcheck disable=SC2086
        sanitize "$tool" kernels $spec
      fi
    done
  done
  # shellcheck disable=SC2086
  for spec in "${NCCL_TESTS[@]}"; do sanitize memcheck nccl $spec; done

  # The rank's training suite under memcheck, one process per test, $sanitizer_jobs at once,
  # each bounded by the sanitizer timeout; each test's result counts.
  t=$NCCL_PARALLEL_TEST
  exe=$(bin_of "$t")
  dir=$out/memcheck_nccl_${t##*:}
  echo "+ $exe --gtest_list_tests"
  echo "+ for each test T, $sanitizer_jobs at once: RL_REQUIRE_GPU=1" \
    "RL_GPU_TEST_DEADLINE_SCALE=$SANITIZER_DEADLINE_SCALE timeout $sanitizer_timeout" \
    "compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 $exe" \
    "--gtest_filter=T > $dir/T.log"
  if ((!dry)); then
    mkdir -p "$dir"
    mapfile -t tests < <("$exe" --gtest_list_tests 2>/dev/null |
      awk '/^[^ ]/ {suite = $1} /^  [^ ]/ {print suite $1}')
    if ((${#tests[@]} == 0)); then
      fail "memcheck ${t##*:}: --gtest_list_tests listed no test"
      row "memcheck ${t##*:}, a process per test" "FAIL: no test listed"
    else
      # Each test writes DIR/T.log and its exit status to DIR/T.rc ('/' of a test name -> '_').
      # shellcheck disable=SC2016
      printf '%s\n' "${tests[@]}" | RL_REQUIRE_GPU=1 \
        RL_GPU_TEST_DEADLINE_SCALE=$SANITIZER_DEADLINE_SCALE xargs -P "$sanitizer_jobs" -I{} \
        bash -c 'f=$4/${3//\//_}
          timeout "$1" compute-sanitizer --tool memcheck --report-api-errors no \
            --error-exitcode 1 "$2" --gtest_filter="$3" >"$f.log" 2>&1
          echo $? >"$f.rc"' _ "$sanitizer_timeout" "$exe" {} "$dir"
      clean=0 skipped=0 bad=()
      for test in "${tests[@]}"; do
        f=$dir/${test//\//_}
        rc=$(cat "$f.rc" 2>/dev/null || echo none)
        errors=$(grep -oE 'ERROR SUMMARY: [0-9]+ errors?' "$f.log" 2>/dev/null | tail -n1)
        if [ "$rc" = 0 ] && [ "$errors" = "ERROR SUMMARY: 0 errors" ]; then
          if grep -qE '^\[  SKIPPED \]|: Skipped$' "$f.log"; then
            skipped=$((skipped + 1))
            pass "memcheck $test: skipped ($(grep -A1 ': Skipped$' "$f.log" | tail -n1))"
          else
            clean=$((clean + 1))
            pass "memcheck $test: 0 errors"
          fi
        else
          bad+=("$test")
          why="exit $rc"; [ "$rc" = 124 ] && why="timed out after $sanitizer_timeout s"
          fail "memcheck $test ($why; ${errors:-no error summary}; log $f.log)"
          grep -E 'Invalid|FAILED' "$f.log" | head -n 6
        fi
      done
      figure="$clean clean, $skipped skipped, ${#bad[@]} failed"
      if ((${#bad[@]})); then
        row "memcheck ${t##*:}, a process per test" "FAIL: $figure: ${bad[*]}"
      else
        row "memcheck ${t##*:}, a process per test" "$figure"
      fi
    fi
  fi
else
  fail "compute-sanitizer not found in $CUDA_HOME/bin or PATH (install the toolkit's sanitizer)"
fi


if ((${#all_skipped[@]})); then
  row "tests not run for want of GPUs" \
    "${#all_skipped[@]}: $(printf '%s\n' "${all_skipped[@]}" | paste -sd' ')"
fi
finish
