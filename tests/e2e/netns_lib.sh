# shellcheck shell=bash
# Sourced by the several-hosts e2e tests (multihost_e2e_test.sh, multihost_culprit_e2e_test.sh):
# three "hosts" as network namespaces on one bridge (198.18.7.0/24, the benchmarking range; no
# traffic leaves them), the processes started in them, and the clean-up on exit.
#
#   host coord ($prefix-coord-PID): bridge rlbr0 198.18.7.1/24, coordinator on :7070, the CLI
#   host 1     ($prefix-h1-PID):    eth0 198.18.7.2/24 (veth rlh1 to the bridge)
#   host 2     ($prefix-h2-PID):    eth0 198.18.7.3/24 (veth rlh2)
#
# The links live inside the namespaces (the bridge and the host ends of the veths in the
# coordinator's), so two of these tests may run at once. Usage:
#
#   netns_skip_unless_root TEST_NAME CASE_NAME WHAT   # exits 0, reported as skipped, unless root
#   netns_init PREFIX COORDINATOR WORKER RANK CLI     # checks programs, sets the variables below,
#                                                     # installs the EXIT trap (cleanup)
#   netns_create_hosts                                # the namespaces and links
#   start NAME NS COMMAND...                          # in the background, output to NAME.log
#   start_on_host NAME NS HOSTNAME COMMAND...         # the same with a host name of its own
#
# Variables: coordinator_bin worker_bin rank_bin cli_bin, coord_ns coord_addr host_ns[1..2]
# host_addr[1..2] coordinator (HOST:PORT), run_dir, python. Every wait is bounded.

# netns_skip_unless_root TEST_NAME CASE_NAME WHAT: when not root, says so, writes a JUnit file
# that reports CASE_NAME as skipped (where Bazel asks for one) and exits 0.
netns_skip_unless_root() {
  local test_name=$1 case_name=$2 what=$3
  [ "$(id -u)" = 0 ] && return 0
  echo "SKIPPED: needs root for network namespaces (run as root to test $what)"
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    cat >"$XML_OUTPUT_FILE" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
  <testsuite name="$test_name" tests="1" failures="0" errors="0" skipped="1">
    <testcase name="$case_name" classname="$test_name">
      <skipped message="needs root for network namespaces"/>
    </testcase>
  </testsuite>
</testsuites>
XML
  fi
  exit 0
}

fail() { echo "FAIL: $*" >&2; exit 1; }

# netns_init PREFIX COORDINATOR WORKER RANK CLI
netns_init() {
  local prefix=$1 program
  export PATH="$PATH:/usr/sbin:/sbin"
  for program in ip ss timeout unshare; do
    command -v "$program" >/dev/null ||
      fail "$program is required (Debian's iproute2, coreutils, util-linux: deploy/setup.sh)"
  done
  python=/usr/bin/python3
  [ -x "$python" ] || fail "$python is required (Debian's python3: deploy/setup.sh)"
  # shellcheck disable=SC2034  # used by the scripts that source this file
  coordinator_bin=$(realpath "$2") worker_bin=$(realpath "$3") rank_bin=$(realpath "$4")
  cli_bin=$(realpath "$5")

  local tag=$$
  coord_ns=$prefix-coord-$tag coord_addr=198.18.7.1
  host_ns=([1]=$prefix-h1-$tag [2]=$prefix-h2-$tag)
  host_addr=([1]=198.18.7.2 [2]=198.18.7.3)
  coordinator=$coord_addr:7070
  run_dir=$(mktemp -d "${TEST_TMPDIR:-/tmp}/$prefix.XXXXXX") || fail "mktemp failed"
  pids=() names=() created=()
  trap netns_cleanup EXIT
  trap 'exit 130' INT TERM
}

netns_log_tails() {
  local f
  for f in "$run_dir"/*.log "$run_dir"/host*/*/rank.log; do
    [ -f "$f" ] && { echo "---- $f"; tail -n 20 "$f"; }
  done
}

