"""The real control plane fixture against the real peers (etcd and
kube-apiserver from tools/realkube.sh build, found through $REALKUBE_BIN):
the pinned version, TLS and tokens, RBAC, the default ServiceAccounts that
let Pods pass admission, and the controls (restart keeping etcd, compaction,
feature gates); then the command line (up/env/down with the real kubectl)
and that no process outlives its supervisor.

Every wait polls a condition against a deadline.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import control_plane  # noqa: E402

EXPECTED_VERSION = "v1.37.2"
PYTHON = "/usr/bin/python3"
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                      "control_plane.py")


def bin_dir():
    path = os.environ.get("REALKUBE_BIN", "")
    if not path:
        raise RuntimeError("REALKUBE_BIN is not set (tools/realkube.sh "
                           "bin-dir prints it)")
    return path


def wait_until(condition, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.1)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[-1][0] != "Z"
    except OSError:
        return False


def feature_metrics(cp):
    """name -> (stage, enabled) from kubernetes_feature_enabled."""
    gates = {}
    for line in cp.api("GET", "/metrics").splitlines():
        if not line.startswith("kubernetes_feature_enabled{"):
            continue
        labels, value = line[len("kubernetes_feature_enabled{"):].split("} ")
        fields = dict(kv.split("=", 1) for kv in labels.split(","))
        gates[fields["name"].strip('"')] = (fields.get("stage", "").strip('"'),
                                           float(value) == 1.0)
    return gates


class ControlPlaneTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cp = control_plane.ControlPlane(bin_dir())
        cls.cp.start()

    @classmethod
    def tearDownClass(cls):
        cls.cp.stop()

    def test_serves_the_pinned_version_over_tls_from_its_ca(self):
        self.assertEqual(self.cp.version, EXPECTED_VERSION)
        self.assertEqual(self.cp.api("GET", "/readyz"), "ok")
        self.assertTrue(self.cp.server.startswith("https://127.0.0.1:"))

    def test_tokens_name_the_admin_and_the_unprivileged_user(self):
        review = {"apiVersion": "authentication.k8s.io/v1",
                  "kind": "SelfSubjectReview"}
        path = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
        admin = self.cp.api("POST", path, review)["status"]["userInfo"]
        user = self.cp.api("POST", path, review,
                           token=self.cp.user_token)["status"]["userInfo"]
        self.assertEqual(admin["username"], control_plane.ADMIN_USER)
        self.assertIn("system:masters", admin["groups"])
        self.assertEqual(user["username"], control_plane.UNPRIVILEGED_USER)
        self.assertNotIn("system:masters", user["groups"])

    def test_rbac_denies_the_user_until_a_role_binding_allows_it(self):
        self.cp.create_namespace("rbac")
        path = "/api/v1/namespaces/rbac/configmaps"
        with self.assertRaises(urllib.error.HTTPError) as denied:
            self.cp.api("GET", path, token=self.cp.user_token)
        self.assertEqual(denied.exception.code, 403)
        self.cp.api("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/"
                    "rbac/rolebindings",
                    {"metadata": {"name": "user-view"},
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                 "kind": "ClusterRole", "name": "view"},
                     "subjects": [{"apiGroup": "rbac.authorization.k8s.io",
                                   "kind": "User",
                                   "name": control_plane.UNPRIVILEGED_USER}]})

        def allowed():
            return self.cp.api("GET", path, token=self.cp.user_token,
                               ok_statuses=(403,)) is not None
        wait_until(allowed, "the RoleBinding to take effect")
        # view never covers Secrets.
        with self.assertRaises(urllib.error.HTTPError) as secrets:
            self.cp.api("GET", "/api/v1/namespaces/rbac/secrets",
                        token=self.cp.user_token)
        self.assertEqual(secrets.exception.code, 403)

    def pod(self, name):
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name},
                "spec": {"containers": [{"name": "c",
                                         "image": "example.invalid/none"}]}}

    def test_pods_pass_admission_only_with_the_default_service_account(self):
        # What kube-controller-manager would add is missing here...
        self.cp.api("POST", "/api/v1/namespaces",
                    {"metadata": {"name": "bare"}})
        with self.assertRaises(urllib.error.HTTPError) as refused:
            self.cp.api("POST", "/api/v1/namespaces/bare/pods",
                        self.pod("p"))
        self.assertEqual(refused.exception.code, 403)
        self.assertIn("serviceaccount", refused.exception.msg.lower())
        # ...and create_namespace adds it.
        self.cp.create_namespace("admitted")
        pod = self.cp.api("POST", "/api/v1/namespaces/admitted/pods",
                          self.pod("p"))
        self.assertEqual(pod["spec"]["serviceAccountName"], "default")
        # Not scheduled, so deleted at once (no kubelet to confirm).
        self.cp.api("DELETE", "/api/v1/namespaces/admitted/pods/p")
        self.cp.api("GET", "/api/v1/namespaces/admitted/pods/p",
                    ok_statuses=(404,))

    def test_restart_keeps_etcd_the_port_and_the_objects(self):
        self.cp.create_namespace("restart")
        created = self.cp.api("POST", "/api/v1/namespaces/restart/configmaps",
                              {"metadata": {"name": "kept"},
                               "data": {"k": "v"}})
        server, old_pid = self.cp.server, self.cp.apiserver.pid
        self.cp.restart_apiserver()
        self.assertEqual(self.cp.server, server)
        self.assertNotEqual(self.cp.apiserver.pid, old_pid)
        self.assertFalse(alive(old_pid))
        got = self.cp.api("GET",
                          "/api/v1/namespaces/restart/configmaps/kept")
        self.assertEqual(got["metadata"]["uid"], created["metadata"]["uid"])
        self.assertEqual(got["data"], {"k": "v"})

    def test_compaction_drops_the_history_below_the_current_revision(self):
        self.cp.create_namespace("compact")
        path = "/api/v1/namespaces/compact/configmaps"
        first = self.cp.api("POST", path, {"metadata": {"name": "c"},
                                           "data": {"n": "1"}})
        old_rv = first["metadata"]["resourceVersion"]
        first["data"] = {"n": "2"}
        self.cp.api("PUT", path + "/c", first)
        key = "/registry/configmaps/compact/c"
        self.assertEqual(self.cp.etcdctl("get", key, "--rev", old_rv,
                                         "--keys-only").strip(), key)
        revision = self.cp.compact_etcd()
        self.assertGreater(revision, int(old_rv))
        with self.assertRaises(control_plane.ControlPlaneError) as gone:
            self.cp.etcdctl("get", key, "--rev", old_rv, "--keys-only")
        self.assertIn("compacted", str(gone.exception))
        # The API server still serves the current state.
        self.assertEqual(self.cp.api("GET", path + "/c")["data"], {"n": "2"})

    def test_feature_gate_off_then_back_to_its_default(self):
        gates = feature_metrics(self.cp)
        # A beta gate on by default, so turning it off is allowed: WatchList
        # (streaming lists, which informers use) while the server has it.
        candidates = sorted(name for name, (stage, on) in gates.items()
                            if stage == "BETA" and on)
        self.assertTrue(candidates, "no enabled beta gate in %s" % gates)
        gate = "WatchList" if "WatchList" in candidates else candidates[0]
        try:
            self.cp.restart_apiserver(feature_gates={gate: False})
            self.assertEqual(self.cp.feature_gates, {gate: False})
            self.assertFalse(feature_metrics(self.cp)[gate][1])
        finally:
            self.cp.restart_apiserver(feature_gates={})
        self.assertTrue(feature_metrics(self.cp)[gate][1])


class CommandLineTest(unittest.TestCase):
    """up / env / down as tools/realkube.sh runs them, with the real
    kubectl, and the supervisor's children dying with it."""

    def setUp(self):
        # Short: the control socket's path must fit in 107 bytes.
        self.state_dir = tempfile.mkdtemp(prefix="rk", dir="/tmp")

    def tearDown(self):
        subprocess.run([PYTHON, SCRIPT, "down", "--state-dir",
                        self.state_dir], capture_output=True, check=False)
        subprocess.run(["rm", "-rf", self.state_dir], check=False)

    def run_cli(self, *args):
        out = subprocess.run([PYTHON, SCRIPT] + list(args) +
                             ["--state-dir", self.state_dir],
                             capture_output=True, text=True, timeout=400)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout

    def test_up_env_kubectl_down(self):
        up = self.run_cli("up", "--bin-dir", bin_dir())
        self.assertIn("kube-apiserver %s at https://127.0.0.1:" %
                      EXPECTED_VERSION, up)
        self.assertIn(os.path.join(self.state_dir, "admin.kubeconfig"), up)
        exports = self.run_cli("env")
        env = {}
        for line in exports.splitlines():
            name, _, value = line[len("export "):].partition("=")
            env[name] = value.strip("'")
        self.assertEqual(env["KUBECONFIG"],
                         os.path.join(self.state_dir, "admin.kubeconfig"))
        state = json.loads(self.run_cli("create-namespace", "cli"))
        kubectl = subprocess.run(
            [os.path.join(bin_dir(), "kubectl"), "get", "serviceaccounts",
             "-n", "cli", "-o", "name"],
            env=dict(os.environ, KUBECONFIG=env["KUBECONFIG"],
                     KUBECACHEDIR=os.path.join(self.state_dir, "cache")),
            capture_output=True, text=True, timeout=60)
        self.assertEqual(kubectl.returncode, 0, kubectl.stderr)
        self.assertEqual(kubectl.stdout.strip(), "serviceaccount/default")
        compacted = json.loads(self.run_cli("compact"))
        self.assertGreater(compacted["revision"], 0)
        self.assertIn("stopped", self.run_cli("down"))
        for pid in state["pids"].values():
            wait_until(lambda: not alive(pid), "pid %d to exit" % pid)

    def test_children_die_with_a_killed_supervisor(self):
        serve = subprocess.Popen(
            [PYTHON, SCRIPT, "serve", "--state-dir", self.state_dir,
             "--bin-dir", bin_dir()],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            reply = json.loads(serve.stdout.readline())
            self.assertTrue(reply["ok"], reply)
            pids = reply["state"]["pids"]
            self.assertTrue(alive(pids["etcd"]))
            self.assertTrue(alive(pids["kube-apiserver"]))
            os.kill(serve.pid, signal.SIGKILL)
            serve.wait()
            for name in ("etcd", "kube-apiserver"):
                wait_until(lambda: not alive(pids[name]),
                           "%s to die with its supervisor" % name)
        finally:
            serve.kill()
            serve.wait()
            serve.stdout.close()


if __name__ == "__main__":
    unittest.main()
