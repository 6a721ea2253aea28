#!/usr/bin/env bash
# usage: slurm_requeue_e2e_test.sh SBATCH_SCRIPT COORDINATOR WORKER RANK CLI
#
# deploy/slurm/ringleader.sbatch when daemons are lost and when the allocation is requeued, on a
# real one-node Slurm cluster started here (slurm_cluster.sh) with RequeueExit=75:
#   1. spare: `RINGLEADER_SPARES=1 sbatch -O -n 3` (a 2-rank gloo job on 3 daemons, which
#      register --topology=rack1/NODE from the cluster's topology/tree switch); the daemon
#      of rank 1 is SIGKILLed mid-job: the job restarts on the two left from its checkpoint, the
#      Slurm job exits 0 and the ringleader job is SUCCEEDED in a later generation without it;
#   2. requeue: `RINGLEADER_CANCEL_ON_TERM=0 sbatch -n 2`; once a checkpoint is written,
#      `scontrol requeue` of the running Slurm job: the requeued allocation continues the SAME
#      ringleader job as its next generation from its checkpoint. Then a daemon of that
#      allocation is SIGKILLed: no spare, so the script exits 75, which Slurm's RequeueExit
#      requeues again; the third allocation finishes the job and exits 0. Checked from
#      `ringleader status --output json`: the job id, its generations, each resume's step > 0.
# Every wait is bounded; without root or Slurm it FAILS naming what is missing, never skips.
# shellcheck source=tests/slurm/slurm_cluster.sh
source "$(dirname "${BASH_SOURCE[0]}")/slurm_cluster.sh" || { echo "FAIL: no slurm_cluster.sh" >&2; exit 1; }
slurm_setup "$@"
# One leaf switch, rack1, over the node: the script gives its daemons --topology=rack1/NODE.
echo "SwitchName=rack1 Nodes=$(hostname -s)" >"$dir/topology.conf"
# Slurm holds a requeued job back for its credentials' lifetime (AuthInfo cred_expire, 120 s
# by default): 5 s here, and a scheduler pass every second to start it once that is over.
slurm_auth_options=",cred_expire=5" start_slurm "RequeueExit=75" "TopologyPlugin=topology/tree" \
  "SchedulerParameters=sched_interval=1"
test_start=$SECONDS

mkdir -p "$dir/ckpt"
# Short heartbeats: a killed daemon is declared lost within 3 s. slow_ms paces the job (about
# 70 ms a step) so that it is still training when the test interferes.
export RINGLEADER_WORKER_ARGS="--allowed_roots=$dir/ckpt"
export RINGLEADER_COORDINATOR_ARGS="--heartbeat_interval=500ms --heartbeat_timeout=3s --allow_fault_injection"
cat >job.yaml <<YAML
name: slurm-requeue
backend: gloo
epochs: 12
batch_size: 32
max_restarts: 12
collective_timeout_ms: 20000
checkpoint_dir: $dir/ckpt
checkpoint_interval_steps: 4
model: {kind: mlp, layers: [32, 64, 8], faults: {slow_rank: 0, slow_ms: 60}}
data: {dataset: synthetic, max_train_examples: 1024, max_test_examples: 256}
YAML

