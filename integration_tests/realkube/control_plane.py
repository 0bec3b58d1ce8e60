#!/usr/bin/env python3
"""A real Kubernetes control plane on loopback for tests: etcd and
kube-apiserver built from Go modules (tools/realkube.sh build), with TLS from
a throw-away CA, static tokens for an admin (system:masters) and an
unprivileged user, and RBAC.

As a module (Python tests):

    with ControlPlane(bin_dir) as cp:          # waits for /readyz
        cp.create_namespace("demo")            # with its default ServiceAccount
        cp.api("GET", "/api/v1/namespaces/demo/configmaps")
        cp.restart_apiserver(feature_gates={"SomeGate": False})
        cp.compact_etcd()

As a command (the C++ fixture and tools/realkube.sh):

    control_plane.py up [--state-dir D] [--bin-dir B]   # runs in the background
    control_plane.py env [--state-dir D]                # shell exports
    control_plane.py down [--state-dir D]
    control_plane.py serve --state-dir D                # in the foreground
    control_plane.py restart-apiserver|compact|create-namespace|status ...

`serve` is the supervisor: it owns etcd and kube-apiserver, prints one JSON
line on stdout once the API server is ready (or failed to start), answers the
control commands on the unix socket D/control.sock, and stops both on SIGTERM,
SIGINT or the `stop` command. `up` starts it detached and returns once it is
ready; the other commands talk to it through the socket.

No kube-controller-manager runs, so the fixture does what it would for the
tests: namespaces it creates get their `default` ServiceAccount, which Pods
need to pass admission. Nothing is left behind: every child runs in its own
process group with PR_SET_PDEATHSIG (it dies with its parent), and stopping
sends SIGTERM to the group, then SIGKILL after a bound. Waits poll a
condition (a port, /readyz, a process's exit) against a deadline.
"""

import argparse
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ADMIN_USER = "realkube-admin"
UNPRIVILEGED_USER = "realkube-user"
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
DEFAULT_STATE_DIR = os.path.join(tempfile.gettempdir(),
                                 "informer-realkube-%d" % os.getuid())
READY_TIMEOUT = 180.0   # a cold kube-apiserver on 2 busy cores
STOP_GRACE = 20.0       # SIGTERM to SIGKILL
BIND_ATTEMPTS = 5
POLL_INTERVAL = 0.1

_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)


class ControlPlaneError(Exception):
    """A control plane that failed to start or to answer a control."""


def _child_setup(parent_pid):
    """Runs in the child between fork and exec: its own process group (so a
    stop reaches its children too) and death with the parent."""
    def setup():
        os.setpgid(0, 0)
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl
            os._exit(1)
    return setup


