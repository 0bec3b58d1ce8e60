#!/usr/bin/env bash
# Installs every Debian 12 package informer-sidecar needs to build, test and
# run. Idempotent and quick when everything is present: it asks dpkg first
# and calls apt-get only for what is missing (silently when nothing is).
# Needs root (or sudo). apt's and dpkg's output goes to a log file; the
# script prints one line saying what it installs and one summary line, and
# the log's tail when something fails. When another apt or dpkg holds the
# lock it says so and waits (up to 5 minutes) instead of failing.
set -euo pipefail

PACKAGES=(
  # Build
  bazel-bootstrap g++ clang-14 libclang-rt-14-dev clang-format
  # C++ libraries
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libcurl4-openssl-dev libgoogle-glog-dev libgflags-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libsimdjson-dev rapidjson-dev libyaml-cpp-dev libcpp-httplib-dev
  libssl-dev zlib1g-dev libzstd-dev
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
export DEBIAN_FRONTEND=noninteractive
log="${TMPDIR:-/tmp}/informer-install-deps.log"
: >"$log"
LOCK_WAIT=300  # seconds
APT_OPTS=(-o "DPkg::Lock::Timeout=$LOCK_WAIT" -o Dpkg::Use-Pty=0)

# Who holds apt's or dpkg's lock, as "command (pid N)", or nothing.
lock_holder() {
  lslocks --noheadings --notruncate --output COMMAND,PID,PATH 2>/dev/null |
    awk '$3 ~ "^/var/lib/dpkg/lock|^/var/lib/apt/lists/lock|^/var/cache/apt/archives/lock" {
           print $1 " (pid " $2 ")"; exit }'
}

said=0  # 1 once we told the user we wait for the lock
# Runs one apt-get step with its output in the log; says when it waits for
# the lock. Fails with the log's tail.
apt_step() {  # description, apt-get arguments...
  local what="$1"; shift
  local holder
  holder="$(lock_holder)"
  if [ "$said" -eq 0 ] && [ -n "$holder" ]; then
    echo "install_deps: waiting for the apt/dpkg lock held by $holder (up to $((LOCK_WAIT / 60)) min)..." >&2
    said=1
  fi
  echo "== apt-get $*" >>"$log"
  $SUDO apt-get "${APT_OPTS[@]}" "$@" >>"$log" 2>&1 &
  local pid=$!
  while jobs -rp | grep -qx "$pid"; do
    if [ "$said" -eq 0 ] && grep -qE 'Waiting for cache lock|Could not get lock' "$log"; then
      echo "install_deps: waiting for the apt/dpkg lock held by another process (up to $((LOCK_WAIT / 60)) min)..." >&2
      said=1
    fi
    sleep 1
  done
  if ! wait "$pid"; then
    tail -n 40 "$log" >&2
    echo "install_deps: $what failed (full log: $log)" >&2
    exit 1
  fi
}

start=$SECONDS
echo "install_deps: installing ${#missing[@]} missing package(s) and their dependencies: ${missing[*]}" >&2
apt_step "apt-get update" update -qq
apt_step "apt-get install" install -y -qq --no-install-recommends "${missing[@]}"
count=$(grep -c '^Setting up ' "$log" || true)
echo "install_deps: done, $count package(s) installed in $((SECONDS - start)) s (log: $log)" >&2
