"""End-to-end tests of the Kubernetes API facade with plain HTTP clients.

A process (kube_api_e2e_server) runs the API server emulator as the
upstream and the facade wired as in the sidecar. Objects are written to the
emulator; the facade is read with Python's urllib, raw sockets (to see the
HTTP/1.1 chunk framing) and kubectl. Where the API server's form is fixed
(envelopes, Status bodies, watch framing) answers are compared byte for byte
with the emulator's and with the real API server's captures in
testdata/kube-apiserver-v1.24.
"""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
BINARY = os.path.join(HERE, "kube_api_e2e_server")
CAPTURES = os.path.join(os.getcwd(), "testdata", "kube-apiserver-v1.24")
UA = "kube-api-facade-e2e"  # not curl: the API server pretty-prints for curl


def capture_body(name):
    with open(os.path.join(CAPTURES, name)) as f:
        return f.read().split("\n\nHTTP ")[0]


class Process:
    """The e2e server process; stopped by closing its stdin."""

    def __init__(self, *flags):
        self.proc = subprocess.Popen(
            [BINARY, "--kube_api_listen=127.0.0.1:0", *flags],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("kube_api_e2e_server did not start")
        info = json.loads(line)
        self.port = info["facade"]
        self.base = "http://127.0.0.1:%d" % self.port
        self.emulator = info["emulator"]

    def metrics(self):
        self.proc.stdin.write("metrics\n")
        self.proc.stdin.flush()
        lines = []
        while True:
            line = self.proc.stdout.readline()
            if line.strip() == "END" or not line:
                return "".join(lines)
            lines.append(line)

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self.proc.stdout.close()


def request(url, method="GET", body=None, headers=None):
    """(code, headers, body text) of one request; HTTP errors included."""
    h = {"User-Agent": UA}
    h.update(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(url, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def raw_watch(port, target):
    """A watch over a raw socket: returns (socket file, status line, headers)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nUser-Agent: %s\r\n\r\n" %
               (target, UA)).encode())
    f = s.makefile("rb")
    status = f.readline().decode().rstrip("\r\n")
    headers = {}
    while True:
        line = f.readline().decode().rstrip("\r\n")
        if not line:
            break
        k, v = line.split(":", 1)
        headers[k.lower()] = v.strip()
    return s, f, status, headers


def read_chunk(f):
    """One HTTP/1.1 chunk's data (b"" for the final chunk)."""
    size = int(f.readline().decode().strip(), 16)
    data = f.read(size)
    assert f.read(2) == b"\r\n"
    return data


class FacadeTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.p = Process("--resources=configmaps,pods", "--kube_api_history=50")
        cls.create_cm("demo", "cm-0000", {"app": "demo"})
        cls.create_cm("demo", "cm-0001", {"app": "demo"})
        cls.create_cm("demo", "cm-0002", {"app": "other"})
        cls.create_cm("kube-system", "cm-0003", {})
        for i in range(3):
            cls.create_cm("paging", "cm-%04d" % i, {})

    @classmethod
    def tearDownClass(cls):
        cls.p.stop()

    @classmethod
    def create_cm(cls, ns, name, labels):
        code, _, body = request(
            "%s/api/v1/namespaces/%s/configmaps" % (cls.p.emulator, ns), "POST",
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
        assert code == 201, body
        return json.loads(body)["metadata"]["resourceVersion"]

    def facade(self, path, **kw):
        return request(self.p.base + path, **kw)

    def synced(self, path):
        """GET `path` from the facade once its cache has the emulator's
        current resourceVersion (NotOlderThan), and the same from the
        emulator."""
        _, _, up = request(self.p.emulator + "/api/v1/configmaps?limit=1")
        rv = json.loads(up)["metadata"]["resourceVersion"]
        code, _, body = self.facade(
            "/api/v1/configmaps?resourceVersionMatch=NotOlderThan"
            "&resourceVersion=%s" % rv)
        self.assertEqual(code, 200, body)
        return self.facade(path), request(self.p.emulator + path)

    def test_discovery(self):
        code, headers, body = self.facade("/api/v1")
        self.assertEqual(code, 200)
        self.assertEqual(headers["Content-Type"], "application/json")
        doc = json.loads(body)
        self.assertEqual([r["name"] for r in doc["resources"]],
                         ["configmaps", "pods"])
        for r in doc["resources"]:
            self.assertEqual(r["verbs"], ["get", "list", "watch"])
        self.assertTrue(body.startswith(
            '{"kind":"APIResourceList","groupVersion":"v1","resources":['))
        code, _, body = self.facade("/api")
        self.assertEqual(body, capture_body("discovery-api.json").strip().replace(
            "127.0.0.1:6443", "127.0.0.1:%d" % self.p.port))
        self.assertEqual(self.facade("/apis")[2],
                         '{"kind":"APIGroupList","apiVersion":"v1","groups":[]}')
        code, _, body = self.facade("/apis/apps/v1")
        self.assertEqual((code, body),
                         (404, capture_body("error-404-resource.txt")))
        self.assertEqual(self.facade("/readyz")[0], 200)

    def test_list_is_the_emulators_bytes(self):
        (code, _, mine), (ucode, _, theirs) = self.synced(
            "/api/v1/namespaces/demo/configmaps")
        self.assertEqual((code, mine), (ucode, theirs))
        doc = json.loads(mine)
        self.assertEqual(list(doc), ["kind", "apiVersion", "metadata", "items"])
        self.assertEqual(doc["kind"], "ConfigMapList")
        for item in doc["items"]:
            # As in the API server's lists (list-configmaps-limit2.json).
            self.assertNotIn("kind", item)
            self.assertNotIn("apiVersion", item)

    def test_paging_envelope_is_the_api_servers(self):
        (code, _, mine), (_, _, theirs) = self.synced(
            "/api/v1/namespaces/paging/configmaps?limit=2")
        self.assertEqual(code, 200)
        self.assertEqual(mine, theirs)
        page = json.loads(mine)
        captured = json.loads(capture_body("list-configmaps-limit2.json"))
        self.assertEqual(list(page["metadata"]), list(captured["metadata"]))
        self.assertEqual(page["metadata"]["remainingItemCount"], 1)
        code, _, rest = self.facade(
            "/api/v1/namespaces/paging/configmaps?limit=2&continue=" +
            page["metadata"]["continue"])
        self.assertEqual(code, 200)
        names = [i["metadata"]["name"] for i in page["items"] +
                 json.loads(rest)["items"]]
        self.assertEqual(names, ["cm-0000", "cm-0001", "cm-0002"])
        self.assertNotIn("continue", json.loads(rest)["metadata"])

    def test_selectors(self):
        (code, _, mine), (_, _, theirs) = self.synced(
            "/api/v1/configmaps?labelSelector=app%3Ddemo")
        self.assertEqual(code, 200)
        self.assertEqual(mine, theirs)
        code, _, body = self.facade(
            "/api/v1/configmaps?fieldSelector=metadata.namespace%3Dkube-system")
        self.assertEqual([i["metadata"]["name"] for i in json.loads(body)["items"]],
                         ["cm-0003"])
        code, _, body = self.facade(
            "/api/v1/configmaps?labelSelector=app%20in%20(demo,other),app!%3Ddemo")
        self.assertEqual([i["metadata"]["name"] for i in json.loads(body)["items"]],
                         ["cm-0002"])
        code, _, body = self.facade("/api/v1/configmaps?fieldSelector=data.k%3Dv")
        self.assertEqual(code, 400)
        self.assertEqual(
            body,
            '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
            '"message":"field label not supported: data.k","reason":"BadRequest",'
            '"code":400}')

    def test_get_and_404(self):
        (code, _, mine), (_, _, theirs) = self.synced(
            "/api/v1/namespaces/demo/configmaps/cm-0000")
        self.assertEqual(code, 200)
        self.assertEqual(mine, theirs)
        self.assertTrue(mine.startswith('{"kind":"ConfigMap","apiVersion":"v1",'))
        code, _, body = self.facade(
            "/api/v1/namespaces/demo/configmaps/does-not-exist")
        self.assertEqual((code, body), (404, capture_body("error-404.txt")))

    def test_writes_are_405(self):
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            code, _, body = self.facade(
                "/api/v1/namespaces/demo/configmaps" +
                ("" if method == "POST" else "/cm-0000"),
                method=method, body={})
            self.assertEqual(code, 405, method)
            status = json.loads(body)
            self.assertEqual(status["reason"], "MethodNotAllowed")
            self.assertIn("read-only", status["message"])

    def test_watch_framing_and_events_are_the_emulators(self):
        _, _, up = request(self.p.emulator + "/api/v1/namespaces/demo/configmaps")
        rv = json.loads(up)["metadata"]["resourceVersion"]
        target = ("/api/v1/namespaces/demo/configmaps?watch=1&resourceVersion=%s"
                  "&timeoutSeconds=30" % rv)
        s1, mine, status, headers = raw_watch(self.p.port, target)
        s2, theirs, _, _ = raw_watch(int(self.p.emulator.rsplit(":", 1)[1]),
                                     target)
        self.assertEqual(status, "HTTP/1.1 200 OK")
        self.assertEqual(headers["content-type"], "application/json")
        self.assertEqual(headers["transfer-encoding"], "chunked")
        self.assertEqual(headers["cache-control"], "no-cache, private")
        self.create_cm("demo", "watched", {"a": "b"})
        code, _, body = request(
            self.p.emulator + "/api/v1/namespaces/demo/configmaps/watched",
            "PATCH", {"data": {"k": "v2"}},
            {"Content-Type": "application/merge-patch+json"})
        self.assertEqual(code, 200, body)
        request(self.p.emulator + "/api/v1/namespaces/demo/configmaps/watched",
                "DELETE")
        for want in ("ADDED", "MODIFIED", "DELETED"):
            a = read_chunk(mine)
            b = read_chunk(theirs)
            while b.startswith(b'{"type":"BOOKMARK"'):
                b = read_chunk(theirs)
            self.assertTrue(a.endswith(b"\n"))
            self.assertEqual(a.count(b"\n"), 1)
            self.assertEqual(json.loads(a)["type"], want)
            self.assertEqual(a, b)
        s1.close()
        s2.close()

    def test_watch_timeout_ends_with_the_zero_chunk(self):
        s, f, _, _ = raw_watch(
            self.p.port, "/api/v1/configmaps?watch=1&timeoutSeconds=1"
            "&allowWatchBookmarks=true&labelSelector=none%3Dnone")
        event = json.loads(read_chunk(f))
        self.assertEqual(event["type"], "BOOKMARK")
        self.assertEqual(list(event["object"]["metadata"]),
                         ["resourceVersion", "creationTimestamp"])
        self.assertEqual(read_chunk(f), b"")
        s.close()

    def test_too_old_watch_is_410_error_event(self):
        for i in range(60):  # past --kube_api_history=50
            self.create_cm("churn", "c%d" % i, {})
        self.synced("/api/v1/configmaps")
        s, f, status, _ = raw_watch(self.p.port,
                                    "/api/v1/configmaps?watch=1&resourceVersion=1")
        self.assertEqual(status, "HTTP/1.1 200 OK")
        event = json.loads(read_chunk(f))
        with open(os.path.join(CAPTURES, "watch-too-old-rv-410.jsonl")) as c:
            captured = json.loads(c.readline())
        self.assertEqual(event["type"], "ERROR")
        self.assertEqual(list(event["object"]), list(captured["object"]))
        self.assertEqual(event["object"]["code"], 410)
        self.assertEqual(event["object"]["reason"], "Expired")
        self.assertRegex(event["object"]["message"],
                         r"^too old resource version: 1 \(\d+\)$")
        self.assertEqual(read_chunk(f), b"")
        s.close()
        # A paged list whose snapshot left the history: the captured 410.
        code, _, body = self.facade("/api/v1/configmaps?limit=1")
        first = json.loads(body)["metadata"]["continue"]
        for i in range(60):
            self.create_cm("churn2", "c%d" % i, {})
        self.synced("/api/v1/configmaps")
        code, _, body = self.facade("/api/v1/configmaps?limit=1&continue=" + first)
        self.assertEqual(code, 410)
        status = json.loads(body)
        captured = json.loads(capture_body("list-expired-continue-410.txt"))
        self.assertEqual(list(status), list(captured))
        self.assertEqual(status["message"], captured["message"])
        self.assertEqual(status["reason"], "Expired")

    def test_kubectl(self):
        kubectl = shutil.which("kubectl")
        if kubectl is None:
            self.fail("kubectl is not installed (Debian: kubernetes-client)")
        cache = tempfile.mkdtemp()
        base = [kubectl, "--server=" + self.p.base, "--cache-dir=" + cache]
        self.synced("/api/v1/configmaps")
        out = subprocess.run(base + ["get", "cm", "-n", "demo", "-o", "name"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("configmap/cm-0000", out.stdout.split())
        # Human-readable output comes from the facade's server-side Tables:
        # the pod printer's columns for Pods, Name and Age otherwise.
        out = subprocess.run(base + ["get", "cm", "-n", "demo"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["NAME", "AGE"])
        self.assertIn("cm-0000", [l.split()[0] for l in lines[1:]])
        code, _, body = request(
            "%s/api/v1/namespaces/demo/pods" % self.p.emulator, "POST",
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "kubectl-pod"},
             "spec": {"nodeName": "node-1",
                      "containers": [{"name": "c", "image": "busybox"}]}})
        self.assertEqual(code, 201, body)
        rv = json.loads(body)["metadata"]["resourceVersion"]
        code, _, body = self.facade(
            "/api/v1/pods?resourceVersionMatch=NotOlderThan&resourceVersion="
            + rv)
        self.assertEqual(code, 200, body)
        out = subprocess.run(base + ["get", "pods", "-n", "demo", "-o", "wide"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(lines[0].split(),
                         ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP",
                          "NODE", "NOMINATED", "NODE", "READINESS", "GATES"])
        row = lines[1].split()
        self.assertEqual(row[:2], ["kubectl-pod", "0/1"])
        self.assertIn("node-1", row)
        self.assertIn("<none>", row)  # no IP yet, no nominated node
        out = subprocess.run(base + ["api-resources", "--no-headers"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual([l.split()[0] for l in out.stdout.splitlines()],
                         ["configmaps", "pods"])
        out = subprocess.run(base + ["delete", "cm", "cm-0000", "-n", "demo"],
                             capture_output=True, text=True, timeout=60)
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("MethodNotAllowed", out.stderr)
        self.assertIn("read-only", out.stderr)
        # kubectl get -w: the list, then an event the emulator produced.
        watch = subprocess.Popen(
            base + ["get", "cm", "-n", "demo", "-w", "-o", "name",
                    "--request-timeout=20s"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = []
        for line in watch.stdout:
            seen.append(line.strip())
            if line.strip() == "configmap/cm-0002":
                self.create_cm("demo", "from-kubectl-watch", {})
            if line.strip() == "configmap/from-kubectl-watch":
                break
        watch.kill()
        watch.wait()
        self.assertIn("configmap/from-kubectl-watch", seen)
        shutil.rmtree(cache)

    def test_metrics(self):
        self.facade("/api/v1/configmaps")
        text = self.p.metrics()
        self.assertRegex(
            text, r'informer_sidecar_kube_api_requests_total\{verb="list",'
            r'code="200",resource="configmaps"\} \d+')


class TokensTest(unittest.TestCase):

    def test_tokens_and_permissions(self):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "tokens.yaml")
        with open(path, "w") as f:
            f.write("tokens:\n- name: nobody\n  token: t-0123456789abcdef\n"
                    "  resources: [pods]\n  namespaces: [demo]\n")
        p = Process("--resources=configmaps,pods", "--tokens_file=" + path)
        try:
            code, _, body = request(p.base + "/api/v1/namespaces/demo/configmaps")
            self.assertEqual((code, body), (401, capture_body("error-401.txt")))
            auth = {"Authorization": "Bearer t-0123456789abcdef"}
            code, _, body = request(p.base + "/api/v1/namespaces/demo/configmaps",
                                    headers=auth)
            self.assertEqual((code, body), (403, capture_body("error-403.txt")))
            code, _, _ = request(p.base + "/api/v1/namespaces/demo/pods",
                                 headers=auth)
            self.assertEqual(code, 200)
        finally:
            p.stop()
            shutil.rmtree(d)


if __name__ == "__main__":
    unittest.main()
