#!/usr/bin/env bash
# Stragglers, judged from arrival times: false alarms on clean jobs, and real stragglers named.
#
#   bench/straggler_trial.sh [--runs 20] [--max_steps 1500] [--no_real]
#
# A local fleet of 4 CPU workers runs the demo job (deploy/demo_job.yaml: the MLP on
# Fashion-MNIST) for --max_steps steps, --runs times in each of 8 configurations: 2 and 4 ranks,
# shared memory and TCP, fp32 and bf16 on the wire. Every STRAGGLER alarm of these clean jobs is
# a false alarm; each configuration prints its count and the verdicts. Then (unless --no_real),
# two real stragglers that must be named with the cause "compute": the slow_rank fault, and a
# worker (its daemon and the rank it starts) held to 20% of a core by a CPU cgroup quota (needs
# root and a cgroup v1 cpu or v2 controller; fails loudly without). Last line:
# "false STRAGGLER alarms F over R clean runs; real stragglers named N of M".
set -euo pipefail
cd "$(dirname "$0")/.."
runs=20
max_steps=1500
real=1
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --max_steps) max_steps=$2; shift 2 ;;
    --no_real) real=0; shift ;;
    *) echo "straggler_trial: unknown argument $1 (--runs N, --max_steps N, --no_real)" >&2
       exit 2 ;;
  esac
done
source bench/local_fleet.sh
start_local_fleet straggler_trial 4

# Runs one job to its end; prints "<state> <verdict> <stragglers> <flagged rank workers>".
run_job() {
  local id
  id=$("${cli[@]}" submit deploy/demo_job.yaml --json --epochs 1 --max_steps "$max_steps" "$@" |
       python3 -c 'import json,sys; print(json.load(sys.stdin)["job_id"])')
  "${cli[@]}" watch "$id" >/dev/null 2>&1 || true
  "${cli[@]}" status "$id" --json | python3 -c '
import json, sys
job = json.load(sys.stdin)
alarms = [a for a in job.get("alarms", []) if a.get("kind") == "STRAGGLER"]
ranks = {int(r.get("rank", 0)): r.get("worker_name", "") for r in job.get("ranks", [])}
named = sorted({ranks.get(int(x), "?") for a in alarms for x in a.get("ranks", [])})
print(job.get("state", "?"), job.get("verdict", {}).get("result", "?"), len(alarms),
      ",".join(named) or "-")
for a in alarms: print("  alarm:", a.get("message", ""), file=sys.stderr)'
}

false_alarms=0
clean_runs=0
for ranks in 2 4; do
  for shm in true false; do
    for dtype in fp32 bf16; do
      alarms=0; verdicts=""
      for _ in $(seq 1 "$runs"); do
        read -r state verdict count _ < <(run_job --world_size "$ranks" \
          --set sync.shared_memory=$shm --set sync.comm_dtype=$dtype)
        alarms=$((alarms + count)); clean_runs=$((clean_runs + 1))
        verdicts="$verdicts $verdict"
        [ "$state" = JOB_STATE_SUCCEEDED ] || echo "  a clean job ended $state" >&2
      done
      false_alarms=$((false_alarms + alarms))
      printf '%d ranks, %s, %s: %d STRAGGLER alarms over %d runs; verdicts:%s\n' "$ranks" \
        "$([ $shm = true ] && echo shared-memory || echo tcp)" "$dtype" "$alarms" "$runs" \
        "$(echo "$verdicts" | tr ' ' '\n' | grep . | sort | uniq -c | awk '{printf " %s x%d", $2, $1}')"
    done
  done
done

named=0
cases=0
if [ "$real" = 1 ]; then
  cases=2
  # The slow_rank fault: rank 1 sleeps 5 ms in every step's compute.
  read -r state verdict count who < <(run_job --world_size 2 --set model.faults.slow_rank=1 \
    --set model.faults.slow_ms=5)
  echo "slow_rank fault (rank 1, 5 ms a step): $count STRAGGLER alarms, named $who"
  [ "$count" -ge 1 ] && named=$((named + 1))
  # A worker held to 20% of a core: its daemon joins the cgroup, the rank it starts is born in it.
  if [ -e /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    group=/sys/fs/cgroup/cpu/ringleader-straggler-trial.$$
    mkdir "$group"
    echo 100000 >"$group/cpu.cfs_period_us"; echo 20000 >"$group/cpu.cfs_quota_us"
    root=/sys/fs/cgroup/cpu
  elif [ -e /sys/fs/cgroup/cgroup.controllers ]; then
    group=/sys/fs/cgroup/ringleader-straggler-trial.$$
    mkdir "$group"
    echo "20000 100000" >"$group/cpu.max"
    root=/sys/fs/cgroup
  else
    echo "straggler_trial: no CPU cgroup controller (v1 /sys/fs/cgroup/cpu or v2): cannot" \
         "hold a worker to 20% of a core" >&2
    exit 1
  fi
  echo "${fleet_pids[4]}" >"$group/cgroup.procs"  # trial-cpu3's daemon
  read -r state verdict count who < <(run_job --world_size 4)
  while read -r pid; do echo "$pid" >"$root/cgroup.procs" 2>/dev/null || true; done \
    <"$group/cgroup.procs"
  rmdir "$group"
  echo "trial-cpu3 held to 20% of a core: $count STRAGGLER alarms, named $who"
  [ "$who" = trial-cpu3 ] && named=$((named + 1))
fi
echo "false STRAGGLER alarms $false_alarms over $clean_runs clean runs; real stragglers named" \
     "$named of $cases"
