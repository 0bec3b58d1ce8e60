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

import copy
import importlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "realkube"))
import control_plane  # noqa: E402

WORKSPACE = os.environ.get("TEST_WORKSPACE", "informer_sidecar")
RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), WORKSPACE)
SYNC_NS = "smoke-sync"
LIVE_NS = "smoke-live"
TIMEOUT = 90.0
SERVING = 1  # grpc.health.v1.HealthCheckResponse.ServingStatus


def runfile(relative):
    for path in (os.path.join(RUNFILES, relative),
                 os.path.join(os.path.dirname(__file__), "..", relative)):
        if os.path.exists(path):
            return os.path.abspath(path)
    raise FileNotFoundError(relative)


def generate_messages(out_dir):
    proto = runfile("proto/informer/v1/informer.proto")
    root = os.path.dirname(os.path.dirname(os.path.dirname(proto)))
    subprocess.run(["protoc", "-I", root, "-I", "/usr/include",
                    "--python_out=" + out_dir, "informer/v1/informer.proto"],
                   check=True)
    sys.path.insert(0, out_dir)
    return importlib.import_module("informer.v1.informer_pb2")


def health_status(raw):
    """HealthCheckResponse has one field, `status` (1, varint); decoded by
    hand since the health proto is not among this test's data."""
    if not raw:
        return 0
    assert raw[0] == 0x08 and len(raw) == 2, raw
    return raw[1]


def comparable(obj):
    """An object as the sidecar caches it: without managedFields (its
    default transform) and without the list's missing TypeMeta."""
    obj = copy.deepcopy(obj)
    obj["metadata"].pop("managedFields", None)
    obj.pop("kind", None)
    obj.pop("apiVersion", None)
    return obj


def wait_until(condition, what, timeout=TIMEOUT):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.1)


class WatchMirror:
    """A client-side cache built from one Informer.Watch stream (read on a
    thread): name -> object, per the stream's events."""

    def __init__(self, channel, pb, resource, namespace):
        self.pb = pb
        self.lock = threading.Lock()
        self.objects = {}
        self.synced = False
        self.error = None
        call = channel.unary_stream(
            "/informer.v1.Informer/Watch",
            request_serializer=pb.WatchRequest.SerializeToString,
            response_deserializer=pb.WatchResponse.FromString)
        self.stream = call(pb.WatchRequest(resource=resource,
                                           namespace=namespace),
                           wait_for_ready=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        pb = self.pb
        try:
            for response in self.stream:
                with self.lock:
                    for e in response.events:
                        if e.type == pb.EVENT_TYPE_RESET:
                            self.objects.clear()
                        elif e.type == pb.EVENT_TYPE_INITIAL_STATE_DONE:
                            self.synced = True
                        elif e.type in (pb.EVENT_TYPE_ADDED,
                                        pb.EVENT_TYPE_MODIFIED):
                            obj = json.loads(e.object.json)
                            self.objects[obj["metadata"]["name"]] = obj
                        elif e.type == pb.EVENT_TYPE_DELETED:
                            obj = json.loads(e.object.json)
                            self.objects.pop(obj["metadata"]["name"], None)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                self.error = e

    def snapshot(self):
        with self.lock:
            return self.synced, copy.deepcopy(self.objects)

    def close(self):
        self.stream.cancel()
        self.thread.join(timeout=10)


class SidecarAgainstRealServerTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="rks", dir="/tmp")
        cls.pb = generate_messages(cls.tmp)
        cls.bin_dir = os.environ["REALKUBE_BIN"]
        cls.cp = control_plane.ControlPlane(cls.bin_dir)
        cls.cp.start()
        try:
            cls.cp.bind_cluster_role(control_plane.UNPRIVILEGED_USER, "view")
            for ns in (SYNC_NS, LIVE_NS):
                cls.cp.create_namespace(ns)
            # Present before the sidecar starts: its initial list.
            for i in range(40):
                cls.cp.api("POST", "/api/v1/namespaces/%s/configmaps" %
                           SYNC_NS, cls.configmap("seed-%02d" % i, i))
            for i in range(5):
                cls.cp.api("POST", "/api/v1/namespaces/%s/pods" % SYNC_NS,
                           cls.pod("seed-%d" % i))
            cls.socket = os.path.join(cls.tmp, "grpc.sock")
            cls.sidecar_log = open(os.path.join(cls.tmp, "sidecar.log"), "w")
            cls.sidecar = subprocess.Popen(
                [os.environ.get("INFORMER_SIDECAR_BIN") or
                 runfile("server/informer_sidecar"),
                 "--kubeconfig=" + cls.cp.user_kubeconfig,
                 "--resources=configmaps,pods",
                 "--grpc_listen=unix:" + cls.socket],
                stdout=subprocess.DEVNULL, stderr=cls.sidecar_log)
            cls.channel = grpc.insecure_channel("unix:" + cls.socket)
            cls.wait_serving()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "channel", None) is not None:
            cls.channel.close()
        if getattr(cls, "sidecar", None) is not None:
            cls.sidecar.terminate()
            try:
                cls.sidecar.wait(timeout=30)
            except subprocess.TimeoutExpired:
                cls.sidecar.kill()
                cls.sidecar.wait()
            cls.sidecar_log.close()
        cls.cp.stop()
        subprocess.run(["rm", "-rf", cls.tmp], check=False)

    @classmethod
    def wait_serving(cls):
        """Follows Health/Watch until the overall status is SERVING."""
        watch = cls.channel.unary_stream(
            "/grpc.health.v1.Health/Watch",
            request_serializer=lambda _: b"",
            response_deserializer=lambda b: b)
        stream = watch(None, timeout=TIMEOUT, wait_for_ready=True)
        for raw in stream:
            if health_status(raw) == SERVING:
                stream.cancel()
                return
        raise AssertionError("health watch ended before SERVING")

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
        listed = self.cp.api("GET", "/api/v1/namespaces/%s/%s" %
                             (namespace, resource))
        return {o["metadata"]["name"]: comparable(o)
                for o in listed["items"]}

    def grpc_list(self, resource, namespace):
        call = self.channel.unary_unary(
            "/informer.v1.Informer/List",
            request_serializer=self.pb.ListRequest.SerializeToString,
            response_deserializer=self.pb.ListResponse.FromString)
        objects, token = {}, ""
        while True:
            page = call(self.pb.ListRequest(resource=resource,
                                            namespace=namespace, limit=7,
                                            continue_token=token),
                        timeout=30)
            for o in page.objects:
                obj = json.loads(o.json)
                objects[obj["metadata"]["name"]] = comparable(obj)
            token = page.continue_token
            if not token:
                return objects

    def assert_same_objects(self, expected, actual, what):
        self.assertEqual(sorted(expected), sorted(actual), what + ": names")
        for name in expected:
            self.assertEqual(expected[name], actual[name],
                             "%s: object %s differs" % (what, name))

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
        check = self.channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=lambda _: b"",
            response_deserializer=lambda b: b)
        self.assertEqual(health_status(check(None, timeout=30)), SERVING)

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
             "-max-time", "30"] + list(args[:-1]) + [self.socket, args[-1]],
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
        self.assertIsNone(self.sidecar.poll(), "the sidecar exited")


if __name__ == "__main__":
    unittest.main()
