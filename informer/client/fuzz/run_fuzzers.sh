#!/bin/bash
# Builds the libFuzzer targets of informer/client with Debian's clang-14
# (-fsanitize=fuzzer,address) directly against the system libraries (Bazel's
# auto-configured toolchain is GCC) and runs each for a bounded time.
# Exits non-zero on a crash, leak, hang (per-input timeout) or build failure.
#
# Usage: informer/client/fuzz/run_fuzzers.sh [seconds-per-target]
# Works from any directory; writes only under a fresh temp dir.
set -euo pipefail

SECONDS_PER_TARGET="${1:-20}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${HERE}/../../.." && pwd)"
CXX="${CXX_FUZZ:-clang++-14}"
OUT="$(mktemp -d "${TMPDIR:-/tmp}/informer-fuzz.XXXXXX")"
trap 'rm -rf "${OUT}"' EXIT

ABSL_LIBS=()
for lib in /usr/lib/x86_64-linux-gnu/libabsl_*.so; do
  name="$(basename "${lib}" .so)"
  ABSL_LIBS+=("-l${name#lib}")
done

CXXFLAGS=(-std=c++17 -g -O1 -fsanitize=fuzzer,address
          -fno-omit-frame-pointer -I"${ROOT}")

build() {  # name, sources..., -- link flags...
  local name="$1"; shift
  local srcs=() libs=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do srcs+=("$1"); shift; done
  [[ $# -gt 0 ]] && shift
  libs=("$@")
  echo "== building ${name}"
  "${CXX}" "${CXXFLAGS[@]}" "${srcs[@]}" -o "${OUT}/${name}" \
    -Wl,--as-needed "${libs[@]}" -pthread
}

run() {  # name, seed dir
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

C="${ROOT}/informer/client"
build line_splitter_fuzzer "${C}/fuzz/line_splitter_fuzzer.cc" \
  "${C}/line_splitter.cc" -- "${ABSL_LIBS[@]}"
U="${ROOT}/informer/util"
build kubeconfig_fuzzer "${C}/fuzz/kubeconfig_fuzzer.cc" \
  "${C}/kubeconfig.cc" "${C}/rest_config_builder.cc" \
  "${U}/read_file.cc" "${U}/yaml_reader.cc" -- -lyaml-cpp "${ABSL_LIBS[@]}"

# Seeds: the recorded watch stream and a kubeconfig using every field.
SPLIT_SEEDS="${OUT}/seeds-splitter"
mkdir -p "${SPLIT_SEEDS}"
{ printf '\x07'; cat "${ROOT}/testdata/kube-apiserver-v1.24/watch-configmaps.jsonl"; } \
  > "${SPLIT_SEEDS}/watch-configmaps"

status=0
run line_splitter_fuzzer "${SPLIT_SEEDS}" || status=1
run kubeconfig_fuzzer "${C}/fuzz/corpus/kubeconfig" || status=1
if [[ ${status} -ne 0 ]]; then
  echo "FUZZING FAILED" >&2
  exit 1
fi
echo "fuzzing passed"