cli_at() {  # cli_at RUN_DIR ARGS...: the CLI against the coordinator the allocation started
  local port
  port=$(sed 's/.*://' "$1/coordinator.port" 2>/dev/null | tr -dc 0-9)
  shift
  [ -n "$port" ] && "$dir/bin/ringleader" --insecure --coordinator="127.0.0.1:$port" --timeout 5s "$@"
}
job_field() { cli_at "$1" --output json status "$2" 2>/dev/null | json_field "$3" 2>/dev/null; }
at_step() {  # at_step RUN_DIR JOB GENERATION STEP: generation >= GENERATION has a checkpoint past STEP
  local gen step
  gen=$(job_field "$1" "$2" generation) step=$(job_field "$1" "$2" last_checkpoint_step)
  ((${gen:-0} >= $3 && ${step:-0} > $4))
}
kill_daemon_of_rank() {  # kill_daemon_of_rank RUN_DIR JOB RANK: SIGKILL, prints its name
  local name pid
  name=$(cli_at "$1" --output json workers | python3 -c '
import json, sys
for w in json.load(sys.stdin).get("workers", []):
    if w.get("job_id") == sys.argv[1] and int(w.get("rank", 0)) == int(sys.argv[2]):
        print(w["name"])' "$2" "$3") || die "ringleader workers failed"
  [ -n "$name" ] || die "no worker runs rank $3 of $2"
  pid=$(pgrep -f -- "^$dir/bin/ringleader-worker .*--name=$name( |$)") || die "no process of $name"
  kill -KILL $pid
  echo "$name"
}

# --- 1. a daemon killed, a spare takes its place ----------------------------------------------
start=$SECONDS
# -O (overcommit): three tasks on the node's two CPUs.
slurm_job=$(RINGLEADER_SPARES=1 sbatch --parsable -O -n 3 --output="$dir/submit/spare-%j.log" \
  "$dir/ringleader.sbatch" job.yaml --epochs 6) || die "sbatch of the spare case failed"
run_dir="$dir/submit/ringleader-slurm-$slurm_job"
log="$dir/submit/spare-$slurm_job.log"
wait_for 30 "Slurm job $slurm_job submits its ringleader job" test -s "$run_dir/job_id"
job=$(cat "$run_dir/job_id")
wait_for 30 "job $job writes a checkpoint" at_step "$run_dir" "$job" 1 0
topologies=$(cli_at "$run_dir" --output json workers | python3 -c '
import json, sys
print(" ".join(sorted({w.get("topology", "") for w in json.load(sys.stdin).get("workers", [])})))')
[ "$topologies" = "rack1/$host" ] || die "the daemons' topologies are '$topologies', expected rack1/$host"
echo "ok: the 3 daemons registered with --topology=rack1/$host (Slurm's topology/tree)"
killed=$(kill_daemon_of_rank "$run_dir" "$job" 1)
echo "killed $killed (rank 1 of $job) with SIGKILL"
wait_slurm_job "$slurm_job" 60
code=$(slurm_field "$slurm_job" ExitCode)
[ "$code" = 0:0 ] || { cat "$log" >&2; die "Slurm job $slurm_job of the spare case: exit code $code, expected 0:0"; }
grep -q "world_size 2 of 3 daemons" "$log" || { cat "$log" >&2; die "the batch log does not say world_size 2 of 3"; }
status=$(status_from_state "$run_dir/state" "$job") || die "ringleader status $job failed"
state=$(json_field state <<<"$status") gen=$(json_field generation <<<"$status")
last_workers=$(json_field "attempts[-1].workers" <<<"$status")
[ "$state" = JOB_STATE_SUCCEEDED ] || { cat "$log" >&2; die "job $job ended $state, expected SUCCEEDED"; }
((gen >= 2)) || die "job $job succeeded in generation $gen: no restart after $killed was killed"
grep -q -- "$killed" <<<"$last_workers" && die "the last attempt of $job ran on the killed $killed: $last_workers"
sed 's/^/  | /' "$log"
echo "ok: $killed killed: job $job SUCCEEDED in generation $gen on $last_workers; Slurm job $slurm_job exited 0 in $((SECONDS - start)) s"
rm -rf "${run_dir:?}"

# --- 2. scontrol requeue, then too few daemons: exit 75 and RequeueExit ------------------------
no_processes() { ! pgrep -f -- "$dir/bin/ringleader-(rank|worker|coordinator)" >/dev/null; }
wait_for 30 "no process left from the spare case" no_processes
start=$SECONDS
slurm_job=$(RINGLEADER_CANCEL_ON_TERM=0 sbatch --parsable -n 2 --open-mode=append \
  --output="$dir/submit/requeue-%j.log" "$dir/ringleader.sbatch" job.yaml) ||
  die "sbatch of the requeue case failed"
run_dir="$dir/submit/ringleader-slurm-$slurm_job"
log="$dir/submit/requeue-$slurm_job.log"
wait_for 30 "Slurm job $slurm_job submits its ringleader job" test -s "$run_dir/job_id"
job=$(cat "$run_dir/job_id")
wait_for 30 "job $job writes a checkpoint" at_step "$run_dir" "$job" 1 0
step=$(job_field "$run_dir" "$job" last_checkpoint_step)
scontrol requeue "$slurm_job" || die "scontrol requeue $slurm_job failed"
echo "scontrol requeue $slurm_job: job $job had a checkpoint at step $step"
wait_requeued "$slurm_job" 1
wait_for 40 "job $job trains again in generation 2 or later past step $step" at_step "$run_dir" "$job" 2 "$step"
[ "$(cat "$run_dir/job_id")" = "$job" ] || die "the requeued allocation changed the job id file"
killed=$(kill_daemon_of_rank "$run_dir" "$job" 0)
echo "killed $killed (rank 0 of $job) with SIGKILL: no spare left"
wait_requeued "$slurm_job" 2
code=$(slurm_field "$slurm_job" ExitCode)
[ "$code" = 75:0 ] || { cat "$log" >&2; die "the second allocation of $slurm_job exited $code, expected 75:0"; }
echo "ok: the second allocation exited 75 and Slurm requeued it (RequeueExit=75)"
wait_slurm_job "$slurm_job" 60
exit_code=$(slurm_field "$slurm_job" ExitCode)
[ "$exit_code" = 0:0 ] && [ "$(slurm_field "$slurm_job" JobState)" = COMPLETED ] ||
  { cat "$log" >&2; die "Slurm job $slurm_job ended $(slurm_field "$slurm_job" JobState) $exit_code, expected COMPLETED 0:0"; }
grep -q "exiting 75 for a requeue" "$log" || { cat "$log" >&2; die "the batch log does not say it exited 75"; }
grep -q "continuing ringleader job $job" "$log" || { cat "$log" >&2; die "the batch log does not say it continued $job"; }
status=$(status_from_state "$run_dir/state" "$job") || die "ringleader status $job failed"
check_requeues=$(cat <<'PY'
import json, sys
job, step = sys.argv[1], int(sys.argv[2])
s = json.load(sys.stdin)
gen = int(s.get("generation", 0))
attempts = s.get("attempts", [])
resumed = [int(a.get("resumed_from_step", 0)) for a in attempts]
print(f"  job {s.get('job_id')}: {s.get('state')}, generation {gen}, resumed from steps {resumed}")
assert s.get("job_id") == job, s.get("job_id")
assert s.get("state") == "JOB_STATE_SUCCEEDED", s.get("state")
assert gen >= 3, f"generation {gen}: expected one per allocation at least"
trained = [(int(a.get("resumed_from_step", 0)), int(a.get("last_step", 0))) for a in attempts]
# Every later attempt that trained resumed from a checkpoint (one that never reached a step,
# placed on a daemon not yet declared lost, says nothing).
assert all(r > 0 for r, last in trained[1:] if last > 0), f"a later attempt started from step 0: {trained}"
assert max(resumed) > step, f"no resume past the step {step} of the first allocation's checkpoint: {resumed}"
PY
)
python3 -c "$check_requeues" "$job" "$step" <<<"$status" ||
  { cat "$log" >&2; die "the status of $job does not show the requeues"; }
wait_for 30 "no ringleader process is left after the third allocation" no_processes
sed 's/^/  | /' "$log"
echo "ok: scontrol requeue and exit 75: job $job continued over 3 allocations; $((SECONDS - start)) s"
echo "PASS in $((SECONDS - test_start)) s after Slurm started"
