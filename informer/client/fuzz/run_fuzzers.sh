#!/bin/bash
# Builds the libFuzzer targets of informer/client and runs each for a
# bounded time (tools/fuzz_lib.sh: clang-14, ASan, the system libraries).
# Exits non-zero on a crash, leak, hang (per-input timeout) or build failure.
#
# Usage: informer/client/fuzz/run_fuzzers.sh [seconds-per-target]
# Works from any directory; writes only under a fresh temp dir.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "${HERE}/../../../tools/fuzz_lib.sh"
fuzz_init informer-fuzz "${1:-20}"

C="${ROOT}/informer/client"
fuzz_build line_splitter_fuzzer "${C}/fuzz/line_splitter_fuzzer.cc" \
  "${C}/line_splitter.cc" -- "${ABSL_LIBS[@]}"
U="${ROOT}/informer/util"
fuzz_build kubeconfig_fuzzer "${C}/fuzz/kubeconfig_fuzzer.cc" \
  "${C}/kubeconfig.cc" "${C}/rest_config_builder.cc" \
  "${U}/read_file.cc" "${U}/yaml_reader.cc" -- -lyaml-cpp "${ABSL_LIBS[@]}"

# Seeds: the recorded watch stream and a kubeconfig using every field.
SPLIT_SEEDS="${OUT}/seeds-splitter"
mkdir -p "${SPLIT_SEEDS}"
{ printf '\x07'
  cat "${ROOT}/testdata/kube-apiserver-v1.24/watch-configmaps.jsonl"
} > "${SPLIT_SEEDS}/watch-configmaps"

fuzz_run line_splitter_fuzzer "${SPLIT_SEEDS}" || fuzz_failed
fuzz_run kubeconfig_fuzzer "${C}/fuzz/corpus/kubeconfig" || fuzz_failed
fuzz_finish
