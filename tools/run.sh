#!/usr/bin/env bash
# Installs what is missing, builds the sidecar (//server:informer_sidecar,
# -c opt) and runs it. It uses --kubeconfig, $KUBECONFIG, the in-cluster
# service account or ~/.kube/config when one exists; otherwise it starts its
# embedded demo cluster and prints the events it sees. Extra arguments are
# passed to the binary (--help lists every flag); relative paths in them are
# relative to the directory you run this from. Ctrl-C stops the sidecar.
#
# It prints the binary's stable path first ($(bazel info -c opt bazel-bin)/
# server/informer_sidecar, which other builds of the tree do not replace):
# scripts and examples can run that path directly.
set -euo pipefail
caller_dir="$PWD"
cd "$(dirname "$0")/.."
tools/install_deps.sh
bazel build -c opt //server:informer_sidecar
binary="$(bazel info -c opt bazel-bin 2>/dev/null)/server/informer_sidecar"
echo "run.sh: sidecar binary: $binary" >&2
cd "$caller_dir"
exec "$binary" "$@"
