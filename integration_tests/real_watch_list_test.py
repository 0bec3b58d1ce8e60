"""--watch_list against the real kube-apiserver v1.37, read from the API
server's own audit log (what it was asked, not what the sidecar says):

- auto, WatchList gate on (v1.37's default): the initial state arrives as
  one watch with sendInitialEvents=true and no LIST is sent; the cache
  equals the server object by object;
- off: a LIST, then a watch without sendInitialEvents;
- auto with the API server's WatchList gate off: the WatchList watch is
  refused (422) and the sidecar lists instead, once, and syncs;
- on with the gate off: the same fallback for the round (client-go's).
"""

import os
import subprocess
import tempfile
import unittest

import real_sidecar
import real_sidecar_smoke_test as smoke
from real_sidecar import AuditLog, RealSidecar

import control_plane  # noqa: E402  (on sys.path through the smoke test)

NS = "watchlist"
USER = control_plane.UNPRIVILEGED_USER
OBJECTS = 30


class WatchListAgainstRealServerTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="rkwl", dir="/tmp")
        cls.pb = smoke.generate_messages(cls.tmp)
        cls.audit = AuditLog(cls.tmp)
        cls.cp = control_plane.ControlPlane(
            os.environ["REALKUBE_BIN"],
            extra_apiserver_flags=cls.audit.flags())
        cls.cp.start()
        try:
            cls.cp.bind_cluster_role(USER, "view")
            cls.cp.create_namespace(NS)
            for i in range(OBJECTS):
                cls.cp.api("POST", "/api/v1/namespaces/%s/configmaps" % NS,
                           {"metadata": {"name": "cm-%02d" % i},
                            "data": {"n": str(i)}})
        except BaseException:
            cls.cp.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.cp.stop()
        subprocess.run(["rm", "-rf", cls.tmp], check=False)

    def run_sidecar(self, name, mode):
        """Starts a sidecar for NS's ConfigMaps with --watch_list=`mode`,
        waits until it serves, checks its cache against the server object
        by object, stops it, and returns the ConfigMap requests it made."""
        since = self.audit.offset()
        sidecar = RealSidecar(os.path.join(self.tmp, name),
                              self.cp.user_kubeconfig,
                              ["--resources=configmaps", "--namespace=" + NS,
                               "--watch_list=" + mode])
        try:
            sidecar.start()
            expected = real_sidecar.server_objects(self.cp, "configmaps", NS)
            self.assertEqual(len(expected), OBJECTS)
            cached = real_sidecar.grpc_list(sidecar.channel, self.pb,
                                            "configmaps", NS)
            self.assertEqual(sorted(expected), sorted(cached))
            for name_ in expected:
                self.assertEqual(expected[name_], cached[name_], name_)
            # The watch that follows the initial state is open (a watch is
            # audited at ResponseComplete once it ends: stop first).
        finally:
            sidecar.stop()
            log = sidecar.log()
        requests = real_sidecar.wait_for(
            lambda: [r for r in self.audit.requests(USER, "configmaps", since)
                     if r["verb"] == "watch"] and
            self.audit.requests(USER, "configmaps", since),
            "the sidecar's watch in the audit log")
        return requests, log

    @staticmethod
    def watch_lists(requests):
        return [r for r in requests if r["verb"] == "watch" and
                "sendInitialEvents=true" in r["uri"]]

    def test_a_auto_streams_the_initial_state_without_a_list(self):
        requests, _ = self.run_sidecar("auto", "auto")
        self.assertEqual([r for r in requests if r["verb"] == "list"], [],
                         requests)
        streamed = self.watch_lists(requests)
        self.assertEqual(len(streamed), 1, requests)
        self.assertIn("resourceVersionMatch=NotOlderThan", streamed[0]["uri"])
        self.assertIn("allowWatchBookmarks=true", streamed[0]["uri"])
        self.assertEqual(streamed[0]["code"], 200)

    def test_b_off_lists_then_watches(self):
        requests, _ = self.run_sidecar("off", "off")
        self.assertEqual(self.watch_lists(requests), [], requests)
        self.assertEqual(len([r for r in requests if r["verb"] == "list"]),
                         1, requests)

    def test_c_gate_off_auto_and_on_fall_back_to_a_list(self):
        self.cp.restart_apiserver(feature_gates={"WatchList": False})
        try:
            for mode in ("auto", "on"):
                requests, log = self.run_sidecar("gate-off-" + mode, mode)
                refused = self.watch_lists(requests)
                self.assertEqual(len(refused), 1, requests)
                self.assertEqual(refused[0]["code"], 422, requests)
                self.assertEqual(
                    len([r for r in requests if r["verb"] == "list"]), 1,
                    requests)
                if mode == "auto":
                    self.assertIn("does not support WatchList", log)
        finally:
            self.cp.restart_apiserver(feature_gates={})


if __name__ == "__main__":
    unittest.main()
