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

import unittest

import real_sidecar

NS = "watchlist"
USER = real_sidecar.USER
OBJECTS = 30


class WatchListAgainstRealServerTest(real_sidecar.ClusterTest):

    CLUSTER_PREFIX = "rkwl"
    CLUSTER_AUDIT = True

    @classmethod
    def populate(cls):
        cls.cluster.view_namespace(NS)
        cls.cluster.create_configmaps(NS, [
            {"metadata": {"name": "cm-%02d" % i}, "data": {"n": str(i)}}
            for i in range(OBJECTS)])

    def run_sidecar(self, name, mode):
        """Starts a sidecar for NS's ConfigMaps with --watch_list=`mode`,
        waits until it serves, checks its cache against the server object
        by object, stops it, and returns the ConfigMap requests it made."""
        since = self.audit.offset()
        sidecar = self.cluster.sidecar(
            name, ["--resources=configmaps", "--namespace=" + NS,
                   "--watch_list=" + mode])
        try:
            expected = real_sidecar.server_objects(self.cp, "configmaps", NS)
            self.assertEqual(len(expected), OBJECTS)
            cached = real_sidecar.grpc_list(sidecar.channel, self.pb,
                                            "configmaps", NS)
            self.assert_same_objects(expected, cached, name)
            # The watch that follows the initial state is open (a watch is
            # audited at ResponseComplete once it ends: stop first).
        finally:
            sidecar.stop()
            log = sidecar.log()
        requests = self.audit.wait_requests(
            USER, "configmaps", since, lambda r: r["verb"] == "watch",
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
