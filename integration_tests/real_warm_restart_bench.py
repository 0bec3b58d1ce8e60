"""Warm restarts on the REAL kube-apiserver v1.37: the time to SERVING of
the real informer_sidecar started cold (no snapshot: the initial state from
the server, a WatchList under the default --watch_list=auto) and warm
(--cache_dir holds the snapshot of the run before), for 50k ConfigMaps of
1 KiB in one namespace, seeded over the API as real_side_by_side_bench does.

    bazel build -c opt //integration_tests:real_warm_restart_bench
    REALKUBE_BIN=$(tools/realkube.sh bin-dir) \\
        bazel-bin/integration_tests/real_warm_restart_bench [--runs=3]
        [--configmaps=50000] [--changes=20]

Each round: a cold start on an empty cache directory (its snapshot written
at SIGTERM); a warm start with nothing changed; then, while the sidecar is
down, --changes ConfigMaps are added and another resource is written (a
Namespace, as Leases are every few seconds: etcd's resourceVersion is then
past the ConfigMaps' last change) and a warm start again. Times are the
sidecar's own, from its first log line to its "health SERVING" line; bytes
are informer_bytes_received_total. Medians over the rounds, and the ratios
warm/cold of each round's pair.
"""

import argparse
import datetime
import os
import re
import shutil
import statistics
import sys
import tempfile

import real_sidecar
import real_side_by_side_bench as seeding

import control_plane  # noqa: E402  (on sys.path through real_sidecar)

BYTES = "informer_sidecar_informer_bytes_received_total"
LISTS = "informer_sidecar_informer_lists_total"
STAMP = re.compile(r"^[IWEF](\d{8} \d\d:\d\d:\d\d\.\d{6})", re.M)


def serving_seconds(log):
    """From the first log line to the "health SERVING" line."""
    stamps = [(m.start(), datetime.datetime.strptime(m.group(1),
                                                     "%Y%m%d %H:%M:%S.%f"))
              for m in STAMP.finditer(log)]
    at = log.find("health SERVING")
    if not stamps or at < 0:
        raise SystemExit("no SERVING line in the log:\n" + log[-3000:])
    end = [t for pos, t in stamps if pos <= at][-1]
    return (end - stamps[0][1]).total_seconds()


class Bench:

    def __init__(self, cp, tmp):
        self.cp = cp
        self.tmp = tmp
        self.starts = 0

    def run_sidecar(self, cache_dir):
        """One sidecar start to SERVING, then SIGTERM: (seconds to
        SERVING, bytes received, lists made, its log)."""
        self.starts += 1
        sidecar = real_sidecar.RealSidecar(
            os.path.join(self.tmp, "run-%d" % self.starts),
            self.cp.admin_kubeconfig,
            ["--resources=configmaps", "--namespace=" + seeding.CM_NAMESPACE,
             "--cache_dir=" + cache_dir, "--cache_snapshot_interval=0"])
        sidecar.start()
        received = sidecar.metric(BYTES, resource="configmaps")
        lists = sidecar.metric(LISTS, resource="configmaps")
        sidecar.stop()
        log = sidecar.log()
        return serving_seconds(log), received, lists, log

    def change_while_down(self, round_, changes):
        loader = seeding.Loader(self.cp)
        path = "/api/v1/namespaces/%s/configmaps" % seeding.CM_NAMESPACE
        loader.run([[("POST", path,
                      '{"metadata":{"name":"down-%d-%d"},"data":{"v":"x"}}'
                      % (round_, i), None)] for i in range(changes)])
        self.cp.create_namespace("elsewhere-%d" % round_)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--configmaps", type=int, default=50000)
    parser.add_argument("--changes", type=int, default=20)
    args = parser.parse_args()
    bin_dir = os.environ.get("REALKUBE_BIN")
    if not bin_dir:
        raise SystemExit("set REALKUBE_BIN=$(tools/realkube.sh bin-dir)")
    # This script's directory is the source tree's (Python resolves the
    # runfiles' symlink), where real_sidecar would not find the binary.
    here = os.path.dirname(os.path.abspath(sys.argv[0]))
    os.environ.setdefault("INFORMER_SIDECAR_BIN", os.path.join(
        here, "..", "server", "informer_sidecar"))
    tmp = tempfile.mkdtemp(prefix="rkwrb", dir="/tmp")
    try:
        with control_plane.ControlPlane(bin_dir) as cp:
            print("kube-apiserver %s at %s" % (cp.version, cp.server),
                  flush=True)
            cp.create_namespace(seeding.CM_NAMESPACE)
            seeding.Loader(cp).run(seeding.configmaps(args.configmaps))
            print("seeded %d ConfigMaps" % args.configmaps, flush=True)
            run_rounds(Bench(cp, tmp), args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_rounds(bench, args):
    rows = {"cold": [], "warm, nothing changed": [],
            "warm, %d added, then another resource written" % args.changes:
            []}
    keys = list(rows)
    for r in range(args.runs):
        cache_dir = os.path.join(bench.tmp, "cache-%d" % r)
        cold = bench.run_sidecar(cache_dir)
        quiet = bench.run_sidecar(cache_dir)
        bench.change_while_down(r, args.changes)
        busy = bench.run_sidecar(cache_dir)
        for key, run in zip(keys, (cold, quiet, busy)):
            rows[key].append(run)
        for key, run in zip(keys[1:], (quiet, busy)):
            if run[2] != 0:
                raise SystemExit("the warm start listed:\n" + run[3])
        print("round %d: cold %.2f s, warm quiet %.2f s, warm changed "
              "%.2f s" % (r + 1, cold[0], quiet[0], busy[0]), flush=True)
        for line in busy[3].splitlines():
            if "resuming" in line or "caught up" in line:
                print("  " + line[:200])
    cold_s = [run[0] for run in rows["cold"]]
    print("\n| start | time to SERVING (median) | warm/cold (median of "
          "rounds) | bytes received |\n| --- | --- | --- | --- |")
    for key in keys:
        times = [run[0] for run in rows[key]]
        ratio = "" if key == "cold" else "%.2fx" % statistics.median(
            t / c for t, c in zip(times, cold_s))
        print("| %s | %.2f s | %s | %.0f |" % (
            key, statistics.median(times), ratio,
            statistics.median(run[1] for run in rows[key])))


if __name__ == "__main__":
    sys.exit(main())
