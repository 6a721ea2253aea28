#!/usr/bin/env bash
# Installs ringleader on this machine, or stages it under a root for a package or a test:
#
#   deploy/install.sh [--prefix DIR] [--destdir DIR] [--from DIR]
#
# Builds (bazel build -c opt) the coordinator, worker, rank and CLI binaries and the Python
# package, then installs
#   PREFIX/bin/ringleader-coordinator, ringleader-worker, ringleader-rank, ringleader
#   PREFIX/lib/ringleader/python/      the package command jobs import (ringleader.torch)
#   /etc/systemd/system/ringleader-coordinator.service, ringleader-worker@.service
#                                      (their paths rewritten to PREFIX when it is not /usr/local)
#   /etc/default/ringleader-coordinator, /etc/default/ringleader-worker
#                                      the units' settings, all commented out; written only where
#                                      missing, so an operator's edits survive a reinstall
#   /etc/sysusers.d/ringleader.conf    the workers' system user `ringleader` (in the video and
#                                      render groups, for the GPUs); without --destdir it is
#                                      created at once with systemd-sysusers
#
#   --prefix DIR   where binaries and the package go (default /usr/local); absolute
#   --destdir DIR  put every file under DIR instead of / (the paths inside the units stay the
#                  final ones, as with make's DESTDIR); needs no root
#   --from DIR     take the binaries and python/pkg from DIR (a bazel-bin directory, or a test's
#                  runfiles tree) instead of building
#
# Idempotent: running it again replaces binaries (atomically: a running daemon keeps its old
# file), the package and the units, and keeps the /etc/default files. It enables and starts
# nothing: it prints the systemctl commands to run. Exit codes: 0 done, 1 failed, 2 bad usage.
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
}
die() { echo "install: $*" >&2; exit 1; }
bad_usage() { echo "install: $*" >&2; echo "usage: deploy/install.sh [--prefix DIR] [--destdir DIR] [--from DIR] (--help for more)" >&2; exit 2; }

prefix=/usr/local
destdir=""
from=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix=*|--destdir=*|--from=*) flag=${1%%=*} value=${1#*=}; shift ;;
    --prefix|--destdir|--from)
      flag=$1
      [ $# -ge 2 ] || bad_usage "$flag needs a value: $flag DIR"
      value=$2
      shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) bad_usage "unknown argument '$1'" ;;
  esac
  [ -n "$value" ] || bad_usage "$flag needs a value: $flag DIR"
  case "$flag" in
    --prefix) prefix=$value ;;
    --destdir) destdir=$value ;;
    --from) from=$value ;;
  esac
done

# The prefix is written into ExecStart= lines: absolute, and nothing systemd or sed would read
# specially.
case "$prefix" in
  /*) ;;
  *) bad_usage "--prefix must be an absolute path, got '$prefix'" ;;
esac
if [[ ! "$prefix" =~ ^[A-Za-z0-9._/+-]+$ ]]; then
  bad_usage "--prefix '$prefix': only letters, digits and . _ / + - are allowed (it goes into the systemd units)"
fi
prefix=${prefix%/}
[ -n "$prefix" ] || bad_usage "--prefix / is not allowed (binaries would go to /bin)"
if [ -n "$destdir" ]; then
  case "$destdir" in /*) ;; *) destdir="$PWD/$destdir" ;; esac
  destdir=${destdir%/}
fi

repo=$(cd "$(dirname "$0")/.." && pwd)
units_src="$repo/deploy/systemd"

# --- the build (or the prebuilt tree) -------------------------------------------------------
BINARIES=(coordinator/ringleader-coordinator worker/ringleader-worker worker/ringleader-rank
          client/ringleader)
if [ -z "$from" ]; then
  command -v bazel >/dev/null ||
    die "bazel not found: run deploy/setup.sh first (it installs the build's Debian packages), or pass --from DIR with prebuilt binaries"
  echo "install: building (bazel build -c opt; the first build takes a few minutes)..."
  (cd "$repo" && bazel build -c opt //coordinator:ringleader-coordinator \
      //worker:ringleader-worker //worker:ringleader-rank //client:ringleader \
      //python:ringleader_pkg) || die "the build failed (see above); nothing was installed"
  from=$(cd "$repo" && bazel info -c opt bazel-bin 2>/dev/null) ||
    die "bazel info bazel-bin failed; nothing was installed"
fi
[ -d "$from" ] || die "--from $from: no such directory"
for b in "${BINARIES[@]}"; do
  [ -f "$from/$b" ] && [ -x "$from/$b" ] ||
    die "$from/$b is missing or not executable (build it: bazel build -c opt //${b%/*}:${b##*/}); nothing was installed"
