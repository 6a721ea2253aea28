#!/usr/bin/env bash
# Memory and throughput per strategy, measured beside the prediction: real jobs (coordinator +
# CPU worker daemons on 127.0.0.1, gloo with shared memory) of a ~50 M-parameter MLP, a few
# steps each, for every strategy and world size; then the default (small) model at 2 ranks for
# throughput. Prints two tables (bench/strategy_table.py):
#
#   1. strategy, ranks, predicted bytes per rank (`ringleader plan`), the bytes the rank's
#      buffers hold (RankMemory.total_bytes), the heap's growth by glibc's counters
#      (RankMemory.allocator_bytes), gradients + optimizer state as % of ddp's, train samples/s
#      and its ratio to ddp in the same run;
#   2. the default model's train samples/s per strategy and the ratio to ddp.
#
# Memory figures are the rank holding the most. Samples/s leaves out each job's first step
# (first touch of every buffer): batch x ranks / the median of the slowest rank's step time
# over the others.
# Every job runs --rounds times, the strategies taking turns within a round; the tables show the
# median samples/s and the median of each round's ratio to that round's ddp (a shared 2-core
# machine is noisy; the memory figures are the same every round).
# A strategy the spec validator refuses (`ringleader plan` exits non-zero) is skipped with a
# line saying why, so a new one shows up once it is accepted.
#
#   bench/strategy_compare.sh [--strategies ddp,zero1,zero2,fsdp] [--ranks "2 4"]
#       [--layers 784,2048 x 12,10] [--bucket_cap_mb 16] [--steps 8] [--batch_size 32]
#       [--small_steps 400]
#       [--rounds 3] [--bin DIR] [--keep] [--dry_run]
#
# The default model is deep rather than wide (12 hidden layers of 2048: P = 47.8 M), with
# buckets of 16 MiB, one layer each: zero2 keeps two buckets in flight, so it saves gradient
# memory only when a bucket is small next to the model (a layer of 26 M elements would be a
# 100 MiB bucket of its own).
# --bin: the built binaries' root (a bazel-bin, built -c opt) instead of building them here;
# --keep: keep the run's folder (specs, logs, each job's status and metrics JSON) and name it;
# --dry_run: check the flags, print the runs and exit (nothing built or started).
set -euo pipefail
cd "$(dirname "$0")/.."

strategies="ddp,zero1,zero2,fsdp"
ranks_list="2 4"
layers="784,2048,2048,2048,2048,2048,2048,2048,2048,2048,2048,2048,2048,10"
bucket_cap=16
steps=8
batch=32
small_steps=400
rounds=3
bin=""
dry_run=0
keep=0
usage() {
  echo "strategy_compare: $1 (flags: --strategies, --ranks, --layers, --bucket_cap_mb, --steps, --batch_size," \
       "--small_steps, --rounds, --bin, --keep, --dry_run)" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --dry_run) dry_run=1; shift; continue ;;
    --keep) keep=1; shift; continue ;;
    --strategies|--ranks|--layers|--bucket_cap_mb|--steps|--batch_size|--small_steps|--rounds|--bin)
      [ $# -ge 2 ] || usage "$1 needs a value" ;;
    *) usage "unknown flag $1" ;;
  esac
  case "$1" in
    --strategies) strategies="$2" ;;
    --ranks) ranks_list="$2" ;;
    --layers) layers="$2" ;;
    --bucket_cap_mb) bucket_cap="$2" ;;
    --steps) steps="$2" ;;
    --batch_size) batch="$2" ;;
    --small_steps) small_steps="$2" ;;
    --rounds) rounds="$2" ;;
    --bin) bin="$2" ;;
  esac
  shift 2
done

[[ "$strategies" =~ ^[a-z0-9_]+(,[a-z0-9_]+)*$ ]] ||
  usage "--strategies: expected names separated by commas, e.g. ddp,zero1,zero2; got '$strategies'"
[[ ",$strategies," == *,ddp,* ]] ||
  usage "--strategies: the ratios are to ddp, so the list must hold ddp; got '$strategies'"
[[ "$ranks_list" =~ ^[[:space:]]*[1-9][0-9]*([[:space:]]+[1-9][0-9]*)*[[:space:]]*$ ]] ||
  usage "--ranks: expected world sizes separated by spaces, e.g. \"2 4\"; got '$ranks_list'"
[[ "$layers" =~ ^[1-9][0-9]*(,[1-9][0-9]*)+$ && "$layers" == 784,* && "$layers" == *,10 ]] ||
  usage "--layers: expected widths from 784 to 10 (the synthetic data set), e.g. 784,5120,10; got '$layers'"
[[ "$bucket_cap" =~ ^[1-9][0-9]*$ ]] ||
  usage "--bucket_cap_mb: expected a positive number of MiB, got '$bucket_cap'"
for value in "$steps" "$small_steps" "$batch" "$rounds"; do
  [[ "$value" =~ ^[1-9][0-9]*$ ]] ||
    usage "--steps, --small_steps, --batch_size, --rounds: expected a positive count, got '$value'"
done
[ "$steps" -ge 2 ] && [ "$small_steps" -ge 2 ] ||
  usage "--steps, --small_steps: at least 2 (the first step is not timed)"

