#!/usr/bin/env bash
# Installs what is missing and runs informer-sidecar. Extra arguments are
# passed to the binary (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
# Until the gRPC service (//server:informer_sidecar) lands, this runs the
# informer core's demo: a shared informer over an in-process demo source.
exec bazel run -c opt //informer:informer_demo -- "$@"
