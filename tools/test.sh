#!/usr/bin/env bash
# The whole test suite: installs what is missing, then runs every test.
#   tools/test.sh                   # every phase below, then bazel test //...
#   tools/test.sh --config=asan     # bazel test //... under AddressSanitizer
# Extra arguments go to `bazel test`. Phases (each prints a start line and an
# end line with its elapsed time):
#   layering         tools/check_layering.sh (package cycles, layering, file sizes)
#   lint             tools/lint.sh: clang-format-14, buildifier, gofmt (prints
#                    the command that fixes an unformatted file)
#   fuzzers          the libFuzzer targets (clang-14, ASan), each for a bounded time
#   fuzzers-persist  the snapshot reader's libFuzzer target, the same way
#   thread-safety    clang-14 -Wthread-safety compile of our code (no links)
#   node-sdk         client_sdk/node/test.sh, when that file exists
#   java-sdk         client_sdk/java/test.sh, when that file exists
#   release          the -c opt build that tools/run.sh and the Dockerfile
#                    ship (gRPC, protobuf, Abseil linked statically), tested
#                    end to end: grpcurl by reflection, default clients, ops
#   real-cluster     tools/realkube.sh build (kube-apiserver, etcd, kubectl,
#                    grpcurl, ... from Go modules; each peer's build time is
#                    printed), kube-informer-bench's Go tests, then the
#                    tests tagged realkube against them
#   bazel test //...
# The first eight are skipped under --config=asan (they are passes of their
# own). Bazel's summary comes last, then one "N passed, N failed" line. Exits
# non-zero on any failure. Logs are kept only when something failed: their
# directory is printed at the end.

status=0          # the exit code
failed_phases=0   # phases other than bazel test that failed
finished=0        # 1 once the summary line is printed
suite_start=$SECONDS
prebuild_pid=""   # the peers' background build (see start_peers_build)

# On success the logs go; on failure (or an interrupted run) they stay.
cleanup() {
  # A peers' build still running in the background (the run ended early).
  if [ -n "$prebuild_pid" ]; then kill -- "-$prebuild_pid" 2>/dev/null; fi
  if { [ "$status" -eq 0 ] && [ "$finished" -eq 1 ]; } ||
     [ -z "$(ls -A "$logdir")" ]; then
    rm -rf "$logdir"
  else
    echo "test.sh: logs kept in $logdir" >&2
  fi
}

elapsed() {  # seconds -> "3m07s"
  printf '%dm%02ds' $(($1 / 60)) $(($1 % 60))
}

# Runs one phase quietly into $logdir/NAME.log; prints a start line, an end
# line with its elapsed time, and on failure the log's tail and its path.
phase() {  # name, command...
  local name="$1"; shift
  local start=$SECONDS
  echo "test.sh: $name: started $(date +%H:%M:%S) ($*)"
  if "$@" >"$logdir/$name.log" 2>&1; then
    echo "test.sh: $name: passed in $(elapsed $((SECONDS - start)))"
  else
    status=1
    failed_phases=$((failed_phases + 1))
    tail -n 60 "$logdir/$name.log"
    echo "test.sh: $name: FAILED after $(elapsed $((SECONDS - start))) (log: $logdir/$name.log)"
  fi
}

# Installs Debian packages that only the tests need (never for tools/run.sh).
test_packages() {  # name, packages...
  local name="$1"; shift
  echo "test.sh: $name: installing $* (apt)"
  local SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  { DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=300 update -qq &&
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=300 \
      install -y -qq --no-install-recommends "$@"
  } >"$logdir/$name-install.log" 2>&1 || {
      tail -n 30 "$logdir/$name-install.log" >&2
      echo "test.sh: $name: installing $* failed (log: $logdir/$name-install.log)" >&2
      return 1
    }
}

# Node and npm from Debian, only when neither is on PATH (machines with Node
# 20 from a package that bundles npm must not get Debian's npm: it conflicts).
ensure_node() {
  if command -v node >/dev/null && command -v npm >/dev/null; then return 0; fi
  if command -v node >/dev/null || command -v npm >/dev/null; then
    echo "test.sh: node-sdk: found only one of node and npm; install the other" >&2
    return 1
  fi
  test_packages node-sdk nodejs npm
}

