"""The real informer_sidecar binary with --kube_api_listen, read by kubectl
and by raw HTTP: discovery of a named group (apps), lists, a watch that sees
the demo cluster's churn, and an orderly SIGTERM."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import unittest
import urllib.request

SIDECAR = os.path.join(os.getcwd(), "server", "informer_sidecar")
SERVING = re.compile(r"Kubernetes API facade serving (\d+) resources on "
                     r"(http://[0-9.]+:\d+)")


class SidecarKubeApiTest(unittest.TestCase):

    def setUp(self):
        self.proc = subprocess.Popen(
            [SIDECAR, "--demo", "--resources=pods,configmaps,deployments.apps",
             "--grpc_listen=127.0.0.1:0", "--http_listen=",
             "--kube_api_listen=127.0.0.1:0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.base = None
        for line in self.proc.stderr:
            m = SERVING.search(line)
            if m:
                self.assertEqual(m.group(1), "3")
                self.base = m.group(2)
                break
        self.assertIsNotNone(self.base, "the sidecar never served the facade")
        # Keep draining the log so the sidecar never blocks on stderr.
        self.drain = threading.Thread(target=self.proc.stderr.read, daemon=True)
        self.drain.start()
        self.cache = tempfile.mkdtemp()

    def tearDown(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.cache)

    def kubectl(self, *args):
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            self.fail("kubectl is not installed (Debian: kubernetes-client)")
        return subprocess.run(
            [kubectl, "--server=" + self.base, "--cache-dir=" + self.cache,
             *args], capture_output=True, text=True, timeout=60)

    def test_kubectl_and_watch_then_sigterm(self):
        # The first request waits for the caches to sync, as the API server's.
        with urllib.request.urlopen(self.base + "/api/v1/pods", timeout=60) as r:
            pods = json.loads(r.read())
        self.assertEqual(pods["kind"], "PodList")
        self.assertGreater(len(pods["items"]), 0)
        out = self.kubectl("get", "deployments", "-A", "-o", "name")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertTrue(out.stdout.startswith("deployment.apps/"), out.stdout)
        out = self.kubectl("api-resources", "--no-headers")
        self.assertEqual(sorted(l.split()[0] for l in out.stdout.splitlines()),
                         ["configmaps", "deployments", "pods"])
        # A watch from the list's resourceVersion sees the demo's churn.
        rv = pods["metadata"]["resourceVersion"]
        s = socket.create_connection(
            ("127.0.0.1", int(self.base.rsplit(":", 1)[1])), timeout=30)
        s.sendall(("GET /api/v1/pods?watch=1&resourceVersion=%s HTTP/1.1\r\n"
                   "Host: x\r\n\r\n" % rv).encode())
        f = s.makefile("rb")
        self.assertEqual(f.readline(), b"HTTP/1.1 200 OK\r\n")
        while f.readline() != b"\r\n":
            pass
        size = int(f.readline().decode().strip(), 16)
        event = json.loads(f.read(size))
        self.assertIn(event["type"], ("ADDED", "MODIFIED", "DELETED"))
        self.assertGreater(int(event["object"]["metadata"]["resourceVersion"]),
                           int(rv))
        # SIGTERM with a watch open: an orderly exit.
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=60), 0)
        s.close()


if __name__ == "__main__":
    unittest.main()
