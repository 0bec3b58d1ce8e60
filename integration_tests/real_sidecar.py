"""Shared parts of the real-cluster tests: the real control plane with the
sidecar's gRPC messages in a temporary directory (Cluster, ClusterTest),
the real informer_sidecar binary as a child process (RealSidecar), the
real kube-apiserver's audit log as the record of what the sidecar asked it
(AuditLog), and the comparisons of the sidecar's cache with the API
server's objects.

RealSidecar starts the binary on a unix socket with its HTTP server on a
free port (read back from --ports_file), waits until Health says SERVING,
scrapes /metrics, and can freeze (SIGSTOP) and thaw (SIGCONT) it. AuditLog
writes a policy that records every request's metadata and reads back the
requests one user made. Every wait polls a condition against a deadline.
"""

import copy
import importlib
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
import urllib.request

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "realkube"))
import control_plane  # noqa: E402

WORKSPACE = os.environ.get("TEST_WORKSPACE", "informer_sidecar")
RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), WORKSPACE)
TIMEOUT = 90.0
SERVING = 1  # grpc.health.v1.HealthCheckResponse.ServingStatus
USER = control_plane.UNPRIVILEGED_USER


def runfile(relative):
    for path in (os.path.join(RUNFILES, relative),
                 os.path.join(os.path.dirname(__file__), "..", relative)):
        if os.path.exists(path):
            return os.path.abspath(path)
    raise FileNotFoundError(relative)


def generate_messages(out_dir, proto_name="informer"):
    """informer/v1/PROTO_NAME.proto compiled by the system protoc into
    `out_dir` and imported (informer_pb2 by default)."""
    relative = "informer/v1/%s.proto" % proto_name
    proto = runfile("proto/" + relative)
    root = os.path.dirname(os.path.dirname(os.path.dirname(proto)))
    subprocess.run(["protoc", "-I", root, "-I", "/usr/include",
                    "--python_out=" + out_dir, relative], check=True)
    if out_dir not in sys.path:
        sys.path.insert(0, out_dir)
    return importlib.import_module("informer.v1.%s_pb2" % proto_name)


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
    """Polls `condition` until it is true; fails after `timeout`."""
    wait_for(condition, what, timeout)


def wait_for(condition, what, timeout=TIMEOUT):
    """Polls `condition` until it returns a true value, which it returns;
    fails after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.1)


AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
"""


class AuditLog:
    """kube-apiserver's audit log (--audit-log-path) under `directory`:
    one JSON event per request at ResponseComplete (and ResponseStarted for
    watches), written synchronously (the log backend's blocking mode)."""

    def __init__(self, directory):
        self.policy = os.path.join(directory, "audit-policy.yaml")
        self.path = os.path.join(directory, "audit.log")
        with open(self.policy, "w") as f:
            f.write(AUDIT_POLICY)

    def flags(self):
        return ["--audit-policy-file=" + self.policy,
                "--audit-log-path=" + self.path,
                "--audit-log-mode=blocking"]

    def offset(self):
        """Where the log ends now: requests() from here on."""
        return os.path.getsize(self.path) if os.path.exists(self.path) else 0

    def wait_requests(self, user, resource, since, seen, what):
        """requests() once one of them satisfies `seen` (a watch is logged
        at ResponseComplete: once it ended)."""
        def logged():
            requests = self.requests(user, resource, since)
            return requests if any(seen(r) for r in requests) else None
        return wait_for(logged, what)

    def requests(self, user, resource, since=0):
        """The completed requests of `user` for `resource` logged after
        `since`: dicts with verb, uri and code."""
        out = []
        with open(self.path) as f:
            f.seek(since)
            for line in f:
                e = json.loads(line)
                ref = e.get("objectRef") or {}
                if (e.get("stage") != "ResponseComplete" or
                        e["user"].get("username") != user or
                        ref.get("resource") != resource):
                    continue
                out.append({"verb": e["verb"], "uri": e["requestURI"],
                            "code": e.get("responseStatus", {}).get("code")})
        return out


