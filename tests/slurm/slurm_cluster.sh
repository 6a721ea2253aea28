# shellcheck shell=bash
# Sourced by the Slurm tests (slurm_e2e_test.sh, slurm_requeue_e2e_test.sh): a real one-node
# Slurm cluster started here, and what the tests share.
#
#   slurm_setup SBATCH_SCRIPT COORDINATOR WORKER RANK CLI
#       checks root and the Slurm programs (FAILS naming what is missing: never skips), makes
#       $dir (a temporary directory, removed on exit with every daemon started here) holding
#       bin/ (the four binaries: RINGLEADER_BIN), ringleader.sbatch and submit/ (the cwd);
#   start_slurm [slurm.conf LINE...]
#       munged with a generated key, slurmctld and slurmd with a generated slurm.conf (one node
#       of 2 CPUs, proctrack/linuxproc, select/cons_tres, no accounting) plus LINEs, all on
#       their own socket, ports and directories under $dir; waits until the node is idle.
#       $slurm_auth_options is appended to AuthInfo (e.g. ",cred_expire=5");
#   wait_for SECONDS WHAT COMMAND...   bounded wait: fails naming WHAT when it runs out;
#   die MESSAGE                        fails after printing the logs;
#   status_from_state STATE_DIR JOB    the job's `ringleader status --output json`, from a
#                                      coordinator started on a stopped allocation's state;
#   json_field FIELD < JSON            a field of a JSON document (dotted path, [-1] = last);
#   slurm_field JOB FIELD              a field of `scontrol show job` (JobState, ExitCode, ...);
#   wait_slurm_job JOB SECONDS         until JOB is over (COMPLETED, FAILED, ...), bounded;
#   wait_requeued JOB RESTARTS         until JOB is pending again with RESTARTS restarts.
set -uo pipefail

fail() { echo "FAIL: $*" >&2; exit 1; }

slurm_setup() {
  (($# == 5)) || fail "usage: $0 SBATCH_SCRIPT COORDINATOR WORKER RANK CLI"
  local sbatch_script b
  sbatch_script=$(readlink -f "$1")
  shift
  [ "$(id -u)" = 0 ] || fail "needs root to run munged, slurmctld and slurmd (Slurm cannot be started)"
  for b in munged slurmctld slurmd sinfo sbatch scancel squeue scontrol python3; do
    command -v "$b" >/dev/null ||
      fail "$b not found: Slurm cannot be started (install slurm-wlm and munge: deploy/setup.sh)"
  done
  # Short paths under /tmp: a UNIX socket path is limited to 108 bytes.
  dir=$(mktemp -d /tmp/rl-slurm.XXXXXX) || fail "mktemp failed"
  chmod 755 "$dir"
  pids=()
  trap slurm_cleanup EXIT
  mkdir -p "$dir/bin" "$dir/log" "$dir/submit" "$dir/state" "$dir/spool" "$dir/munge"
  for b in "$@"; do ln -s "$(readlink -f "$b")" "$dir/bin/$(basename "$b")"; done
  cp "$sbatch_script" "$dir/ringleader.sbatch"
  export RINGLEADER_BIN="$dir/bin" RINGLEADER_INSECURE=1
  cd "$dir/submit" || fail "cd $dir/submit"
}

slurm_cleanup() {
  local pid
  [ -n "${SLURM_CONF:-}" ] && scancel --quiet --partition=rltest 2>/dev/null
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  sleep 1
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  # Whatever the jobs left (the tests check there is nothing) goes too: only processes run
  # from this test's directory match.
  for pid in $(pgrep -f -- "$dir/bin/ringleader-"); do kill -KILL "$pid" 2>/dev/null; done
  rm -rf "$dir"
}

show_logs() {
  local f
  for f in "$dir"/log/*.log "$dir"/submit/*.log "$dir"/submit/ringleader-slurm-*/*.log; do
    [ -f "$f" ] && { echo "--- $f"; tail -30 "$f"; }
  done >&2
}
die() { show_logs; fail "$@"; }

wait_for() {  # wait_for SECONDS WHAT COMMAND...
  local limit=$1 deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    ((SECONDS < deadline)) || die "timed out after $limit s: $what"
    sleep 0.3
  done
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start_slurm() {
  local socket="$dir/munge/munge.sock" line
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
  chmod 700 "$dir/munge"
  chmod 400 "$dir/munge/munge.key"
  munged --foreground --force --socket="$socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
    --seed-file="$dir/munge/munged.seed" >>"$dir/log/munged.log" 2>&1 &
  pids+=($!)
  wait_for 20 "munged creates $socket" test -S "$socket"

  host=$(hostname -s)
  export SLURM_CONF="$dir/slurm.conf"
  cat >"$SLURM_CONF" <<CONF
ClusterName=rltest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket${slurm_auth_options:-}
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
CONF
  for line in "$@"; do echo "$line" >>"$SLURM_CONF"; done
  slurmctld -D -i -f "$SLURM_CONF" >>"$dir/log/slurmctld.out" 2>&1 &
  pids+=($!)
  slurmd -D -f "$SLURM_CONF" >>"$dir/log/slurmd.out" 2>&1 &
  pids+=($!)
  node_idle() { [ "$(sinfo -h -n "$host" -o %t 2>/dev/null)" = idle ]; }
  wait_for 60 "sinfo shows the node $host idle (Slurm could not be started)" node_idle
  echo "ok: slurmctld and slurmd up, node $host idle"
}

json_field() {  # json_field PATH < JSON: "spec.world_size", "attempts[-1].resumed_from_step"
  python3 -c '
import json, re, sys
value = json.load(sys.stdin)
for part in re.findall(r"[^.\[\]]+|\[-?\d+\]", sys.argv[1]):
    if part.startswith("["):
        value = value[int(part[1:-1])]
    else:
        value = value.get(part, "") if isinstance(value, dict) else ""
print(value if not isinstance(value, (dict, list)) else json.dumps(value))' "$1"
}

status_from_state() {  # status_from_state STATE_DIR JOB
  local port_file="$dir/verify-$RANDOM.port" pid out code
  "$dir/bin/ringleader-coordinator" --insecure --listen=127.0.0.1:0 --port_file="$port_file" \
    --http_listen= --state_dir="$1" >>"$dir/log/verify-coordinator.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_for 20 "a coordinator on $1 starts" test -s "$port_file"
  out=$("$dir/bin/ringleader" --insecure --coordinator="$(tr -d '[:space:]' <"$port_file")" \
    --output json status "$2")
  code=$?
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  echo "$out"
  return "$code"
}

slurm_field() { scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }

wait_slurm_job() {  # wait_slurm_job JOB SECONDS
  slurm_job_over() {
    case "$(slurm_field "$1" JobState)" in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE) return 0 ;;
    esac
    return 1
  }
  wait_for "$2" "Slurm job $1 ends" slurm_job_over "$1"
}

wait_requeued() {  # wait_requeued JOB RESTARTS
  requeued() {
    [ "$(slurm_field "$1" Restarts)" = "$2" ] && [ "$(slurm_field "$1" JobState)" = PENDING ]
  }
  wait_for 60 "Slurm job $1 is pending again after restart $2" requeued "$1" "$2"
}
