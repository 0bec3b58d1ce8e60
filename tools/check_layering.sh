#!/usr/bin/env bash
# The layering check (tools/check_layering.py has the rules): no package
# cycle, informer/ independent of server/ and emulator/, no product target on
# integration_tests/, no product source file over 900 lines. One bazel query.
# tools/test.sh runs it; exits non-zero and prints what violates.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 tools/check_layering.py "$@"
