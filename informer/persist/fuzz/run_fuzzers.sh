#!/bin/bash
# Builds the libFuzzer target of informer/persist (ReadSnapshotFile), seeds
# it with valid snapshots and runs it for a bounded time (tools/fuzz_lib.sh:
# clang-14, ASan, the system libraries).
# Exits non-zero on a crash, leak, hang, violated property or build failure.
#
# Usage: informer/persist/fuzz/run_fuzzers.sh [seconds]
# Works from any directory; writes only under a fresh temp dir.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "${HERE}/../../../tools/fuzz_lib.sh"
fuzz_init persist-fuzz "${1:-20}"
LIBS=(-lsimdjson -lz -lzstd "${ABSL_LIBS[@]}")

P="${ROOT}/informer/persist"
O="${ROOT}/informer/object"
# The library under test and what it links (the Bazel deps of
# //informer/persist:snapshot_reader, :snapshot_writer, :snapshot_test_util).
SRCS=("${P}/snapshot_error.cc" "${P}/snapshot_format.cc"
      "${P}/snapshot_identity.cc" "${P}/snapshot_reader.cc"
      "${P}/object_block_decoder.cc" "${P}/object_record_codec.cc"
      "${P}/snapshot_writer.cc" "${P}/snapshot_test_util.cc"
      "${O}/object.cc" "${O}/json_decode.cc" "${O}/zstd_json_compressor.cc"
      "${ROOT}/informer/util/clock.cc")

fuzz_build snapshot_reader_fuzzer "${P}/fuzz/snapshot_reader_fuzzer.cc" \
  "${SRCS[@]}" -- "${LIBS[@]}"
echo "== building the seed writer"
"${CXX}" -std=c++17 -O1 -I"${ROOT}" "${P}/fuzz/snapshot_fuzz_seeds.cc" \
  "${SRCS[@]}" -o "${OUT}/snapshot_fuzz_seeds" -Wl,--as-needed "${LIBS[@]}" \
  -pthread

SEEDS="${OUT}/seeds"
mkdir -p "${SEEDS}"
"${OUT}/snapshot_fuzz_seeds" "${SEEDS}"

fuzz_run snapshot_reader_fuzzer "${SEEDS}" || fuzz_failed
fuzz_finish