# P: sum over the linear layers of in x out + out.
IFS=, read -r -a widths <<<"$layers"
parameters=0
for ((i = 1; i < ${#widths[@]}; ++i)); do
  parameters=$((parameters + widths[i - 1] * widths[i] + widths[i]))
done
max_ranks=0
for n in $ranks_list; do [ "$n" -gt "$max_ranks" ] && max_ranks=$n; done
[ "$max_ranks" -ge 2 ] || max_ranks=2  # the default model's table runs at 2 ranks

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')," \
     "$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
echo "model: mlp ${layers//,/-} (P = $parameters parameters), batch $batch per rank, $steps steps;" \
     "strategies $strategies at ranks ${ranks_list}; default model 784-256-128-10, $small_steps steps at 2 ranks;" \
     "$rounds rounds"
[ "$dry_run" -eq 1 ] && exit 0

if [ -z "$bin" ]; then
  bazel build -c opt //coordinator:ringleader-coordinator //worker:ringleader-worker \
    //worker:ringleader-rank //client:ringleader >/dev/null 2>&1 || {
    echo "strategy_compare: bazel build -c opt of the binaries failed" >&2; exit 1; }
  bin=$(bazel info -c opt bazel-bin 2>/dev/null)
fi
for program in coordinator/ringleader-coordinator worker/ringleader-worker \
               worker/ringleader-rank client/ringleader; do
  [ -x "$bin/$program" ] || { echo "strategy_compare: no $bin/$program (--bin)" >&2; exit 1; }
done

run_dir=$(mktemp -d -t ringleader-strategies.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$keep" -eq 1 ]; then echo "strategy_compare: kept $run_dir"; else rm -rf "$run_dir"; fi
}
trap cleanup EXIT

# job SPEC_FILE LAYERS STEPS RANKS: a job of STEPS steps on just enough synthetic examples.
write_job() {
  cat >"$1" <<YAML
name: strategy-compare
backend: gloo
epochs: 1
max_steps: $3
batch_size: $batch
model: {kind: mlp, layers: [$2]}
data: {dataset: synthetic, max_train_examples: $(($3 * batch * $4)), max_test_examples: 64}
optimizer: {kind: sgd, learning_rate: 0.01, momentum: 0.9}
sync: {bucket_cap_mb: $bucket_cap}
YAML
}

# The strategies the validator accepts at every world size.
plan_cli=("$bin/client/ringleader" plan --output json)
accepted=()
for strategy in ${strategies//,/ }; do
  for n in $ranks_list 2; do
    write_job "$run_dir/check.yaml" "$layers" "$steps" "$n"
    if ! "${plan_cli[@]}" "$run_dir/check.yaml" --world_size "$n" --set strategy="$strategy" \
         >/dev/null 2>"$run_dir/plan.err"; then
      echo "strategy_compare: skipping $strategy: $(head -1 "$run_dir/plan.err")"
      continue 2
    fi
  done
  accepted+=("$strategy")
done
[[ " ${accepted[*]} " == *" ddp "* ]] || { echo "strategy_compare: ddp was refused" >&2; exit 1; }
# The jobs, "LABEL LAYERS STEPS RANKS STRATEGY ROUND" per line: in each round, each model and
# world size runs every strategy in turn.
: >"$run_dir/runs"
for round in $(seq 1 "$rounds"); do
  for n in $ranks_list; do
    for strategy in "${accepted[@]}"; do
      echo "big $layers $steps $n $strategy $round" >>"$run_dir/runs"
    done
  done
  for strategy in "${accepted[@]}"; do
    echo "small 784,256,128,10 $small_steps 2 $strategy $round" >>"$run_dir/runs"
  done
done

"$bin/coordinator/ringleader-coordinator" --listen=127.0.0.1:0 --insecure \
  --port_file="$run_dir/coordinator.addr" >"$run_dir/coordinator.log" 2>&1 &
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

while read -r label run_layers run_steps n strategy round <&3; do
  name="$label-$strategy-$n-$round"
  write_job "$run_dir/$name.yaml" "$run_layers" "$run_steps" "$n"
  "${plan_cli[@]}" "$run_dir/$name.yaml" --world_size "$n" --set strategy="$strategy" \
    >"$run_dir/$name.plan.json"
  submitted=$("${cli[@]}" submit "$run_dir/$name.yaml" --world_size "$n" \
                --set strategy="$strategy")
  job=$(echo "$submitted" | grep -o 'job-[0-9]*' | head -1)
  "${cli[@]}" watch "$job" >"$run_dir/$name.watch" 2>&1 || {
    echo "strategy_compare: $strategy at $n ranks: job $job did not succeed:" >&2
    tail -5 "$run_dir/$name.watch" >&2; exit 1; }
  "${cli[@]}" status "$job" --output json >"$run_dir/$name.status.json"
  "${cli[@]}" metrics "$job" --format json >"$run_dir/$name.metrics.json"
  echo "$label $strategy $n $round $name" >>"$run_dir/done"
done 3<"$run_dir/runs"

/usr/bin/python3 bench/strategy_table.py --dir "$run_dir" --batch_size "$batch"
