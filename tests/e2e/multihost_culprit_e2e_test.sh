#!/usr/bin/env bash
# usage: multihost_culprit_e2e_test.sh COORDINATOR WORKER RANK CLI
#
# The real-world mistake on several hosts: one worker daemon started with
# --collective_host=127.0.0.1 while its peer runs on another host. The same three namespaces as
# multihost_e2e_test (netns_lib.sh): the coordinator in one, a worker daemon in each of the
# others, each daemon with a host name of its own (rl-host1, rl-host2: a UTS namespace each; the
# coordinator tells hosts apart by the name a worker registers with). mc-host1 finds its address
# from the route to the coordinator; mc-host2 is given 127.0.0.1. A 2-rank gloo job, with the
# rendezvous (gloo's connect) and collective timeouts at 5 s, must fail, and its reason must
#   - name the loopback rank with the port it really listened on (seen with `ss` while the job
#     ran): "could not connect to rank R at 127.0.0.1:PORT", and where gloo's byte-swapped port
#     is explained, "[127.0.0.1]:SWAPPED is 127.0.0.1:PORT";
#   - say what to fix: "rank R's collective address 127.0.0.1:PORT is a loopback address, but it
#     runs on rl-host2 and the rank that could not reach it on rl-host1: set the worker's
#     collective address ...";
#   - not name the healthy rank as a suspect.
# Which rank gets mc-host2 is read from the job's status (ranks[].worker_name), so the checks
# hold whichever rank it is.
#
# Root only (network namespaces): otherwise it prints "SKIPPED: needs root for network
# namespaces" and reports the case as skipped. Everything (processes, namespaces, links) is
# removed on exit, also on failure. Every wait is bounded.
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=netns_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/netns_lib.sh" ||
  { echo "FAIL: netns_lib.sh not found beside this script" >&2; exit 1; }
netns_skip_unless_root multihost_culprit_e2e_test LoopbackCollectiveAddressIsNamed \
  "a loopback collective address across hosts"
netns_init rl-mc "$@"

# --- the three hosts and the cluster --------------------------------------------------------
netns_create_hosts
start coordinator "$coord_ns" "$coordinator_bin" --listen="$coordinator" --http_listen= --insecure \
  --heartbeat_interval=500ms
bad=2 good=1  # the daemon on host 2 gets the loopback address
collective_flag=([1]="" [2]=--collective_host=127.0.0.1)
for i in 1 2; do
  # shellcheck disable=SC2206  # host 1: no flag at all
  flags=(${collective_flag[$i]})
  start_on_host "host$i" "${host_ns[$i]}" "rl-host$i" "$worker_bin" \
    --coordinator="$coordinator" --insecure --name="mc-host$i" --work_dir="$run_dir/host$i" \
    --rank_binary="$rank_bin" --rank_args=--rendezvous_timeout=5s --wait_timeout=2s "${flags[@]}"
done

wait_for 60 "both worker daemons register with the coordinator at $coordinator" idle_workers mc-host
hosts=$(cli --json workers | json_get "' '.join(sorted(f\"{w['name']}@{w.get('host')}\"
  for w in j.get('workers', []) if w['name'].startswith('mc-host')))")
[ "$hosts" = "mc-host1@rl-host1 mc-host2@rl-host2" ] ||
  fail "expected the daemons to register from hosts rl-host1 and rl-host2, got: $hosts"
echo "ok: the daemons registered from two hosts: $hosts"
for i in 1 2; do
  expected=${host_addr[$i]}
  ((i == bad)) && expected=127.0.0.1
  grep -q "ranks listen for peers on $expected " "$run_dir/host$i.log" ||
    fail "daemon mc-host$i does not use $expected: $(grep 'listen for peers' "$run_dir/host$i.log")"
done
echo "ok: mc-host$good's ranks listen on ${host_addr[$good]}, mc-host$bad's on 127.0.0.1"

# --- the job ----------------------------------------------------------------------------------
cat >"$run_dir/job.yaml" <<'YAML'
name: multihost-loopback
world_size: 2
backend: gloo
epochs: 1
batch_size: 16
max_restarts: 0
collective_timeout_ms: 5000
model: {kind: mlp, layers: [32, 64, 8]}
data: {dataset: synthetic, max_train_examples: 1024, max_test_examples: 256}
# The namespaces are one machine: without this the ranks would share memory, not the link.
sync: {shared_memory: false}
YAML
submitted_at=$(date +%s%N)
job=$(cli --json submit "$run_dir/job.yaml" | json_get "j['job_id']") || fail "submit failed"
[ -n "$job" ] || fail "submit printed no job id"
echo "submitted $job"

