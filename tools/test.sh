#!/usr/bin/env bash
# The whole test suite: installs what is missing, then runs every test.
#   tools/test.sh                   # fuzzers, -Wthread-safety build, bazel test //...
#   tools/test.sh --config=asan     # bazel test //... under AddressSanitizer
# Extra arguments go to `bazel test`. Bazel's summary comes last, then one
# "N passed, N failed" line. Exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."

tools/install_deps.sh || { echo "test.sh: installing dependencies failed" >&2; exit 1; }

status=0
logdir="$(mktemp -d "${TMPDIR:-/tmp}/informer-test.XXXXXX")"
trap 'rm -rf "$logdir"' EXIT

# Runs one extra suite quietly; shows its log only when it fails.
extra() {  # name, command...
  local name="$1"; shift
  if "$@" >"$logdir/$name.log" 2>&1; then
    echo "test.sh: $name: passed"
  else
    status=1
    tail -n 60 "$logdir/$name.log"
    echo "test.sh: $name: FAILED (log above)" >&2
  fi
}

case " $* " in
  *" --config=asan "*) ;;  # the extras below are compiler passes of their own
  *)
    # libFuzzer targets (clang-14, ASan), each for a bounded time.
    extra fuzzers informer/client/fuzz/run_fuzzers.sh 20
    # Clang's -Wthread-safety over our code: every ABSL_GUARDED_BY checked.
    extra thread-safety-analysis bazel build --config=tsa //informer/... //server/... //emulator/...
    ;;
esac

bazel test //... "$@" 2>&1 | tee "$logdir/bazel.log"
bazel_status=${PIPESTATUS[0]}
[ "$bazel_status" -ne 0 ] && status=$bazel_status

passed=$(grep -cE '^//\S+\s+(\(cached\) )?PASSED' "$logdir/bazel.log")
failed=$(grep -cE '^//\S+\s+.*(FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FLAKY)' "$logdir/bazel.log")
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "test.sh: $passed passed, $failed failed"
exit "$status"
