"""A forced 410 on the real kube-apiserver v1.37: the real informer_sidecar
is frozen (SIGSTOP) and the API server restarted once, which closes the
sidecar's watch before anything changes (a change sent before that would
wait in the frozen process's socket buffer and be applied on resume).
Objects then change, etcd is compacted, and the API server is restarted
again, so its watch cache starts after the compaction. Thawed (SIGCONT),
the sidecar re-watches from its last resourceVersion, which the server no
longer has: the re-watch gets 410, the sidecar relists once, and its cache
equals the server object by object.
"""

import os
import subprocess
import tempfile
import time
import unittest

import real_sidecar
import real_sidecar_smoke_test as smoke
from real_sidecar import RealSidecar

import control_plane  # noqa: E402  (on sys.path through the smoke test)

NS = "forced-410"
RELISTS = "informer_sidecar_informer_relists_total"
ERRORS = "informer_sidecar_informer_errors_total"


class ForcedRelistAgainstRealServerTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rk410", dir="/tmp")
        self.pb = smoke.generate_messages(self.tmp)
        self.cp = control_plane.ControlPlane(os.environ["REALKUBE_BIN"])
        self.cp.start()
        self.sidecar = None

    def tearDown(self):
        if self.sidecar is not None:
            self.sidecar.stop()
        self.cp.stop()
        subprocess.run(["rm", "-rf", self.tmp], check=False)

    def path(self, name=""):
        return "/api/v1/namespaces/%s/configmaps%s" % (
            NS, "/" + name if name else "")

    def cache_matches_server(self):
        expected = real_sidecar.server_objects(self.cp, "configmaps", NS)
        cached = real_sidecar.grpc_list(self.sidecar.channel, self.pb,
                                        "configmaps", NS)
        return (expected, cached) if expected == cached else None

    def test_relists_once_after_a_410_and_matches_the_server(self):
        self.cp.bind_cluster_role(control_plane.UNPRIVILEGED_USER, "view")
        self.cp.create_namespace(NS)
        for i in range(20):
            self.cp.api("POST", self.path(),
                        {"metadata": {"name": "cm-%02d" % i},
                         "data": {"v": "initial"}})
        self.sidecar = RealSidecar(
            os.path.join(self.tmp, "sidecar"), self.cp.user_kubeconfig,
            ["--resources=configmaps", "--namespace=" + NS]).start()
        real_sidecar.wait_for(self.cache_matches_server, "the initial sync")
        relists = self.sidecar.metric(RELISTS, resource="configmaps")
        expired = self.sidecar.metric(ERRORS, resource="configmaps",
                                      kind="http_410")
        self.assertEqual(relists, 0)

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
        self.sidecar.thaw()

        expected, cached = real_sidecar.wait_for(
            self.cache_matches_server, "the cache to match the server")
        self.assertEqual(len(expected), 21)
        self.assertEqual(sorted(expected), sorted(cached))
        for name in expected:
            self.assertEqual(expected[name], cached[name], name)
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


if __name__ == "__main__":
    unittest.main()
