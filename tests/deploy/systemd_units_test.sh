#!/usr/bin/env bash
# usage: systemd_units_test.sh INSTALL_SH
#
# Stages an installation with deploy/install.sh --destdir (the binaries and the Python package
# are this test's data dependencies, handed over with --from; nothing is built here) and checks
# the systemd units with `systemd-analyze verify --root=ROOT` (systemd 252: unit files, the
# [Install] targets and the ExecStart= binaries are all looked up under ROOT, so the binaries
# are checked at the paths the units name, without touching /usr/local). The host's
# /usr/lib/systemd/system is copied under ROOT for the units systemd's own ones depend on
# (sysinit.target, ...). Checked for --prefix /usr/local and for /opt/ringleader (the path
# rewrite).
#
# systemd-analyze verify exits 0 on some problems it reports (an unparsable value such as
# Restart=on-failur is "ignored" with a message): any output at all fails the test. It does not
# check that a unit named in Wants=/After=/WantedBy= exists, nor paths handed to the program as
# arguments: both are checked here. Negative controls (a missing binary, a bad value) prove the
# check still reports problems. Also: install.sh is idempotent and keeps /etc/default edits.
#
# Hardening: each unit carries its sandbox directives (the worker as the static user ringleader,
# which the staged sysusers.d file creates, applied with systemd-sysusers --root to a scratch
# root), the worker's --allowed_roots cover every directory it may write, and `systemd-analyze
# security --offline=true --root=ROOT` scores each unit at or below its threshold (exposure, 0 =
# locked down, 10 = none: coordinator 2.0, worker 3.0); a worker unit stripped of its sandbox
# scores above it (negative control).
#
# Needs systemd-analyze (Debian's systemd package): without it the test fails.
set -uo pipefail
install_sh=$1
runfiles=$PWD
tmp=${TEST_TMPDIR:-$(mktemp -d)}
failures=0

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

if ! command -v systemd-analyze >/dev/null; then
  echo "FAIL: systemd-analyze is required: install Debian's systemd package (deploy/setup.sh)" >&2
  exit 1
fi
system_units=/usr/lib/systemd/system
if [ ! -f "$system_units/multi-user.target" ]; then
  echo "FAIL: $system_units/multi-user.target is missing: install Debian's systemd package" >&2
  exit 1
fi
echo "using $(systemd-analyze --version | head -1)"

UNITS=(ringleader-coordinator.service ringleader-worker@0.service ringleader-worker@3.service)

# stage ROOT PREFIX: install.sh into ROOT, then systemd's own units beside ours.
stage() {
  local root=$1 prefix=$2
  if ! "$install_sh" --from "$runfiles" --destdir "$root" --prefix "$prefix" >"$root.install.log" 2>&1; then
    cat "$root.install.log" >&2
    fail "install.sh --destdir $root --prefix $prefix failed"
    return 1
  fi
  mkdir -p "$root/usr/lib/systemd"
  cp -a "$system_units" "$root/usr/lib/systemd/"
}

# verify ROOT: systemd-analyze verify's output (stdout and stderr), empty when it found nothing;
# its exit code is folded in.
verify() {
  local root=$1 out rc
  out=$(cd "$root" && systemd-analyze verify --root="$root" "${UNITS[@]}" 2>&1)
  rc=$?
  printf '%s' "$out"
  if [ "$rc" != 0 ]; then printf '\n(systemd-analyze verify exited %s)' "$rc"; fi
}

# unit_file ROOT NAME: where a unit (or its template) lies under ROOT, or nothing.
unit_file() {
  local root=$1 name=$2 dir
  case "$name" in *@*.*) name="${name%%@*}@.${name##*.}" ;; esac
  for dir in etc/systemd/system usr/lib/systemd/system; do
    if [ -e "$root/$dir/$name" ]; then echo "$root/$dir/$name"; return; fi
  done
}

