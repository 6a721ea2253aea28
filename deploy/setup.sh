#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the demo need. Idempotent and quiet:
# packages already present are not touched, and `apt-get update` runs at most once.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap bazel-rules-java default-jdk-headless
  g++ pkg-config python3
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  # libcrypto: HMAC-SHA256 of the per-attempt tokens
  libssl-dev
  libabsl-dev libgtest-dev libgmock-dev
  libgloo-dev libopenblas-dev zlib1g-dev libyaml-cpp-dev libsqlite3-dev nlohmann-json3-dev
  # cpp-httplib serves the coordinator's /metrics; prometheus brings promtool and the server
  # the metrics e2e test scrapes with (Debian also enables a prometheus.service on :9090:
  # `systemctl disable --now prometheus` where it is not wanted).
  libcpp-httplib-dev prometheus
  # chromium: the dashboard e2e test renders the pages headless; librsvg2-bin: rsvg-convert,
  # which `ringleader plot -o FILE.png` converts the SVG with.
  chromium librsvg2-bin
  dataset-fashion-mnist
  python3-torch python3-grpcio python3-protobuf python3-numpy
  # grpc-proto: the official grpc.health.v1 and reflection .proto files, which the generic
  # health/reflection client test compiles with protoc (Debian packages neither grpcurl,
  # grpc_cli nor grpcio-health-checking). systemd: systemd-analyze verify checks the units
  # install.sh stages. iproute2: ip and ss, for the multi-host test's network namespaces.
  grpc-proto systemd iproute2
  # The fuzz targets (fuzz/, docs/testing.md "Fuzzing"): clang-14 compiles them, libclang-rt-14-dev holds
  # libFuzzer and the ASan/UBSan runtimes (-fsanitize=fuzzer,address,undefined), llvm-14 the
  # llvm-symbolizer that puts file and line into their crash reports.
  clang-14 libclang-rt-14-dev llvm-14
  # etcd-server: the etcd the etcd job store's tests start on loopback ports (--store=etcd);
  # golang-etcd-server-dev: upstream's .proto files, which proto/etcd/ follows field by field.
  etcd-server golang-etcd-server-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${#missing[*]} Debian package(s): ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The CUDA 13 toolkit ($RINGLEADER_CUDA_PATH, default /usr/local/cuda) and NCCL are needed only
# to compile the GPU code; without the toolkit the build is CPU-only (everything but the GPU
# worker). NCCL is looked for apart from the toolkit ($RINGLEADER_NCCL_PATH, the toolkit, the
# system dirs) by third_party/find_cuda.sh, the same search the build's @cuda repository runs:
# a toolkit without NCCL stops the build, so it is said here too, with the fixes.
find_cuda=(bash "$(dirname "$0")/../third_party/find_cuda.sh" "--cuda_path=${RINGLEADER_CUDA_PATH:-/usr/local/cuda}")
if [ -n "${RINGLEADER_NCCL_PATH:-}" ]; then find_cuda+=("--nccl_path=$RINGLEADER_NCCL_PATH"); fi
cuda_found=$("${find_cuda[@]}" 2>&1)
cuda_message=$(grep -v '^[a-z_]*=' <<<"$cuda_found" || true)
case "$(sed -n 's/^status=//p' <<<"$cuda_found")" in
  cuda | cpu_only) ;;
  no_toolkit)
    echo "setup: $cuda_message; GPU code and tests are skipped, nccl jobs answer 'no usable GPU'." >&2
    ;;
  no_nccl)
    {
      echo "setup: ********************************************************************"
      echo "setup: ERROR: CUDA toolkit without NCCL: bazel build stops with this until fixed."
      sed 's/^/setup: /' <<<"$cuda_message"
      echo "setup: ********************************************************************"
    } >&2
    ;;
  *) echo "setup: third_party/find_cuda.sh failed: $cuda_found" >&2 ;;
esac

# Slurm (deploy/slurm/ringleader.sbatch; the tests in //tests/slurm start their own munged,
# slurmctld and slurmd from these packages on a one-node cluster).
SLURM_PACKAGES=(slurm-wlm munge)
missing=()
for p in "${SLURM_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing ${#missing[*]} Debian package(s) for Slurm: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
