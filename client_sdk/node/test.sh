#!/usr/bin/env bash
# The Node SDK's test phase: installs the locked dependencies (npm ci, whose
# prepare script compiles the TypeScript) and runs the end-to-end tests
# against the real sidecar binary in demo mode.
#
# The binary: $INFORMER_SIDECAR_BIN, default ../../bazel-bin/server/informer_sidecar
# (bazel build //server:informer_sidecar). The protos: ../../proto, or
# $INFORMER_SIDECAR_PROTO_DIR.
set -euo pipefail
cd "$(dirname "$0")"
bin="${INFORMER_SIDECAR_BIN:-../../bazel-bin/server/informer_sidecar}"
if [[ ! -x "$bin" ]]; then
  echo "client_sdk/node/test.sh: no sidecar binary at $bin" \
    "(bazel build //server:informer_sidecar, or set INFORMER_SIDECAR_BIN)" >&2
  exit 1
fi
npm ci --no-audit --no-fund
npm test