job_state() { cli --json status "$job" 2>/dev/null | json_get "j.get('state', '')" 2>/dev/null; }

# The ports host 2's rank listens on at 127.0.0.1 while it waits for its peer (gloo's listener).
declare -A listening=()
observe_listeners() {
  local port
  for port in $(ip netns exec "${host_ns[$bad]}" ss -Htlnp 2>/dev/null |
                  awk '/"ringleader-rank"/ && $4 ~ /^127\.0\.0\.1:[0-9]+$/ {
                         sub(/^127\.0\.0\.1:/, "", $4); print $4 }'); do
    listening[$port]=1
  done
}

deadline=$(($(date +%s) + 90))
state=""
while (($(date +%s) < deadline)); do
  state=$(job_state)
  case "$state" in
    JOB_STATE_SUCCEEDED|JOB_STATE_FAILED|JOB_STATE_CANCELLED) break ;;
  esac
  observe_listeners
  check_alive
  sleep 0.1
done
elapsed_ms=$((($(date +%s%N) - submitted_at) / 1000000))
echo "job $job: $state after ${elapsed_ms} ms"
[ "$state" = JOB_STATE_FAILED ] ||
  fail "job $job ended '$state' (expected JOB_STATE_FAILED within 90 s):" \
    "$(cli status "$job" 2>&1 | head -40)"

cli --json status "$job" >"$run_dir/status.json" || fail "status $job failed"
reason=$(json_get "[t.get('reason', '') for t in j.get('transitions', [])
  if t.get('state') == 'JOB_STATE_FAILED'][-1]" <"$run_dir/status.json") ||
  fail "no transition to JOB_STATE_FAILED in the status of $job"
echo "reason: $reason"

# Which rank ran where.
rank_of() {
  json_get "[r['rank'] if 'rank' in r else 0 for r in j.get('ranks', [])
    if r.get('worker_name') == 'mc-host$1'][0]" <"$run_dir/status.json"
}
bad_rank=$(rank_of "$bad") || fail "no rank of $job ran on mc-host$bad"
good_rank=$(rank_of "$good") || fail "no rank of $job ran on mc-host$good"
[ "$bad_rank" != "$good_rank" ] || fail "both workers hold rank $bad_rank"
echo "ok: rank $bad_rank on mc-host$bad (127.0.0.1), rank $good_rank on mc-host$good"

# 1. The loopback rank named with the port it listened on.
port=$(grep -oE "could not connect to rank $bad_rank at 127\.0\.0\.1:[0-9]+" <<<"$reason" |
  head -n 1 | sed 's/.*://')
[ -n "$port" ] ||
  fail "the reason does not say 'could not connect to rank $bad_rank at 127.0.0.1:PORT'"
((${#listening[@]} > 0)) || fail "host $bad's rank was never seen listening on 127.0.0.1"
[ -n "${listening[$port]:-}" ] ||
  fail "the reason names port $port, host $bad's rank listened on: ${!listening[*]}"
echo "ok: the reason names rank $bad_rank at 127.0.0.1:$port, the port its process listened on"
if grep -q "byte-swapped" <<<"$reason"; then
  swapped=$(((port >> 8) | ((port & 0xff) << 8)))
  grep -qF "[127.0.0.1]:$swapped is 127.0.0.1:$port)" <<<"$reason" ||
    fail "the byte-swapped port is not explained as '[127.0.0.1]:$swapped is 127.0.0.1:$port'"
  echo "ok: gloo's byte-swapped port $swapped is explained as 127.0.0.1:$port"
fi

# 2. What is wrong and what to do.
hint="rank $bad_rank's collective address 127.0.0.1:$port is a loopback address, but it runs on"
hint+=" rl-host$bad and the rank that could not reach it on rl-host$good"
grep -qF "$hint" <<<"$reason" || fail "the reason lacks: $hint"
grep -qF "set the worker's collective address" <<<"$reason" ||
  fail "the reason lacks: set the worker's collective address"
echo "ok: the reason says the address is loopback on another host and to set the collective address"

# 3. The healthy rank is no suspect.
if grep -qF "suspect: rank $good_rank " <<<"$reason"; then
  fail "the healthy rank $good_rank (mc-host$good) is named as a suspect"
fi
echo "ok: the healthy rank $good_rank is not named as a suspect"
echo "PASS"