def free_port():
    """A port free right now on 127.0.0.1 (the caller retries when another
    process takes it before the server binds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path, lines=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def _openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_pki(pki_dir):
    """A throw-away CA, a serving certificate for 127.0.0.1/localhost signed
    by it, and the service-account signing key pair, with the openssl CLI."""
    os.makedirs(pki_dir, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
          "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "7", "-subj", "/CN=informer-realkube-ca", cwd=pki_dir)
    _openssl("req", *ec, "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=kube-apiserver", cwd=pki_dir)
    with open(os.path.join(pki_dir, "server.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,"
                "DNS:kubernetes,DNS:kubernetes.default,"
                "DNS:kubernetes.default.svc\n"
                "extendedKeyUsage=serverAuth\n"
                "keyUsage=critical,digitalSignature,keyEncipherment\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt",
             "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.crt",
             "-days", "7", "-extfile", "server.ext", cwd=pki_dir)
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt",
             "rsa_keygen_bits:2048", "-out", "sa.key", cwd=pki_dir)
    _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub",
             cwd=pki_dir)


def write_kubeconfig(path, server, ca_file, token, user):
    with open(path, "w") as f:
        f.write("apiVersion: v1\nkind: Config\ncurrent-context: realkube\n"
                "clusters:\n- name: realkube\n  cluster:\n"
                "    server: %s\n    certificate-authority: %s\n"
                "contexts:\n- name: realkube\n  context:\n"
                "    cluster: realkube\n    user: %s\n"
                "users:\n- name: %s\n  user:\n    token: %s\n"
                % (server, ca_file, user, user, token))


class _Child:
    """One server process (etcd or kube-apiserver) with its log file."""

    def __init__(self, name, argv, log_path):
        self.name = name
        self.log_path = log_path
        log = open(log_path, "ab")
        self.log_start = log.tell()  # the log is shared across restarts
        try:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_child_setup(os.getpid()))
        finally:
            log.close()

    @property
    def pid(self):
        return self.proc.pid

    def running(self):
        return self.proc.poll() is None

    def bind_failed(self):
        if self.running():
            return False
        with open(self.log_path, "rb") as f:
            f.seek(self.log_start)
            return b"address already in use" in f.read()

    def stop(self, grace=STOP_GRACE):
        """SIGTERM to the process group, SIGKILL after `grace` seconds."""
        if self.proc.returncode is not None:
            return self.proc.returncode
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                return self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        return self.proc.returncode


def _wait_for(condition, timeout, what, child=None):
    """Polls `condition` until true; raises after `timeout` or when `child`
    exits first."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return
        if child is not None and not child.running():
            raise ControlPlaneError(
                "%s exited (code %s) while waiting for %s; log %s:\n%s" %
                (child.name, child.proc.returncode, what, child.log_path,
                 _tail(child.log_path)))
        if time.monotonic() > deadline:
            raise ControlPlaneError("timed out after %.0fs waiting for %s" %
                                    (timeout, what))
        time.sleep(POLL_INTERVAL)


