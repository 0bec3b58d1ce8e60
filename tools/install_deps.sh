#!/usr/bin/env bash
# Installs every Debian 12 package informer-sidecar needs to build, test and
# run. Idempotent and quick when everything is present: it asks dpkg first
# and calls apt-get only for what is missing. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  # Build
  bazel-bootstrap g++ clang-14 libclang-rt-14-dev clang-format
  # C++ libraries
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libcurl4-openssl-dev libgoogle-glog-dev libgflags-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libsimdjson-dev rapidjson-dev libyaml-cpp-dev libcpp-httplib-dev
  libssl-dev zlib1g-dev
  # Kubernetes API facade (server/kubeapi): libevent's evhttp
  libevent-dev
  # Python (tests, SDK): Debian's interpreter with its gRPC, protobuf, YAML
  python3 python3-venv python3-grpcio python3-protobuf python3-yaml
  python3-setuptools python3-wheel
  # Tools used by tests and scripts
  curl ca-certificates openssl procps
)

# One dpkg-query for all packages; anything not "installed" is missing.
installed=$(dpkg-query -W -f='${Package} ${Status}\n' "${PACKAGES[@]}" 2>/dev/null |
  awk '$NF == "installed" {print $1}' || true)
missing=()
for p in "${PACKAGES[@]}"; do
  grep -qx "$p" <<<"$installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install_deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
