#!/usr/bin/env bash
# Gradient communication over a bandwidth-limited link: two network namespaces joined by a veth
# pair shaped with tc (token bucket) to 1 Gbit/s and 10 Gbit/s; rank 0 (with the coordinator)
# in one, rank 1 in the other, so every all-reduce byte crosses the shaped link. A bigger model
# preset (784-2048-2048-10, 5.8 M parameters, 23 MB of fp32 gradients per step) makes
# communication matter. Prints train samples/s for fp32 vs bf16 communication and overlap on vs
# off, and the ratios against fp32 with overlap, measured in the same run.
#
#   sudo bench/link_bench.sh [--rates "1gbit 10gbit"] [--examples 4096]
#
# Root only (namespaces, veth, tc); addresses on 198.18.0.0/24 (the benchmarking range); no
# traffic leaves the two namespaces. Everything is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

rates="1gbit 10gbit"
examples=4096
while [ $# -gt 0 ]; do
  case "$1" in
    --rates) rates="$2"; shift 2 ;;
    --examples) examples="$2"; shift 2 ;;
    *) echo "link_bench: unknown flag $1 (flags: --rates, --examples)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "link_bench: needs root (network namespaces and tc)" >&2; exit 1; }

bazel build -c opt //coordinator:ringleader-coordinator //worker:ringleader-worker \
  //worker:ringleader-rank //client:ringleader >/dev/null 2>&1
bin=$(bazel info -c opt bazel-bin 2>/dev/null)

ns_a=rlbench-a; ns_b=rlbench-b
addr_a=198.18.0.1; addr_b=198.18.0.2; port=47070
run_dir=$(mktemp -d -t ringleader-link.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  ip netns del "$ns_a" 2>/dev/null || true
  ip netns del "$ns_b" 2>/dev/null || true
  rm -rf "$run_dir"
}
trap cleanup EXIT
ip netns del "$ns_a" 2>/dev/null || true
ip netns del "$ns_b" 2>/dev/null || true
ip netns add "$ns_a"; ip netns add "$ns_b"
ip link add rlbench0 netns "$ns_a" type veth peer name rlbench1 netns "$ns_b"
ip -n "$ns_a" addr add "$addr_a/24" dev rlbench0
ip -n "$ns_b" addr add "$addr_b/24" dev rlbench1
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set rlbench0 up; ip -n "$ns_b" link set rlbench1 up

in_a=(ip netns exec "$ns_a"); in_b=(ip netns exec "$ns_b")
"${in_a[@]}" "$bin/coordinator/ringleader-coordinator" --listen="$addr_a:$port" --insecure \
  2>"$run_dir/coordinator.log" &
pids+=($!)
"${in_a[@]}" "$bin/worker/ringleader-worker" --coordinator="$addr_a:$port" --name=link-a --insecure \
  --work_dir="$run_dir/a" --rank_binary="$bin/worker/ringleader-rank" \
  --rank_args=--collective_host="$addr_a" 2>"$run_dir/a.log" &
pids+=($!)
"${in_b[@]}" "$bin/worker/ringleader-worker" --coordinator="$addr_a:$port" --name=link-b --insecure \
  --work_dir="$run_dir/b" --rank_binary="$bin/worker/ringleader-rank" \
  --rank_args=--collective_host="$addr_b" 2>"$run_dir/b.log" &
pids+=($!)
cli=("${in_a[@]}" "$bin/client/ringleader" --coordinator="$addr_a:$port" --insecure)
for _ in $(seq 1 100); do
  [ "$("${cli[@]}" workers 2>/dev/null | grep -c link- || true)" -ge 2 ] && break
  sleep 0.1
done

cat > "$run_dir/job.yaml" <<YAML
name: link-bench
world_size: 2
backend: gloo
epochs: 1
batch_size: 64
model: {kind: mlp, layers: [784, 2048, 2048, 10]}
data: {dataset: fashion-mnist, max_train_examples: $examples, max_test_examples: 256}
optimizer: {kind: sgd, learning_rate: 0.01, momentum: 0.9}
# The namespaces are one machine: without this the ranks would share memory, not the link.
sync: {shared_memory: false}
YAML

rate_of() {  # comm_dtype overlap -> train samples/s of one job
  local out job
  out=$("${cli[@]}" submit "$run_dir/job.yaml" --set sync.comm_dtype="$1" \
          --set sync.overlap="$2")
  job=$(echo "$out" | grep -o 'job-[0-9]*' | head -1)
  "${cli[@]}" watch "$job" >"$run_dir/$job.log" 2>&1 || {
    echo "link_bench: job $job failed:" >&2; tail -5 "$run_dir/$job.log" >&2; exit 1; }
  "${cli[@]}" status "$job" | grep -o '[0-9.]* train samples/s' | head -1 | cut -d' ' -f1
}

printf "%-8s %-6s %-8s %12s %8s\n" link comm overlap "samples/s" ratio
for rate in $rates; do
  for dev_ns in "$ns_a rlbench0" "$ns_b rlbench1"; do
    set -- $dev_ns
    ip -n "$1" link set "$2" up
    tc -n "$1" qdisc replace dev "$2" root tbf rate "$rate" burst 4mb latency 50ms
  done
  base=""
  for variant in "fp32 true" "fp32 false" "bf16 true" "bf16 false"; do
    set -- $variant
    r=$(rate_of "$1" "$2")
    [ -z "$base" ] && base=$r
    printf "%-8s %-6s %-8s %12s %8s\n" "$rate" "$1" "$2" "$r" \
      "$(python3 -c "print(f'{$r / $base:.2f}x')")"
  done
done