class ControlPlane:
    """etcd + kube-apiserver on loopback, owned by this process.

    start() returns once /readyz answers ok; stop() (or leaving the `with`
    block, on failure too) stops both. Not thread-safe: one thread drives it
    (PR_SET_PDEATHSIG ties the children to the thread that started them, so
    start and restart from the same long-lived thread).
    """

    def __init__(self, bin_dir, state_dir=None, feature_gates=None,
                 extra_apiserver_flags=()):
        self.bin_dir = os.path.abspath(bin_dir)
        for tool in ("etcd", "kube-apiserver", "etcdctl"):
            if not os.access(os.path.join(self.bin_dir, tool), os.X_OK):
                raise ControlPlaneError("no %s in %s (run tools/realkube.sh "
                                        "build)" % (tool, self.bin_dir))
        self._own_dir = state_dir is None
        self.state_dir = os.path.abspath(
            state_dir or tempfile.mkdtemp(prefix="realkube."))
        self.feature_gates = dict(feature_gates or {})
        self.extra_apiserver_flags = list(extra_apiserver_flags)
        self.pki = os.path.join(self.state_dir, "pki")
        self.logs = os.path.join(self.state_dir, "logs")
        self.ca_file = os.path.join(self.pki, "ca.crt")
        self.admin_token = secrets.token_hex(16)
        self.user_token = secrets.token_hex(16)
        self.admin_kubeconfig = os.path.join(self.state_dir,
                                             "admin.kubeconfig")
        self.user_kubeconfig = os.path.join(self.state_dir, "user.kubeconfig")
        self.etcd = None
        self.apiserver = None
        self.etcd_endpoint = None
        self.port = None
        self.version = None
        self._ssl = None

    # ---- lifecycle -------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        try:
            os.makedirs(self.logs, exist_ok=True)
            make_pki(self.pki)
            self._ssl = ssl.create_default_context(cafile=self.ca_file)
            with open(os.path.join(self.pki, "tokens.csv"), "w") as f:
                f.write('%s,%s,%s-uid,"system:masters"\n' %
                        (self.admin_token, ADMIN_USER, ADMIN_USER))
                f.write("%s,%s,%s-uid\n" % (self.user_token,
                                            UNPRIVILEGED_USER,
                                            UNPRIVILEGED_USER))
            self._start_etcd()
            self._start_apiserver(new_port=True)
            write_kubeconfig(self.admin_kubeconfig, self.server, self.ca_file,
                             self.admin_token, ADMIN_USER)
            write_kubeconfig(self.user_kubeconfig, self.server, self.ca_file,
                             self.user_token, UNPRIVILEGED_USER)
            for ns in ("default", "kube-system", "kube-public"):
                self.create_namespace(ns)
            self.aggregate_cluster_roles()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        """Stops the API server, then etcd. Idempotent."""
        for child in (self.apiserver, self.etcd):
            if child is not None:
                child.stop()
        if self._own_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def _start_etcd(self):
        for _ in range(BIND_ATTEMPTS):
            client, peer = free_port(), free_port()
            self.etcd_endpoint = "http://127.0.0.1:%d" % client
            peer_url = "http://127.0.0.1:%d" % peer
            data_dir = os.path.join(self.state_dir, "etcd-data")
            shutil.rmtree(data_dir, ignore_errors=True)
            self.etcd = _Child("etcd", [
                os.path.join(self.bin_dir, "etcd"), "--name=realkube",
                "--data-dir=" + data_dir,
                "--listen-client-urls=" + self.etcd_endpoint,
                "--advertise-client-urls=" + self.etcd_endpoint,
                "--listen-peer-urls=" + peer_url,
                "--initial-advertise-peer-urls=" + peer_url,
                "--initial-cluster=realkube=" + peer_url,
                "--log-level=warn", "--unsafe-no-fsync",
            ], os.path.join(self.logs, "etcd.log"))
            try:
                _wait_for(self._etcd_healthy, READY_TIMEOUT, "etcd /health",
                          self.etcd)
                return
            except ControlPlaneError:
                if not self.etcd.bind_failed():
                    raise
        raise ControlPlaneError("etcd: no free port after %d attempts" %
                                BIND_ATTEMPTS)

    def _etcd_healthy(self):
        try:
            with urllib.request.urlopen(self.etcd_endpoint + "/health",
                                        timeout=5) as r:
                return json.load(r).get("health") == "true"
        except (OSError, ValueError):
            return False

    def _apiserver_argv(self):
        argv = [
            os.path.join(self.bin_dir, "kube-apiserver"),
            "--etcd-servers=" + self.etcd_endpoint,
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            "--secure-port=%d" % self.port,
            "--cert-dir=" + os.path.join(self.state_dir, "apiserver-certs"),
            "--tls-cert-file=" + os.path.join(self.pki, "server.crt"),
            "--tls-private-key-file=" + os.path.join(self.pki, "server.key"),
            "--client-ca-file=" + self.ca_file,
            "--token-auth-file=" + os.path.join(self.pki, "tokens.csv"),
            "--authorization-mode=RBAC",
            "--service-account-issuer=" + SA_ISSUER,
            "--service-account-key-file=" + os.path.join(self.pki, "sa.pub"),
            "--service-account-signing-key-file=" +
            os.path.join(self.pki, "sa.key"),
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            # No Endpoints for the `kubernetes` Service: loopback addresses
            # are invalid there, and nothing in the tests needs them.
            "--endpoint-reconciler-type=none",
            # Open watches end within 1 s of SIGTERM; by default the server
            # waits for them up to its 60 s request timeout.
            "--shutdown-watch-termination-grace-period=1s",
            # Compaction only when a test asks for it (compact_etcd).
            "--etcd-compaction-interval=0",
            "--profiling=false",
        ]
        if self.feature_gates:
            argv.append("--feature-gates=" + ",".join(
                "%s=%s" % (k, "true" if v else "false")
                for k, v in sorted(self.feature_gates.items())))
        return argv + self.extra_apiserver_flags

    def _start_apiserver(self, new_port):
        """Starts kube-apiserver and waits for /readyz. A fresh free port
        per attempt when `new_port`; a restart keeps its port (clients'
        kubeconfigs name it) and retries only while it is still held."""
        log = os.path.join(self.logs, "kube-apiserver.log")
        for attempt in range(BIND_ATTEMPTS):
            if new_port or self.port is None:
                self.port = free_port()
            self.apiserver = _Child("kube-apiserver", self._apiserver_argv(),
                                    log)
            try:
                _wait_for(self._ready, READY_TIMEOUT, "kube-apiserver /readyz",
                          self.apiserver)
                self.version = self.api("GET", "/version")["gitVersion"]
                return
            except ControlPlaneError:
                if not self.apiserver.bind_failed():
                    raise
                if not new_port:
                    _wait_for(lambda: _port_free(self.port), 30,
                              "port %d to be released" % self.port)
        raise ControlPlaneError("kube-apiserver: could not bind after %d "
                                "attempts" % BIND_ATTEMPTS)

    def _ready(self):
        try:
            req = urllib.request.Request(self.server + "/readyz")
            with urllib.request.urlopen(req, context=self._ssl,
                                        timeout=5) as r:
                return r.status == 200
        except (OSError, ValueError):
            return False

    # ---- controls --------------------------------------------------------

    @property
    def server(self):
        return "https://127.0.0.1:%d" % self.port

    def restart_apiserver(self, feature_gates=None, extra_flags=None):
        """Stops kube-apiserver (SIGTERM) and starts it again on the same
        port against the same etcd. `feature_gates` (name -> bool) replaces
        the gates of the last start when given ({} = none); so does
        `extra_flags`."""
        if feature_gates is not None:
            self.feature_gates = dict(feature_gates)
        if extra_flags is not None:
            self.extra_apiserver_flags = list(extra_flags)
        self.stop_apiserver()
        self.start_apiserver()

    def stop_apiserver(self):
        """Stops kube-apiserver (SIGTERM) and leaves etcd running: an API
        server outage. Its port refuses connections until start_apiserver."""
        self.apiserver.stop()

    def start_apiserver(self):
        """Starts kube-apiserver again after stop_apiserver, on the same
        port against the same etcd; returns once /readyz answers ok."""
        self._start_apiserver(new_port=False)

    def apiserver_running(self):
        return self.apiserver is not None and self.apiserver.running()

    def etcdctl(self, *args):
        out = subprocess.run(
            [os.path.join(self.bin_dir, "etcdctl"),
             "--endpoints=" + self.etcd_endpoint] + list(args),
            check=False, capture_output=True, text=True, errors="replace",
            timeout=60)
        if out.returncode != 0:
            raise ControlPlaneError("etcdctl %s: %s" % (" ".join(args),
                                                         out.stderr.strip()))
        return out.stdout

    def etcd_revision(self):
        status = json.loads(self.etcdctl("endpoint", "status", "-w", "json"))
        return int(status[0]["Status"]["header"]["revision"])

    def compact_etcd(self):
        """Compacts etcd at its current revision (as the API server's
        periodic compaction does); returns that revision."""
        revision = self.etcd_revision()
        self.etcdctl("compact", str(revision), "--physical")
        return revision

    def api(self, method, path, body=None, token=None, ok_statuses=()):
        """One request to the API server, as the admin unless `token`.
        Returns the decoded JSON (text for non-JSON answers). Raises
        urllib.error.HTTPError on an error status not in `ok_statuses`."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.server + path, data=data,
                                     method=method)
        req.add_header("Authorization",
                       "Bearer " + (token or self.admin_token))
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, context=self._ssl,
                                        timeout=60) as r:
                text = r.read().decode()
        except urllib.error.HTTPError as e:
            if e.code not in ok_statuses:
                e.msg = "%s %s: %s" % (method, path, e.read().decode())
                raise
            return None
        try:
            return json.loads(text)
        except ValueError:
            return text

    def create_namespace(self, name):
        """Creates namespace `name` (if missing) and its `default`
        ServiceAccount, as kube-controller-manager would."""
        self.api("POST", "/api/v1/namespaces",
                 {"apiVersion": "v1", "kind": "Namespace",
                  "metadata": {"name": name}}, ok_statuses=(409,))
        self.api("POST", "/api/v1/namespaces/%s/serviceaccounts" % name,
                 {"apiVersion": "v1", "kind": "ServiceAccount",
                  "metadata": {"name": "default"}}, ok_statuses=(409,))

    def aggregate_cluster_roles(self):
        """Fills the rules of ClusterRoles with an aggregationRule (admin,
        edit, view, ...) from the ClusterRoles their selectors match, as
        kube-controller-manager's clusterrole-aggregation controller does;
        bootstrapped without it, `view` grants nothing. Aggregates nest
        (view's rules are part of edit's), so it repeats to a fixpoint."""
        path = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
        roles = self.api("GET", path)["items"]
        changed = set()
        for _ in range(len(roles)):
            progress = False
            for role in roles:
                selectors = (role.get("aggregationRule") or {}).get(
                    "clusterRoleSelectors") or []
                rules = []
                for other in roles:
                    labels = other["metadata"].get("labels") or {}
                    if other is not role and any(
                            all(labels.get(k) == v for k, v in
                                (sel.get("matchLabels") or {}).items())
                            for sel in selectors):
                        rules += [r for r in other.get("rules") or []
                                  if r not in rules]
                if selectors and rules != (role.get("rules") or []):
                    role["rules"] = rules
                    changed.add(role["metadata"]["name"])
                    progress = True
            if not progress:
                break
        for role in roles:
            if role["metadata"]["name"] in changed:
                self.api("PUT", path + "/" + role["metadata"]["name"], role)

    def bind_cluster_role(self, user, cluster_role):
        """A ClusterRoleBinding of `cluster_role` (e.g. "view") to `user`."""
        name = "realkube-%s-%s" % (user, cluster_role)
        self.api("POST",
                 "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                 {"apiVersion": "rbac.authorization.k8s.io/v1",
                  "kind": "ClusterRoleBinding", "metadata": {"name": name},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                              "kind": "ClusterRole", "name": cluster_role},
                  "subjects": [{"apiGroup": "rbac.authorization.k8s.io",
                                "kind": "User", "name": user}]},
                 ok_statuses=(409,))

    def state(self):
        """What clients need, as written to state.json."""
        return {
            "server": self.server, "port": self.port,
            "version": self.version, "ca_file": self.ca_file,
            "admin_user": ADMIN_USER, "admin_token": self.admin_token,
            "user": UNPRIVILEGED_USER, "user_token": self.user_token,
            "admin_kubeconfig": self.admin_kubeconfig,
            "user_kubeconfig": self.user_kubeconfig,
            "etcd_endpoint": self.etcd_endpoint, "bin_dir": self.bin_dir,
            "state_dir": self.state_dir, "logs": self.logs,
            "feature_gates": self.feature_gates,
            "pids": {"etcd": self.etcd.pid, "kube-apiserver":
                     self.apiserver.pid, "supervisor": os.getpid()},
        }


def _alive(pid):
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(") ", 1)[-1][:1] != "Z"
    except OSError:
        return False


def _port_free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


# ---- the supervisor and its control socket ------------------------------

class _Stop(Exception):
    pass


def _raise_stop(signum, frame):
    raise _Stop()


def _handle(cp, request):
    cmd = request.get("cmd")
    if cmd == "status":
        return cp.state()
    if cmd == "restart_apiserver":
        gates = request.get("feature_gates")
        cp.restart_apiserver(feature_gates=gates,
                             extra_flags=request.get("extra_flags"))
    elif cmd == "compact":
        return {"revision": cp.compact_etcd()}
    elif cmd == "create_namespace":
        cp.create_namespace(request["name"])
    elif cmd == "bind_cluster_role":
        cp.bind_cluster_role(request["user"], request["cluster_role"])
    else:
        raise ControlPlaneError("unknown command %r" % cmd)
    _write_state(cp)
    return cp.state()


def _write_state(cp):
    path = os.path.join(cp.state_dir, "state.json")
    with open(path + ".tmp", "w") as f:
        json.dump(cp.state(), f, indent=1)
    os.replace(path + ".tmp", path)


def serve(args):
    """The supervisor: starts the control plane, reports on stdout, then
    answers control commands until told to stop."""
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, _raise_stop)
    os.makedirs(args.state_dir, exist_ok=True)
    sock_path = os.path.join(args.state_dir, "control.sock")
    cp = None
    try:
        cp = ControlPlane(args.bin_dir, args.state_dir,
                          feature_gates=_parse_gates(args.feature_gates))
        cp.start()
        _write_state(cp)
        if os.path.exists(sock_path):
            os.unlink(sock_path)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(sock_path)
        server.listen(8)
        _report({"ok": True, "state": cp.state()})
        while True:
            conn, _ = server.accept()
            with conn:
                request = json.loads(conn.makefile().readline() or "{}")
                if request.get("cmd") == "stop":
                    conn.sendall(b'{"ok": true}\n')
                    break
                try:
                    reply = {"ok": True, "state": _handle(cp, request)}
                except Exception as e:  # reported to the caller
                    reply = {"ok": False, "error": str(e)}
                conn.sendall((json.dumps(reply) + "\n").encode())
    except _Stop:
        pass
    except Exception as e:
        _report({"ok": False, "error": str(e)})
        return 1
    finally:
        if cp is not None:
            cp.stop()
        for name in ("control.sock", "state.json"):
            try:
                os.unlink(os.path.join(args.state_dir, name))
            except OSError:
                pass
    return 0


def _report(message):
    """One JSON line on stdout, then stdout goes to /dev/null (`up` reads
    the line and leaves)."""
    try:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except OSError:
        pass


def _parse_gates(text):
    gates = {}
    for item in filter(None, (text or "").split(",")):
        name, _, value = item.partition("=")
        gates[name.strip()] = value.strip().lower() in ("true", "1", "")
    return gates


def _ask(state_dir, request, timeout=READY_TIMEOUT + 60):
    sock_path = os.path.join(state_dir, "control.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(sock_path)
        except OSError as e:
            raise ControlPlaneError("no control plane running in %s (%s)" %
                                    (state_dir, e))
        s.sendall((json.dumps(request) + "\n").encode())
        reply = json.loads(s.makefile().readline() or "{}")
    if not reply.get("ok"):
        raise ControlPlaneError(reply.get("error", "no answer"))
    return reply


def _find_bin_dir(args):
    if args.bin_dir:
        return args.bin_dir
    if os.environ.get("REALKUBE_BIN"):
        return os.environ["REALKUBE_BIN"]
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                          "..", "..", "tools", "realkube.sh")
    out = subprocess.run(["bash", script, "bin-dir"], capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        raise ControlPlaneError("peers not built: run tools/realkube.sh "
                                "build (%s)" % out.stderr.strip())
    return out.stdout.strip()


def up(args):
    state_dir = os.path.abspath(args.state_dir)
    try:
        state = _ask(state_dir, {"cmd": "status"}, timeout=10)["state"]
        print("already running in %s" % state_dir)
        _print_up(state)
        return 0
    except ControlPlaneError:
        pass
    os.makedirs(state_dir, exist_ok=True)
    # Detached: the supervisor outlives this command (`down` stops it).
    log = open(os.path.join(state_dir, "supervisor.log"), "ab")
    argv = [sys.executable, os.path.abspath(__file__), "serve",
            "--state-dir", state_dir, "--bin-dir", _find_bin_dir(args)]
    if args.feature_gates:
        argv += ["--feature-gates", args.feature_gates]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=log,
                            start_new_session=True, text=True)
    log.close()
    line = proc.stdout.readline()  # EOF if it died without a word
    proc.stdout.close()
    reply = json.loads(line) if line.strip() else {
        "ok": False, "error": "supervisor exited: see %s/supervisor.log" %
        state_dir}
    if not reply.get("ok"):
        proc.wait()
        print("realkube up failed: %s" % reply.get("error"), file=sys.stderr)
        return 1
    _print_up(reply["state"])
    return 0


def _print_up(state):
    print("kube-apiserver %s at %s" % (state["version"], state["server"]))
    print("etcd           %s" % state["etcd_endpoint"])
    print("kubeconfig     %s (%s, system:masters)" %
          (state["admin_kubeconfig"], state["admin_user"]))
    print("user config    %s (%s, no roles)" %
          (state["user_kubeconfig"], state["user"]))
    print("CA             %s" % state["ca_file"])
    print("logs           %s" % state["logs"])
    print("state          %s (pids: %s)" % (
        state["state_dir"], ", ".join("%s %d" % kv
                                      for kv in state["pids"].items())))


def down(args):
    state_dir = os.path.abspath(args.state_dir)
    path = os.path.join(state_dir, "state.json")
    try:
        with open(path) as f:
            pid = json.load(f)["pids"]["supervisor"]
    except (OSError, ValueError, KeyError):
        print("no control plane running in %s" % state_dir)
        return 0
    try:
        _ask(state_dir, {"cmd": "stop"}, timeout=10)
    except (ControlPlaneError, OSError, ValueError):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    # The supervisor removes state.json once etcd and the API server exited
    # (a supervisor that died left it behind; its children died with it).
    try:
        _wait_for(lambda: not os.path.exists(path) or not _alive(pid),
                  3 * STOP_GRACE, "the supervisor (pid %d) to stop" % pid)
    except ControlPlaneError:
        os.kill(pid, signal.SIGKILL)  # its children die with it (pdeathsig)
    if os.path.exists(path):
        os.unlink(path)
    print("stopped the control plane in %s" % state_dir)
    return 0


def env(args):
    state = _ask(os.path.abspath(args.state_dir), {"cmd": "status"},
                 timeout=10)["state"]
    exports = {
        "KUBECONFIG": state["admin_kubeconfig"],
        "REALKUBE_SERVER": state["server"],
        "REALKUBE_CA": state["ca_file"],
        "REALKUBE_ADMIN_TOKEN": state["admin_token"],
        "REALKUBE_USER_TOKEN": state["user_token"],
        "REALKUBE_USER_KUBECONFIG": state["user_kubeconfig"],
        "REALKUBE_BIN": state["bin_dir"],
        "ETCDCTL_ENDPOINTS": state["etcd_endpoint"],
    }
    for k, v in exports.items():
        print("export %s='%s'" % (k, v))
    print("export PATH='%s':\"$PATH\"" % state["bin_dir"])
    return 0


def control(args):
    request = {"cmd": args.command.replace("-", "_")}
    if args.command == "restart-apiserver":
        if args.feature_gates is not None:
            request["feature_gates"] = _parse_gates(args.feature_gates)
    elif args.command == "create-namespace":
        request["name"] = args.name
    reply = _ask(os.path.abspath(args.state_dir), request)
    print(json.dumps(reply["state"]))
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("up", "serve", "down", "env", "status", "compact",
                 "restart-apiserver", "create-namespace"):
        s = sub.add_parser(name)
        s.add_argument("--state-dir", default=DEFAULT_STATE_DIR)
        if name in ("up", "serve"):
            s.add_argument("--bin-dir", default="")
        if name in ("up", "serve", "restart-apiserver"):
            s.add_argument("--feature-gates", default=None,
                           help="Name=true,Other=false")
        if name == "create-namespace":
            s.add_argument("name")
    args = p.parse_args(argv)
    try:
        if args.command == "serve":
            if not args.bin_dir:
                args.bin_dir = _find_bin_dir(args)
            return serve(args)
        handler = {"up": up, "down": down, "env": env}.get(args.command,
                                                           control)
        return handler(args)
    except ControlPlaneError as e:
        print("control_plane: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
