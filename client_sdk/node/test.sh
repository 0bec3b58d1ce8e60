#!/usr/bin/env bash
# The Node SDK's test phase: installs the locked dependencies (npm ci, whose
# prepare script copies ../../proto/informer/v1 into the package and compiles
# the TypeScript) and runs the tests: end-to-end against the real sidecar
# binary in demo mode, the packed tarball installed outside the tree
# (test/pack.test.ts; needs the npm registry), and the conformance runner
# (../conformance) against the scripted server.
#
# The binary: $INFORMER_SIDECAR_BIN, default ../../bazel-bin/server/informer_sidecar
# (bazel build //server:informer_sidecar). The scripted server:
# $INFORMER_CONFORMANCE_SERVER, default
# ../../bazel-bin/client_sdk/conformance/scripted_server
# (bazel build //client_sdk/conformance:scripted_server). The API server
# emulator of the restart tests (test/restart_resume.test.ts):
# $INFORMER_EMULATOR_BIN, default ../../bazel-bin/emulator/kube_emulator
# (bazel build //emulator:kube_emulator).
set -euo pipefail
cd "$(dirname "$0")"
bin="${INFORMER_SIDECAR_BIN:-../../bazel-bin/server/informer_sidecar}"
if [[ ! -x "$bin" ]]; then
  echo "client_sdk/node/test.sh: no sidecar binary at $bin" \
    "(bazel build //server:informer_sidecar, or set INFORMER_SIDECAR_BIN)" >&2
  exit 1
fi
export INFORMER_CONFORMANCE_SERVER="${INFORMER_CONFORMANCE_SERVER:-$PWD/../../bazel-bin/client_sdk/conformance/scripted_server}"
if [[ ! -x "$INFORMER_CONFORMANCE_SERVER" ]]; then
  echo "client_sdk/node/test.sh: no scripted server at $INFORMER_CONFORMANCE_SERVER" \
    "(bazel build //client_sdk/conformance:scripted_server, or set INFORMER_CONFORMANCE_SERVER)" >&2
  exit 1
fi
export INFORMER_EMULATOR_BIN="${INFORMER_EMULATOR_BIN:-$PWD/../../bazel-bin/emulator/kube_emulator}"
if [[ ! -x "$INFORMER_EMULATOR_BIN" ]]; then
  echo "client_sdk/node/test.sh: no emulator at $INFORMER_EMULATOR_BIN" \
    "(bazel build //emulator:kube_emulator, or set INFORMER_EMULATOR_BIN)" >&2
  exit 1
fi
npm ci --no-audit --no-fund
npm test
