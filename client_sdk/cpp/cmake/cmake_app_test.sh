#!/bin/bash
# The C++ SDK used from outside this repository with CMake against Debian's
# gRPC: package.sh makes the SDK's source package in a temporary directory,
# an application there (README.md's quick start, taken from the README as
# written, with a CMakeLists.txt using add_subdirectory) is configured and
# built by cmake, then run against the real sidecar in --demo mode.
# Run by Bazel (runfiles: the sources, the sidecar binary) or from the
# repository's root: client_sdk/cpp/cmake/cmake_app_test.sh [SIDECAR_BINARY]
set -euo pipefail

if [[ -n "${TEST_SRCDIR:-}" ]]; then
  root="${TEST_SRCDIR}/informer_sidecar"
else
  root="$(pwd)"
fi
sidecar="${1:-${root}/server/informer_sidecar}"
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/cmakeapp.XXXXXX")"
# unix socket paths are limited to 107 bytes: a short directory for it.
sock_dir="$(mktemp -d /tmp/cma.XXXXXX)"
sidecar_pid=""
cleanup() {
  if [[ -n "${sidecar_pid}" ]]; then
    kill "${sidecar_pid}" 2>/dev/null || true
    wait "${sidecar_pid}" 2>/dev/null || true
  fi
  rm -rf "${work}" "${sock_dir}"
}
trap cleanup EXIT

"${root}/client_sdk/cpp/cmake/package.sh" "${work}/sdk.tar.gz" "${root}"
mkdir -p "${work}/app"
tar -C "${work}/app" -xzf "${work}/sdk.tar.gz"

# The quick start, as README.md prints it.
awk '/^## Quick start/{q=1} q&&/^```cpp$/{c=1;next} c&&/^```$/{exit} c' \
  "${root}/client_sdk/cpp/README.md" >"${work}/app/quickstart.cc"
grep -q 'int main' "${work}/app/quickstart.cc" \
  || { echo "FAIL: no quick start in README.md"; exit 1; }
cat >"${work}/app/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(quickstart LANGUAGES CXX)
add_subdirectory(informer-sidecar-cpp-sdk informer_sidecar)
add_executable(quickstart quickstart.cc)
target_link_libraries(quickstart PRIVATE informer_sidecar::client)
CMAKE

cmake -S "${work}/app" -B "${work}/build" -DCMAKE_BUILD_TYPE=Release \
  >"${work}/cmake.log" 2>&1 || { cat "${work}/cmake.log"; exit 1; }
cmake --build "${work}/build" -j 2 >"${work}/build.log" 2>&1 \
  || { tail -50 "${work}/build.log"; exit 1; }

"${sidecar}" --demo --grpc_listen="unix:${sock_dir}/grpc.sock" \
  --http_listen=127.0.0.1:0 --print_events=false 2>"${work}/sidecar.log" &
sidecar_pid=$!
# The quick start retries with back-off until the sidecar listens and has
# synced (WaitForSync up to 30 s), so no wait loop is needed here.
"${work}/build/quickstart" "unix:${sock_dir}/grpc.sock" >"${work}/out.txt" \
  2>"${work}/err.txt" || { cat "${work}/err.txt"; exit 1; }
cat "${work}/out.txt"
grep -Eq '^[a-z0-9-]+/[a-z0-9.-]+$' "${work}/out.txt" \
  || { echo "FAIL: no pod keys printed"; cat "${work}/err.txt"; exit 1; }
echo "1 passed, 0 failed"
