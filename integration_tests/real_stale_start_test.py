"""The stale state against the real kube-apiserver v1.37: the real
informer_sidecar with --cache_dir syncs ConfigMaps and Pods, writes its
snapshots at SIGTERM, and the cluster changes while no sidecar runs (three
ConfigMaps changed, one deleted, one created, a Pod deleted). Then the API
server stops (etcd keeps the state) and a sidecar starts while nothing
answers on its address.

With --serve_stale_on_start it serves the snapshots at once, marked stale:
Informer.List answers from them, ListResources says stale with the
snapshot's age, the informer_sidecar_informer_stale gauge is 1, a plain
grpcio client (default options) gets the initial state ending in a stale
INITIAL_STATE_DONE, the installed Python SDK's mirror says is_stale, and
/readyz is not ready (ready with --ready_when_stale; gRPC health follows
the sync either way; the Kubernetes API facade starts, its resources and
kinds from the snapshots, and lists once the informers synced); a List by
kind or singular name resolves from the kind the snapshots recorded. Once
the API server is back (while it starts it answers 403 for a moment, its
RBAC caches empty: that settles nothing, the sidecar stays stale rather
than take it for another cluster), the changes made while the sidecar was
down reach the Watch as ordinary events before FRESH: the restarted
server's watch cache begins after the snapshots' resourceVersion, so the
catch-up is a 410 and one relist diffed against the stale cache, the
deleted object a tombstone. The flag and the gauge clear, the changes made
after are ordinary events too, and the cache and the SDK's mirror equal the
server object by object.

Without the flag the same outage gives today's behaviour: the sidecar
exits at start, reporting the refused connection (nothing served, never
ready); started again once the API server is back, it syncs as usual
(its snapshot loaded, never stale).

One control plane for the class; each test its own namespace and cache
directory, and the API server running again at its end. Every wait polls
a condition or reads a stream against a deadline.
"""

import json
import os
import subprocess
import sys
import time
import unittest
import urllib.request

import grpc

import real_sidecar
from real_sidecar import SERVING, SdkMirror, comparable, wait_for

STALE = "informer_sidecar_informer_stale"
EVENTS_OUT = "informer_sidecar_watch_events_out_total"
RESOURCES = ("configmaps", "pods")
CONFIGMAPS = 20
PODS = 3
STREAM_TIMEOUT = 300.0


def describe(pb, event):
    """"TYPE name" of a Watch event ("TYPE" for a marker), " stale" and
    " tombstone" when set."""
    out = pb.EventType.Name(event.type)[len("EVENT_TYPE_"):]
    if event.HasField("object"):
        out += " " + json.loads(event.object.json)["metadata"]["name"]
    if event.stale:
        out += " stale"
    if event.tombstone:
        out += " tombstone"
    return out


