#!/usr/bin/env bash
# The demo (README command 1): a coordinator and two CPU worker daemons on 127.0.0.1 train the
# default MLP on Fashion-MNIST over gloo; the CLI follows the job to its end and prints the test
# accuracy per epoch and the final verdict. Everything is stopped on exit, also on Ctrl-C.
#
#   deploy/demo.sh [extra `ringleader submit` flags overriding deploy/demo_job.yaml, e.g. --epochs 2]
set -euo pipefail
cd "$(dirname "$0")/.."
deploy/setup.sh

echo "demo: building (first build takes a few minutes)..."
bazel build -c opt //coordinator:ringleader-coordinator //worker:ringleader-worker \
  //worker:ringleader-rank //client:ringleader
bin=$(bazel info -c opt bazel-bin 2>/dev/null)

run_dir=$(mktemp -d -t ringleader-demo.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  echo "demo: daemons stopped; logs and checkpoint kept in $run_dir"
}
trap cleanup EXIT

# Mutual TLS, as in a real cluster: a CA and the coordinator's, workers' and CLI's certificates.
deploy/certs.sh "$run_dir/tls" >/dev/null
tls=--tls_dir="$run_dir/tls"

# --allow_fault_injection: the demo may be given model.faults to show what ringleader catches.
"$bin/coordinator/ringleader-coordinator" --listen=127.0.0.1:0 --allow_fault_injection "$tls" \
  --state_dir="$run_dir/state" \
  --port_file="$run_dir/coordinator.addr" 2>"$run_dir/coordinator.log" &
pids+=($!)

# Wait (bounded) for the coordinator to publish its address.
for _ in $(seq 1 100); do
  [ -s "$run_dir/coordinator.addr" ] && break
  kill -0 "${pids[0]}" 2>/dev/null || { cat "$run_dir/coordinator.log" >&2; exit 1; }
  sleep 0.1
done
[ -s "$run_dir/coordinator.addr" ] || { echo "demo: coordinator did not start" >&2; exit 1; }
addr=$(cat "$run_dir/coordinator.addr")
echo "demo: coordinator listening on $addr"

# --allowed_roots: the job may name paths only in the demo's checkpoint directory and
# the Fashion-MNIST directory; anything else (checkpoint_dir=/etc) fails the job.
for i in 0 1; do
  "$bin/worker/ringleader-worker" --coordinator="$addr" --name="demo-cpu$i" "$tls" \
    --work_dir="$run_dir/worker$i" --rank_binary="$bin/worker/ringleader-rank" \
    --allowed_roots="$run_dir/checkpoints,/usr/share/datasets/fashion-mnist" \
    2>"$run_dir/worker$i.log" &
  pids+=($!)
done

cli=("$bin/client/ringleader" --coordinator="$addr" "$tls")
# Wait (bounded) until both workers have registered.
for _ in $(seq 1 100); do
  n=$("${cli[@]}" workers 2>/dev/null | grep -c "demo-cpu" || true)
  [ "$n" -ge 2 ] && break
  sleep 0.1
done
"${cli[@]}" workers

start=$(date +%s)
rc=0
"${cli[@]}" submit deploy/demo_job.yaml --set checkpoint_dir="$run_dir/checkpoints" "$@" \
  --watch || rc=$?
echo "demo: finished in $(( $(date +%s) - start )) s"
exit $rc
