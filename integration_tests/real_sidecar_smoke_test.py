"""The real informer_sidecar binary against the real kube-apiserver and etcd
(control_plane.py): initial sync and live events for ConfigMaps and Pods,
compared object by object with what the API server lists; health SERVING;
calls through the real grpcurl; recovery after an API server restart on a
compacted etcd.

The sidecar runs as the unprivileged user with the `view` ClusterRole, as
it would in a cluster. The gRPC messages are generated with the system
protoc from the repository's informer.proto. Every wait polls a condition
(or reads a stream) against a deadline.
"""

import json
import os
import subprocess
import unittest

import real_sidecar
from real_sidecar import SERVING, WatchMirror, comparable, wait_until

SYNC_NS = "smoke-sync"
LIVE_NS = "smoke-live"


class SidecarAgainstRealServerTest(real_sidecar.ClusterTest):

    CLUSTER_PREFIX = "rks"

    @classmethod
    def populate(cls):
        cls.cp.bind_cluster_role(real_sidecar.USER, "view")
        for ns in (SYNC_NS, LIVE_NS):
            cls.cp.create_namespace(ns)
        # Present before the sidecar starts: its initial list.
        cls.cluster.create_configmaps(
            SYNC_NS, [cls.configmap("seed-%02d" % i, i) for i in range(40)])
        for i in range(5):
            cls.cp.api("POST", "/api/v1/namespaces/%s/pods" % SYNC_NS,
                       cls.pod("seed-%d" % i))
        cls.sidecar = cls.cluster.sidecar("sidecar",
                                          ["--resources=configmaps,pods"])
        cls.channel = cls.sidecar.channel

    @staticmethod
    def configmap(name, n):
        return {"metadata": {"name": name, "labels": {"n": str(n)}},
                "data": {"value": "v%d" % n, "blob": "x" * (n * 10)}}

    @staticmethod
    def pod(name):
        return {"metadata": {"name": name, "labels": {"app": "smoke"}},
                "spec": {"containers": [{"name": "c",
                                         "image": "example.invalid/none"}]}}

    def server_objects(self, resource, namespace):
        return real_sidecar.server_objects(self.cp, resource, namespace)

    def grpc_list(self, resource, namespace):
        return real_sidecar.grpc_list(self.channel, self.pb, resource,
                                      namespace)

    def mirror_matches_server(self, mirror, resource, namespace):
        """Waits until the Watch mirror holds exactly the server's objects,
        then compares them and the sidecar's List object by object."""
        state = {}

        def matches():
            synced, objects = mirror.snapshot()
            state["server"] = self.server_objects(resource, namespace)
            state["mirror"] = {k: comparable(v) for k, v in objects.items()}
            return synced and state["mirror"] == state["server"]
        try:
            wait_until(matches, "the sidecar's %s in %s" %
                       (resource, namespace))
        finally:
            self.assertIsNone(mirror.error)
        self.assert_same_objects(state["server"], state["mirror"],
                                 "Watch " + resource)
        self.assert_same_objects(state["server"],
                                 self.grpc_list(resource, namespace),
                                 "List " + resource)
        return state["server"]

    def test_health_is_serving(self):
        self.assertEqual(self.sidecar.health(), SERVING)

    def test_initial_sync_matches_the_server(self):
        for resource, count in (("configmaps", 40), ("pods", 5)):
            mirror = WatchMirror(self.channel, self.pb, resource, SYNC_NS)
            try:
                objects = self.mirror_matches_server(mirror, resource,
                                                     SYNC_NS)
            finally:
                mirror.close()
            self.assertEqual(len(objects), count)

    def test_configmap_live_events_match_the_server(self):
        ns = LIVE_NS
        path = "/api/v1/namespaces/%s/configmaps" % ns
        mirror = WatchMirror(self.channel, self.pb, "configmaps", ns)
        try:
            wait_until(lambda: mirror.snapshot()[0], "initial state")
            for i in range(20):
                self.cp.api("POST", path, self.configmap("live-%02d" % i, i))
            for i in range(0, 20, 3):
                cm = self.cp.api("GET", path + "/live-%02d" % i)
                cm["data"]["value"] = "changed"
                cm["metadata"]["labels"]["changed"] = "yes"
                self.cp.api("PUT", path + "/live-%02d" % i, cm)
            for i in range(1, 20, 4):
                self.cp.api("DELETE", path + "/live-%02d" % i)
            objects = self.mirror_matches_server(mirror, "configmaps", ns)
        finally:
            mirror.close()
        self.assertEqual(len(objects), 15)
        self.assertEqual(objects["live-03"]["data"]["value"], "changed")

    def test_pod_live_events_match_the_server(self):
        ns = LIVE_NS
        path = "/api/v1/namespaces/%s/pods" % ns
        mirror = WatchMirror(self.channel, self.pb, "pods", ns)
        try:
            wait_until(lambda: mirror.snapshot()[0], "initial state")
            for i in range(6):
                self.cp.api("POST", path, self.pod("p%d" % i))
            pod = self.cp.api("GET", path + "/p2")
            pod["metadata"]["labels"]["tier"] = "gold"
            self.cp.api("PUT", path + "/p2", pod)
            self.cp.api("DELETE", path + "/p4")
            objects = self.mirror_matches_server(mirror, "pods", ns)
        finally:
            mirror.close()
        self.assertEqual(sorted(objects), ["p0", "p1", "p2", "p3", "p5"])
        self.assertEqual(objects["p2"]["metadata"]["labels"]["tier"], "gold")
        self.assertEqual(objects["p0"]["spec"]["serviceAccountName"],
                         "default")

    def grpcurl(self, *args):
        out = subprocess.run(
            [os.path.join(self.bin_dir, "grpcurl"), "-plaintext", "-unix",
             "-max-time", "30"] + list(args[:-1]) +
            [self.sidecar.socket, args[-1]],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout

    def test_real_grpcurl_calls_health_and_list(self):
        health = json.loads(self.grpcurl("grpc.health.v1.Health/Check"))
        self.assertEqual(health, {"status": "SERVING"})
        listed = json.loads(self.grpcurl(
            "-d", json.dumps({"resource": "configmaps",
                              "namespace": SYNC_NS,
                              "encoding": "ENCODING_STRUCT"}),
            "informer.v1.Informer/List"))
        names = sorted(o["struct"]["metadata"]["name"]
                       for o in listed["objects"])
        self.assertEqual(names, sorted(self.server_objects("configmaps",
                                                           SYNC_NS)))

    def test_zz_recovers_after_compaction_and_an_api_server_restart(self):
        # Runs last (unittest sorts by name): the sidecar's watches are cut
        # and resume against history that etcd no longer has.
        ns = SYNC_NS
        path = "/api/v1/namespaces/%s/configmaps" % ns
        mirror = WatchMirror(self.channel, self.pb, "configmaps", ns)
        try:
            wait_until(lambda: mirror.snapshot()[0], "initial state")
            for i in range(5):
                cm = self.cp.api("GET", path + "/seed-%02d" % i)
                cm["data"]["value"] = "before-restart"
                self.cp.api("PUT", path + "/seed-%02d" % i, cm)
            self.cp.compact_etcd()
            self.cp.restart_apiserver()
            self.cp.api("DELETE", path + "/seed-39")
            self.cp.api("POST", path, self.configmap("after-restart", 7))
            objects = self.mirror_matches_server(mirror, "configmaps", ns)
        finally:
            mirror.close()
        self.assertIn("after-restart", objects)
        self.assertNotIn("seed-39", objects)
        self.assertEqual(objects["seed-00"]["data"]["value"],
                         "before-restart")
        self.assertIsNone(self.sidecar.process.poll(),
                          "the sidecar exited")


if __name__ == "__main__":
    unittest.main()
