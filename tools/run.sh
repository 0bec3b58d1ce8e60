#!/usr/bin/env bash
# Installs what is missing and runs the sidecar (//server:informer_sidecar).
# It uses --kubeconfig, $KUBECONFIG, the in-cluster service account or
# ~/.kube/config when one exists; otherwise it starts its embedded demo
# cluster and prints the events it sees. Extra arguments are passed to the
# binary (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
exec bazel run -c opt //server:informer_sidecar -- "$@"