netns_cleanup() {
  local rc=$? pid ns running
  trap - EXIT INT TERM
  if [ "$rc" != 0 ]; then netns_log_tails >&2; fi
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 1 50); do  # up to 5 s for a clean stop
    running=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && running=1; done
    ((running)) || break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  # Whatever still runs inside this test's namespaces (a rank process) is this test's too.
  for ns in "${created[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns del "$ns" 2>/dev/null || echo "cleanup: could not delete namespace $ns" >&2
  done
  rm -rf "$run_dir"
  exit "$rc"
}

net() { "$@" || fail "network set-up failed: $*"; }

netns_create_hosts() {
  local ns i
  for ns in "$coord_ns" "${host_ns[@]}"; do
    net ip netns add "$ns"
    created+=("$ns")
    net ip -n "$ns" link set lo up
  done
  net ip -n "$coord_ns" link add rlbr0 type bridge
  net ip -n "$coord_ns" addr add "$coord_addr/24" dev rlbr0
  net ip -n "$coord_ns" link set rlbr0 up
  for i in 1 2; do
    net ip -n "$coord_ns" link add "rlh$i" type veth peer name eth0 netns "${host_ns[$i]}"
    net ip -n "$coord_ns" link set "rlh$i" master rlbr0
    net ip -n "$coord_ns" link set "rlh$i" up
    net ip -n "${host_ns[$i]}" addr add "${host_addr[$i]}/24" dev eth0
    net ip -n "${host_ns[$i]}" link set eth0 up
  done
}

# start NAME NS COMMAND...: runs COMMAND in namespace NS in the background, output to NAME.log.
start() {
  local name=$1 ns=$2
  shift 2
  ip netns exec "$ns" "$@" >"$run_dir/$name.log" 2>&1 &
  pids+=($!)
  names+=("$name")
}

# start_on_host NAME NS HOSTNAME COMMAND...: start with COMMAND given a host name of its own (a
# UTS namespace; network namespaces share the machine's host name). unshare and sh exec the next
# step, so the pid recorded is COMMAND's.
start_on_host() {
  local name=$1 ns=$2 host=$3
  shift 3
  # shellcheck disable=SC2016  # expanded by that sh
  start "$name" "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
}

cli() {
  timeout 30 ip netns exec "$coord_ns" "$cli_bin" --coordinator="$coordinator" --insecure --timeout 5s "$@"
}

# json_get EXPRESSION: evaluates a Python expression on the JSON read from stdin (as `j`).
json_get() { "$python" -c "import json, sys; j = json.load(sys.stdin); print($1)"; }

# check_alive: fails when a process this test started has ended.
check_alive() {
  local k
  for k in "${!pids[@]}"; do
    kill -0 "${pids[$k]}" 2>/dev/null || fail "the ${names[$k]} process ended early"
  done
}

# wait_for SECONDS WHAT COMMAND...: polls COMMAND until it succeeds.
wait_for() {
  local seconds=$1 what=$2 deadline
  shift 2
  deadline=$(($(date +%s) + seconds))
  until "$@"; do
    (($(date +%s) < deadline)) || fail "not within $seconds s: $what"
    check_alive
    sleep 0.1
  done
}

# idle_workers PREFIX: true once two workers named PREFIX* are registered and idle.
idle_workers() {
  local n
  n=$(cli --json workers 2>/dev/null | json_get "sum(1 for w in j.get('workers', []) \
        if w.get('state') == 'WORKER_STATE_IDLE' and w['name'].startswith('$1'))" 2>/dev/null)
  [ "${n:-0}" -ge 2 ]
}

# rank_pids NS: the rank processes running in namespace NS.
rank_pids() {
  local pid
  for pid in $(ip netns pids "$1" 2>/dev/null); do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = ringleader-rank ] && echo "$pid"
  done
}