done
[ -f "$from/python/pkg/ringleader/__init__.py" ] ||
  die "$from/python/pkg/ringleader/__init__.py is missing (build it: bazel build -c opt //python:ringleader_pkg); nothing was installed"
for unit in ringleader-coordinator.service ringleader-worker@.service; do
  [ -f "$units_src/$unit" ] || die "$units_src/$unit is missing"
done

# --- where things go -------------------------------------------------------------------------
bin_dir="$destdir$prefix/bin"
python_dir="$destdir$prefix/lib/ringleader/python"
unit_dir="$destdir/etc/systemd/system"
default_dir="$destdir/etc/default"
sysusers_dir="$destdir/etc/sysusers.d"

# The nearest existing ancestor of each target must be writable: say so before copying anything.
for dir in "$bin_dir" "$python_dir" "$unit_dir" "$default_dir" "$sysusers_dir"; do
  probe=$dir
  while [ ! -e "$probe" ]; do probe=$(dirname "$probe"); done
  if [ ! -d "$probe" ]; then die "$probe is not a directory (needed for $dir)"; fi
  if [ ! -w "$probe" ]; then
    die "cannot write $probe (needed for $dir): run as root (sudo deploy/install.sh), or stage the files with --destdir DIR"
  fi
done
mkdir -p "$bin_dir" "$python_dir" "$unit_dir" "$default_dir" "$sysusers_dir"

# install_file SRC DST MODE: copied beside DST, then renamed over it (atomic; a running program
# keeps its old file instead of failing with "text file busy").
install_file() {
  local tmp
  tmp="$(dirname "$2")/.$(basename "$2").install.$$"
  install -m "$3" "$1" "$tmp" && mv -f "$tmp" "$2" || { rm -f "$tmp"; die "cannot install $2"; }
}

for b in "${BINARIES[@]}"; do
  install_file "$from/$b" "$bin_dir/${b##*/}" 0755
  echo "install: $bin_dir/${b##*/}"
done

# The Python package: a fresh copy beside the old one, then swapped in (symlinks of a runfiles
# tree are followed; Bazel's read-only modes are replaced by 0644/0755).
staged="$python_dir.install.$$"
rm -rf "$staged"
mkdir -p "$staged"
cp -RL "$from/python/pkg/." "$staged/" || { rm -rf "$staged"; die "cannot copy the Python package"; }
find "$staged" -type d -exec chmod 0755 {} + && find "$staged" -type f -exec chmod 0644 {} +
find "$staged" -name __pycache__ -prune -exec rm -rf {} +
rm -rf "$python_dir.old.$$"
mv "$python_dir" "$python_dir.old.$$" && mv "$staged" "$python_dir" && rm -rf "$python_dir.old.$$" ||
  die "cannot replace $python_dir"
echo "install: $python_dir/ (the ringleader Python package)"

# The units name /usr/local; another prefix is written into them. Each rendered unit must start
# and hand over the installed paths before it replaces the one in place.
declare -A unit_checks=(
  [ringleader-coordinator.service]="^ExecStart=$prefix/bin/ringleader-coordinator "
  [ringleader-worker@.service]="^ExecStart=$prefix/bin/ringleader-worker |--rank_binary=$prefix/bin/ringleader-rank |--python_path=$prefix/lib/ringleader/python "
)
for unit in ringleader-coordinator.service ringleader-worker@.service; do
  tmp="$unit_dir/.$unit.install.$$"
  sed -e "s|/usr/local/|$prefix/|g" "$units_src/$unit" >"$tmp" && chmod 0644 "$tmp" ||
    { rm -f "$tmp"; die "cannot write $tmp"; }
  IFS='|' read -r -a patterns <<<"${unit_checks[$unit]}"
  for pattern in "${patterns[@]}"; do
    grep -q -- "$pattern" "$tmp" ||
      { rm -f "$tmp"; die "$units_src/$unit has no line matching '$pattern': the unit and this script disagree"; }
  done
  mv -f "$tmp" "$unit_dir/$unit" || { rm -f "$tmp"; die "cannot install $unit_dir/$unit"; }
  echo "install: $unit_dir/$unit"
done

