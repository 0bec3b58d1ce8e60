#!/bin/bash
# Builds the libFuzzer target of informer/persist (ReadSnapshotFile) with
# Debian's clang-14 (-fsanitize=fuzzer,address) directly against the system
# libraries, as informer/client/fuzz/run_fuzzers.sh does, seeds it with
# valid snapshots and runs it for a bounded time.
# Exits non-zero on a crash, leak, hang, violated property or build failure.
#
# Usage: informer/persist/fuzz/run_fuzzers.sh [seconds]
# Works from any directory; writes only under a fresh temp dir.
set -euo pipefail

SECONDS_PER_TARGET="${1:-20}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${HERE}/../../.." && pwd)"
CXX="${CXX_FUZZ:-clang++-14}"
OUT="$(mktemp -d "${TMPDIR:-/tmp}/persist-fuzz.XXXXXX")"
trap 'rm -rf "${OUT}"' EXIT

ABSL_LIBS=()
for lib in /usr/lib/x86_64-linux-gnu/libabsl_*.so; do
  name="$(basename "${lib}" .so)"
  ABSL_LIBS+=("-l${name#lib}")
done
LIBS=(-lsimdjson -lz "${ABSL_LIBS[@]}")

P="${ROOT}/informer/persist"
O="${ROOT}/informer/object"
# The library under test and what it links (the Bazel deps of
# //informer/persist:snapshot_reader, :snapshot_writer, :snapshot_test_util).
SRCS=("${P}/snapshot_error.cc" "${P}/snapshot_format.cc"
      "${P}/snapshot_identity.cc" "${P}/snapshot_reader.cc"
      "${P}/object_block_decoder.cc"
      "${P}/snapshot_writer.cc" "${P}/snapshot_test_util.cc"
      "${O}/object.cc" "${O}/json_decode.cc"
      "${ROOT}/informer/util/clock.cc")

echo "== building snapshot_reader_fuzzer"
"${CXX}" -std=c++17 -g -O1 -fsanitize=fuzzer,address -fno-omit-frame-pointer \
  -I"${ROOT}" "${P}/fuzz/snapshot_reader_fuzzer.cc" "${SRCS[@]}" \
  -o "${OUT}/snapshot_reader_fuzzer" -Wl,--as-needed "${LIBS[@]}" -pthread
echo "== building the seed writer"
"${CXX}" -std=c++17 -O1 -I"${ROOT}" "${P}/fuzz/snapshot_fuzz_seeds.cc" \
  "${SRCS[@]}" -o "${OUT}/snapshot_fuzz_seeds" -Wl,--as-needed "${LIBS[@]}" \
  -pthread

CORPUS="${OUT}/corpus"
mkdir -p "${CORPUS}"
"${OUT}/snapshot_fuzz_seeds" "${CORPUS}"

echo "== running snapshot_reader_fuzzer for ${SECONDS_PER_TARGET}s"
# -timeout: an input taking longer is a hang; -rss_limit_mb bounds memory.
status=0
(cd "${OUT}" && ./snapshot_reader_fuzzer \
    -max_total_time="${SECONDS_PER_TARGET}" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 \
    "${CORPUS}" 2>&1 | tail -n 25) || status=1
if [[ ${status} -ne 0 ]]; then
  echo "FUZZING FAILED" >&2
  exit 1
fi
echo "fuzzing passed"
