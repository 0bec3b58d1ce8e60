#!/bin/bash
# pods_on_node against the real sidecar in --demo mode: the answer lists the
# pods the demo cluster schedules on node-1, each with its key.
set -euo pipefail

dir="$(mktemp -d /tmp/pon.XXXXXX)"
sidecar_pid=""
cleanup() {
  if [[ -n "${sidecar_pid}" ]]; then kill "${sidecar_pid}" 2>/dev/null || true; wait "${sidecar_pid}" 2>/dev/null || true; fi
  rm -rf "${dir}"
}
trap cleanup EXIT

./server/informer_sidecar --demo --grpc_listen="unix:${dir}/grpc.sock" \
  --http_listen=127.0.0.1:0 --print_events=false 2>"${dir}/sidecar.log" &
sidecar_pid=$!

# The example reconnects with back-off until the sidecar listens and has
# synced, so no wait loop is needed here.
./client_sdk/cpp/examples/pods_on_node --target="unix:${dir}/grpc.sock" \
  --node=node-1 --sync_timeout=60s >"${dir}/out.txt"
cat "${dir}/out.txt"

head -1 "${dir}/out.txt" | grep -Eq '^[1-9][0-9]* pod\(s\) on node node-1 \(of [0-9]+ pods\):$' \
  || { echo "FAIL: unexpected header"; exit 1; }
listed=$(($(wc -l <"${dir}/out.txt") - 1))
count=$(head -1 "${dir}/out.txt" | cut -d' ' -f1)
[[ "${listed}" -eq "${count}" ]] || { echo "FAIL: ${count} announced, ${listed} listed"; exit 1; }
grep -Eq '^  [a-z0-9-]+/[a-z0-9.-]+ \(' "${dir}/out.txt" || { echo "FAIL: no pod lines"; exit 1; }

# A bad node flag is a clear error.
if ./client_sdk/cpp/examples/pods_on_node --node= 2>"${dir}/err.txt"; then
  echo "FAIL: empty --node accepted"; exit 1
fi
grep -q -- '--node: required' "${dir}/err.txt" || { echo "FAIL: no --node error"; exit 1; }
echo "1 passed, 0 failed"
