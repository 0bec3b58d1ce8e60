#!/usr/bin/env bash
# The Java SDK's test phase: `mvn package` builds the stubs from
# ../../proto/informer/v1 and runs the JUnit tests (end to end against the
# real sidecar binary in demo mode, and the conformance runner against the
# scripted server); then the jar and its runtime dependencies are copied to a
# directory outside the tree and both examples run from there, on a plain
# classpath, against a demo sidecar they start.
#
# The binary: $INFORMER_SIDECAR_BIN, default ../../bazel-bin/server/informer_sidecar
# (bazel build //server:informer_sidecar). The scripted server:
# $INFORMER_CONFORMANCE_SERVER, default
# ../../bazel-bin/client_sdk/conformance/scripted_server
# (bazel build //client_sdk/conformance:scripted_server). The API server
# emulator of RestartResumeTest: $INFORMER_EMULATOR_BIN, default
# ../../bazel-bin/emulator/kube_emulator (bazel build //emulator:kube_emulator).
set -euo pipefail
cd "$(dirname "$0")"
export INFORMER_SIDECAR_BIN="${INFORMER_SIDECAR_BIN:-$PWD/../../bazel-bin/server/informer_sidecar}"
if [[ ! -x "$INFORMER_SIDECAR_BIN" ]]; then
  echo "client_sdk/java/test.sh: no sidecar binary at $INFORMER_SIDECAR_BIN" \
    "(bazel build //server:informer_sidecar, or set INFORMER_SIDECAR_BIN)" >&2
  exit 1
fi
export INFORMER_CONFORMANCE_SERVER="${INFORMER_CONFORMANCE_SERVER:-$PWD/../../bazel-bin/client_sdk/conformance/scripted_server}"
if [[ ! -x "$INFORMER_CONFORMANCE_SERVER" ]]; then
  echo "client_sdk/java/test.sh: no scripted server at $INFORMER_CONFORMANCE_SERVER" \
    "(bazel build //client_sdk/conformance:scripted_server, or set INFORMER_CONFORMANCE_SERVER)" >&2
  exit 1
fi
export INFORMER_EMULATOR_BIN="${INFORMER_EMULATOR_BIN:-$PWD/../../bazel-bin/emulator/kube_emulator}"
if [[ ! -x "$INFORMER_EMULATOR_BIN" ]]; then
  echo "client_sdk/java/test.sh: no emulator at $INFORMER_EMULATOR_BIN" \
    "(bazel build //emulator:kube_emulator, or set INFORMER_EMULATOR_BIN)" >&2
  exit 1
fi

mvn -B -q -Dstyle.color=never package
tail -n 1 -q target/surefire-reports/*Test.txt

# The jar on a plain classpath, outside the tree.
out="$(mktemp -d /tmp/isd-java-pkg.XXXXXX)"
trap 'rm -rf "$out"' EXIT
mvn -B -q -Dstyle.color=never dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$out/lib"
cp target/informer-sidecar-client-*.jar "$out/lib/"
cp examples/*.java "$out/"
cd "$out"

expect() {  # log, pattern: fails unless the log has a line matching it
  if ! grep -qE "$2" "$1"; then
    cat "$1"
    echo "client_sdk/java/test.sh: $1 has no line matching '$2'" >&2
    exit 1
  fi
}

java -cp 'lib/*' PodWatcher.java --sidecar "$INFORMER_SIDECAR_BIN" \
  --duration 4 >pods.log 2>&1
expect pods.log '^ADDED +demo/web-.* \(initial\)$'
expect pods.log '^SYNCED +[0-9]+ pods; by label app: app-1='
expect pods.log '^DELETED +demo/web-'

java -cp 'lib/*' ConfigMapController.java --sidecar "$INFORMER_SIDECAR_BIN" \
  --duration 6 >controller.log 2>&1
expect controller.log "^queue 'configmap-controller' created$"
expect controller.log 'WARNING: WorkQueueWorker\(configmap-controller\): demo/api-config failed \(attempt 1\)'
expect controller.log '^RECORDED +demo/api-config rv=[0-9]+  \(retry, after 1 failure\(s\)\)$'
echo "client_sdk/java/test.sh: the jar and both examples work outside the tree ($(ls lib | wc -l) jars)"
