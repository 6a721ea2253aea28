#!/usr/bin/env bash
# usage: multihost_e2e_test.sh COORDINATOR WORKER RANK CLI
#
# Three "hosts" as network namespaces on one bridge (198.18.7.0/24, the benchmarking range; no
# traffic leaves them): the coordinator in one, a worker daemon in each of the other two, started
# with no collective flag at all. Each daemon must find its collective address from the route to
# the coordinator (its own namespace's address, not 127.0.0.1), and a 2-rank gloo job must
# succeed with one rank per host. That each rank used its own host's address is checked while
# the job runs: the rank process's --collective_host is that address, and the rank holds an
# established TCP connection between it and the other host's address (gloo's pair; gloo closes
# its listening socket once the pairs are connected, so that is not looked for). A rank that
# advertised 127.0.0.1 could not be reached from the other namespace: the job would fail.
#
#   host coord (rl-mh-coord-PID): bridge rlbr0 198.18.7.1/24, coordinator on :7070, the CLI
#   host 1     (rl-mh-h1-PID):    eth0 198.18.7.2/24 (veth to the bridge), worker mh-host1
#   host 2     (rl-mh-h2-PID):    eth0 198.18.7.3/24, worker mh-host2
#
# Root only (network namespaces): otherwise it prints "SKIPPED: needs root for network
# namespaces" and reports the case as skipped. As root, a missing program (iproute2, Debian's
# python3) fails it. Everything (processes, namespaces, links) is removed on exit, also on
# failure. Every wait is bounded. The namespaces, the helpers and the clean-up: netns_lib.sh.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=netns_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/netns_lib.sh" ||
  { echo "FAIL: netns_lib.sh not found beside this script" >&2; exit 1; }
netns_skip_unless_root multihost_e2e_test ThreeHostsInNetworkNamespaces "a 3-host cluster"
netns_init rl-mh "$@"

# --- the three hosts ------------------------------------------------------------------------
netns_create_hosts

# --- the cluster ----------------------------------------------------------------------------
start coordinator "$coord_ns" "$coordinator_bin" --listen="$coordinator" --http_listen= --insecure \
  --heartbeat_interval=500ms
for i in 1 2; do
  # No --collective_host, no --rank_args: the daemon works the address out itself.
  start "host$i" "${host_ns[$i]}" "$worker_bin" --coordinator="$coordinator" --insecure \
    --name="mh-host$i" --work_dir="$run_dir/host$i" --rank_binary="$rank_bin" --wait_timeout=2s
done

wait_for 60 "both worker daemons register with the coordinator at $coordinator" idle_workers mh-host
echo "ok: both daemons registered across the namespaces"

# Each daemon chose its own host's address (the route to the coordinator), and says so.
for i in 1 2; do
  grep -q "ranks listen for peers on ${host_addr[$i]} " "$run_dir/host$i.log" ||
    fail "daemon mh-host$i did not choose ${host_addr[$i]}: $(grep 'listen for peers' "$run_dir/host$i.log")"
done
echo "ok: the daemons chose ${host_addr[1]} and ${host_addr[2]} as their collective addresses"

# --- the job ----------------------------------------------------------------------------------
# Long enough (about 3 s of training on 2 cores) to look at the ranks' sockets while it runs.
cat >"$run_dir/job.yaml" <<'YAML'
name: multihost
world_size: 2
backend: gloo
epochs: 2
batch_size: 16
max_restarts: 0
collective_timeout_ms: 20000
drift_interval_steps: 16
model: {kind: mlp, layers: [32, 64, 8]}
data: {dataset: synthetic, max_train_examples: 16384, max_test_examples: 256}
# The namespaces are one machine: without this the ranks would share memory, not the link.
sync: {shared_memory: false}
YAML
job=$(cli --json submit "$run_dir/job.yaml" | json_get "j['job_id']") || fail "submit failed"
[ -n "$job" ] || fail "submit printed no job id"
echo "submitted $job"

job_state() { cli --json status "$job" 2>/dev/null | json_get "j.get('state', '')" 2>/dev/null; }

# observe: records what each host's rank shows right now (its --collective_host; a connection
# between its address and the other host's); true once all four were seen.
declare -A seen=()
observe() {
  local i own other pid
  for i in 1 2; do
    own=${host_addr[$i]} other=${host_addr[$((3 - i))]}
    for pid in $(rank_pids "${host_ns[$i]}"); do
      if tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qx -- "--collective_host=$own"; then
        seen[cmdline_$i]=1
      fi
    done
    if ip netns exec "${host_ns[$i]}" ss -Htnp state established 2>/dev/null |
         grep -E "$own:[0-9]+ +$other:[0-9]+" | grep -q '"ringleader-rank"'; then
      seen[peer_$i]=1
    fi
  done
  [ "${#seen[@]}" -eq 4 ]
}

deadline=$(($(date +%s) + 120))
state=""
while (($(date +%s) < deadline)); do
  state=$(job_state)
  case "$state" in
    JOB_STATE_SUCCEEDED|JOB_STATE_FAILED|JOB_STATE_CANCELLED) break ;;
  esac
  ((${#seen[@]} < 4)) && observe
  check_alive
  sleep 0.1
done
echo "job $job: $state"
[ "$state" = JOB_STATE_SUCCEEDED ] ||
  fail "job $job ended $state (expected JOB_STATE_SUCCEEDED within 120 s): $(cli status "$job" 2>&1 | head -40)"

# One rank on each host, both finished well.
placement=$(cli --json status "$job" | json_get "' '.join(sorted(
  f\"{r.get('worker_name')}:{r.get('ok', False)}\" for r in j.get('ranks', [])))")
[ "$placement" = "mh-host1:True mh-host2:True" ] ||
  fail "expected one successful rank on each host, got: $placement"
echo "ok: one rank on each host: $placement"

for i in 1 2; do
  own=${host_addr[$i]} other=${host_addr[$((3 - i))]}
  [ -n "${seen[cmdline_$i]:-}" ] || fail "host $i's rank process never had --collective_host=$own"
  [ -n "${seen[peer_$i]:-}" ] || fail "host $i's rank never had a connection $own <-> $other"
  echo "ok: host $i's rank ran with --collective_host=$own and had a connection $own <-> $other"
done
echo "PASS"
