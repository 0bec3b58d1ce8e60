"""Warm restarts against the real kube-apiserver v1.37: the real
informer_sidecar keeps its cache in --cache_dir, is stopped (SIGTERM, which
writes the snapshot) and started again.

Inside the server's watch window it loads the snapshot and resumes: the
API server's audit log shows no list of the state, only the probe of its
watch cache's resourceVersion (a LIST at resourceVersion 0 with
fieldSelector=metadata.name that matches nothing) and a watch from the
snapshot's resourceVersion; the cache equals the server object by object,
with the changes made while it was down. The cluster changed elsewhere
after them, yet the informer is caught up at the last ConfigMap change the
watch replays, not a second later at a bookmark: the probe answers with
the ConfigMaps' watch cache resourceVersion, not etcd's.

After etcd was compacted and the API server restarted (its watch cache
starts after the compaction), the resumed watch gets 410: the sidecar
relists once, reconciled with the loaded cache (only the changed objects
become deltas, which is all handlers and Watch streams hear of), and equals
the server.

The sidecar runs as the unprivileged user with the `view` ClusterRole,
which may get the kube-system namespace: the snapshots carry its uid as
the cluster's identity.
"""

import os
import time
import unittest

import real_sidecar

NS = "warm-restart"
OBJECTS = 300
USER = real_sidecar.USER
LISTS = "informer_sidecar_informer_lists_total"
BYTES = "informer_sidecar_informer_bytes_received_total"


class WarmRestartAgainstRealServerTest(unittest.TestCase):

    def setUp(self):
        self.addCleanup(
            real_sidecar.Cluster("rkwarm", audit=True).attach(self).close)
        self.cache_dir = os.path.join(self.tmp, "cache")
        self.sidecar = None
        self.runs = 0

    def path(self, name=""):
        return "/api/v1/namespaces/%s/configmaps%s" % (
            NS, "/" + name if name else "")

    def start_sidecar(self):
        """A sidecar on the cache directory; returns its time to SERVING."""
        self.runs += 1
        started = time.monotonic()
        self.sidecar = self.cluster.sidecar(
            "sidecar-%d" % self.runs,
            ["--resources=configmaps", "--namespace=" + NS,
             "--cache_dir=" + self.cache_dir,
             "--cache_snapshot_interval=0"])
        return time.monotonic() - started

    def stop_sidecar(self):
        self.sidecar.stop()
        self.assertEqual(self.sidecar.process.returncode, 0,
                         self.sidecar.log())
        log = self.sidecar.log()
        self.sidecar = None
        return log

    def cache_matches_server(self):
        return real_sidecar.cache_matches_server(
            self.cp, self.sidecar, self.pb, "configmaps", NS)

    def seed_and_run_once(self):
        """A first (cold) run that ends with a snapshot; returns its time
        to SERVING and the bytes its initial state cost."""
        self.cluster.view_namespace(NS)
        self.cluster.create_configmaps(NS, [
            {"metadata": {"name": "cm-%03d" % i},
             "data": {"v": "initial", "pad": "x" * 1024}}
            for i in range(OBJECTS)])
        cold = self.start_sidecar()
        real_sidecar.wait_for(self.cache_matches_server, "the initial sync")
        full = self.sidecar.metric(BYTES, resource="configmaps")
        log = self.stop_sidecar()
        self.assertIn("snapshot of %d objects" % OBJECTS, log)
        self.assertIn("cluster identity for snapshots: uid:", log)
        return cold, full

    def change_while_down(self):
        for i in range(3):
            cm = self.cp.api("GET", self.path("cm-%03d" % i))
            cm["data"]["v"] = "changed while down"
            self.cp.api("PUT", self.path("cm-%03d" % i), cm)
        self.cp.api("DELETE", self.path("cm-%03d" % (OBJECTS - 1)))
        created = self.cp.api("POST", self.path(),
                              {"metadata": {"name": "new-0"},
                               "data": {"v": "new"}})
        return created["metadata"]["resourceVersion"]

    def test_restart_inside_the_window_resumes_without_a_list(self):
        cold, full = self.seed_and_run_once()
        last_change = self.change_while_down()
        # The cluster changes elsewhere too (as leases do every few
        # seconds): etcd's resourceVersion is past the last change of these
        # ConfigMaps, their watch cache's is not. (Exact here: this control
        # plane runs no kube-controller-manager, whose root-CA publisher
        # writes a ConfigMap into every new Namespace, and its etcd sends
        # progress notifications every 10 min, the default.)
        self.cp.create_namespace(NS + "-elsewhere")
        since = self.audit.offset()
        warm = self.start_sidecar()
        expected, cached = real_sidecar.wait_for(
            self.cache_matches_server, "the cache to match the server")
        self.assertEqual(len(expected), OBJECTS)
        self.assertEqual(cached["cm-000"]["data"]["v"], "changed while down")
        self.assertIn("new-0", cached)
        self.assertNotIn("cm-%03d" % (OBJECTS - 1), cached)
        self.assertEqual(self.sidecar.metric(LISTS, resource="configmaps"), 0)
        received = self.sidecar.metric(BYTES, resource="configmaps")
        print("time to SERVING: cold %.2fs, warm %.2fs; bytes: full %d, "
              "warm %d" % (cold, warm, full, received))
        self.assertLess(received, full * 0.05)
        # A watch is audited at ResponseComplete once it ends: stop first.
        log = self.stop_sidecar()
        self.assertIn("loaded %d objects" % OBJECTS, log)
        self.assertIn("caught up with the server at resourceVersion %s\n"
                      % last_change, log)
        for line in log.splitlines():
            if any(s in line for s in ("loaded", "resuming", "caught up",
                                       "cache synced")):
                print(line)
        requests = self.audit.wait_requests(
            USER, "configmaps", since, lambda r: r["verb"] == "watch",
            "the resumed watch in the audit log")
        lists = [r for r in requests if r["verb"] == "list"]
        self.assertEqual(len(lists), 1, requests)
        self.assertIn("fieldSelector=metadata.name", lists[0]["uri"])
        self.assertIn("resourceVersion=0", lists[0]["uri"])
        self.assertEqual([r for r in requests
                          if "sendInitialEvents=true" in r["uri"]], [],
                         requests)

    def test_restart_after_compaction_relists_once_as_a_diff(self):
        self.seed_and_run_once()
        self.change_while_down()
        self.cp.compact_etcd()
        # Its watch cache now starts after the compaction: the snapshot's
        # resourceVersion is gone.
        self.cp.restart_apiserver()
        self.start_sidecar()
        expected, cached = real_sidecar.wait_for(
            self.cache_matches_server, "the cache to match the server")
        self.assertEqual(sorted(expected), sorted(cached))
        self.assertEqual(self.sidecar.metric(LISTS, resource="configmaps"), 1,
                         self.sidecar.log())
        log = self.stop_sidecar()
        self.assertIn("loaded %d objects" % OBJECTS, log)
        # Compared with the loaded cache: the three changed objects and the
        # new one are the only deltas, the deleted one the only tombstone.
        self.assertIn("configmaps: relist of %d objects: %d unchanged "
                      "(kept), 4 new or changed (0 recreated), 1 vanished" %
                      (OBJECTS, OBJECTS - 4), log)


if __name__ == "__main__":
    unittest.main()
