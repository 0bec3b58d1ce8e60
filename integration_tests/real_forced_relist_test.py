"""A forced 410 on the real kube-apiserver v1.37: the real informer_sidecar
is frozen (SIGSTOP) and the API server restarted once, which closes the
sidecar's watch before anything changes (a change sent before that would
wait in the frozen process's socket buffer and be applied on resume).
Objects then change, etcd is compacted, and the API server is restarted
again, so its watch cache starts after the compaction. Thawed (SIGCONT),
the sidecar re-watches from its last resourceVersion, which the server no
longer has: the re-watch gets 410, the sidecar relists once, and its cache
equals the server object by object.

Under the default --watch_list=auto the relist is a WatchList (read from
the API server's audit log: a watch with sendInitialEvents=true, no LIST),
reconciled with the cache: a gRPC Watch stream opened before the freeze
hears of the changed, created and deleted objects only, nothing of the
unchanged ones, and the sidecar logs them as kept.
"""

import json
import threading
import time
import unittest

import grpc

import real_sidecar

NS = "forced-410"
RELISTS = "informer_sidecar_informer_relists_total"
ERRORS = "informer_sidecar_informer_errors_total"
USER = real_sidecar.USER


class ObjectEvents:
    """One Informer.Watch stream of NS's ConfigMaps, read on a thread: the
    object events after its initial state, as (type, name)."""

    def __init__(self, channel, pb):
        self.events = []
        self.initial_done = False
        self.lock = threading.Lock()
        call = channel.unary_stream(
            "/informer.v1.Informer/Watch",
            request_serializer=pb.WatchRequest.SerializeToString,
            response_deserializer=pb.WatchResponse.FromString)
        self.names = pb.EventType.Name
        self.stream = call(pb.WatchRequest(resource="configmaps",
                                           namespace=NS),
                           wait_for_ready=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            for response in self.stream:
                with self.lock:
                    for e in response.events:
                        kind = self.names(e.type)[len("EVENT_TYPE_"):]
                        if kind == "INITIAL_STATE_DONE":
                            self.initial_done = True
                        elif self.initial_done and e.HasField("object"):
                            name = json.loads(e.object.json)["metadata"][
                                "name"]
                            self.events.append((kind, name))
        except grpc.RpcError:
            pass

    def snapshot(self):
        with self.lock:
            return self.initial_done, list(self.events)

    def close(self):
        self.stream.cancel()
        self.thread.join(timeout=10)


class ForcedRelistAgainstRealServerTest(unittest.TestCase):

    def setUp(self):
        self.addCleanup(
            real_sidecar.Cluster("rk410", audit=True).attach(self).close)
        self.sidecar = None
        self.stream = None

    def tearDown(self):
        if self.stream is not None:
            self.stream.close()

    def path(self, name=""):
        return "/api/v1/namespaces/%s/configmaps%s" % (
            NS, "/" + name if name else "")

    def cache_matches_server(self):
        return real_sidecar.cache_matches_server(
            self.cp, self.sidecar, self.pb, "configmaps", NS)

    def test_relists_once_after_a_410_and_matches_the_server(self):
        self.cluster.view_namespace(NS)
        self.cluster.create_configmaps(NS, [
            {"metadata": {"name": "cm-%02d" % i}, "data": {"v": "initial"}}
            for i in range(20)])
        self.sidecar = self.cluster.sidecar(
            "sidecar", ["--resources=configmaps", "--namespace=" + NS])
        real_sidecar.wait_for(self.cache_matches_server, "the initial sync")
        relists = self.sidecar.metric(RELISTS, resource="configmaps")
        expired = self.sidecar.metric(ERRORS, resource="configmaps",
                                      kind="http_410")
        self.assertEqual(relists, 0)
        self.stream = ObjectEvents(self.sidecar.channel, self.pb)
        real_sidecar.wait_for(lambda: self.stream.snapshot()[0],
                              "the stream's initial state")

        self.sidecar.freeze()
        started = time.monotonic()
        # Closes the frozen sidecar's watch while nothing has changed.
        self.cp.restart_apiserver()
        for i in range(0, 5):
            cm = self.cp.api("GET", self.path("cm-%02d" % i))
            cm["data"]["v"] = "changed while frozen"
            self.cp.api("PUT", self.path("cm-%02d" % i), cm)
        for i in range(17, 20):
            self.cp.api("DELETE", self.path("cm-%02d" % i))
        for i in range(4):
            self.cp.api("POST", self.path(),
                        {"metadata": {"name": "new-%d" % i},
                         "data": {"v": "created while frozen"}})
        self.cp.compact_etcd()
        # The watch cache now starts after the compaction.
        self.cp.restart_apiserver()
        # The frozen sidecar has asked nothing since the first restart.
        since = self.audit.offset()
        self.sidecar.thaw()

        expected, cached = real_sidecar.wait_for(
            self.cache_matches_server, "the cache to match the server")
        self.assertEqual(len(expected), 21)
        self.assertEqual(cached["cm-00"]["data"]["v"], "changed while frozen")
        self.assertIn("new-3", cached)
        self.assertNotIn("cm-19", cached)
        self.assertEqual(
            self.sidecar.metric(RELISTS, resource="configmaps"), relists + 1,
            self.sidecar.log())
        self.assertGreaterEqual(
            self.sidecar.metric(ERRORS, resource="configmaps",
                                kind="http_410"), expired + 1,
            self.sidecar.log())
        print("frozen to converged: %.1fs" % (time.monotonic() - started))
        self.check_the_stream_heard_only_the_changes()
        self.check_the_relist_was_a_reconciled_watch_list(since)

    def check_the_stream_heard_only_the_changes(self):
        # A change made now reaches the stream after everything the relist
        # sent: the events before it are the relist's.
        self.cp.api("POST", self.path(), {"metadata": {"name": "marker"}})

        def marker_seen():
            events = self.stream.snapshot()[1]
            return events if ("ADDED", "marker") in events else None

        events = real_sidecar.wait_for(marker_seen, "the marker on the stream")
        relisted = events[:events.index(("ADDED", "marker"))]
        expected = ([("MODIFIED", "cm-%02d" % i) for i in range(5)] +
                    [("DELETED", "cm-%02d" % i) for i in range(17, 20)] +
                    [("ADDED", "new-%d" % i) for i in range(4)])
        self.assertEqual(sorted(relisted), sorted(expected), events)

    def check_the_relist_was_a_reconciled_watch_list(self, since):
        log = self.sidecar.log()
        self.assertIn("configmaps: relisting (WatchList)", log)
        self.assertIn("configmaps: relist of 21 objects: 12 unchanged "
                      "(kept), 9 new or changed (0 recreated), 3 vanished",
                      log)
        # A watch is audited at ResponseComplete once it ends: stop first.
        self.stream.close()
        self.stream = None
        self.sidecar.stop()
        requests = self.audit.wait_requests(
            USER, "configmaps", since,
            lambda r: "sendInitialEvents=true" in r["uri"],
            "the relist's WatchList in the audit log")
        self.assertEqual([r for r in requests if r["verb"] == "list"], [],
                         requests)
        streamed = [r for r in requests if r["verb"] == "watch" and
                    "sendInitialEvents=true" in r["uri"]]
        self.assertEqual(len(streamed), 1, requests)
        self.assertEqual(streamed[0]["code"], 200, requests)


if __name__ == "__main__":
    unittest.main()