# A JDK and Maven from Debian, only when one of them is missing.
ensure_java() {
  command -v javac >/dev/null && command -v mvn >/dev/null && return 0
  test_packages java-sdk openjdk-17-jdk-headless maven
}

# Like node_sdk_tests: the real sidecar, the scripted server and the
# emulator, named.
java_sdk_tests() {
  ensure_java || return 1
  bazel build //server:informer_sidecar \
    //client_sdk/conformance:scripted_server //emulator:kube_emulator || return 1
  INFORMER_SIDECAR_BIN="$(bazel info bazel-bin)/server/informer_sidecar" \
    INFORMER_CONFORMANCE_SERVER="$(bazel info bazel-bin)/client_sdk/conformance/scripted_server" \
    INFORMER_EMULATOR_BIN="$(bazel info bazel-bin)/emulator/kube_emulator" \
    bash client_sdk/java/test.sh
}

# kubectl for the kube API facade's end-to-end tests: any kubectl on PATH,
# else Debian's (kubernetes-client, 1.20, which reads the facade as well).
ensure_kubectl() {
  command -v kubectl >/dev/null && return 0
  test_packages kubectl kubernetes-client
}

# ip and nft for //integration_tests:packet_loss_test, which drops packets
# in a network namespace of its own (as root; under CI=true it must run).
ensure_netfilter() {
  [ -x /usr/sbin/nft ] && [ -x /usr/sbin/ip ] && return 0
  test_packages netfilter iproute2 nftables
}

# The Node tests run the real sidecar, the conformance suite's scripted
# server and the API server emulator: build them here and name them, since
# bazel-bin points at whichever configuration built last (the tsa phase's).
node_sdk_tests() {
  ensure_node || return 1
  bazel build //server:informer_sidecar \
    //client_sdk/conformance:scripted_server //emulator:kube_emulator || return 1
  INFORMER_SIDECAR_BIN="$(bazel info bazel-bin)/server/informer_sidecar" \
    INFORMER_CONFORMANCE_SERVER="$(bazel info bazel-bin)/client_sdk/conformance/scripted_server" \
    INFORMER_EMULATOR_BIN="$(bazel info bazel-bin)/emulator/kube_emulator" \
    bash client_sdk/node/test.sh
}

# The tests against a real etcd + kube-apiserver. They are tagged "manual"
# (so bazel test //... leaves them out) and named here.
REALKUBE_TESTS=(
  //integration_tests:real_control_plane_test
  //integration_tests/realkube:control_plane_test
  //integration_tests:real_sidecar_smoke_test
  //integration_tests:real_watch_list_test
  //integration_tests:real_forced_relist_test
  //integration_tests:real_warm_restart_test
  //client_sdk/python:real_stale_start_test
  //client_sdk/python:real_watch_resume_restart_test
  //integration_tests:real_dead_connection_test
  //integration_tests:real_facade_clients_test
  //integration_tests:real_grpcurl_readme_test
  //integration_tests:real_emulator_differential_test
  //integration_tests:real_events_test
  //integration_tests:real_rbac_forbidden_test
  //integration_tests:real_watch_filter_resume_test
  //integration_tests:real_chain_churn_test
  //integration_tests:real_facade_bookmark_test
  //integration_tests:real_soak_test
  //integration_tests:bench_smoke_client_go_test
)

# Builds the peers (cached outside the tree: seconds once built), then runs
# the real-cluster tests once with the peers' directory.
real_cluster_tests() {
  local out
  # The background build's outcome is read from the build below: it takes
  # the same lock, then finds every peer built or says what failed.
  if [ -n "$prebuild_pid" ]; then
    wait "$prebuild_pid" 2>/dev/null
    prebuild_pid=""
    cat "$logdir/realkube-prebuild.log" >"$logdir/realkube-build.log"
  fi
  out=$(bash tools/realkube.sh build 2>>"$logdir/realkube-build.log") || {
    cat "$logdir/realkube-build.log"
    return 1
  }
  # kube-informer-bench's own unit tests (the Go module of the peers).
  (cd integration_tests/realkube && GOWORK=off go test ./cmd/...) || return 1
  bazel test --test_env=REALKUBE_BIN="${out##*REALKUBE_BIN=}" \
    "${REALKUBE_TESTS[@]}"
}