# check_root ROOT PREFIX: verify, plus what verify leaves out.
check_root() {
  local root=$1 prefix=$2 out unit file dep path
  out=$(verify "$root")
  if [ -n "$out" ]; then
    fail "systemd-analyze verify --root (prefix $prefix) reported:"$'\n'"$out"
  else
    echo "ok: systemd-analyze verify --root=ROOT ${UNITS[*]} (prefix $prefix): no findings"
  fi
  for unit in ringleader-coordinator.service ringleader-worker@.service; do
    file="$root/etc/systemd/system/$unit"
    # Units named as dependencies must exist (verify accepts Wants=/After= on missing units).
    for dep in $(sed -n 's/^\(Wants\|Requires\|After\|Before\|WantedBy\|RequiredBy\)=//p' "$file"); do
      if [ -z "$(unit_file "$root" "$dep")" ]; then
        fail "$unit names $dep, which no unit file under the staged root provides"
      fi
    done
    # Every path under the prefix the unit hands over (rank binary, Python package) exists.
    for path in $(grep -o "$prefix/[A-Za-z0-9._/+-]*" "$file" | sort -u); do
      if [ ! -e "$root$path" ]; then fail "$unit names $path, which install.sh did not install"; fi
    done
    # The settings file it reads is installed.
    for path in $(sed -n 's/^EnvironmentFile=-\{0,1\}//p' "$file"); do
      if [ ! -f "$root$path" ]; then fail "$unit reads $path, which install.sh did not install"; fi
    done
  done
  if ! grep -q "^ExecStart=$prefix/bin/ringleader-coordinator " "$root/etc/systemd/system/ringleader-coordinator.service"; then
    fail "the staged coordinator unit does not start $prefix/bin/ringleader-coordinator"
  fi
  if [ "$prefix" != /usr/local ] && grep -rq /usr/local/ "$root/etc/systemd/system/"ringleader-*; then
    fail "a unit staged with --prefix $prefix still names /usr/local: $(grep -rn /usr/local/ "$root/etc/systemd/system/"ringleader-*)"
  fi
}

# Sandbox directives every unit must keep (docs/security.md, "The systemd sandbox"), then each unit's own.
COMMON_HARDENING=(NoNewPrivileges=yes CapabilityBoundingSet= ProtectSystem=strict ProtectHome=yes
  PrivateTmp=yes ProtectKernelTunables=yes ProtectKernelModules=yes ProtectKernelLogs=yes
  ProtectControlGroups=yes RestrictSUIDSGID=yes LockPersonality=yes
  RestrictRealtime=yes RestrictNamespaces=yes SystemCallArchitectures=native UMask=0027)
COORDINATOR_HARDENING=(DynamicUser=yes StateDirectory=ringleader PrivateDevices=yes ProtectClock=yes
  MemoryDenyWriteExecute=yes SystemCallFilter=@system-service)
WORKER_HARDENING=(User=ringleader Group=ringleader "SupplementaryGroups=video render"
  StateDirectory=ringleader-worker "SystemCallFilter=~@clock @cpu-emulation @module @mount @obsolete @raw-io @reboot @swap")
# Device access must stay open for /dev/nvidia*: no PrivateDevices=, and no ProtectClock= (before
# systemd 252 it implies DeviceAllow=char-rtc, which then denies every other device).
WORKER_FORBIDDEN=(PrivateDevices=yes ProtectClock=yes DevicePolicy=closed DevicePolicy=strict)
# Highest exposure accepted by `systemd-analyze security`, per unit.
declare -A MAX_EXPOSURE=([ringleader-coordinator.service]=2.0 [ringleader-worker@0.service]=3.0)

# exposure ROOT UNIT: the overall exposure level systemd-analyze security gives UNIT ("" if none).
exposure() {
  (cd "$1" && systemd-analyze security --offline=true --root="$1" --no-pager "$2" 2>/dev/null) |
    sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p'
}

# over LEVEL MAX: whether LEVEL > MAX (decimals).
over() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

