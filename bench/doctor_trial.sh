#!/usr/bin/env bash
# False alarms of the pre-flight check: a clean local fleet (a coordinator and N CPU worker
# daemons on 127.0.0.1, plaintext) runs `ringleader doctor` R times; after every run any
# worker it quarantined is counted and released. Prints each run's result and, last,
# "quarantined Q over R runs" (the target: 0).
#
#   bench/doctor_trial.sh [--runs 20] [--workers 3]
#
# Builds the four programs first (fastbuild, as the tests do).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=20
workers=3
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    *) echo "doctor_trial: unknown argument $1 (--runs N, --workers N)" >&2; exit 2 ;;
  esac
done
bazel build //coordinator:ringleader-coordinator //worker:ringleader-worker \
  //worker:ringleader-rank //client:ringleader >/dev/null 2>&1 || {
  echo "doctor_trial: the build failed: run bazel build to see why" >&2; exit 1; }
bin=$(bazel info bazel-bin 2>/dev/null)
run_dir=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$run_dir"
}
trap cleanup EXIT

"$bin/coordinator/ringleader-coordinator" --listen=127.0.0.1:0 --http_listen= --insecure \
  --port_file="$run_dir/coordinator.addr" 2>"$run_dir/coordinator.log" &
pids+=($!)
for _ in $(seq 1 100); do
  [ -s "$run_dir/coordinator.addr" ] && break
  sleep 0.1
done
[ -s "$run_dir/coordinator.addr" ] || {
  echo "doctor_trial: the coordinator did not start:" >&2; cat "$run_dir/coordinator.log" >&2; exit 1; }
addr=$(cat "$run_dir/coordinator.addr")
for i in $(seq 0 $((workers - 1))); do
  "$bin/worker/ringleader-worker" --coordinator="$addr" --name="trial-cpu$i" --insecure \
    --work_dir="$run_dir/worker$i" --rank_binary="$bin/worker/ringleader-rank" \
    2>"$run_dir/worker$i.log" &
  pids+=($!)
done
cli=("$bin/client/ringleader" --coordinator="$addr" --insecure)
for _ in $(seq 1 100); do
  n=$("${cli[@]}" workers 2>/dev/null | grep -c " IDLE " || true)
  [ "$n" -ge "$workers" ] && break
  sleep 0.1
done

quarantined=0
for run in $(seq 1 "$runs"); do
  start=$(date +%s.%N)
  "${cli[@]}" doctor >"$run_dir/doctor.out" 2>&1 || true
  took=$(echo "$(date +%s.%N) - $start" | bc)
  named=$("${cli[@]}" workers | awk '$4 == "QUARANTINED" {print $2}')
  for name in $named; do
    quarantined=$((quarantined + 1))
    echo "run $run: $name quarantined:" >&2
    cat "$run_dir/doctor.out" >&2
    "${cli[@]}" uncordon "$name" >/dev/null
  done
  printf 'run %d: %s quarantined, %.1f s\n' "$run" "$(echo "$named" | grep -c . || true)" "$took"
done
echo "quarantined $quarantined over $runs runs"
