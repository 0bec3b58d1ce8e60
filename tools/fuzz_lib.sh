#!/bin/bash
# Shared by the run_fuzzers.sh scripts (informer/client/fuzz/,
# informer/persist/fuzz/): builds libFuzzer targets with Debian's clang-14
# (-fsanitize=fuzzer,address) directly against the system libraries
# (Bazel's auto-configured toolchain is GCC) and runs each for a bounded
# time. Sourced, not run:
#
#   source "${HERE}/../../../tools/fuzz_lib.sh"  # HERE: the script's dir
#   fuzz_init NAME [seconds-per-target]   # ROOT, OUT (a fresh temp dir,
#                                         # removed at exit), ABSL_LIBS
#   fuzz_build TARGET SOURCES... -- LINK FLAGS...
#   fuzz_run TARGET CORPUS_DIR || fuzz_failed
#   fuzz_finish                           # exits 1 if any run failed
#
# A run fails on a crash, leak, hang (an input over -timeout), a violated
# property or over 2 GB of memory; a failed build stops the script (set -e).
set -euo pipefail

FUZZ_STATUS=0

fuzz_init() {  # name of the temp dir, seconds per target (default 20)
  SECONDS_PER_TARGET="${2:-20}"
  ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  CXX="${CXX_FUZZ:-clang++-14}"
  OUT="$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")"
  trap 'rm -rf "${OUT}"' EXIT
  ABSL_LIBS=()
  local lib name
  for lib in /usr/lib/x86_64-linux-gnu/libabsl_*.so; do
    name="$(basename "${lib}" .so)"
    ABSL_LIBS+=("-l${name#lib}")
  done
}

fuzz_build() {  # target, sources..., -- link flags...
  local name="$1"; shift
  local srcs=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do srcs+=("$1"); shift; done
  [[ $# -gt 0 ]] && shift
  echo "== building ${name}"
  "${CXX}" -std=c++17 -g -O1 -fsanitize=fuzzer,address \
    -fno-omit-frame-pointer -I"${ROOT}" "${srcs[@]}" -o "${OUT}/${name}" \
    -Wl,--as-needed "$@" -pthread
}

fuzz_run() {  # target, seed dir (copied: the run adds to its own corpus)
  local name="$1" seeds="$2"
  local corpus="${OUT}/corpus-${name}"
  mkdir -p "${corpus}"
  cp -r "${seeds}"/. "${corpus}/" 2>/dev/null || true
  echo "== running ${name} for ${SECONDS_PER_TARGET}s"
  # -timeout: an input taking longer is a hang; -rss_limit_mb bounds memory.
  (cd "${OUT}" && "./${name}" -max_total_time="${SECONDS_PER_TARGET}" \
      -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
      "${corpus}" 2>&1 | tail -n 25)
  return "${PIPESTATUS[0]}"
}

fuzz_failed() {
  FUZZ_STATUS=1
}

fuzz_finish() {
  if [[ ${FUZZ_STATUS} -ne 0 ]]; then
    echo "FUZZING FAILED" >&2
    exit 1
  fi
  echo "fuzzing passed"
}
