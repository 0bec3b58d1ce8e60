"""Bookmarks through the sidecar's Kubernetes API facade, read by the real
kubectl v1.37.2 (`kubectl get --raw` on a watch with allowWatchBookmarks,
client-go's REST client underneath), next to the same watch on the real
kube-apiserver v1.37:

- both streams carry the change made during the watch, then a BOOKMARK
  before the timeout ends;
- the facade's BOOKMARK has the server's shape: {"type", "object"} with the
  kind's empty object (kind, apiVersion, metadata.resourceVersion only);
- its resourceVersion is valid: a number at or past the change's, and no
  newer than the server's own at the end (a version the facade really
  reached);
- a watch from the bookmark's resourceVersion on the facade is accepted
  and quiet until the next change, which it carries (a client resuming
  from a bookmark misses nothing).
"""

import json
import os
import subprocess
import threading
import unittest

import real_sidecar

NS = "bookmarks"
# The API server bookmarks a watch 2 s before its timeout, in buckets of a
# second, and only past the watch's start version; below ~10 s its
# pre-timeout bookmark can miss the end.
WATCH_SECONDS = 12


class FacadeBookmarksTest(real_sidecar.ClusterTest):

    CLUSTER_PREFIX = "rkbm"

    @classmethod
    def populate(cls):
        cls.cluster.view_namespace(NS)
        cls.cluster.create_configmaps(NS, [
            {"metadata": {"name": "cm-%d" % i}, "data": {"n": str(i)}}
            for i in range(3)])
        cls.sidecar = cls.cluster.sidecar(
            "node", ["--resources=configmaps", "--namespace=" + NS,
                     "--kube_api_listen=127.0.0.1:0"])
        cls.facade_kubeconfig = real_sidecar.write_kubeconfig(
            os.path.join(cls.tmp, "facade.kubeconfig"),
            cls.sidecar.facade())

    def start_watch(self, kubeconfig, rv):
        """`kubectl get --raw` of a bookmarked watch from `rv`, ending after
        WATCH_SECONDS; returns the process."""
        uri = ("/api/v1/namespaces/%s/configmaps?watch=1&"
               "allowWatchBookmarks=true&timeoutSeconds=%d&"
               "resourceVersion=%s" % (NS, WATCH_SECONDS, rv))
        return subprocess.Popen(
            [os.path.join(self.bin_dir, "kubectl"),
             "--kubeconfig=" + kubeconfig, "get", "--raw", uri],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    @staticmethod
    def finish(watch):
        out, err = watch.communicate(timeout=WATCH_SECONDS + 60)
        assert watch.returncode == 0, err
        decoder, events, text = json.JSONDecoder(), [], out.strip()
        while text:
            event, end = decoder.raw_decode(text)
            events.append(event)
            text = text[end:].strip()
        return events

    def wait_facade_at(self, rv):
        """Until the facade's list is at `rv` or later."""
        def at():
            out = self.cluster.kubectl(
                "get", "--raw", "/api/v1/namespaces/%s/configmaps" % NS,
                kubeconfig=self.facade_kubeconfig)
            listed = json.loads(out)["metadata"]["resourceVersion"]
            return int(listed) >= int(rv)
        real_sidecar.wait_for(at, "the facade at %s" % rv)

    def server_watches(self):
        """Open ConfigMap watches on the API server (its /metrics)."""
        total = 0.0
        for line in self.cp.api("GET", "/metrics").splitlines():
            if (line.startswith("apiserver_longrunning_requests{") and
                    'resource="configmaps"' in line and
                    'verb="WATCH"' in line):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def change(self, name, value):
        path = "/api/v1/namespaces/%s/configmaps/%s" % (NS, name)
        cm = self.cp.api("GET", path)
        cm["data"]["n"] = value
        return self.cp.api("PUT", path, cm)["metadata"]["resourceVersion"]

    def test_facade_bookmarks_have_the_server_shape_and_a_valid_rv(self):
        start_rv = self.cp.api("GET", "/api/v1/namespaces/%s/configmaps" %
                               NS)["metadata"]["resourceVersion"]
        self.wait_facade_at(start_rv)
        # The API server bookmarks a watch only once something was
        # dispatched after it registered (a watch whose replay brought it to
        # the cache's version gets none): change only once it is open.
        open_before = self.server_watches()
        watches = {"server": self.start_watch(self.cp.admin_kubeconfig,
                                              start_rv)}
        real_sidecar.wait_for(
            lambda: self.server_watches() > open_before,
            "kubectl's watch open on the API server")
        watches["facade"] = self.start_watch(self.facade_kubeconfig,
                                             start_rv)
        changed_rv = self.change("cm-1", "during the watch")
        results = {}

        def collect(name):
            results[name] = self.finish(watches[name])
        threads = [threading.Thread(target=collect, args=(n,))
                   for n in watches]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=WATCH_SECONDS + 90)
        end_rv = self.cp.api("GET", "/api/v1/namespaces/%s/configmaps" %
                             NS)["metadata"]["resourceVersion"]

        shapes = {}
        for name, events in results.items():
            types = [e["type"] for e in events]
            self.assertEqual(types[0], "MODIFIED", (name, events))
            self.assertEqual(
                events[0]["object"]["metadata"]["resourceVersion"],
                changed_rv, name)
            self.assertIn("BOOKMARK", types, (name, events))
            self.assertEqual(set(types), {"MODIFIED", "BOOKMARK"},
                             (name, events))
            bookmark = [e for e in events if e["type"] == "BOOKMARK"][-1]
            rv = bookmark["object"]["metadata"]["resourceVersion"]
            self.assertRegex(rv, r"^[1-9][0-9]*$", name)
            self.assertGreaterEqual(int(rv), int(changed_rv), name)
            self.assertLessEqual(int(rv), int(end_rv), name)
            metadata = dict(bookmark["object"]["metadata"])
            if name == "facade":
                # The facade writes v1.24's bookmark (Go's zero
                # creationTimestamp as null, the byte-exact captures under
                # testdata/kube-apiserver-v1.24/); v1.37 omits it. Only
                # that: clients read the resourceVersion alone.
                self.assertIn("creationTimestamp", metadata)
                self.assertIsNone(metadata.pop("creationTimestamp"))
            shapes[name] = {
                "event": sorted(bookmark),
                "object": sorted(bookmark["object"]),
                "metadata": sorted(metadata),
                "kind": bookmark["object"]["kind"],
                "apiVersion": bookmark["object"]["apiVersion"]}
        self.assertEqual(shapes["facade"], shapes["server"])
        self.assertEqual(shapes["facade"]["metadata"], ["resourceVersion"])

        # Resuming from the facade's bookmark: accepted, then exactly the
        # next change.
        bookmark_rv = [e for e in results["facade"]
                       if e["type"] == "BOOKMARK"][-1]["object"][
                           "metadata"]["resourceVersion"]
        resumed = self.start_watch(self.facade_kubeconfig, bookmark_rv)
        next_rv = self.change("cm-2", "after the bookmark")
        events = self.finish(resumed)
        changes = [e for e in events if e["type"] != "BOOKMARK"]
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"],
                           e["object"]["metadata"]["resourceVersion"])
                          for e in changes],
                         [("MODIFIED", "cm-2", next_rv)], events)


if __name__ == "__main__":
    unittest.main()