# The workers' user (ringleader-worker@.service: User=ringleader, SupplementaryGroups=video
# render). The coordinator needs none (DynamicUser=). Replaced on every run, like the units.
sysusers="$sysusers_dir/ringleader.conf"
cat >"$sysusers.install.$$" <<'EOF' && chmod 0644 "$sysusers.install.$$" && mv -f "$sysusers.install.$$" "$sysusers" ||
# The system user of ringleader-worker@.service (deploy/install.sh). Applied by systemd-sysusers.
#Type Name       ID  GECOS                Home directory             Shell
u     ringleader -   "ringleader worker"  /var/lib/ringleader-worker /usr/sbin/nologin
g     video      -
g     render     -
m     ringleader video
m     ringleader render
EOF
  { rm -f "$sysusers.install.$$"; die "cannot write $sysusers"; }
echo "install: $sysusers"
if [ -z "$destdir" ]; then
  command -v systemd-sysusers >/dev/null ||
    die "systemd-sysusers not found (Debian's systemd package): cannot create the user ringleader of $sysusers"
  systemd-sysusers "$sysusers" || die "systemd-sysusers $sysusers failed: the user ringleader was not created"
  echo "install: user ringleader (groups video, render) is present"
fi

# write_default NAME: /etc/default/NAME from stdin, only where it does not exist yet.
write_default() {
  local target="$default_dir/$1"
  if [ -e "$target" ]; then
    cat >/dev/null
    echo "install: $target kept (it exists; compare with a fresh copy: deploy/install.sh --destdir DIR)"
  else
    cat >"$target.install.$$" && chmod 0644 "$target.install.$$" && mv "$target.install.$$" "$target"
    echo "install: $target"
  fi
}
write_default ringleader-coordinator <<'EOF'
# Settings of ringleader-coordinator.service (read at each start: `systemctl restart
# ringleader-coordinator` after a change). Flags: `ringleader-coordinator --help`.
#
# The address workers and the CLI reach the coordinator at (default: every interface, port 7070).
#RINGLEADER_LISTEN=0.0.0.0:7070
#
# More flags, separated by spaces. E.g. Prometheus metrics for a scraper on another host, and a
# longer heartbeat timeout:
#RINGLEADER_COORDINATOR_ARGS=--http_listen=0.0.0.0:7071 --heartbeat_timeout=20s
EOF
write_default ringleader-worker <<'EOF'
# Settings of every ringleader-worker@N.service on this node (read at each start: `systemctl
# restart 'ringleader-worker@*'` after a change). Flags: `ringleader-worker --help`.
#
# The coordinator the workers register with, host:port (the unit's default is 127.0.0.1:7070).
#RINGLEADER_COORDINATOR=coordinator-host:7070
#
# More flags, separated by spaces. E.g. the address this node's ranks listen on for their peers,
# when the route to the coordinator is not the network the ranks should use:
#RINGLEADER_WORKER_ARGS=--collective_host=10.0.0.12
#
# Paths a job spec may name (checkpoint_dir, data.path, model.init_from, workdir) lie under the
# unit's --allowed_roots=/var/lib/ringleader-worker,/srv/ringleader,/usr/share/datasets, the
# only ones it may write being the first two. To add a root, list all of them here (the last
# --allowed_roots wins) and let the unit write it: `systemctl edit ringleader-worker@` with
#   [Service]
#   ReadWritePaths=/data/checkpoints
#RINGLEADER_WORKER_ARGS=--allowed_roots=/var/lib/ringleader-worker,/srv/ringleader,/usr/share/datasets,/data/checkpoints
EOF

where=${destdir:+ (staged under $destdir)}
cat <<EOF
install: done$where. Nothing was enabled or started; to run it (as root):
  systemctl daemon-reload
  # mutual TLS (every connection): the cluster's CA and certificates, made once and copied to
  # every host (ca.key stays on the signing host); the workers read them as group ringleader:
  deploy/certs.sh /etc/ringleader/tls --host COORDINATOR_HOST_NAME --host COORDINATOR_IP
  chgrp -R ringleader /etc/ringleader/tls && chmod 0750 /etc/ringleader/tls
  chmod 0640 /etc/ringleader/tls/*.pem /etc/ringleader/tls/worker.key   # ca.key stays 0600
  # shared checkpoints and training scripts (an allowed root the workers may write; optional):
  install -d -o ringleader -g ringleader -m 0750 /srv/ringleader
  # the coordinator host:
  systemctl enable --now ringleader-coordinator.service
  # each GPU node: set RINGLEADER_COORDINATOR in /etc/default/ringleader-worker, then one
  # worker per GPU (instance = GPU index):
  systemctl enable --now ringleader-worker@0.service ringleader-worker@1.service
  # check: $prefix/bin/ringleader --coordinator=HOST:7070 --tls_dir=/etc/ringleader/tls workers
EOF
