"""Apps' Watch resume tokens across a sidecar restart, against the real
kube-apiserver v1.37: the real informer_sidecar with --cache_dir serves
ConfigMaps to the installed Python SDK's RemoteInformer (its own process,
the SDK's defaults) on a Unix socket; the sidecar stops (SIGTERM: the
snapshot and its Watch history written), the cluster changes while it is
down (two ConfigMaps changed, one deleted, one created), and a sidecar
starts again on the same socket and directory. The informer resumes with
its last token: the new sidecar loads the history, catches up from the
snapshot's resourceVersion inside the server's watch window, and the
mirror hears exactly those four changes, in the server's order, once each,
no RESET (whose reconciliation would report the deletion as a tombstone
and the changes in key order), and ends equal to the server object by
object. A change after the restart is an ordinary event too.

Every wait polls a condition against a deadline.
"""

import os
import sys
import unittest

import real_sidecar
from real_sidecar import Cluster, SdkMirror, comparable, wait_for

NAMESPACE = "resume"
CONFIGMAPS = 12


def body(name, value):
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name}, "data": {"v": value}}


class RealWatchResumeRestartTest(unittest.TestCase):

    def setUp(self):
        cluster = Cluster("rwr").attach(self)
        self.addCleanup(cluster.close)
        cluster.view_namespace(NAMESPACE)
        cluster.create_configmaps(
            NAMESPACE, [body("cm-%02d" % i, "0") for i in range(CONFIGMAPS)])
        self.flags = ["--resources=configmaps",
                      "--cache_dir=" + os.path.join(self.tmp, "cache"),
                      "--cache_snapshot_interval=0"]

    def patch(self, name, value):
        self.cluster.kubectl("-n", NAMESPACE, "patch", "configmap", name,
                             "--type=merge", "-p",
                             '{"data":{"v":"%s"}}' % value)

    def mirror_equals_server(self, mirror):
        state = mirror.state()
        server = real_sidecar.server_objects(self.cp, "configmaps", NAMESPACE)
        mirrored = {name: comparable(obj)
                    for name, obj in state["objects"].items()}
        return state if state["synced"] and mirrored == server else None

    def test_sdk_mirror_resumes_without_reset(self):
        first = self.cluster.sidecar("sidecar", self.flags)
        python = real_sidecar.install_python_sdk(self.tmp)
        mirror = SdkMirror(python, "unix:" + first.socket, "configmaps",
                           NAMESPACE, os.path.join(self.tmp, "mirror.log"))
        self.cluster.on_close(mirror.close)
        wait_for(lambda: mirror.state()["synced"], "the mirror's sync")
        self.patch("cm-00", "1")
        state = wait_for(lambda: self.mirror_equals_server(mirror),
                         "the mirror to follow a change")
        before = len(state["events"])
        first.stop()

        self.patch("cm-07", "down")
        self.patch("cm-02", "down")
        self.cluster.kubectl("-n", NAMESPACE, "delete", "configmap", "cm-05")
        self.cluster.create_configmaps(NAMESPACE, [body("cm-new", "down")])

        second = self.cluster.sidecar("sidecar", self.flags)
        self.assertEqual(second.socket, first.socket)
        self.assertIn("Watch history loaded", second.log())
        state = wait_for(lambda: self.mirror_equals_server(mirror),
                         "the mirror to catch up after the restart")
        self.assertEqual(state["events"][before:],
                         [["MODIFIED", "cm-07", False],
                          ["MODIFIED", "cm-02", False],
                          ["DELETED", "cm-05", False],
                          ["ADDED", "cm-new", False]])

        self.patch("cm-01", "after")
        state = wait_for(lambda: self.mirror_equals_server(mirror),
                         "the mirror to follow a change after the restart")
        self.assertEqual(state["events"][before + 4:],
                         [["MODIFIED", "cm-01", False]])


if __name__ == "__main__":
    if not os.environ.get("REALKUBE_BIN"):
        sys.exit("REALKUBE_BIN must name the real control plane's binaries")
    unittest.main()
