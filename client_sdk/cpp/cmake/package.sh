#!/bin/bash
# Makes the C++ SDK's source package for CMake projects: DEST/ gets
# CMakeLists.txt (from this directory), src/ (the SDK's sources and the
# informer core files they use) and proto/informer/v1/*.proto.
#   client_sdk/cpp/cmake/package.sh DEST [ROOT]
# ROOT is the repository's root (default: the checkout holding this
# script). With DEST ending in .tar.gz the package is written as that
# tarball instead.
set -euo pipefail

dest="${1:?usage: package.sh DEST [ROOT]}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="${2:-$(cd "${here}/../../.." && pwd)}"

files=(
  client_sdk/cpp/grpc_status.h
  client_sdk/cpp/informer_client.cc client_sdk/cpp/informer_client.h
  client_sdk/cpp/record_event.cc client_sdk/cpp/record_event.h
  client_sdk/cpp/remote_informer.cc client_sdk/cpp/remote_informer.h
  client_sdk/cpp/stream_error.h
  client_sdk/cpp/workqueue_client.cc client_sdk/cpp/workqueue_client.h
  client_sdk/cpp/workqueue_worker.cc client_sdk/cpp/workqueue_worker.h
  informer/cache/event_handler.h
  informer/cache/index.cc informer/cache/index.h
  informer/cache/indexer.cc informer/cache/indexer.h
  informer/cache/store.h
  informer/cache/thread_safe_store.cc informer/cache/thread_safe_store.h
  informer/object/json_decode.cc informer/object/json_decode.h
  informer/object/object.cc informer/object/object.h
  informer/util/clock.cc informer/util/clock.h
)

out="${dest}"
case "${dest}" in
  *.tar.gz) out="$(mktemp -d)/informer-sidecar-cpp-sdk" ;;
esac
mkdir -p "${out}/src" "${out}/proto/informer/v1"
for f in "${files[@]}"; do
  mkdir -p "${out}/src/$(dirname "${f}")"
  cp -L "${root}/${f}" "${out}/src/${f}"
done
for p in informer workqueue events; do
  cp -L "${root}/proto/informer/v1/${p}.proto" "${out}/proto/informer/v1/"
done
cp -L "${root}/client_sdk/cpp/cmake/CMakeLists.txt" "${out}/CMakeLists.txt"
chmod -R u+w "${out}"
case "${dest}" in
  *.tar.gz)
    tar -C "$(dirname "${out}")" -czf "${dest}" "$(basename "${out}")"
    rm -rf "$(dirname "${out}")"
    ;;
esac
