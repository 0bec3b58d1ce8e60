"""The installed SDK's mirror across restarts of the sidecar under churn:
the sidecar keeps its cache and its Watch history in --cache_dir, so the
informer resumes with its last token, with no RESET, no missed and no
repeated event, and ends equal to the API server's state.

The real sidecar runs in front of the API server emulator (both as child
processes, real HTTP between them), on a fixed Unix socket so that the
informer reconnects to the restarted one. Run by
//client_sdk/python:python_sdk_restart_resume_test; $INFORMER_SIDECAR_BINARY
and $INFORMER_EMULATOR_BINARY name the binaries. Every wait is on a
condition with a deadline.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

from informer_sidecar import RemoteInformer, object_key

BINARY = os.environ.get("INFORMER_SIDECAR_BINARY", "")
EMULATOR = os.environ.get("INFORMER_EMULATOR_BINARY", "")
OBJECTS = 200
TIMEOUT = 90.0  # failsafe: only reached when the test fails


def rv_of(obj) -> int:
    return int(obj["metadata"]["resourceVersion"])


class Story:
    """Checks the handlers' story: an add of a key not held, an update of a
    held one to a newer resourceVersion (a repeated event would not be), a
    delete of a held one."""

    def __init__(self, informer: RemoteInformer) -> None:
        # Every handler notifies it, so that a test can await the count.
        self.lock = threading.Condition()
        self.held = {}
        self.events = 0
        self.errors = []
        informer.on_add(self._add)
        informer.on_update(self._update)
        informer.on_delete(self._delete)

    def _add(self, obj, _initial):
        with self.lock:
            key = object_key(obj)
            if key in self.held:
                self.errors.append(f"add of held {key}")
            self.held[key] = rv_of(obj)
            self.events += 1
            self.lock.notify_all()

    def _update(self, _old, obj):
        with self.lock:
            key = object_key(obj)
            if key not in self.held:
                self.errors.append(f"update of absent {key}")
            elif rv_of(obj) <= self.held[key]:
                self.errors.append(
                    f"update of {key} to {rv_of(obj)} over {self.held[key]}")
            self.held[key] = rv_of(obj)
            self.events += 1
            self.lock.notify_all()

    def _delete(self, obj, _tombstone):
        with self.lock:
            key = object_key(obj)
            if self.held.pop(key, None) is None:
                self.errors.append(f"delete of absent {key}")
            self.events += 1
            self.lock.notify_all()

    def count(self) -> int:
        with self.lock:
            return self.events

    def wait_for_more(self, n: int) -> bool:
        """Waits until the handlers were called `n` more times; False after
        TIMEOUT."""
        with self.lock:
            until = self.events + n
            return self.lock.wait_for(lambda: self.events >= until, TIMEOUT)


class Churn:
    """Patches the seeded ConfigMaps, and creates and deletes others, until
    stopped (paced at about 200 changes a second: a load, not a wait)."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}/api/v1/namespaces/benchcms"
        self.stop_flag = threading.Event()
        self.lock = threading.Condition()
        self.done = 0  # rounds of changes made, under `lock`
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _request(self, method, path, body=None, ctype="application/json"):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data,
                                     method=method,
                                     headers={"Content-Type": ctype})
        try:
            urllib.request.urlopen(req, timeout=30).close()
        except urllib.error.HTTPError:
            pass  # e.g. a delete racing the emulator's own changes

    def _run(self):
        n = 0
        while not self.stop_flag.is_set():
            self._request("PATCH", "/configmaps/cm-%06d" % ((n * 37) % OBJECTS),
                          {"data": {"churn": str(n)}},
                          "application/merge-patch+json")
            if n % 5 == 0:
                self._request("POST", "/configmaps", {
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": f"churn-{n}"}})
                if n >= 15:
                    self._request("DELETE", f"/configmaps/churn-{n - 15}")
            n += 1
            with self.lock:
                self.done = n
                self.lock.notify_all()
            time.sleep(0.005)  # the pace of the load, not a wait

    def start(self):
        self.thread.start()

    def stop(self):
        self.stop_flag.set()
        self.thread.join()

    def wait_for_more(self, n: int) -> bool:
        """Waits until `n` more rounds of changes were made; False after
        TIMEOUT."""
        with self.lock:
            until = self.done + n
            return self.lock.wait_for(lambda: self.done >= until, TIMEOUT)


class RestartResumeTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rrt", dir="/tmp")
        self.procs = []
        self.emulator = subprocess.Popen(
            [EMULATOR, "--port=0", f"--seed_configmaps={OBJECTS}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL, text=True)
        self.port = int(self.emulator.stdout.readline())
        # A real cluster has it; the sidecar tells clusters apart by its uid.
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/api/v1/namespaces",
            data=json.dumps({"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": "kube-system"}}).encode(),
            method="POST", headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=30).close()
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        with open(self.kubeconfig, "w", encoding="utf-8") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                    f"clusters:\n- name: t\n  cluster:\n"
                    f"    server: http://127.0.0.1:{self.port}\n"
                    "contexts:\n- name: t\n  context:\n    cluster: t\n"
                    "    user: t\nusers:\n- name: t\n  user: {}\n")
        self.target = "unix:" + os.path.join(self.dir, "s.sock")
        self.sidecar = None

    def start_sidecar(self, log):
        with open(os.path.join(self.dir, log), "w", encoding="utf-8") as err:
            self.sidecar = subprocess.Popen(
                [BINARY, "--kubeconfig=" + self.kubeconfig,
                 "--resources=configmaps", "--grpc_listen=" + self.target,
                 "--http_listen=127.0.0.1:0", "--print_events=false",
                 "--cache_dir=" + os.path.join(self.dir, "cache"),
                 "--cache_snapshot_interval=0"],
                stdout=subprocess.DEVNULL, stderr=err,
                stdin=subprocess.DEVNULL)

    def stop_sidecar(self):
        self.sidecar.send_signal(signal.SIGTERM)
        self.assertEqual(self.sidecar.wait(30), 0)
        self.sidecar = None

    def log(self, name) -> str:
        with open(os.path.join(self.dir, name), encoding="utf-8") as f:
            return f.read()

    def emulator_state(self):
        with urllib.request.urlopen(
                f"http://127.0.0.1:{self.port}/_emulator/state"
                "?resource=configmaps", timeout=30) as r:
            state = json.load(r)
        return {o["key"]: o["resourceVersion"] for o in state["objects"]}

    def tearDown(self):
        for proc in [self.sidecar, self.emulator]:
            if proc is None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.emulator.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_mirror_survives_restarts_under_churn_without_reset(self):
        self.start_sidecar("run0.log")
        informer = RemoteInformer("configmaps", target=self.target,
                                  initial_backoff=0.05, max_backoff=1.0)
        story = Story(informer)
        churn = Churn(self.port)
        with informer:
            self.assertTrue(informer.wait_for_sync(TIMEOUT), self.log("run0.log"))
            churn.start()
            try:
                for run in (1, 2):
                    self.assertTrue(story.wait_for_more(30))
                    self.stop_sidecar()
                    self.assertTrue(churn.wait_for_more(20))
                    self.start_sidecar(f"run{run}.log")
                    self.assertTrue(story.wait_for_more(30),
                                    self.log(f"run{run}.log"))
                    self.assertIn("Watch history loaded", self.log(f"run{run}.log"))
            finally:
                churn.stop()
            want = self.emulator_state()

            def mirrored(inf):
                return {object_key(o): o["metadata"]["resourceVersion"]
                        for o in inf.list()} == want

            self.assertTrue(informer.wait_for(mirrored, TIMEOUT),
                            f"mirror {len(informer.list())} objects, "
                            f"API server {len(want)}")
            self.assertEqual(informer.resets, 0)
            self.assertGreaterEqual(informer.reconnects, 2)
        self.assertEqual(story.errors, [])


if __name__ == "__main__":
    if not BINARY or not EMULATOR:
        sys.exit("INFORMER_SIDECAR_BINARY and INFORMER_EMULATOR_BINARY must "
                 "be set")
    unittest.main()
