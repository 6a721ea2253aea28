#!/usr/bin/env bash
# usage: slurm_e2e_test.sh SBATCH_SCRIPT COORDINATOR WORKER RANK CLI
#
# deploy/slurm/ringleader.sbatch on a real one-node Slurm cluster started here (slurm_cluster.sh:
# munged with a generated key, slurmctld and slurmd with a generated slurm.conf, one node of 2
# CPUs, proctrack/linuxproc, select/cons_tres, no accounting, all on their own socket, ports
# and directories under a temporary directory).
#   1. `sbatch -N 1 -n 2 ringleader.sbatch job.yaml` (a 2-rank gloo job on synthetic data):
#      exit 0, and the batch log shows the job SUCCEEDED with a PASS verdict;
#   2. a long job, scancel'ed once it trains: the ringleader job ends CANCELLED with a reason
#      naming the Slurm job, and no ringleader-rank or ringleader-worker process is left.
# Needs root and Slurm (slurm-wlm, munge; deploy/setup.sh installs them): without them it FAILS
# naming what is missing, it never skips. Every daemon it started is stopped on exit, also on
# failure; every wait is bounded.
# shellcheck source=tests/slurm/slurm_cluster.sh
source "$(dirname "${BASH_SOURCE[0]}")/slurm_cluster.sh" || { echo "FAIL: no slurm_cluster.sh" >&2; exit 1; }
slurm_setup "$@"
start_slurm

# --- 1. a job that succeeds -------------------------------------------------------------------
cat >job.yaml <<'YAML'
name: slurm-e2e
backend: gloo
epochs: 1
batch_size: 32
max_restarts: 0
collective_timeout_ms: 20000
drift_interval_steps: 4
model: {kind: mlp, layers: [32, 64, 8]}
data: {dataset: synthetic, max_train_examples: 1024, max_test_examples: 256}
YAML
start=$SECONDS
slurm_job=$(sbatch --parsable -N 1 -n 2 --output="$dir/submit/ok-%j.log" "$dir/ringleader.sbatch" \
  job.yaml) || die "sbatch failed"
wait_slurm_job "$slurm_job" 120
log="$dir/submit/ok-$slurm_job.log"
[ -f "$log" ] || die "sbatch wrote no batch log"
code=$(slurm_field "$slurm_job" ExitCode)
[ "$code" = 0:0 ] || { cat "$log" >&2; die "Slurm job $slurm_job exit code $code, expected 0:0"; }
grep -q SUCCEEDED "$log" || { cat "$log" >&2; die "the batch log does not say SUCCEEDED"; }
grep -q PASS "$log" || { cat "$log" >&2; die "the batch log does not say PASS"; }
grep -q "all 2 daemons registered" "$log" || { cat "$log" >&2; die "the batch log does not say 2 daemons registered"; }
sed 's/^/  | /' "$log"
echo "ok: Slurm job $slurm_job exited 0 in $((SECONDS - start)) s; the batch log says SUCCEEDED and PASS"

# --- 2. scancel mid-job ---------------------------------------------------------------------
# The allocation runs the binaries as $dir/bin/NAME: only this test's processes match.
no_ranks() { ! pgrep -f -- "$dir/bin/ringleader-(rank|worker)" >/dev/null; }
wait_for 30 "no ringleader-rank/ringleader-worker left from the first job" no_ranks
slurm_job=$(sbatch --parsable -N 1 -n 2 --output="$dir/submit/cancel-%j.log" \
  "$dir/ringleader.sbatch" job.yaml --epochs 10000 --set data.max_train_examples=16384) ||
  die "sbatch of the long job failed"
echo "submitted Slurm job $slurm_job (a long ringleader job)"
run_dir="$dir/submit/ringleader-slurm-$slurm_job"
cancel_log="$dir/submit/cancel-$slurm_job.log"
wait_for 60 "the long job's ringleader job is submitted" test -s "$run_dir/job_id"
job=$(cat "$run_dir/job_id")
ranks_running() { pgrep -f -- "$dir/bin/ringleader-rank" >/dev/null; }
wait_for 30 "the ranks of $job run" ranks_running
sleep 2
scancel "$slurm_job" || die "scancel $slurm_job failed"
slurm_done() { [ -z "$(squeue -h -j "$slurm_job" 2>/dev/null)" ]; }
wait_for 60 "Slurm job $slurm_job ends after scancel" slurm_done
wait_for 30 "no ringleader-rank or ringleader-worker process is left after scancel" no_ranks
pgrep -af -- "$dir/bin/ringleader-rank" >&2 && die "a ringleader-rank process is left after scancel"

# The ringleader job's end, read from its coordinator's state directory by a coordinator started
# on it afterwards (the one in the allocation is gone with it).
status=$(status_from_state "$run_dir/state" "$job") ||
  { cat "$cancel_log" >&2; die "ringleader status $job failed"; }
state=$(json_field state <<<"$status")
[ "$state" = JOB_STATE_CANCELLED ] ||
  { cat "$cancel_log" >&2; die "job $job ended $state after scancel, expected JOB_STATE_CANCELLED"; }
grep -q "Slurm job $slurm_job" <<<"$status" ||
  { cat "$cancel_log" >&2; echo "$status" >&2; die "the cancellation of $job does not name Slurm job $slurm_job"; }
sed 's/^/  | /' "$cancel_log"
echo "ok: scancel $slurm_job: job $job CANCELLED naming Slurm job $slurm_job; no rank process left"
echo PASS
