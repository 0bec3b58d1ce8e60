#!/usr/bin/env bash
# The whole test suite: installs what is missing, then runs every test.
#   tools/test.sh                   # bazel test //... + extra suites
#   tools/test.sh --config=asan     # the same under AddressSanitizer
# Extra arguments go to `bazel test`. Exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."

tools/install_deps.sh || { echo "test.sh: installing dependencies failed" >&2; exit 1; }

status=0
bazel test //... "$@" || status=$?

# Suites that are not Bazel tests. The fuzzers are built with their own
# clang ASan instrumentation, so the --config=asan pass skips them.
case " $* " in
  *" --config=asan "*) ;;
  *)
    if [ -x informer/client/fuzz/run_fuzzers.sh ]; then
      informer/client/fuzz/run_fuzzers.sh || status=$?
    fi
    ;;
esac

if [ "$status" -ne 0 ]; then
  echo "test.sh: FAILED (exit $status)" >&2
fi
exit "$status"
