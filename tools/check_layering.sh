#!/usr/bin/env bash
# The layering check (tools/check_layering.py has the rules): no package
# cycle, informer/ independent of server/ and emulator/, no product target on
# integration_tests/, server/'s rooms (services apart, support rooms below
# them, only the app wiring), tests beside their subject, no product source
# file over 900 lines, no product function over 100 (a warning past 80).
# One bazel query.
# tools/test.sh runs it; it prints what violates and exits non-zero.
# The checker's own tests (tools/check_layering_test.py, well under a
# second) run first, so a broken checker cannot pass silently.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! selftest="$(python3 tools/check_layering_test.py 2>&1)"; then
  echo "$selftest" >&2
  echo "check_layering: the checker's own tests failed" >&2
  exit 2
fi
exec python3 tools/check_layering.py "$@"
