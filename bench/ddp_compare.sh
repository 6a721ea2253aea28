#!/usr/bin/env bash
# Side-by-side throughput: the same job trained by ringleader (coordinator + CPU worker daemons
# on 127.0.0.1, gloo) and by PyTorch DDP (bench/torch_ddp_reference.py, Debian's python3-torch),
# one after the other, for 1, 2 and 4 ranks. Prints train samples/s of both and the ratio; the
# ratio is the figure (this machine is shared and noisy), not the absolute rate.
#
#   bench/ddp_compare.sh [--ranks "1 2 4"] [--epochs 2] [--max_train_examples 0]
#
# Same model (MLP 784-256-128-10), batch 64 per rank, SGD lr 0.02 momentum 0.9 weight decay
# 0.0005, Fashion-MNIST, one BLAS thread per rank on both sides. Both rates count training
# steps only (data in memory; evaluation and checkpoints not timed): ringleader's is the
# coordinator's verdict (batch x ranks / the slowest rank's step time, over every judged step).
set -euo pipefail
cd "$(dirname "$0")/.."

ranks_list="1 2 4"
epochs=2
max_train=0
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks_list="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --max_train_examples) max_train="$2"; shift 2 ;;
    *) echo "ddp_compare: unknown flag $1 (flags: --ranks, --epochs, --max_train_examples)" >&2
       exit 2 ;;
  esac
done
/usr/bin/python3 -c "import torch" 2>/dev/null || {
  echo "ddp_compare: python3-torch is missing: run deploy/setup.sh" >&2; exit 1; }

bazel build -c opt //coordinator:ringleader-coordinator //worker:ringleader-worker \
  //worker:ringleader-rank //client:ringleader >/dev/null 2>&1
bin=$(bazel info -c opt bazel-bin 2>/dev/null)

max_ranks=0
for n in $ranks_list; do [ "$n" -gt "$max_ranks" ] && max_ranks=$n; done

run_dir=$(mktemp -d -t ringleader-bench.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$run_dir"
}
trap cleanup EXIT

"$bin/coordinator/ringleader-coordinator" --listen=127.0.0.1:0 --insecure \
  --port_file="$run_dir/coordinator.addr" 2>"$run_dir/coordinator.log" &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$run_dir/coordinator.addr" ] && break; sleep 0.1; done
addr=$(cat "$run_dir/coordinator.addr")
for i in $(seq 0 $((max_ranks - 1))); do
  "$bin/worker/ringleader-worker" --coordinator="$addr" --name="bench-cpu$i" --insecure \
    --work_dir="$run_dir/worker$i" --rank_binary="$bin/worker/ringleader-rank" \
    2>"$run_dir/worker$i.log" &
  pids+=($!)
done
cli=("$bin/client/ringleader" --coordinator="$addr" --insecure)
for _ in $(seq 1 200); do
  [ "$("${cli[@]}" workers 2>/dev/null | grep -c bench-cpu || true)" -ge "$max_ranks" ] && break
  sleep 0.1
done

cat > "$run_dir/job.yaml" <<YAML
name: ddp-compare
backend: gloo
epochs: $epochs
batch_size: 64
model: {kind: mlp, layers: [784, 256, 128, 10]}
data: {dataset: fashion-mnist, max_train_examples: $max_train, max_test_examples: 1000}
optimizer: {kind: sgd, learning_rate: 0.02, momentum: 0.9, weight_decay: 0.0005}
YAML

printf "%-6s %22s %22s %8s\n" ranks "ringleader samples/s" "PyTorch DDP samples/s" ratio
for n in $ranks_list; do
  submitted=$("${cli[@]}" submit "$run_dir/job.yaml" --set world_size="$n")
  job=$(echo "$submitted" | grep -o 'job-[0-9]*' | head -1)
  "${cli[@]}" watch "$job" >"$run_dir/watch-$n.log" 2>&1 || {
    echo "ddp_compare: ringleader job $job did not succeed:" >&2
    tail -5 "$run_dir/watch-$n.log" >&2; exit 1; }
  ours=$("${cli[@]}" status "$job" | grep -o '[0-9.]* train samples/s' | head -1 | cut -d' ' -f1)
  theirs=$(/usr/bin/python3 bench/torch_ddp_reference.py --ranks "$n" --epochs "$epochs" \
             --max_train_examples "$max_train" | grep -o 'samples_per_second=[0-9.]*' | cut -d= -f2)
  ratio=$(/usr/bin/python3 -c "print(f'{$ours / $theirs:.2f}x')")
  printf "%-6s %22s %22s %8s\n" "$n" "$ours" "$theirs" "$ratio"
done