def parse_metrics(text):
    """Prometheus text -> {(name, frozenset(labels)): value}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, value = line.rsplit(" ", 1)
        labels = frozenset()
        if "{" in series:
            name, rest = series.split("{", 1)
            pairs = [p for p in rest.rstrip("}").split(",") if p]
            labels = frozenset(tuple(p.split("=", 1)) for p in pairs)
            labels = frozenset((k, v.strip('"')) for k, v in labels)
        else:
            name = series
        out[(name, labels)] = float(value)
    return out


class RealSidecar:
    """informer_sidecar with `flags` against the cluster of `kubeconfig`,
    its state (socket, ports file, log) under `directory`. start() returns
    once Health is SERVING (every configured informer synced)."""

    def __init__(self, directory, kubeconfig, flags):
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.socket = os.path.join(directory, "grpc.sock")
        self.ports_file = os.path.join(directory, "ports")
        self.log_path = os.path.join(directory, "sidecar.log")
        self.argv = [os.environ.get("INFORMER_SIDECAR_BIN") or
                     runfile("server/informer_sidecar"),
                     "--kubeconfig=" + kubeconfig,
                     "--grpc_listen=unix:" + self.socket,
                     "--http_listen=127.0.0.1:0",
                     "--ports_file=" + self.ports_file] + list(flags)
        self.process = None
        self.channel = None
        self.http_port = None
        self._log = None

    def start(self, serving=True):
        """Starts the process; returns once its ports file is written and,
        when `serving`, Health says SERVING."""
        self._log = open(self.log_path, "w")
        self.process = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL,
                                        stderr=self._log)
        wait_until(self._read_ports, "the sidecar's ports file")
        self.channel = grpc.insecure_channel("unix:" + self.socket)
        if serving:
            self.wait_serving()
        return self

    def _read_ports(self):
        if self.process.poll() is not None:
            raise AssertionError("the sidecar exited: " + self.log())
        try:
            self.http_port = self.ports()["http"]
        except FileNotFoundError:
            return False
        return True

    def ports(self):
        """The ports file as {listener: port}, e.g. "http", "kube_api"."""
        with open(self.ports_file) as f:
            return {name: int(port) for name, port in
                    (line.split("=", 1) for line in f.read().split())}

    def port(self, listener):
        """The port of `listener` once the ports file names it, else 0."""
        return self.ports().get(listener, 0)

    def facade(self):
        """The URL of the Kubernetes API facade (--kube_api_listen), once
        the ports file names its port."""
        return "http://127.0.0.1:%d" % wait_for(
            lambda: self.port("kube_api"), "the facade's port")

    def wait_serving(self):
        watch = self.channel.unary_stream(
            "/grpc.health.v1.Health/Watch",
            request_serializer=lambda _: b"",
            response_deserializer=lambda b: b)
        stream = watch(None, timeout=TIMEOUT, wait_for_ready=True)
        for raw in stream:
            if health_status(raw) == SERVING:
                stream.cancel()
                return
        raise AssertionError("health watch ended before SERVING")

    def health(self):
        """The overall status from Health/Check (SERVING is 1)."""
        check = self.channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=lambda _: b"",
            response_deserializer=lambda b: b)
        return health_status(check(None, timeout=30))

    def metrics(self):
        url = "http://127.0.0.1:%d/metrics" % self.http_port
        with urllib.request.urlopen(url, timeout=10) as r:
            return parse_metrics(r.read().decode())

    def metric(self, name, **labels):
        """The value of one series (0 when absent)."""
        key = (name, frozenset(labels.items()))
        return self.metrics().get(key, 0.0)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def freeze(self):
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self):
        self.process.send_signal(signal.SIGCONT)

    def stop(self):
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


def grpc_list(channel, pb, resource, namespace, limit=7, timeout=30):
    """The sidecar's cache of `resource` in `namespace` through
    Informer/List (in pages of `limit`): name -> comparable object."""
    call = channel.unary_unary(
        "/informer.v1.Informer/List",
        request_serializer=pb.ListRequest.SerializeToString,
        response_deserializer=pb.ListResponse.FromString)
    objects, token = {}, ""
    while True:
        page = call(pb.ListRequest(resource=resource, namespace=namespace,
                                   limit=limit, continue_token=token),
                    timeout=timeout)
        for o in page.objects:
            obj = json.loads(o.json)
            objects[obj["metadata"]["name"]] = comparable(obj)
        token = page.continue_token
        if not token:
            return objects


def server_objects(cp, resource, namespace):
    """What the API server lists: name -> comparable object."""
    listed = cp.api("GET", "/api/v1/namespaces/%s/%s" % (namespace,
                                                         resource))
    return {o["metadata"]["name"]: comparable(o)
            for o in listed["items"]}


def cache_matches_server(cp, sidecar, pb, resource, namespace):
    """(server's objects, sidecar's cache) when they are equal object by
    object, else None: a condition for wait_for."""
    expected = server_objects(cp, resource, namespace)
    cached = grpc_list(sidecar.channel, pb, resource, namespace)
    return (expected, cached) if expected == cached else None


def kubeconfig_through(cp, port, path):
    """Writes to `path` the unprivileged user's kubeconfig with the API
    server's address replaced by 127.0.0.1:`port` (a relay in the test;
    the serving certificate names 127.0.0.1); returns `path`."""
    with open(cp.user_kubeconfig) as f:
        text = f.read()
    if cp.server not in text:
        raise AssertionError("%s not in %s" % (cp.server, cp.user_kubeconfig))
    with open(path, "w") as f:
        f.write(text.replace(cp.server, "https://127.0.0.1:%d" % port))
    return path


def write_kubeconfig(path, server):
    """A kubeconfig for `server` without credentials (the facade's)."""
    with open(path, "w") as f:
        f.write("""apiVersion: v1
kind: Config
clusters:
- name: facade
  cluster: {server: "%s"}
contexts:
- name: facade
  context: {cluster: facade, user: anonymous}
current-context: facade
users:
- name: anonymous
  user: {}
""" % server)
    return path


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


class Cluster:
    """One test's world: a temporary directory under /tmp, the sidecar's
    gRPC messages generated into it (`pb`), a started real control plane
    (`cp`, its API server writing the audit log `audit` when asked), and
    the sidecars and other things started through it.

    close() stops the sidecars and calls the on_close functions (last
    registered first), stops the control plane and removes the directory;
    it is idempotent, and a constructor that fails has closed what it
    started. Not thread-safe: one test thread owns it."""

    def __init__(self, prefix, audit=False, extra_apiserver_flags=(),
                 messages=True, **control_plane_args):
        self.tmp = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
        self.bin_dir = os.environ["REALKUBE_BIN"]
        self.pb = self.audit = self.cp = None
        self._closers = []
        try:
            if messages:
                self.pb = generate_messages(self.tmp)
            flags = list(extra_apiserver_flags)
            if audit:
                self.audit = AuditLog(self.tmp)
                flags += self.audit.flags()
            self.cp = control_plane.ControlPlane(
                self.bin_dir, extra_apiserver_flags=flags,
                **control_plane_args)
            self.cp.start()
        except BaseException:
            self.close()
            raise

    def attach(self, owner):
        """Sets owner.cluster (self), and owner.tmp, .bin_dir, .pb, .audit
        and .cp to these parts; returns self. `owner`: a TestCase class
        (ClusterTest) or a test (a Cluster per test, closed by a cleanup:
        self.addCleanup(Cluster(...).attach(self).close))."""
        owner.cluster = self
        owner.tmp, owner.bin_dir, owner.pb, owner.audit, owner.cp = (
            self.tmp, self.bin_dir, self.pb, self.audit, self.cp)
        return self

    def on_close(self, close):
        """Calls `close()` in close(), before what was registered earlier
        and before the control plane stops; returns `close`."""
        self._closers.append(close)
        return close

    def sidecar(self, name, flags, kubeconfig=None, serving=True):
        """A RealSidecar with its state under tmp/`name`, as the
        unprivileged user unless `kubeconfig` says otherwise, started
        (see RealSidecar.start); close() stops it."""
        sidecar = RealSidecar(os.path.join(self.tmp, name),
                              kubeconfig or self.cp.user_kubeconfig, flags)
        self.on_close(sidecar.stop)
        return sidecar.start(serving)

    def view_namespace(self, namespace):
        """The unprivileged user may read everything (the `view`
        ClusterRole), and `namespace` exists."""
        self.cp.bind_cluster_role(USER, "view")
        self.cp.create_namespace(namespace)

    def create_configmaps(self, namespace, bodies):
        """POSTs every ConfigMap of `bodies` to `namespace`."""
        for body in bodies:
            self.cp.api("POST", "/api/v1/namespaces/%s/configmaps" %
                        namespace, body)

    def kubectl(self, *args, kubeconfig=None, stderr=False):
        """The real kubectl, as the admin unless `kubeconfig` says
        otherwise: its stdout, or (stdout, stderr) when `stderr`. A
        failure raises AssertionError with kubectl's stderr."""
        out = subprocess.run(
            [os.path.join(self.bin_dir, "kubectl"),
             "--kubeconfig=" + (kubeconfig or self.cp.admin_kubeconfig)] +
            list(args), capture_output=True, text=True, timeout=60,
            check=False)
        if out.returncode != 0:
            raise AssertionError("kubectl %s: %s" % (args, out.stderr))
        return (out.stdout, out.stderr) if stderr else out.stdout

    def close(self):
        while self._closers:
            self._closers.pop()()
        if self.cp is not None:
            self.cp.stop()
            self.cp = None
        if self.tmp is not None:
            subprocess.run(["rm", "-rf", self.tmp], check=False)
            self.tmp = None


class ClusterTest(unittest.TestCase):
    """A TestCase with one Cluster for the whole class: setUpClass makes it
    (CLUSTER_PREFIX names its directory; CLUSTER_AUDIT turns on the audit
    log) and calls the classmethod populate(), which subclasses override
    to create objects and start sidecars; tearDownClass closes it. The
    cluster's parts are class attributes: cluster, tmp, bin_dir, pb,
    audit, cp."""

    CLUSTER_PREFIX = "rk"
    CLUSTER_AUDIT = False

    @classmethod
    def setUpClass(cls):
        Cluster(cls.CLUSTER_PREFIX, audit=cls.CLUSTER_AUDIT).attach(cls)
        try:
            cls.populate()
        except BaseException:
            cls.cluster.close()
            raise

    @classmethod
    def populate(cls):
        """Called once the control plane runs; nothing by default."""

    @classmethod
    def tearDownClass(cls):
        cls.cluster.close()

    def assert_same_objects(self, expected, actual, what=""):
        """The same names, then the same object under each name."""
        self.assertEqual(sorted(expected), sorted(actual), what + ": names")
        for name in expected:
            self.assertEqual(expected[name], actual[name],
                             "%s: object %s differs" % (what, name))


def readyz(sidecar):
    """The sidecar's /readyz: (HTTP status, body)."""
    url = "http://127.0.0.1:%d/readyz" % sidecar.http_port
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.request.HTTPError as e:
        return e.code, e.read().decode()


def resource_statuses(channel, pb):
    """Informer/ListResources: resource -> ResourceStatus."""
    call = channel.unary_unary(
        "/informer.v1.Informer/ListResources",
        request_serializer=pb.ListResourcesRequest.SerializeToString,
        response_deserializer=pb.ListResourcesResponse.FromString)
    return {r.resource: r
            for r in call(pb.ListResourcesRequest(), timeout=30).resources}


def install_python_sdk(directory):
    """Installs the Python SDK as its README says (pip, offline, from the
    checkout in the runfiles, which generates its stubs) into a venv of
    Debian's Python under `directory`; returns the venv's python."""
    src = os.path.join(directory, "sdk-src")
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    shutil.copytree(runfile("client_sdk/python"),
                    os.path.join(src, "client_sdk", "python"), ignore=ignore)
    shutil.copytree(os.path.dirname(runfile("proto/informer/v1/"
                                            "informer.proto")),
                    os.path.join(src, "proto", "informer", "v1"))
    # The runfiles tree's "informer_sidecar" directory would shadow the
    # package.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    venv = os.path.join(directory, "sdk-venv")
    subprocess.run(["/usr/bin/python3", "-m", "venv",
                    "--system-site-packages", venv], check=True, env=env)
    pip = subprocess.run(
        [os.path.join(venv, "bin", "pip"), "install", "--no-index",
         "--no-build-isolation", "./client_sdk/python"],
        cwd=src, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=600, check=False)
    if pip.returncode != 0:
        raise AssertionError("pip install of the Python SDK: " + pip.stdout)
    return os.path.join(venv, "bin", "python")


class SdkMirror:
    """A RemoteInformer of the installed Python SDK with its defaults, in
    its own process (sdk_mirror.py run by `python`, the SDK's venv).
    state() asks it at once for what it holds; close() ends it."""

    def __init__(self, python, target, resource, namespace, log_path):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self._log = open(log_path, "w")
        self.process = subprocess.Popen(
            [python, runfile("integration_tests/sdk_mirror.py"), target,
             resource, namespace], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self._log, text=True, env=env)

    def state(self):
        """{"synced", "stale", "objects": {name: object}, "events":
        [[type, name, tombstone], ...]} as the mirror has them now."""
        self.process.stdin.write("state\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise AssertionError("the SDK mirror exited (log %s)" %
                                 self._log.name)
        return json.loads(line)

    def close(self):
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
