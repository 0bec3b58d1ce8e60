"""The side-by-side sync on the REAL kube-apiserver v1.37: the sidecar,
client-go v0.37's informer (kube-informer-bench) with its defaults and with
managedFields stripped, and a plain download of the same list, for 50k
ConfigMaps in one namespace and 10k Pods, one process at a time.

    bazel build -c opt //integration_tests:real_side_by_side_bench
    REALKUBE_BIN=$(tools/realkube.sh bin-dir) \\
        bazel-bin/integration_tests/real_side_by_side_bench [--runs=3]
        [--configmaps=50000] [--pods=10000] [--pod_namespaces=10]

It starts the real control plane (integration_tests/realkube/
control_plane.py), seeds it over the API on parallel keep-alive connections:
ConfigMaps as `kubectl create configmap` makes them (1 KiB of data, field
manager kubectl-create) and Pods of the emulator's seed shape (taken from a
kube_emulator started with --seed_pods/--seed_pod_namespaces) created with
field manager kube-controller-manager, as a ReplicaSet's are, then given the
seed's Running status through the status subresource with field manager
kubelet, as a node's kubelet does. Then it runs memory_bench against the
server for each case (--kubeconfig mode) and prints its tables.
"""

import argparse
import http.client
import json
import os
import queue
import shlex
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "realkube"))
import control_plane  # noqa: E402

WORKERS = 8
CM_NAMESPACE = "bench"


def runfile(relative):
    """A binary of this workspace next to this script's runfiles."""
    for root in (os.environ.get("RUNFILES_DIR"),
                 os.path.abspath(sys.argv[0]) + ".runfiles"):
        if root:
            path = os.path.join(root, "informer_sidecar", relative)
            if os.access(path, os.X_OK):
                return path
    raise SystemExit("not in the runfiles: " + relative)


class Loader:
    """Sends requests on WORKERS keep-alive TLS connections at once."""

    def __init__(self, cp):
        self.host, self.port = "127.0.0.1", cp.port
        self.ctx = ssl.create_default_context(cafile=cp.ca_file)
        self.headers = {"Authorization": "Bearer " + cp.admin_token,
                        "Content-Type": "application/json"}

    def run(self, requests):
        """requests: an iterable of lists of (method, path, body,
        content_type), each list sent in order on one connection."""
        q = queue.Queue(maxsize=WORKERS * 4)
        errors = []

        def work():
            conn = http.client.HTTPSConnection(self.host, self.port,
                                               context=self.ctx, timeout=120)
            while True:
                item = q.get()
                if item is None:
                    return
                # One item: requests that must go in order (a create, then
                # its status), on this connection.
                for method, path, body, ctype in item:
                    headers = dict(self.headers)
                    if ctype:
                        headers["Content-Type"] = ctype
                    conn.request(method, path, body, headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    if resp.status >= 300 and resp.status != 409:
                        errors.append("%s %s: %d %s" % (
                            method, path, resp.status, data[:300]))

        threads = [threading.Thread(target=work) for _ in range(WORKERS)]
        for t in threads:
            t.start()
        for item in requests:
            q.put(item)
        for _ in threads:
            q.put(None)
        for t in threads:
            t.join()
        if errors:
            raise SystemExit("%d requests failed, e.g. %s" % (len(errors),
                                                               errors[0]))


def configmaps(n):
    for i in range(n):
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cm-%d" % i,
                             "namespace": CM_NAMESPACE},
                "data": {"payload": "x" * 1024}}
        yield [("POST", "/api/v1/namespaces/%s/configmaps?fieldManager="
                "kubectl-create" % CM_NAMESPACE, json.dumps(body), None)]


