"""The benchmarks of issue-sized runs at a size CI affords: each one runs
end to end against the emulator (a few hundred Pods spread over namespaces)
and prints the rows its documentation describes. With REALKUBE_BIN set (the
real-cluster phase), memory_bench also runs client-go v0.37's informer
(kube-informer-bench) side by side and its rows must be there.
"""

import os
import re
import subprocess
import unittest

WORKSPACE = os.environ.get("TEST_WORKSPACE", "informer_sidecar")
RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), WORKSPACE)
PODS = 600
NAMESPACES = 3
TIMEOUT = 600
# Set by --require-client-go (the real-cluster variant): without
# REALKUBE_BIN the test fails instead of leaving client-go out.
REQUIRE_CLIENT_GO = False


def client_go():
    if REQUIRE_CLIENT_GO and not os.environ.get("REALKUBE_BIN"):
        raise AssertionError("--require-client-go without REALKUBE_BIN")
    return bool(os.environ.get("REALKUBE_BIN"))


def run(binary, *flags):
    out = subprocess.run(
        [os.path.join(RUNFILES, "integration_tests", binary)] + list(flags),
        check=False, capture_output=True, text=True, timeout=TIMEOUT)
    if out.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s\n%s" % (
            binary, out.returncode, out.stdout, out.stderr[-4000:]))
    return out.stdout


def row(text, first_cell):
    """The cells of the table row starting with `first_cell`."""
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            return cells
    raise AssertionError("no row %r in:\n%s" % (first_cell, text))


def megabytes(cell):
    m = re.fullmatch(r"([0-9.]+) MB", cell)
    if not m:
        raise AssertionError("not a size: %r" % cell)
    return float(m.group(1))


class BenchSmokeTest(unittest.TestCase):

    def test_memory_bench_side_by_side_on_spread_pods(self):
        out = run("memory_bench", "--pods=%d" % PODS,
                  "--pod_namespaces=%d" % NAMESPACES, "--runs=1",
                  "--tunables=default")
        self.assertIn("%d pods in all namespaces" % PODS, out)
        sidecar = row(out, "sidecar (this build)")
        self.assertGreater(megabytes(sidecar[3]), 10)   # RSS after sync
        self.assertGreaterEqual(megabytes(sidecar[4]),  # peak >= after
                                megabytes(sidecar[3]) - 1)
        row(out, "download (curl)")
        json_bytes = int(row(out, "JSON")[1])
        self.assertGreater(json_bytes, 2000)  # a Pod without managedFields
        self.assertGreater(int(row(out, "metadata")[1]), 0)
        if client_go():
            for name in ("client-go defaults",
                         "client-go, managedFields stripped"):
                go = row(out, name)
                self.assertGreater(megabytes(go[3]), 10, name)
                self.assertRegex(go[5], r"^[0-9.]+$", name)

    def test_grpc_query_bench_gets_and_lists_a_namespace(self):
        out = run("grpc_query_bench", "--pods=%d" % PODS,
                  "--namespaces=%d" % NAMESPACES, "--rounds=1",
                  "--duration=0.3s")
        cells = [c.strip() for c in out.strip().splitlines()[-1]
                 .strip("|").split("|")]
        self.assertRegex(cells[1], r"^[0-9.]+ ms$")   # Get p50
        self.assertEqual(cells[3], "1.00x")          # the baseline itself
        gets, lists = (float(x) for x in cells[7].split(","))
        self.assertGreater(gets, 0)
        self.assertGreater(lists, 0)

    def test_sync_bench_on_spread_pods(self):
        out = run("sidecar_sync_bench",
                  "--cases=pods:%d:%d" % (PODS, NAMESPACES),
                  "--rates=75e6", "--runs=1", "--compressions=none")
        self.assertRegex(out, r"pods %d \([0-9.]+ MB\), emulator 75 MB/s: "
                         r"curl [0-9.]+ s" % PODS)
        self.assertRegex(out, r"sidecar 0 --api_compression=none: [0-9.]+ s")
        if client_go():
            self.assertIn("client-go (defaults)", out)
            self.assertIn("client-go (managedFields stripped)", out)


if __name__ == "__main__":
    import sys
    if "--require-client-go" in sys.argv:
        sys.argv.remove("--require-client-go")
        REQUIRE_CLIENT_GO = True
    unittest.main()