class StaleStartAgainstRealServerTest(real_sidecar.ClusterTest):

    CLUSTER_PREFIX = "rkstale"

    @classmethod
    def populate(cls):
        cls.cp.bind_cluster_role(real_sidecar.USER, "view")
        cls.sdk_python = real_sidecar.install_python_sdk(cls.tmp)

    def setUp(self):
        self.ns = "stale-" + self._testMethodName.replace("_", "-")[5:40]
        self.cache_dir = os.path.join(self.tmp, self.ns, "cache")
        self.runs = 0
        # Whatever happens in the test, the next finds the API server up.
        self.addCleanup(self.api_server_up)

    def api_server_up(self):
        if not self.cp.apiserver_running():
            self.cp.start_apiserver()

    # ---- the cluster -----------------------------------------------------

    def path(self, resource, name=""):
        return "/api/v1/namespaces/%s/%s%s" % (self.ns, resource,
                                               "/" + name if name else "")

    def create_configmap(self, name, value):
        self.cp.api("POST", self.path("configmaps"),
                    {"metadata": {"name": name}, "data": {"v": value}})

    def update_configmap(self, name, value):
        cm = self.cp.api("GET", self.path("configmaps", name))
        cm["data"]["v"] = value
        self.cp.api("PUT", self.path("configmaps", name), cm)

    def delete(self, resource, name):
        self.cp.api("DELETE", self.path(resource, name))

    def server_state(self):
        return {r: real_sidecar.server_objects(self.cp, r, self.ns)
                for r in RESOURCES}

    # ---- sidecars --------------------------------------------------------

    def flags(self, *extra):
        return ["--resources=" + ",".join(RESOURCES),
                "--namespace=" + self.ns, "--cache_dir=" + self.cache_dir,
                "--cache_snapshot_interval=0"] + list(extra)

    def start_sidecar(self, *extra, serving=True):
        self.runs += 1
        sidecar = self.cluster.sidecar(
            "%s/sidecar-%d" % (self.ns, self.runs), self.flags(*extra),
            serving=serving)
        # In the test's log (shown when it fails): what the sidecar said.
        self.addCleanup(lambda: sys.stderr.write(
            "--- %s\n%s" % (sidecar.log_path, sidecar.log())))
        return sidecar

    def cache_state(self, sidecar):
        return {r: real_sidecar.grpc_list(sidecar.channel, self.pb, r,
                                          self.ns) for r in RESOURCES}

    def converged(self, sidecar):
        """The cache equals the server, object by object."""
        expected = self.server_state()
        return expected if self.cache_state(sidecar) == expected else None

    def stop_sidecar(self, sidecar):
        sidecar.stop()
        self.assertEqual(sidecar.process.returncode, 0, sidecar.log())
        return sidecar.log()

    def snapshot_change_and_stop_the_api_server(self):
        """A first sidecar syncs and writes its snapshots at SIGTERM; the
        cluster changes while none runs; the API server stops. Returns the
        snapshots' state and the wall-clock bounds of their writing."""
        self.cp.create_namespace(self.ns)
        for i in range(CONFIGMAPS):
            self.create_configmap("cm-%02d" % i, "initial")
        for i in range(PODS):
            self.cp.api("POST", self.path("pods"), {
                "metadata": {"name": "pod-%d" % i},
                "spec": {"containers": [{"name": "c",
                                         "image": "example.invalid/none"}]}})
        first = self.start_sidecar()
        snapshot = wait_for(lambda: self.converged(first), "the first sync")
        written_after = time.time()
        log = self.stop_sidecar(first)
        written_before = time.time()
        for resource, objects in snapshot.items():
            self.assertIn("%s: snapshot of %d objects" %
                          (resource, len(objects)), log)
        for i in range(3):
            self.update_configmap("cm-%02d" % i, "changed while down")
        self.delete("configmaps", "cm-03")
        self.create_configmap("new-while-down", "new")
        self.delete("pods", "pod-0")
        self.cp.stop_apiserver()
        return snapshot, (written_after, written_before)

    # ---- the stale side --------------------------------------------------

    def assert_stale_status(self, sidecar, snapshot, written):
        statuses = real_sidecar.resource_statuses(sidecar.channel, self.pb)
        asked = time.time()
        self.assertEqual(sorted(statuses), sorted(RESOURCES))
        for resource in RESOURCES:
            s = statuses[resource]
            self.assertTrue(s.stale, s)
            self.assertFalse(s.synced, s)
            self.assertEqual(s.object_count, len(snapshot[resource]), s)
            self.assertTrue(s.HasField("stale_age"), s)
            age = s.stale_age.seconds + s.stale_age.nanos / 1e9
            # Now minus the snapshot's writing, which ended with the first
            # sidecar (half a second for the clocks' reads).
            self.assertGreaterEqual(age, asked - written[1] - 0.5, s)
            self.assertLessEqual(age, asked - written[0] + 0.5, s)

    def stale_gauges(self, sidecar, value):
        return all(sidecar.metric(STALE, resource=r) == value
                   for r in RESOURCES)

    def open_watch(self, sidecar):
        """A Watch of the configmaps from a plain grpcio client with
        gRPC's default options; returns (its events' iterator, channel)."""
        channel = grpc.insecure_channel("unix:" + sidecar.socket)
        call = channel.unary_stream(
            "/informer.v1.Informer/Watch",
            request_serializer=self.pb.WatchRequest.SerializeToString,
            response_deserializer=self.pb.WatchResponse.FromString)
        stream = call(self.pb.WatchRequest(resource="configmaps",
                                           namespace=self.ns),
                      timeout=STREAM_TIMEOUT)
        self.addCleanup(channel.close)
        self.addCleanup(stream.cancel)
        return (e for response in stream for e in response.events), channel

    def read_until(self, events, done):
        """The events' descriptions, bookmarks left out, up to the first
        for which done(description) holds (included)."""
        got = []
        for e in events:
            if e.type == self.pb.EVENT_TYPE_BOOKMARK:
                continue
            got.append(describe(self.pb, e))
            if done(got[-1]):
                return got
        self.fail("the Watch ended after %s" % got)

    def sdk_mirror(self, sidecar):
        mirror = SdkMirror(self.sdk_python, "unix:" + sidecar.socket,
                           "configmaps", self.ns,
                           os.path.join(sidecar.directory, "sdk.log"))
        self.addCleanup(mirror.close)
        return mirror

    def sdk_holds(self, mirror, stale, objects):
        """The SDK's state when it is synced, says `stale` and holds
        `objects` (name -> comparable object), else None."""
        state = mirror.state()
        held = {n: comparable(o) for n, o in state["objects"].items()}
        ok = state["synced"] and state["stale"] == stale and held == objects
        return state if ok else None

    # ---- the tests -------------------------------------------------------

    def test_served_stale_then_fresh_once_the_api_server_is_back(self):
        snapshot, written = self.snapshot_change_and_stop_the_api_server()
        sidecar = self.start_sidecar("--serve_stale_on_start", serving=False)
        wait_for(lambda: self.stale_gauges(sidecar, 1), "the stale gauges")
        self.assert_stale_status(sidecar, snapshot, written)
        self.assertEqual(self.cache_state(sidecar), snapshot)
        # Named by kind and singular too: the snapshots recorded the kind.
        self.assertEqual(real_sidecar.grpc_list(
            sidecar.channel, self.pb, "ConfigMap", self.ns),
            snapshot["configmaps"])
        self.assertEqual(real_sidecar.grpc_list(
            sidecar.channel, self.pb, "pod", self.ns), snapshot["pods"])
        status, body = real_sidecar.readyz(sidecar)
        self.assertEqual(status, 503, body)
        for resource in RESOURCES:
            self.assertIn("%s (stale)" % resource, body)
        self.assertNotEqual(sidecar.health(), SERVING)

        events, _ = self.open_watch(sidecar)
        initial = self.read_until(
            events, lambda d: d.startswith("INITIAL_STATE_DONE"))
        self.assertEqual(initial[-1], "INITIAL_STATE_DONE stale")
        self.assertEqual(sorted(initial[:-1]),
                         sorted("ADDED " + n for n in snapshot["configmaps"]))
        mirror = self.sdk_mirror(sidecar)
        wait_for(lambda: self.sdk_holds(mirror, True,
                                        snapshot["configmaps"]),
                 "the SDK's stale mirror")
        log = sidecar.log()
        self.assertIn("trusts the snapshots' own cluster identity, uid:", log)
        self.assertIn("using the group and version of its snapshot, v1", log)

        self.cp.start_apiserver()
        caught_up = self.read_until(events, lambda d: d == "FRESH")
        self.assertEqual(caught_up[-1], "FRESH")
        # The restarted API server's watch cache starts after the
        # snapshots' resourceVersion: 410, one relist diffed against the
        # stale cache, the vanished object a tombstone.
        self.assertEqual(sorted(caught_up[:-1]), [
            "ADDED new-while-down", "DELETED cm-03 tombstone",
            "MODIFIED cm-00", "MODIFIED cm-01", "MODIFIED cm-02"])
        wait_for(lambda: self.stale_gauges(sidecar, 0), "fresh gauges")
        statuses = real_sidecar.resource_statuses(sidecar.channel, self.pb)
        for resource in RESOURCES:
            s = statuses[resource]
            self.assertFalse(s.stale, s)
            self.assertTrue(s.synced, s)
            self.assertFalse(s.HasField("stale_age"), s)
        self.assertEqual(real_sidecar.readyz(sidecar)[0], 200)
        self.assertEqual(sidecar.health(), SERVING)
        expected = wait_for(lambda: self.converged(sidecar),
                            "the cache to equal the server")
        self.assertNotIn("pod-0", expected["pods"])
        self.assertIn("configmaps: relist of %d objects: %d unchanged (kept), "
                      "4 new or changed (0 recreated), 1 vanished" %
                      (CONFIGMAPS, CONFIGMAPS - 4), sidecar.log())
        state = wait_for(lambda: self.sdk_holds(mirror, False,
                                                expected["configmaps"]),
                         "the SDK's mirror to turn fresh")
        self.assertEqual(sorted(map(tuple, state["events"])), [
            ("ADDED", "new-while-down", False),
            ("DELETED", "cm-03", True),
            ("MODIFIED", "cm-00", False), ("MODIFIED", "cm-01", False),
            ("MODIFIED", "cm-02", False)])
        # Both streams told stale heard FRESH, each counted once.
        self.assertEqual(sidecar.metric(EVENTS_OUT, type="FRESH"), 2)

        # Changes after: ordinary events.
        self.update_configmap("cm-10", "changed after")
        self.create_configmap("new-after", "new")
        self.delete("configmaps", "cm-11")
        live = []
        want = ["ADDED new-after", "DELETED cm-11", "MODIFIED cm-10"]
        while sorted(live) != want:
            live += self.read_until(events, lambda d: True)
            self.assertLessEqual(len(live), len(want), live)
        expected = wait_for(lambda: self.converged(sidecar),
                            "the cache to equal the server again")
        wait_for(lambda: self.sdk_holds(mirror, False,
                                        expected["configmaps"]),
                 "the SDK's mirror to equal the server")
        self.stop_sidecar(sidecar)

    def test_ready_when_stale_and_the_facade(self):
        snapshot, written = self.snapshot_change_and_stop_the_api_server()
        # The Kubernetes API facade starts too, its resources (and their
        # kinds) from the snapshots; it answers once the informers synced.
        sidecar = self.start_sidecar("--serve_stale_on_start",
                                     "--ready_when_stale",
                                     "--kube_api_listen=127.0.0.1:0",
                                     serving=False)
        wait_for(lambda: self.stale_gauges(sidecar, 1), "the stale gauges")
        self.assert_stale_status(sidecar, snapshot, written)
        status, body = real_sidecar.readyz(sidecar)
        self.assertEqual(status, 200, body)
        # gRPC health follows the sync, not --ready_when_stale.
        self.assertNotEqual(sidecar.health(), SERVING)
        self.cp.start_apiserver()
        wait_for(lambda: self.stale_gauges(sidecar, 0), "fresh gauges")
        expected = wait_for(lambda: self.converged(sidecar),
                            "the cache to equal the server")
        self.assertEqual(real_sidecar.readyz(sidecar)[0], 200)
        sidecar.wait_serving()
        url = "%s/api/v1/namespaces/%s/configmaps" % (sidecar.facade(),
                                                       self.ns)
        with urllib.request.urlopen(url, timeout=30) as r:
            listed = json.load(r)
        self.assertEqual(listed["kind"], "ConfigMapList")
        self.assertEqual({o["metadata"]["name"]: comparable(o)
                          for o in listed["items"]}, expected["configmaps"])
        self.stop_sidecar(sidecar)

    def test_without_serve_stale_the_outage_is_todays(self):
        self.snapshot_change_and_stop_the_api_server()
        self.runs += 1
        off = real_sidecar.RealSidecar(
            os.path.join(self.tmp, self.ns, "sidecar-off"),
            self.cp.user_kubeconfig, self.flags())
        run = subprocess.run(off.argv, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True,
                             timeout=real_sidecar.TIMEOUT, check=False)
        self.assertNotEqual(run.returncode, 0, run.stderr)
        self.assertIn("The connection to the server 127.0.0.1:%d was "
                      "refused" % self.cp.port, run.stderr)
        self.assertFalse(os.path.exists(off.ports_file))

        # Once the API server is back: a warm start, never stale.
        self.cp.start_apiserver()
        sidecar = self.start_sidecar()
        expected = wait_for(lambda: self.converged(sidecar),
                            "the cache to equal the server")
        self.assertIn("new-while-down", expected["configmaps"])
        self.assertTrue(self.stale_gauges(sidecar, 0))
        statuses = real_sidecar.resource_statuses(sidecar.channel, self.pb)
        for resource in RESOURCES:
            self.assertFalse(statuses[resource].stale)
            self.assertTrue(statuses[resource].synced)
        self.assertEqual(real_sidecar.readyz(sidecar)[0], 200)
        log = self.stop_sidecar(sidecar)
        self.assertIn("configmaps: loaded %d objects" % CONFIGMAPS, log)


if __name__ == "__main__":
    unittest.main()