def emulator_pods(n, namespaces, tmp):
    """The emulator's seeded Pods (their JSON as it serves them)."""
    port_file = os.path.join(tmp, "emu.port")
    emu = subprocess.Popen(
        [runfile("emulator/kube_emulator"), "--seed_pods=%d" % n,
         "--seed_pod_namespaces=%d" % namespaces,
         "--print_port_file=" + port_file],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not os.path.exists(port_file):
            if emu.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("kube_emulator did not start")
            time.sleep(0.05)
        with open(port_file) as f:
            port = int(f.read())
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        conn.request("GET", "/api/v1/pods")
        return json.loads(conn.getresponse().read())["items"]
    finally:
        emu.terminate()
        emu.wait()


def pod_requests(pods):
    """Create as kube-controller-manager, then the status as kubelet."""
    for pod in pods:
        meta = pod["metadata"]
        for k in ("uid", "resourceVersion", "creationTimestamp",
                  "managedFields"):
            meta.pop(k, None)
        status = pod.pop("status")
        base = "/api/v1/namespaces/%s/pods" % meta["namespace"]
        yield [("POST", base + "?fieldManager=kube-controller-manager",
                json.dumps(pod), None),
               ("PATCH", "%s/%s/status?fieldManager=kubelet" %
                (base, urllib.parse.quote(meta["name"])),
                json.dumps({"status": status}),
                "application/merge-patch+json")]


def seed(cp, args, tmp):
    loader = Loader(cp)
    cp.create_namespace(CM_NAMESPACE)
    t0 = time.monotonic()
    loader.run(configmaps(args.configmaps))
    print("seeded %d ConfigMaps in %.0f s" % (args.configmaps,
                                              time.monotonic() - t0),
          flush=True)
    pods = emulator_pods(args.pods, args.pod_namespaces, tmp)
    for ns in sorted({p["metadata"]["namespace"] for p in pods}):
        cp.create_namespace(ns)
    emulated = json.dumps(pods[0], separators=(",", ":"))
    t0 = time.monotonic()
    loader.run(pod_requests(pods))
    print("seeded %d Pods (create + status) in %.0f s" %
          (len(pods), time.monotonic() - t0), flush=True)
    compare_shapes(cp, json.loads(emulated))


def compare_shapes(cp, emulated):
    """The same Pod as the emulator serves it and as the real server does
    after the seeding's create and status update."""
    meta = emulated["metadata"]
    real = cp.api("GET", "/api/v1/namespaces/%s/pods/%s" %
                  (meta["namespace"], meta["name"]))
    for name, pod in (("emulator", emulated), ("kube-apiserver", real)):
        compact = json.dumps(pod, separators=(",", ":"))
        managed = pod["metadata"].get("managedFields") or []
        mf = len(json.dumps(managed, separators=(",", ":")))
        print("a Pod as %s serves it: %d B of JSON, managedFields %d B (%s)"
              % (name, len(compact), mf, ", ".join(
                  "%s/%s%s" % (m.get("manager"), m.get("operation"),
                               "/" + m["subresource"] if m.get("subresource")
                               else "") for m in managed)), flush=True)
    print("fields only the real Pod has: %s" % sorted(
        set(flatten(real)) - set(flatten(emulated))), flush=True)
    print("fields only the emulator's Pod has: %s" % sorted(
        set(flatten(emulated)) - set(flatten(real))), flush=True)


def flatten(obj, prefix=""):
    """Field paths of `obj` (lists by their first item), managedFields'
    own contents left out."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            path = prefix + "." + k if prefix else k
            yield path
            if k != "managedFields":
                yield from flatten(v, path)
    elif isinstance(obj, list) and obj:
        yield from flatten(obj[0], prefix + "[]")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--configmaps", type=int, default=50000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--pod_namespaces", type=int, default=10)
    parser.add_argument("--initial_state", default="default",
                        help="memory_bench's --initial_state: default "
                        "(WatchList for both on v1.37) or list")
    parser.add_argument("--bench_flags", default="",
                        help="more memory_bench flags")
    args = parser.parse_args()
    bin_dir = os.environ.get("REALKUBE_BIN")
    if not bin_dir:
        raise SystemExit("set REALKUBE_BIN=$(tools/realkube.sh bin-dir)")
    bench = runfile("integration_tests/memory_bench")
    tmp = tempfile.mkdtemp(prefix="rksbs", dir="/tmp")
    try:
        run_all(args, bin_dir, bench, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_all(args, bin_dir, bench, tmp):
    with control_plane.ControlPlane(bin_dir) as cp:
        print("kube-apiserver %s at %s" % (cp.version, cp.server), flush=True)
        seed(cp, args, tmp)
        curl = "--cacert %s -H 'Authorization: Bearer %s'" % (
            cp.ca_file, cp.admin_token)
        for resource, ns in (("configmaps", CM_NAMESPACE), ("pods", "")):
            cmd = [bench, "--kubeconfig=" + cp.admin_kubeconfig,
                   "--resource=" + resource, "--namespace=" + ns,
                   "--curl_flags=" + curl, "--runs=%d" % args.runs,
                   "--tunables=default",
                   "--initial_state=" + args.initial_state,
                   "--client_go_bench=" + os.path.join(
                       bin_dir, "kube-informer-bench")]
            cmd += shlex.split(args.bench_flags)
            print("\n$ memory_bench --resource=%s --namespace=%s" %
                  (resource, ns), flush=True)
            subprocess.run(cmd, check=True, env=dict(
                os.environ, RUNFILES_DIR=os.path.dirname(
                    os.path.dirname(os.path.dirname(bench)))))


if __name__ == "__main__":
    main()
