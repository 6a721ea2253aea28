#!/usr/bin/env bash
# usage: slurm_e2e_test.sh SBATCH_SCRIPT COORDINATOR WORKER RANK CLI
#
# deploy/slurm/ringleader.sbatch on a real one-node Slurm cluster started here: munged with a
# generated key, slurmctld and slurmd with a generated slurm.conf (one node of 2 CPUs,
# proctrack/linuxproc, select/cons_tres, no accounting), all on their own socket, ports and
# directories under a temporary directory.
#   1. `sbatch --wait -N 1 -n 2 ringleader.sbatch job.yaml` (a 2-rank gloo job on synthetic
#      data): exit 0, and the batch log shows the job SUCCEEDED with a PASS verdict;
#   2. a long job, scancel'ed once it trains: the ringleader job ends CANCELLED with a reason
#      naming the Slurm job, and no ringleader-rank or ringleader-worker process is left.
# Needs root and Slurm (slurm-wlm, munge; deploy/setup.sh installs them): without them it FAILS
# naming what is missing, it never skips. Every daemon it started is stopped on exit, also on
# failure; every wait is bounded.
set -uo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }
(($# == 5)) || fail "usage: $0 SBATCH_SCRIPT COORDINATOR WORKER RANK CLI"
abs() { readlink -f "$1"; }
sbatch_script=$(abs "$1")
bin_dir_sources=("$(abs "$2")" "$(abs "$3")" "$(abs "$4")" "$(abs "$5")")

[ "$(id -u)" = 0 ] || fail "needs root to run munged, slurmctld and slurmd (Slurm cannot be started)"
for p in munged slurmctld slurmd sinfo sbatch scancel squeue python3; do
  command -v "$p" >/dev/null ||
    fail "$p not found: Slurm cannot be started (install slurm-wlm and munge: deploy/setup.sh)"
done

# Short paths under /tmp: a UNIX socket path is limited to 108 bytes.
dir=$(mktemp -d /tmp/rl-slurm.XXXXXX) || fail "mktemp failed"
chmod 755 "$dir"
pids=()
cleanup() {
  local pid
  [ -n "${SLURM_CONF:-}" ] && scancel --quiet --partition=rltest 2>/dev/null
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  sleep 1
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  # Whatever the jobs left (there should be nothing: checked below) goes too: only processes
  # run from this test's directory match.
  for pid in $(pgrep -f -- "$dir/bin/ringleader-"); do kill -KILL "$pid" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
show_logs() {
  local f
  for f in "$dir"/log/*.log "$dir"/submit/*.log "$dir"/submit/ringleader-slurm-*/*.log; do
    [ -f "$f" ] && { echo "--- $f"; tail -30 "$f"; }
  done >&2
}
die() { show_logs; fail "$@"; }

wait_for() {  # wait_for SECONDS WHAT COMMAND...
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    ((SECONDS < deadline)) || die "timed out after ${deadline}s: $what"
    sleep 0.3
  done
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# --- the binaries (RINGLEADER_BIN) --------------------------------------------------------------
mkdir -p "$dir/bin" "$dir/log" "$dir/submit" "$dir/state" "$dir/spool" "$dir/munge"
for b in "${bin_dir_sources[@]}"; do ln -s "$b" "$dir/bin/$(basename "$b")"; done
cp "$sbatch_script" "$dir/ringleader.sbatch"

# --- munge ------------------------------------------------------------------------------------
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
chmod 700 "$dir/munge"
chmod 400 "$dir/munge/munge.key"
socket="$dir/munge/munge.sock"
munged --foreground --force --socket="$socket" --key-file="$dir/munge/munge.key" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
  --seed-file="$dir/munge/munged.seed" >>"$dir/log/munged.log" 2>&1 &
pids+=($!)
wait_for 20 "munged creates $socket" test -S "$socket"

# --- slurm ------------------------------------------------------------------------------------
host=$(hostname -s)
export SLURM_CONF="$dir/slurm.conf"
cat >"$SLURM_CONF" <<EOF
ClusterName=rltest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
KillWait=20
InactiveLimit=0
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=rltest Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -D -i -f "$SLURM_CONF" >>"$dir/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -f "$SLURM_CONF" >>"$dir/log/slurmd.out" 2>&1 &
pids+=($!)
node_idle() { [ "$(sinfo -h -n "$host" -o %t 2>/dev/null)" = idle ]; }
wait_for 60 "sinfo shows the node $host idle (Slurm could not be started)" node_idle
echo "ok: slurmctld and slurmd up, node $host idle"

export RINGLEADER_BIN="$dir/bin" RINGLEADER_INSECURE=1
cd "$dir/submit" || fail "cd $dir/submit"

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
timeout 120 sbatch --wait -N 1 -n 2 --output="$dir/submit/ok-%j.log" "$dir/ringleader.sbatch" job.yaml
code=$?
log=$(ls "$dir"/submit/ok-*.log 2>/dev/null | head -1)
[ -n "$log" ] || die "sbatch wrote no batch log (exit $code)"
((code == 0)) || { cat "$log" >&2; die "sbatch --wait exited $code, expected 0"; }
grep -q SUCCEEDED "$log" || { cat "$log" >&2; die "the batch log does not say SUCCEEDED"; }
grep -q PASS "$log" || { cat "$log" >&2; die "the batch log does not say PASS"; }
grep -q "all 2 daemons registered" "$log" || { cat "$log" >&2; die "the batch log does not say 2 daemons registered"; }
sed 's/^/  | /' "$log"
echo "ok: sbatch --wait exited 0 in $((SECONDS - start)) s; the batch log says SUCCEEDED and PASS"

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
port_file="$dir/verify.port"
"$dir/bin/ringleader-coordinator" --insecure --listen=127.0.0.1:0 --port_file="$port_file" \
  --http_listen= --state_dir="$run_dir/state" >>"$dir/log/verify-coordinator.log" 2>&1 &
pids+=($!)
wait_for 20 "a coordinator on $run_dir/state starts" test -s "$port_file"
status=$("$dir/bin/ringleader" --insecure --coordinator="$(tr -d '[:space:]' <"$port_file")" \
  --output json status "$job") || { cat "$cancel_log" >&2; die "ringleader status $job failed"; }
state=$(python3 -c 'import json, sys; print(json.load(sys.stdin).get("state", ""))' <<<"$status")
[ "$state" = JOB_STATE_CANCELLED ] ||
  { cat "$cancel_log" >&2; die "job $job ended $state after scancel, expected JOB_STATE_CANCELLED"; }
grep -q "Slurm job $slurm_job" <<<"$status" ||
  { cat "$cancel_log" >&2; echo "$status" >&2; die "the cancellation of $job does not name Slurm job $slurm_job"; }
sed 's/^/  | /' "$cancel_log"
echo "ok: scancel $slurm_job: job $job CANCELLED naming Slurm job $slurm_job; no rank process left"
echo PASS