check_hardening() {
  local root=$1 dir=$1/etc/systemd/system unit directive file level max rw allowed state workdir
  for directive in "${COMMON_HARDENING[@]}"; do
    for unit in ringleader-coordinator.service ringleader-worker@.service; do
      grep -qxF -- "$directive" "$dir/$unit" || fail "$unit lacks $directive"
    done
  done
  for directive in "${COORDINATOR_HARDENING[@]}"; do
    grep -qxF -- "$directive" "$dir/ringleader-coordinator.service" ||
      fail "ringleader-coordinator.service lacks $directive"
  done
  for directive in "${WORKER_HARDENING[@]}"; do
    grep -qxF -- "$directive" "$dir/ringleader-worker@.service" ||
      fail "ringleader-worker@.service lacks $directive"
  done
  for directive in "${WORKER_FORBIDDEN[@]}"; do
    ! grep -qxF -- "$directive" "$dir/ringleader-worker@.service" ||
      fail "ringleader-worker@.service has $directive: the GPU device nodes would be unreachable"
  done
  # The worker may name in a job only what it may use: every directory it may write is an
  # allowed root, and its work dir lies in its state directory.
  file=$dir/ringleader-worker@.service
  # (In the command line: ExecStart= and its continuation lines, not the comments.)
  allowed=$(grep -E '^(ExecStart=|[[:space:]])' "$file" | grep -o -- '--allowed_roots=[^ ]*' |
    head -1 | cut -d= -f2)
  [ -n "$allowed" ] || fail "ringleader-worker@.service passes no --allowed_roots"
  state=/var/lib/$(sed -n 's/^StateDirectory=//p' "$file")
  for rw in "$state" $(sed -n 's/^ReadWritePaths=//p' "$file"); do
    rw=${rw#-}
    [[ ",$allowed," == *",$rw,"* ]] ||
      fail "ringleader-worker@.service may write $rw, which is not in --allowed_roots=$allowed"
  done
  workdir=$(grep -E '^(ExecStart=|[[:space:]])' "$file" | grep -o -- '--work_dir=[^ ]*' |
    cut -d= -f2)
  [[ "$workdir" == "$state/"* ]] ||
    fail "the worker's --work_dir=$workdir is not in its state directory $state"
  # Offline security review of the staged units.
  for unit in ringleader-coordinator.service ringleader-worker@0.service; do
    level=$(exposure "$root" "$unit")
    max=${MAX_EXPOSURE[$unit]}
    if [ -z "$level" ]; then
      fail "systemd-analyze security --offline=true gave no exposure level for $unit"
    elif over "$level" "$max"; then
      fail "systemd-analyze security: $unit exposure $level is above $max"
    else
      echo "ok: systemd-analyze security --offline=true: $unit exposure $level (at most $max)"
    fi
  done
}

root=$tmp/root
stage "$root" /usr/local && check_root "$root" /usr/local && check_hardening "$root"

# The worker's user: the staged sysusers.d file, applied to a scratch root (never this host's).
users_root=$tmp/users-root
mkdir -p "$users_root/etc/sysusers.d"
cp "$root/etc/sysusers.d/ringleader.conf" "$users_root/etc/sysusers.d/" ||
  fail "install.sh did not stage /etc/sysusers.d/ringleader.conf"
if systemd-sysusers --root="$users_root" ringleader.conf >"$tmp/sysusers.log" 2>&1; then
  grep -q '^ringleader:x:[0-9]*:[0-9]*:[^:]*:/var/lib/ringleader-worker:/usr/sbin/nologin$' \
    "$users_root/etc/passwd" || fail "sysusers made no user ringleader: $(cat "$users_root/etc/passwd")"
  for group in video render; do
    grep -q "^$group:x:[0-9]*:\(.*,\)\{0,1\}ringleader\(,.*\)\{0,1\}$" "$users_root/etc/group" ||
      fail "sysusers did not put ringleader in group $group: $(cat "$users_root/etc/group")"
  done
  echo "ok: sysusers.d creates the user ringleader in groups video and render"
else
  fail "systemd-sysusers --root rejected the staged ringleader.conf: $(cat "$tmp/sysusers.log")"
fi

# Negative control: the worker unit without its sandbox scores above the threshold.
bare=$tmp/root-bare
cp -a "$root" "$bare"
sed -i -E '/^(User|Group|SupplementaryGroups|UMask|NoNewPrivileges|CapabilityBoundingSet|AmbientCapabilities|Protect[A-Za-z]*|Private[A-Za-z]*|Restrict[A-Za-z]*|LockPersonality|RemoveIPC|SystemCall[A-Za-z]*|ReadWritePaths)=/d' \
  "$bare/etc/systemd/system/ringleader-worker@.service"
level=$(exposure "$bare" ringleader-worker@0.service)
if [ -n "$level" ] && over "$level" "${MAX_EXPOSURE[ringleader-worker@0.service]}"; then
  echo "ok: the worker unit without its sandbox scores $level, above the threshold"
else
  fail "the worker unit stripped of its sandbox scored '$level': the threshold check proves nothing"
fi
opt_root=$tmp/root-opt
stage "$opt_root" /opt/ringleader && check_root "$opt_root" /opt/ringleader &&
  check_hardening "$opt_root"

# Negative controls on a copy: the check must report a missing binary and a value systemd cannot
# parse (exit code 0 for the latter).
bad=$tmp/root-bad
cp -a "$root" "$bad"
rm "$bad/usr/local/bin/ringleader-worker"
out=$(verify "$bad")
if [[ "$out" == *"/usr/local/bin/ringleader-worker is not executable"* ]]; then
  echo "ok: a missing ExecStart binary is reported"
else
  fail "a missing worker binary was not reported; verify said: '$out'"
fi
cp "$root/usr/local/bin/ringleader-worker" "$bad/usr/local/bin/"
sed -i 's/^Restart=on-failure/Restart=on-failur/' "$bad/etc/systemd/system/ringleader-coordinator.service"
out=$(verify "$bad")
if [[ "$out" == *"on-failur"* ]]; then
  echo "ok: an unparsable value is reported"
else
  fail "Restart=on-failur was not reported; verify said: '$out'"
fi

# Idempotent: a second run changes nothing but keeps an operator's /etc/default edit.
listing() {
  (cd "$1" && find . -path ./usr/lib/systemd -prune -o -type f -printf '%p %m ' -exec sha256sum {} \; |
     awk '{print $1, $2, $3}' | sort)
}
echo "RINGLEADER_COORDINATOR=10.1.2.3:7070" >>"$root/etc/default/ringleader-worker"
before=$(listing "$root")
if "$install_sh" --from "$runfiles" --destdir "$root" >"$tmp/again.log" 2>&1; then
  after=$(listing "$root")
  if [ "$before" == "$after" ]; then
    echo "ok: a second install.sh run leaves the staged tree as it was"
  else
    fail "a second install.sh run changed the tree:"$'\n'"$(diff <(echo "$before") <(echo "$after"))"
  fi
  grep -q "^RINGLEADER_COORDINATOR=10.1.2.3:7070" "$root/etc/default/ringleader-worker" ||
    fail "install.sh overwrote the edited /etc/default/ringleader-worker"
  grep -q "ringleader-worker kept" "$tmp/again.log" || fail "install.sh did not say it kept the edited file"
  grep -q "systemctl enable --now ringleader-coordinator.service" "$tmp/again.log" ||
    fail "install.sh did not print the systemctl commands: $(cat "$tmp/again.log")"
else
  cat "$tmp/again.log" >&2
  fail "the second install.sh run failed"
fi

# Clear errors: bad usage exits 2, a tree without the binaries exits 1 naming the file.
"$install_sh" --prefix relative/dir --destdir "$tmp/x" >"$tmp/usage.log" 2>&1
rc=$?
if [ "$rc" != 2 ] || ! grep -q "absolute" "$tmp/usage.log"; then
  fail "--prefix relative/dir: exit $rc (expected 2), said: $(cat "$tmp/usage.log")"
fi
mkdir -p "$tmp/empty"
"$install_sh" --from "$tmp/empty" --destdir "$tmp/y" >"$tmp/empty.log" 2>&1
rc=$?
if [ "$rc" != 1 ] || ! grep -q "ringleader-coordinator is missing" "$tmp/empty.log" || [ -e "$tmp/y" ]; then
  fail "--from an empty tree: exit $rc (expected 1, nothing written), said: $(cat "$tmp/empty.log")"
fi

if ((failures)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "PASS"
