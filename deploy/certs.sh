#!/usr/bin/env bash
# Creates the certificates of a ringleader cluster (OpenSSL, ECDSA P-256), all under DIR:
#
#   ca.pem, ca.key                 the cluster's certificate authority (kept if DIR has one)
#   coordinator.pem, .key          the coordinator's server certificate: SANs localhost,
#                                  127.0.0.1 and every --host
#   worker.pem, .key               the client certificate worker daemons and their ranks use
#   client.pem, .key               the client certificate of the `ringleader` CLI
#
#   deploy/certs.sh DIR [--host NAME|IP ...] [--days N] [--ca-from CADIR] [--only ROLE]
#
# Every binary takes --tls_dir=DIR and reads ca.pem plus its own pair (coordinator, worker or
# client). Copy DIR/ca.pem and the role's pair to each host; ca.key stays on the machine that
# signs. Certificates are re-read from their files while the processes run (replace the files
# to rotate them). --ca-from signs with another directory's CA (e.g. a worker certificate for
# a new host); --days (default 825) sets the validity (tests use -1 for an expired one);
# --only ROLE makes only that role's pair.
set -euo pipefail

usage() {
  echo "usage: deploy/certs.sh DIR [--host NAME|IP ...] [--days N] [--ca-from CADIR] [--only ROLE]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
dir=$1
shift
hosts=()
days=825
ca_dir=""
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --host) [ $# -ge 2 ] || usage; hosts+=("$2"); shift 2 ;;
    --days) [ $# -ge 2 ] || usage; days=$2; shift 2 ;;
    --ca-from) [ $# -ge 2 ] || usage; ca_dir=$2; shift 2 ;;
    --only)
      [ $# -ge 2 ] || usage
      case "$2" in coordinator|worker|client) only=$2 ;;
        *) echo "certs.sh: --only: expected coordinator, worker or client, got '$2'" >&2; exit 2 ;;
      esac
      shift 2 ;;
    *) echo "certs.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
command -v openssl >/dev/null ||
  { echo "certs.sh: openssl not found (Debian package openssl)" >&2; exit 1; }
mkdir -p "$dir"
chmod 700 "$dir"
ca_dir=${ca_dir:-$dir}

if [ ! -f "$ca_dir/ca.pem" ] || [ ! -f "$ca_dir/ca.key" ]; then
  [ "$ca_dir" = "$dir" ] || { echo "certs.sh: no ca.pem/ca.key in $ca_dir" >&2; exit 1; }
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" -days 3650 -subj "/CN=ringleader cluster CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    2>/dev/null
  chmod 600 "$dir/ca.key"
  echo "certs.sh: created the CA $dir/ca.pem"
elif [ "$ca_dir" != "$dir" ]; then
  cp "$ca_dir/ca.pem" "$dir/ca.pem"
fi

# issue ROLE EXTENDED_USAGE SAN
issue() {
  local role=$1 usage=$2 san=$3 ext
  ext=$(mktemp)
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=%s\nsubjectAltName=%s\n' \
    "$usage" "$san" >"$ext"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 \
    -keyout "$dir/$role.key" -out "$dir/$role.csr" -subj "/CN=ringleader $role" 2>/dev/null
  openssl x509 -req -in "$dir/$role.csr" -CA "$ca_dir/ca.pem" -CAkey "$ca_dir/ca.key" \
    -CAcreateserial -out "$dir/$role.pem" -days "$days" -sha256 -extfile "$ext" 2>/dev/null
  rm -f "$dir/$role.csr" "$ext"
  chmod 600 "$dir/$role.key"
  echo "certs.sh: $dir/$role.pem ($san, $days days)"
}

san="DNS:localhost,IP:127.0.0.1"
for host in "${hosts[@]}"; do
  if [[ $host =~ ^[0-9.]+$ || $host == *:* ]]; then san+=",IP:$host"; else san+=",DNS:$host"; fi
done
if [ -z "$only" ] || [ "$only" = coordinator ]; then issue coordinator serverAuth "$san"; fi
if [ -z "$only" ] || [ "$only" = worker ]; then issue worker clientAuth "DNS:ringleader-worker"; fi
if [ -z "$only" ] || [ "$only" = client ]; then issue client clientAuth "DNS:ringleader-client"; fi
