# A local fleet for the trial commands, sourced (not run): a coordinator and N CPU worker
# daemons on 127.0.0.1 (plaintext, fault injection allowed), stopped and removed on exit.
#
#   source bench/local_fleet.sh
#   start_local_fleet NAME N     # sets: bin, run_dir, addr, cli (an array), fleet_pids
#
# Builds the four programs first (fastbuild, as the tests do).

start_local_fleet() {
  local name=$1 workers=$2
  bazel build //coordinator:ringleader-coordinator //worker:ringleader-worker \
    //worker:ringleader-rank //client:ringleader >/dev/null 2>&1 || {
    echo "$name: the build failed: run bazel build to see why" >&2; return 1; }
  bin=$(bazel info bazel-bin 2>/dev/null)
  run_dir=$(mktemp -d)
  fleet_pids=()
  trap stop_local_fleet EXIT
  "$bin/coordinator/ringleader-coordinator" --listen=127.0.0.1:0 --http_listen= --insecure \
    --allow_fault_injection --port_file="$run_dir/coordinator.addr" \
    2>"$run_dir/coordinator.log" &
  fleet_pids+=($!)
  for _ in $(seq 1 100); do
    [ -s "$run_dir/coordinator.addr" ] && break
    sleep 0.1
  done
  [ -s "$run_dir/coordinator.addr" ] || {
    echo "$name: the coordinator did not start:" >&2; cat "$run_dir/coordinator.log" >&2
    return 1; }
  addr=$(cat "$run_dir/coordinator.addr")
  for i in $(seq 0 $((workers - 1))); do
    "$bin/worker/ringleader-worker" --coordinator="$addr" --name="trial-cpu$i" --insecure \
      --work_dir="$run_dir/worker$i" --rank_binary="$bin/worker/ringleader-rank" \
      2>"$run_dir/worker$i.log" &
    fleet_pids+=($!)
  done
  cli=("$bin/client/ringleader" --coordinator="$addr" --insecure)
  for _ in $(seq 1 100); do
    n=$("${cli[@]}" workers 2>/dev/null | grep -c " IDLE " || true)
    [ "$n" -ge "$workers" ] && return 0
    sleep 0.1
  done
  echo "$name: only $n of $workers workers registered" >&2
  return 1
}

stop_local_fleet() {
  for pid in "${fleet_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$run_dir"
}
