"""Chained sidecars on the real kube-apiserver v1.37 under churn and
restarts: a node sidecar serves its cache on the Kubernetes API facade
(--kube_api_listen, a fixed port), a pod sidecar reads it
(--cache_upstream), while a thread creates, updates and deletes ConfigMaps
through the real API without pause. Meanwhile the node sidecar is restarted
(twice) and so is the API server. Once the churn stops, the pod sidecar's
cache equals the server object by object (as does the node's), and the pod
sidecar never restarted. The pod sidecar talks to the API server as
another user (the admin: discovery only), and the API server's audit log
shows it never listed or watched ConfigMaps there: all of that went to the
facade. Every wait polls a condition against a deadline.
"""

import json
import random
import sys
import threading
import unittest
import urllib.error

import real_sidecar

import control_plane  # noqa: E402  (on sys.path through real_sidecar)

NS = "chain"
SEED = 30
OPS_PER_STEP = 40
TIMEOUT = 120.0


class Churn:
    """Creates, updates and deletes ConfigMaps in NS on a thread until
    stopped; API errors (an API server restarting, a conflict) are counted
    and the loop goes on."""

    def __init__(self, cp, names):
        self.cp = cp
        self.names = list(names)
        self.ops = 0
        self.errors = 0
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.rng = random.Random(32)
        self.next_id = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def count(self):
        with self.lock:
            return self.ops

    def _path(self, name=""):
        return "/api/v1/namespaces/%s/configmaps%s" % (
            NS, "/" + name if name else "")

    def _one(self):
        roll = self.rng.random()
        if roll < 0.3 or len(self.names) < 5:
            name = "churn-%04d" % self.next_id
            self.next_id += 1
            self.cp.api("POST", self._path(), {
                "metadata": {"name": name}, "data": {"v": "0"}})
            self.names.append(name)
        elif roll < 0.8:
            name = self.rng.choice(self.names)
            cm = self.cp.api("GET", self._path(name))
            cm["data"] = {"v": str(self.rng.randrange(1 << 30))}
            self.cp.api("PUT", self._path(name), cm)
        else:
            name = self.names.pop(self.rng.randrange(len(self.names)))
            self.cp.api("DELETE", self._path(name))

    def _run(self):
        # Paced lightly (not a wait for a condition): two busy cores.
        while not self.stop_event.wait(0.01):
            try:
                self._one()
                with self.lock:
                    self.ops += 1
            except (OSError, urllib.error.HTTPError, ValueError):
                with self.lock:
                    self.errors += 1

    def stop(self):
        self.stop_event.set()
        self.thread.join(timeout=60)


class ChainedSidecarsUnderChurnTest(real_sidecar.ClusterTest):

    CLUSTER_PREFIX = "rkch"
    CLUSTER_AUDIT = True

    @classmethod
    def populate(cls):
        cls.cluster.view_namespace(NS)
        cls.cluster.create_configmaps(NS, [
            {"metadata": {"name": "seed-%02d" % i}, "data": {"v": str(i)}}
            for i in range(SEED)])
        cls.facade_port = control_plane.free_port()

    def start_node(self, run):
        self.node = self.cluster.sidecar(
            "node-%d" % run,
            ["--resources=configmaps", "--namespace=" + NS,
             "--kube_api_listen=127.0.0.1:%d" % self.facade_port])

    def churn_on(self, what):
        target = self.churn.count() + OPS_PER_STEP
        real_sidecar.wait_for(lambda: self.churn.count() >= target,
                              "%d more changes %s" % (OPS_PER_STEP, what),
                              timeout=TIMEOUT)

    def pod_requests_on_the_server(self):
        """What the admin asked with a user agent other than this test's
        (urllib): the pod sidecar's requests, (verb, resource, uri)."""
        out = []
        with open(self.audit.path) as f:
            for line in f:
                e = json.loads(line)
                if (e["user"].get("username") == control_plane.ADMIN_USER and
                        e.get("stage") == "ResponseComplete" and
                        not e.get("userAgent", "").startswith("Python")):
                    out.append((e["verb"],
                                (e.get("objectRef") or {}).get("resource"),
                                e["requestURI"]))
        return out

    def test_the_chained_cache_ends_equal_to_the_server(self):
        self.start_node(0)
        pod = self.cluster.sidecar(
            "pod", ["--resources=configmaps", "--namespace=" + NS,
                    "--cache_upstream=http://127.0.0.1:%d" % self.facade_port],
            kubeconfig=self.cp.admin_kubeconfig)
        pid = pod.process.pid
        names = ["seed-%02d" % i for i in range(SEED)]
        self.churn = Churn(self.cp, names).start()
        self.cluster.on_close(self.churn.stop)

        self.churn_on("before any restart")
        self.node.stop()
        self.churn_on("while the node sidecar is down")
        self.start_node(1)
        self.churn_on("after the node sidecar restarted")
        self.cp.restart_apiserver()
        self.churn_on("after the API server restarted")
        self.node.stop()
        self.start_node(2)
        self.churn_on("after the node sidecar restarted again")
        self.churn.stop()

        state = {}

        def equal(sidecar):
            state["server"] = real_sidecar.server_objects(self.cp,
                                                          "configmaps", NS)
            state["cache"] = real_sidecar.grpc_list(sidecar.channel, self.pb,
                                                    "configmaps", NS)
            return state["cache"] == state["server"]
        for name, sidecar in (("node", self.node), ("pod", pod)):
            try:
                real_sidecar.wait_for(lambda: equal(sidecar),
                                      "the %s sidecar equal to the server" %
                                      name, timeout=TIMEOUT)
            finally:
                self.assertEqual(sorted(state["cache"]),
                                 sorted(state["server"]), name)
                for key in state["server"]:
                    self.assertEqual(state["cache"][key],
                                     state["server"][key], key)
        self.assertEqual(pod.process.pid, pid)
        self.assertIsNone(pod.process.poll())
        self.assertGreater(len(state["server"]), 0)
        requests = self.pod_requests_on_the_server()
        self.assertTrue(requests)  # its discovery
        self.assertEqual([r for r in requests if r[1] == "configmaps"], [],
                         requests)
        sys.stderr.write(
            "churn: %d changes, %d refused during restarts; pod sidecar: "
            "%d lists, %d relists, %d watch restarts\n" % (
                self.churn.ops, self.churn.errors,
                pod.metric("informer_sidecar_informer_lists_total",
                           resource="configmaps"),
                pod.metric("informer_sidecar_informer_relists_total",
                           resource="configmaps"),
                pod.metric("informer_sidecar_informer_watch_restarts_total",
                           resource="configmaps")))


if __name__ == "__main__":
    unittest.main()