# On a machine that has never built the peers, their Go build (kube-apiserver
# alone is ~14 min of CPU) runs from the start at low priority, in a process
# group of its own, and takes the CPU the phases before real-cluster leave
# idle (downloads, single-threaded links, tests waiting on servers). Once
# built, `realkube.sh bin-dir` succeeds and nothing starts.
start_peers_build() {
  bash tools/realkube.sh bin-dir >/dev/null 2>&1 && return 0
  echo "test.sh: real-cluster: building the peers in the background from $(date +%H:%M:%S)"
  setsid nice -n 10 bash tools/realkube.sh build \
    >/dev/null 2>"$logdir/realkube-prebuild.log" &
  prebuild_pid=$!
}

main() {
  local start=$SECONDS
  echo "test.sh: install: started $(date +%H:%M:%S) (tools/install_deps.sh)"
  tools/install_deps.sh || {
    status=1
    echo "test.sh: installing dependencies failed" >&2
    exit 1
  }
  echo "test.sh: install: done in $(elapsed $((SECONDS - start)))"

  case " $* " in
    *" --config=asan "*) ;;  # the phases below are passes of their own
    *)
      phase layering tools/check_layering.sh
      phase lint tools/lint.sh
      phase fuzzers informer/client/fuzz/run_fuzzers.sh 20
      phase fuzzers-persist informer/persist/fuzz/run_fuzzers.sh 20
      # Clang's -Wthread-safety over our code: every ABSL_GUARDED_BY checked.
      start_peers_build
      # Compile only: the analysis is the compiler's, so linking the test
      # binaries again with clang would only cost time.
      phase thread-safety bazel build --config=tsa \
        --output_groups=compilation_outputs //informer/... //server/... //emulator/...
      if [ -f client_sdk/node/test.sh ]; then
        phase node-sdk node_sdk_tests
      fi
      if [ -f client_sdk/java/test.sh ]; then
        phase java-sdk java_sdk_tests
      fi
      phase release bazel test -c opt \
        //integration_tests:readme_grpcurl_test \
        //integration_tests:sidecar_watch_default_clients_e2e_test \
        //integration_tests:sidecar_ops_e2e_test
      phase real-cluster real_cluster_tests
      # What each peer's build took (or that all were built already).
      sed -n 's/^realkube: /test.sh: real-cluster: /p' \
        "$logdir/realkube-build.log" 2>/dev/null |
        grep -E 'built|build done|download|too little|error' || true
      ;;
  esac

  ensure_kubectl || status=1
  ensure_netfilter || status=1
  start=$SECONDS
  echo "test.sh: bazel test: started $(date +%H:%M:%S) (bazel test //...${*:+ $*})"
  bazel test //... --test_env=CI "$@" 2>&1 | tee "$logdir/bazel.log"
  local bazel_status=${PIPESTATUS[0]}
  [ "$bazel_status" -ne 0 ] && status=$bazel_status
  echo "test.sh: bazel test: $([ "$bazel_status" -eq 0 ] && echo passed || echo "FAILED (log: $logdir/bazel.log)") in $(elapsed $((SECONDS - start))); whole suite $(elapsed $((SECONDS - suite_start)))"

  local passed failed
  passed=$(grep -cE '^//\S+\s+(\(cached\) )?PASSED' "$logdir/bazel.log")
  failed=$(grep -cE '^//\S+\s+.*(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FLAKY)' "$logdir/bazel.log")
  failed=$((failed + failed_phases))
  if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
  finished=1
  echo "test.sh: $passed passed, $failed failed"
  exit "$status"
}

# `source tools/test.sh` defines the functions only (to try one phase: set
# logdir, then e.g. `phase layering tools/check_layering.sh`).
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -uo pipefail
  cd "$(dirname "$0")/.."
  logdir="$(mktemp -d "${TMPDIR:-/tmp}/informer-test.XXXXXX")"
  trap cleanup EXIT
  trap 'exit 130' INT   # run cleanup (and say where the logs are) on Ctrl-C
  trap 'exit 143' TERM
  main "$@"
fi
