"""The sidecar's Kubernetes API facade (--kube_api_listen) in front of the
real kube-apiserver v1.37, read by real clients as they are:

- kubectl v1.37.2: list, get, label and field selectors, paging
  (--chunk-size, the continue tokens seen in kubectl's own request log),
  each answer compared with what kubectl gets from the real server, and
  `kubectl get -w` seeing a change made on the real server;
- client-go v0.37.2 (kube-informer-bench) with its WatchListClient gate on:
  the facade refuses WatchList (422) as a server without it does, and
  client-go falls back to a LIST and syncs every object;
- a second sidecar chained to the first one's facade (--cache_upstream):
  its cache equals the real server's, and it fell back from WatchList.
"""

import json
import os
import queue
import subprocess
import threading
import time
import unittest

import real_sidecar

NS = "facade"
OBJECTS = 25
FACADE_REQUESTS = "informer_sidecar_kube_api_requests_total"


class FacadeWithRealClientsTest(real_sidecar.ClusterTest):

    CLUSTER_PREFIX = "rkfc"

    @classmethod
    def populate(cls):
        cls.cluster.view_namespace(NS)
        cls.cluster.create_configmaps(NS, [
            {"metadata": {"name": "cm-%02d" % i,
                          "labels": {"tier": "ab"[i % 2]}},
             "data": {"n": str(i)}} for i in range(OBJECTS)])
        cls.sidecar = cls.cluster.sidecar(
            "node", ["--resources=configmaps", "--namespace=" + NS,
                     "--kube_api_listen=127.0.0.1:0"])
        cls.facade = cls.sidecar.facade()
        cls.facade_kubeconfig = real_sidecar.write_kubeconfig(
            os.path.join(cls.tmp, "facade.kubeconfig"), cls.facade)

    def kubectl(self, kubeconfig, *args, stderr=False):
        return self.cluster.kubectl(*args, kubeconfig=kubeconfig,
                                    stderr=stderr)

    def both(self, *args):
        """kubectl -o json against the facade and against the real server:
        (facade's, server's) items as name -> comparable object."""
        def items(text):
            doc = json.loads(text)
            objs = doc["items"] if "items" in doc else [doc]
            return {o["metadata"]["name"]: real_sidecar.comparable(o)
                    for o in objs}
        return (items(self.kubectl(self.facade_kubeconfig, *args, "-o",
                                   "json")),
                items(self.kubectl(self.cp.admin_kubeconfig, *args, "-o",
                                   "json")))

    def assert_same(self, facade, server, expected_count):
        self.assertEqual(len(server), expected_count)
        self.assertEqual(sorted(facade), sorted(server))
        for name in server:
            self.assertEqual(facade[name], server[name], name)

    def wait_cached(self, name, value):
        real_sidecar.wait_for(
            lambda: real_sidecar.grpc_list(
                self.sidecar.channel, self.pb, "configmaps", NS).get(
                    name, {}).get("data", {}).get("n") == value,
            "%s=%s in the sidecar" % (name, value))

    def test_list_get_and_selectors_match_the_server(self):
        self.assert_same(*self.both("get", "configmaps", "-n", NS), OBJECTS)
        self.assert_same(*self.both("get", "configmap", "cm-03", "-n", NS),
                         1)
        self.assert_same(*self.both("get", "cm", "-n", NS, "-l", "tier=a"),
                         (OBJECTS + 1) // 2)
        self.assert_same(*self.both("get", "cm", "-n", NS, "-l",
                                    "tier!=a,tier"), OBJECTS // 2)
        self.assert_same(*self.both("get", "cm", "-n", NS,
                                    "--field-selector",
                                    "metadata.name=cm-05"), 1)
        self.assert_same(*self.both("get", "cm", "-n", NS,
                                    "--field-selector",
                                    "metadata.name!=cm-05"), OBJECTS - 1)

    def test_paging_with_chunk_size(self):
        out, log = self.kubectl(self.facade_kubeconfig, "get", "cm", "-n",
                                NS, "--chunk-size=4", "-o", "name", "-v=6",
                                stderr=True)
        names = sorted(line.split("/", 1)[1] for line in out.split())
        self.assertEqual(names, sorted(real_sidecar.server_objects(
            self.cp, "configmaps", NS)))
        pages = [line for line in log.splitlines()
                 if "limit=4" in line and "GET" in line]
        # 25 objects in pages of 4: 7 requests, 6 with a continue token.
        self.assertEqual(len(pages), 7, log)
        self.assertEqual(len([p for p in pages if "continue=" in p]), 6, log)

    def test_kubectl_get_w_sees_a_change_on_the_server(self):
        path = "/api/v1/namespaces/%s/configmaps/cm-07" % NS
        watch = subprocess.Popen(
            [os.path.join(self.bin_dir, "kubectl"),
             "--kubeconfig=" + self.facade_kubeconfig, "get", "cm", "cm-07",
             "-n", NS, "-w", "--output-watch-events", "-o", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        events = queue.Queue()

        def read():
            decoder, buf = json.JSONDecoder(), ""
            for line in watch.stdout:
                buf += line
                try:
                    obj, end = decoder.raw_decode(buf.strip())
                except ValueError:
                    continue
                events.put(obj)
                buf = buf.strip()[end:]
        threading.Thread(target=read, daemon=True).start()
        try:
            first = events.get(timeout=60)
            self.assertEqual(first["type"], "ADDED")
            self.assertEqual(first["object"]["metadata"]["name"], "cm-07")
            cm = self.cp.api("GET", path)
            cm["data"]["n"] = "changed"
            updated = self.cp.api("PUT", path, cm)
            deadline = time.monotonic() + 60
            while True:
                event = events.get(
                    timeout=max(0.1, deadline - time.monotonic()))
                if event["type"] == "MODIFIED":
                    break
            self.assertEqual(event["object"]["data"]["n"], "changed")
            self.assertEqual(event["object"]["metadata"]["resourceVersion"],
                             updated["metadata"]["resourceVersion"])
        finally:
            watch.terminate()
            watch.wait(timeout=30)
            watch.stdout.close()
            watch.stderr.close()
            cm = self.cp.api("GET", path)
            cm["data"]["n"] = "7"
            self.cp.api("PUT", path, cm)
            self.wait_cached("cm-07", "7")

    def test_client_go_watch_list_falls_back_to_a_list(self):
        before = self.sidecar.metrics()
        env = dict(os.environ, KUBE_FEATURE_WatchListClient="true")
        out = subprocess.run(
            [os.path.join(self.bin_dir, "kube-informer-bench"),
             "--kubeconfig=" + self.facade_kubeconfig,
             "--resource=v1/configmaps", "--namespace=" + NS],
            capture_output=True, text=True, timeout=120, env=env,
            check=False)
        self.assertEqual(out.returncode, 0, out.stderr)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        self.assertEqual(result["objects"], OBJECTS)
        after = self.sidecar.metrics()

        def delta(code, verb=None):
            total = 0.0
            for (name, labels), value in after.items():
                labels = dict(labels)
                if (name != FACADE_REQUESTS or
                        labels.get("resource") != "configmaps" or
                        labels.get("code") != code or
                        (verb is not None and labels.get("verb") != verb)):
                    continue
                total += value - before.get((name, frozenset(
                    labels.items())), 0.0)
            return total
        # The WatchList request refused as a server without WatchList
        # refuses it, then the LIST client-go fell back to.
        self.assertGreaterEqual(delta("422"), 1, after)
        self.assertGreaterEqual(delta("200", "list"), 1, after)

    def test_a_sidecar_chained_to_the_facade_matches_the_server(self):
        chained = self.cluster.sidecar(
            "chained", ["--resources=configmaps", "--namespace=" + NS,
                        "--cache_upstream=" + self.facade])
        try:
            expected = real_sidecar.server_objects(self.cp, "configmaps", NS)
            cached = real_sidecar.grpc_list(chained.channel, self.pb,
                                            "configmaps", NS)
            self.assert_same(cached, expected, OBJECTS)
            self.assertIn("does not support WatchList", chained.log())
        finally:
            chained.stop()


if __name__ == "__main__":
    unittest.main()
