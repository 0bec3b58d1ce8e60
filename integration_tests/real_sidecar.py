"""The real informer_sidecar binary as a child process for the real-cluster
tests, and the real kube-apiserver's audit log as the record of what the
sidecar asked it.

RealSidecar starts the binary on a unix socket with its HTTP server on a
free port (read back from --ports_file), waits until Health says SERVING,
scrapes /metrics, and can freeze (SIGSTOP) and thaw (SIGCONT) it. AuditLog
writes a policy that records every request's metadata and reads back the
requests one user made. Every wait polls a condition against a deadline.
"""

import json
import os
import signal
import subprocess
import time
import urllib.request

import grpc

import real_sidecar_smoke_test as smoke

TIMEOUT = 90.0

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
                     smoke.runfile("server/informer_sidecar"),
                     "--kubeconfig=" + kubeconfig,
                     "--grpc_listen=unix:" + self.socket,
                     "--http_listen=127.0.0.1:0",
                     "--ports_file=" + self.ports_file] + list(flags)
        self.process = None
        self.channel = None
        self.http_port = None
        self._log = None

    def start(self):
        self._log = open(self.log_path, "w")
        self.process = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL,
                                        stderr=self._log)
        smoke.wait_until(self._read_ports, "the sidecar's ports file")
        self.channel = grpc.insecure_channel("unix:" + self.socket)
        self.wait_serving()
        return self

    def _read_ports(self):
        if self.process.poll() is not None:
            raise AssertionError("the sidecar exited: " + self.log())
        try:
            with open(self.ports_file) as f:
                ports = dict(line.split("=", 1) for line in f.read().split())
        except FileNotFoundError:
            return False
        self.http_port = int(ports["http"])
        return True

    def wait_serving(self):
        watch = self.channel.unary_stream(
            "/grpc.health.v1.Health/Watch",
            request_serializer=lambda _: b"",
            response_deserializer=lambda b: b)
        stream = watch(None, timeout=TIMEOUT, wait_for_ready=True)
        for raw in stream:
            if smoke.health_status(raw) == smoke.SERVING:
                stream.cancel()
                return
        raise AssertionError("health watch ended before SERVING")

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


def wait_for(condition, what, timeout=TIMEOUT):
    """smoke.wait_until with the caller's timeout; returns the value."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.1)


def grpc_list(channel, pb, resource, namespace):
    """The sidecar's cache of `resource` in `namespace` through
    Informer/List (in pages of 7): name -> comparable object."""
    call = channel.unary_unary(
        "/informer.v1.Informer/List",
        request_serializer=pb.ListRequest.SerializeToString,
        response_deserializer=pb.ListResponse.FromString)
    objects, token = {}, ""
    while True:
        page = call(pb.ListRequest(resource=resource, namespace=namespace,
                                   limit=7, continue_token=token),
                    timeout=30)
        for o in page.objects:
            obj = json.loads(o.json)
            objects[obj["metadata"]["name"]] = smoke.comparable(obj)
        token = page.continue_token
        if not token:
            return objects


def server_objects(cp, resource, namespace):
    """What the API server lists: name -> comparable object."""
    listed = cp.api("GET", "/api/v1/namespaces/%s/%s" % (namespace,
                                                         resource))
    return {o["metadata"]["name"]: smoke.comparable(o)
            for o in listed["items"]}
