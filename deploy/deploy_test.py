"""Checks the deployment files against the sidecar binary they deploy.

The manifests and the Dockerfile cannot be applied or built here, so this
test checks what can go stale silently: every YAML document parses and has
the fields the examples promise, every --flag they pass exists in
`informer_sidecar --helpfull`, the RBAC rules cover the resources the
manifests configure, the runtime image installs every package providing a
shared library the binary links, and the example tokens files load.

The node-level cache (node-cache.yaml, pod-with-node-cache.yaml) adds the
Kubernetes API facade's rules: a facade listening beyond loopback serves
TLS from a mounted Secret, its Service targets the port it listens on, a pod
sidecar's https --cache_upstream names that Service, has its CA and a token
of the node cache's tokens file for its namespace, and the node cache
caches everything the pod sidecar asks for. Every file a flag names lies in
a mounted Secret that has that key (in the manifests, or created by the
kubectl command their comments give). One test runs the DaemonSet's own
flags with certificates from node-cache-certs.sh and checks TLS for the
Service name and the per-namespace tokens over HTTPS.
"""
import http.client
import json
import os
import posixpath
import re
import secrets
import shlex
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import unittest
import urllib.parse

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
MANIFESTS = ("rbac.yaml", "pod-with-sidecar.yaml", "daemonset.yaml",
             "node-cache.yaml", "pod-with-node-cache.yaml")
SIDECAR_IMAGE = "informer-sidecar"


def runfile(path):
    base = os.environ.get("TEST_SRCDIR")
    if base:
        candidate = os.path.join(base, os.environ.get("TEST_WORKSPACE", ""),
                                 path)
        if os.path.exists(candidate):
            return candidate
    return os.path.join(HERE, "..", path)


BINARY = runfile("server/informer_sidecar")


def documents(name):
    with open(os.path.join(HERE, name)) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def all_documents():
    return [(name, doc) for name in MANIFESTS for doc in documents(name)]


def pod_templates():
    """(file, kind/name, namespace, pod labels, pod spec) for every Pod and
    workload template."""
    for name, doc in all_documents():
        kind = doc["kind"]
        meta = doc["metadata"]
        ident = "%s %s/%s" % (name, kind, meta["name"])
        ns = meta.get("namespace", "default")
        if kind == "Pod":
            yield name, ident, ns, meta.get("labels", {}), doc["spec"]
        elif kind in ("DaemonSet", "Deployment", "StatefulSet"):
            template = doc["spec"]["template"]
            yield (name, ident, ns, template["metadata"].get("labels", {}),
                   template["spec"])


def pod_specs():
    """(file, kind/name, pod spec) for every Pod and workload template."""
    for name, ident, _, _, spec in pod_templates():
        yield name, ident, spec


class Sidecar(object):
    """One container running informer_sidecar, with its pod's context."""

    def __init__(self, file, where, ns, labels, spec, container, argv):
        self.file = file
        self.where = where
        self.ns = ns
        self.labels = labels
        self.spec = spec
        self.container = container
        self.argv = argv

    def flag(self, name):
        return flag_value(self.argv, name)

    def config(self):
        """The --config file a shell wrapper writes (parsed), or None."""
        if "command" not in self.container:
            return None
        script = " ".join(self.container["command"] +
                          self.container.get("args", []))
        m = re.search(r"<<EOF\n(.*?)\nEOF\n", script, re.DOTALL)
        return yaml.safe_load(m.group(1)) if m else None

    def resources(self):
        """The resources it caches, as configured ("pods",
        "deployments.apps")."""
        listed = [r for r in (self.flag("resources") or "").split(",") if r]
        config = self.config()
        if config:
            listed += [r["resource"] for r in config.get("resources", [])]
        return listed


def sidecars():
    for file, ident, ns, labels, spec in pod_templates():
        for c in spec.get("initContainers", []) + spec["containers"]:
            if SIDECAR_IMAGE not in c.get("image", ""):
                continue
            where = "%s container %s" % (ident, c["name"])
            if "command" not in c:
                argv = list(c.get("args", []))
            else:
                # A shell wrapper: the words after the binary's path, with
                # shell line continuations joined.
                script = " ".join(c["command"] + c.get("args", []))
                script = script.replace("\\\n", " ")
                m = re.search(r"informer_sidecar\s(.*)", script)
                if m is None:
                    continue  # another program of the same image (init step)
                argv = shlex.split(m.group(1).splitlines()[0])
            yield Sidecar(file, where, ns, labels, spec, c, argv)


def sidecar_containers():
    """(where, container, sidecar argv) for each container running it."""
    for sc in sidecars():
        yield sc.where, sc.container, sc.argv


def documented_secrets():
    """{(namespace, name): set of keys} of the Secrets the manifests'
    comments tell the reader to create with `kubectl create secret`."""
    found = {}
    for name in MANIFESTS:
        with open(os.path.join(HERE, name)) as f:
            comments = "\n".join(
                line.strip()[1:] for line in f
                if line.strip().startswith("#"))
        comments = re.sub(r"\\\n", " ", comments)
        for line in comments.splitlines():
            m = re.search(r"kubectl\s+(.*?)\bcreate secret (tls|generic) "
                          r"(\S+)(.*)", line)
            if m is None:
                continue
            ns = re.search(r"-n\s+(\S+)", m.group(1) + m.group(4))
            words = shlex.split(m.group(4))
            if m.group(2) == "tls":
                keys = {"tls.crt", "tls.key"}
            else:
                keys = set()
                for w in words:
                    if w.startswith("--from-file="):
                        value = w.split("=", 1)[1]
                        key, eq, path = value.partition("=")
                        keys.add(key if eq else posixpath.basename(value))
                    elif w.startswith("--from-literal="):
                        keys.add(w.split("=", 2)[1])
            found[(ns.group(1) if ns else "default", m.group(3))] = keys
    return found


def secret_keys(ns, secret_name):
    """The keys of Secret `secret_name` in `ns`, from a Secret in the
    manifests or a documented kubectl command; None when neither has it."""
    for _, doc in all_documents():
        meta = doc["metadata"]
        if (doc["kind"] == "Secret" and meta["name"] == secret_name and
                meta.get("namespace", "default") == ns):
            return set(doc.get("stringData", {})) | set(doc.get("data", {}))
    return documented_secrets().get((ns, secret_name))


def mounted_file(sc, path):
    """(volume, key) of the Secret key a flag's file path reads, or fails
    with an explanation (as a string)."""
    directory, base = posixpath.split(path)
    mounts = {m["mountPath"].rstrip("/"): m["name"]
              for m in sc.container.get("volumeMounts", [])}
    if directory not in mounts:
        return "%s is not in a mounted volume (mounts: %s)" % (
            path, sorted(mounts))
    volume = [v for v in sc.spec.get("volumes", [])
              if v["name"] == mounts[directory]][0]
    if "secret" not in volume:
        return "%s: volume %s is not a Secret" % (path, volume["name"])
    secret = volume["secret"]
    items = secret.get("items")
    keys = secret_keys(sc.ns, secret["secretName"])
    if keys is None:
        return ("%s: Secret %s/%s is neither in the manifests nor created by "
                "a documented kubectl command" % (path, sc.ns,
                                                  secret["secretName"]))
    if items is not None:
        by_path = {i["path"]: i["key"] for i in items}
        if base not in by_path:
            return "%s: volume %s projects only %s" % (
                path, volume["name"], sorted(by_path))
        key = by_path[base]
    else:
        key = base
    if key not in keys:
        return "%s: Secret %s/%s has no key %s (it has %s)" % (
            path, sc.ns, secret["secretName"], key, sorted(keys))
    return (volume, key)


def is_loopback(host):
    return host in ("localhost", "::1", "[::1]") or host.startswith("127.")


def host_port(address):
    host, _, port = address.rpartition(":")
    return host, int(port)


def flag_name(arg):
    m = re.match(r"--([A-Za-z0-9_]+)(=|$)", arg)
    return m.group(1) if m else None


def flag_value(argv, name):
    for arg in argv:
        if arg.startswith("--%s=" % name):
            return arg.split("=", 1)[1]
    return None


def dockerfile():
    with open(os.path.join(HERE, "Dockerfile")) as f:
        return f.read()


class DeployTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        out = subprocess.run([BINARY, "--helpfull"], capture_output=True,
                             text=True, timeout=60)
        text = out.stdout + out.stderr
        cls.flags = set(re.findall(r"^    --([A-Za-z0-9_]+) \(", text,
                                   re.MULTILINE))
        assert "grpc_listen" in cls.flags, text[:2000]

    def assert_flags_exist(self, where, argv):
        for arg in argv:
            if not arg.startswith("--"):
                self.fail("%s: %r is not a --flag" % (where, arg))
            name = flag_name(arg)
            self.assertIsNotNone(name, "%s: malformed flag %r" % (where, arg))
            known = name in self.flags or (name.startswith("no") and
                                            name[2:] in self.flags)
            self.assertTrue(
                known, "%s uses --%s, which informer_sidecar --helpfull does "
                "not list" % (where, name))

    def test_every_document_parses_with_kind_and_name(self):
        kinds = {}
        for name, doc in all_documents():
            self.assertIn("apiVersion", doc, name)
            self.assertIn("kind", doc, name)
            self.assertTrue(doc["metadata"]["name"], name)
            kinds.setdefault(name, []).append(doc["kind"])
        self.assertEqual(kinds["rbac.yaml"],
                         ["ServiceAccount", "ClusterRole",
                          "ClusterRoleBinding"])
        self.assertIn("Pod", kinds["pod-with-sidecar.yaml"])
        self.assertEqual(kinds["daemonset.yaml"], ["DaemonSet"])
        self.assertEqual(kinds["node-cache.yaml"],
                         ["Namespace", "ServiceAccount", "ClusterRole",
                          "ClusterRoleBinding", "Service", "DaemonSet"])
        self.assertEqual(kinds["pod-with-node-cache.yaml"],
                         ["ServiceAccount", "Role", "RoleBinding", "Pod"])

    def test_manifest_flags_exist(self):
        found = 0
        for where, _, argv in sidecar_containers():
            found += 1
            self.assertTrue(argv, where)
            self.assert_flags_exist(where, argv)
        self.assertEqual(found, 4, "one sidecar in each Pod and DaemonSet")

    def test_dockerfile_flags_exist_and_build_matches_development(self):
        text = dockerfile()
        self.assertRegex(text, r"(?m)^FROM debian:bookworm AS build$")
        self.assertRegex(text, r"(?m)^FROM debian:bookworm-slim$")
        self.assertIn("tools/install_deps.sh", text)
        self.assertIn("bazel build -c opt //server:informer_sidecar", text)
        m = re.search(r"(?m)^CMD (\[.*\])$", text)
        self.assertIsNotNone(m, "the Dockerfile sets default flags in CMD")
        self.assert_flags_exist("Dockerfile CMD", yaml.safe_load(m.group(1)))

    def test_dockerfile_sets_the_sidecars_malloc_tunables(self):
        # The same value the binary would re-execute itself with, so that the
        # image skips that re-exec and gets what the benchmarks measured.
        with open(runfile("server/ops/malloc_tuning.h")) as f:
            m = re.search(r'kMallocTunables\[\] =\s*"([^"]+)"', f.read())
        self.assertIsNotNone(m, "kMallocTunables not found")
        self.assertRegex(dockerfile(),
                         r"(?m)^ENV GLIBC_TUNABLES=" + re.escape(m.group(1)) +
                         "$")

    @staticmethod
    def owning_packages(paths):
        """{path: Debian package} for libraries, under any of their
        merged-/usr names (dpkg records /lib/... for some, /usr/lib/... for
        others). One dpkg call: each takes a while."""
        aliases = {}
        for path in paths:
            for p in (path, os.path.realpath(path)):
                for alias in (p, p[len("/usr"):] if p.startswith("/usr/lib/")
                              else "/usr" + p):
                    aliases.setdefault(alias, path)
        out = subprocess.run(["dpkg", "-S", *sorted(aliases)],
                             capture_output=True, text=True).stdout
        owners = {}
        for line in out.splitlines():
            package, _, owned = line.partition(": ")
            if owned in aliases:
                owners[aliases[owned]] = package.split(":")[0]
        return owners

    def test_runtime_image_installs_every_linked_library(self):
        text = dockerfile()
        runtime = text[text.index("FROM debian:bookworm-slim"):]
        installed = set(re.findall(r"(?m)^\s+(lib[a-z0-9.+-]+)", runtime))
        needed = re.findall(
            r"NEEDED\s+(\S+)",
            subprocess.run(["objdump", "-p", BINARY], capture_output=True,
                           text=True, check=True).stdout)
        ldd = subprocess.run(["ldd", BINARY], capture_output=True, text=True,
                             check=True).stdout
        paths = dict(re.findall(r"^\s*(\S+) => (\S+)", ldd, re.MULTILINE))
        # In every Debian image already (dpkg itself needs zlib).
        base = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}
        # Not libraries to ship: the dynamic loader (libc6), and sanitizer
        # runtimes (--config=asan builds; the image is built with -c opt).
        needed = [n for n in needed if not n.startswith(
            ("ld-linux", "libasan", "liblsan", "libubsan", "libtsan"))]
        for soname in needed:
            if soname not in paths:
                self.fail("ldd does not resolve " + soname)
        owners = self.owning_packages([paths[n] for n in needed])
        for soname in needed:
            package = owners.get(paths[soname])
            self.assertIsNotNone(package,
                                 "no Debian package owns " + paths[soname])
            if package in base:
                continue
            self.assertIn(package, installed,
                          "the runtime stage must install %s (for %s)" %
                          (package, soname))

    def test_grpc_listens_locally_and_probes_reach_http(self):
        for where, c, argv in sidecar_containers():
            listen = flag_value(argv, "grpc_listen")
            self.assertIsNotNone(listen, where)
            self.assertTrue(
                listen.startswith("unix:") or listen.startswith("127.0.0.1:"),
                "%s: gRPC must listen on loopback or a unix socket, not %s" %
                (where, listen))
            http = flag_value(argv, "http_listen")
            self.assertIsNotNone(http, where)
            port = int(http.rsplit(":", 1)[1])
            self.assertEqual(port, 9090, where)
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            self.assertEqual(ports.get("http"), port, where)
            for probe, path in (("livenessProbe", "/healthz"),
                                ("readinessProbe", "/readyz"),
                                ("startupProbe", "/healthz")):
                get = c[probe]["httpGet"]
                self.assertEqual(get["path"], path, "%s %s" % (where, probe))
                self.assertIn(get["port"], ("http", port), where)
            env = {e["name"]: e for e in c.get("env", [])}
            for var, field in (("POD_NAME", "metadata.name"),
                               ("POD_NAMESPACE", "metadata.namespace")):
                self.assertEqual(
                    env[var]["valueFrom"]["fieldRef"]["fieldPath"], field,
                    "%s: downward API %s" % (where, var))
            self.assertFalse(
                c["securityContext"].get("allowPrivilegeEscalation", True),
                where)
            self.assertTrue(c["securityContext"]["readOnlyRootFilesystem"],
                            where)

    @staticmethod
    def granted_to(sa, ns):
        """{(group, resource, verb)} that the manifests' ClusterRoleBindings
        and RoleBindings (in `ns`) grant ServiceAccount `ns`/`sa`."""
        docs = [d for _, d in all_documents()]
        roles = {}
        for d in docs:
            if d["kind"] == "ClusterRole":
                roles[("ClusterRole", None, d["metadata"]["name"])] = d
            elif d["kind"] == "Role":
                roles[("Role", d["metadata"]["namespace"],
                       d["metadata"]["name"])] = d
        granted = set()
        for d in docs:
            if d["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
                continue
            if {"kind": "ServiceAccount", "name": sa,
                    "namespace": ns} not in d["subjects"]:
                continue
            where = d["metadata"].get("namespace")
            if d["kind"] == "RoleBinding" and where != ns:
                continue
            ref = d["roleRef"]
            role = roles.get((ref["kind"],
                              where if ref["kind"] == "Role" else None,
                              ref["name"]))
            assert role is not None, "%s refers to a missing %s" % (
                d["metadata"]["name"], ref)
            for rule in role["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        for verb in rule["verbs"]:
                            granted.add((group, resource, verb))
        return granted

    def test_rbac_covers_what_the_manifests_watch_and_events(self):
        service_accounts = {(d["metadata"].get("namespace", "default"),
                             d["metadata"]["name"])
                            for _, d in all_documents()
                            if d["kind"] == "ServiceAccount"}
        for sc in sidecars():
            sa = sc.spec["serviceAccountName"]
            self.assertIn((sc.ns, sa), service_accounts, sc.where)
            granted = self.granted_to(sa, sc.ns)
            # Never Secrets (withheld unless --allow_secrets), never writes
            # to the cached resources.
            for group, resource, verb in granted:
                self.assertNotEqual(resource, "secrets", sc.where)
                if resource != "events":
                    self.assertIn(verb, ("list", "watch"), sc.where)
            # The event recorder writes to the API server in every case.
            for group in ("", "events.k8s.io"):
                for verb in ("create", "patch"):
                    self.assertIn((group, "events", verb), granted,
                                  "%s: %s events" % (sc.where, verb))
            # A sidecar reading through a node cache lists and watches with
            # that cache's token, not its service account.
            if sc.flag("cache_upstream"):
                continue
            resources = sc.resources()
            self.assertTrue(resources, sc.where)
            for r in resources:
                resource, _, group = r.partition(".")
                for verb in ("list", "watch"):
                    self.assertIn((group, resource, verb), granted,
                                  "%s: the RBAC must grant %s on %s" %
                                  (sc.where, verb, r))

    def test_every_file_flag_reads_a_mounted_secret_key(self):
        checked = 0
        for sc in sidecars():
            for arg in sc.argv:
                name = flag_name(arg)
                if not name.endswith("_file") or name == "ports_file":
                    continue
                found = mounted_file(sc, flag_value(sc.argv, name))
                self.assertIsInstance(found, tuple,
                                      "%s --%s: %s" % (sc.where, name, found))
                checked += 1
        # tokens (3), facade cert and key, the upstream's token and CA.
        self.assertGreaterEqual(checked, 7)

    def services_for(self, sc):
        """The manifests' Services that select the pods of `sc`."""
        found = []
        for _, d in all_documents():
            if d["kind"] != "Service" or d["metadata"].get(
                    "namespace", "default") != sc.ns:
                continue
            selector = d["spec"].get("selector", {})
            if selector and all(sc.labels.get(k) == v
                                for k, v in selector.items()):
                found.append(d)
        return found

    def target_port(self, sc, service_port):
        target = service_port.get("targetPort", service_port["port"])
        if isinstance(target, int):
            return target
        for p in sc.container.get("ports", []):
            if p.get("name") == target:
                return p["containerPort"]
        self.fail("%s: no container port named %s" % (sc.where, target))

    def test_kube_api_listens_locally_or_with_tls_behind_its_service(self):
        facades = 0
        for sc in sidecars():
            listen = sc.flag("kube_api_listen")
            if not listen:
                continue
            facades += 1
            host, port = host_port(listen)
            cert = sc.flag("kube_api_tls_cert_file")
            key = sc.flag("kube_api_tls_key_file")
            self.assertEqual(bool(cert), bool(key), sc.where)
            if is_loopback(host):
                continue
            # Reachable from other pods: only over TLS, only with tokens.
            self.assertTrue(cert and key,
                            "%s: --kube_api_listen=%s is not loopback: it "
                            "needs --kube_api_tls_cert_file and "
                            "--kube_api_tls_key_file" % (sc.where, listen))
            self.assertTrue(sc.flag("tokens_file"),
                            "%s: a facade beyond loopback needs "
                            "--tokens_file" % sc.where)
            self.assertIn(port, [p["containerPort"]
                                 for p in sc.container.get("ports", [])],
                          sc.where)
            services = self.services_for(sc)
            self.assertTrue(services, "%s: no Service selects it" % sc.where)
            for svc in services:
                ident = "Service %s" % svc["metadata"]["name"]
                targets = [self.target_port(sc, p)
                           for p in svc["spec"]["ports"]]
                self.assertIn(port, targets,
                              "%s must target the facade's port %d" %
                              (ident, port))
                # Pods reach their own node's cache: a Local Service, or
                # the node's address.
                self.assertTrue(
                    svc["spec"].get("internalTrafficPolicy") == "Local" or
                    sc.spec.get("hostNetwork"), ident)
                advertised = sc.flag("kube_api_advertised_address")
                if advertised:
                    svc_port = [p["port"] for p in svc["spec"]["ports"]
                                if self.target_port(sc, p) == port][0]
                    self.assertEqual(
                        advertised, "%s.%s.svc:%d" % (
                            svc["metadata"]["name"], sc.ns, svc_port),
                        sc.where)
        self.assertEqual(facades, 1, "the node cache serves the facade")

    def upstream_of(self, url):
        """(Service, its facade Sidecar, service port) that an upstream URL
        names: https://<service>.<namespace>.svc[.cluster.local]:<port>."""
        parsed = urllib.parse.urlsplit(url)
        m = re.fullmatch(r"([a-z0-9-]+)\.([a-z0-9-]+)\.svc(\.cluster\.local)?",
                         parsed.hostname or "")
        self.assertIsNotNone(m, "%s does not name a Service" % url)
        for sc in sidecars():
            if sc.ns != m.group(2) or not sc.flag("kube_api_listen"):
                continue
            for svc in self.services_for(sc):
                if svc["metadata"]["name"] != m.group(1):
                    continue
                for p in svc["spec"]["ports"]:
                    if p["port"] == parsed.port:
                        return svc, sc, p
        self.fail("%s: no Service %s.%s with port %s in front of a "
                  "facade" % (url, m.group(1), m.group(2), parsed.port))

    def test_cache_upstream_has_ca_token_and_a_facade_that_serves_it(self):
        downstream = 0
        for sc in sidecars():
            url = sc.flag("cache_upstream")
            if not url:
                continue
            downstream += 1
            parsed = urllib.parse.urlsplit(url)
            self.assertEqual(parsed.scheme, "https",
                             "%s: %s crosses the pod network" % (sc.where, url))
            self.assertTrue(sc.flag("cache_upstream_ca_file"),
                            "%s: an https --cache_upstream needs "
                            "--cache_upstream_ca_file" % sc.where)
            self.assertTrue(sc.flag("cache_upstream_token_file"), sc.where)
            _, facade, svc_port = self.upstream_of(url)
            # The Service port leads to the facade's listening port.
            _, listen_port = host_port(facade.flag("kube_api_listen"))
            self.assertEqual(self.target_port(facade, svc_port), listen_port)
            self.assertTrue(facade.flag("kube_api_tls_cert_file"))
            # The node cache caches what the pod sidecar asks for...
            served = set(facade.resources())
            for r in sc.resources():
                self.assertIn(r, served, "%s caches %s, which %s does not" %
                              (sc.where, r, facade.where))
            # ... and a token of its tokens file reads them in the pod's
            # namespace (and only there), which the pod sidecar's informers
            # are limited to.
            ns = sc.flag("namespace")
            env = {e["name"]: e for e in sc.container.get("env", [])}
            if ns == "$(POD_NAMESPACE)":
                self.assertEqual(
                    env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"],
                    "metadata.namespace")
                ns = sc.ns
            self.assertEqual(ns, sc.ns, "%s: --namespace" % sc.where)
            grants = self.node_cache_tokens(facade)["tokens"]
            matching = [g for g in grants if g.get("namespaces") == [ns] and
                        set(sc.resources()) <= set(g["resources"])]
            self.assertTrue(matching, "%s: the node cache's tokens file has "
                            "no token for namespace %s" % (sc.where, ns))
            # The token file it mounts is that namespace's token.
            volume, key = mounted_file(sc, sc.flag("cache_upstream_token_file"))
            documented = documented_secrets()[(sc.ns,
                                               volume["secret"]["secretName"])]
            self.assertIn(key, documented)
            with open(os.path.join(HERE, sc.file)) as f:
                text = f.read()
            self.assertIn("--from-file=%s=%s" % (key,
                                                 matching[0]["tokenFile"]),
                          text,
                          "%s: the documented client Secret takes the "
                          "namespace's token file" % sc.where)
        self.assertEqual(downstream, 1)

    @staticmethod
    def node_cache_tokens(facade):
        """The node cache's tokens file: the file that the documented
        `kubectl create secret` command puts into its tokens Secret."""
        with open(os.path.join(HERE, facade.file)) as f:
            text = f.read()
        m = re.search(r"--from-file=tokens\.yaml=deploy/(\S+)", text)
        assert m, "%s: no documented tokens.yaml" % facade.file
        with open(os.path.join(HERE, m.group(1))) as f:
            return yaml.safe_load(f)

    @staticmethod
    def start_until(args, marker, env_home):
        """Runs the sidecar until a stderr line contains `marker` or an
        error line; returns the lines read."""
        env = dict(os.environ, HOME=env_home)
        env.pop("KUBECONFIG", None)
        env.pop("KUBERNETES_SERVICE_HOST", None)
        lines = []
        with subprocess.Popen(
                [BINARY, "--demo", "--grpc_listen=127.0.0.1:0",
                 "--http_listen=127.0.0.1:0", *args],
                stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                env=env) as proc:
            try:
                for line in proc.stderr:
                    lines.append(line)
                    if marker in line or line.startswith("E"):
                        break
            finally:
                proc.terminate()
                proc.wait(timeout=30)
        return "".join(lines)

    def test_daemonset_config_file_loads(self):
        ds = documents("daemonset.yaml")[0]
        container = ds["spec"]["template"]["spec"]["containers"][0]
        script = container["args"][0]
        m = re.search(r"<<EOF\n(.*?)\nEOF\n", script, re.DOTALL)
        self.assertIsNotNone(m, "the DaemonSet writes its --config file")
        config = m.group(1).replace("${NODE_NAME}", "node-1")
        self.assertIn("fieldSelector: spec.nodeName=node-1", config)
        with tempfile.TemporaryDirectory(
                dir=os.environ.get("TEST_TMPDIR")) as tmp:
            path = os.path.join(tmp, "sidecar.yaml")
            with open(path, "w") as f:
                f.write(config)
            text = self.start_until(["--config=" + path], "gRPC listening",
                                    tmp)
        self.assertIn("gRPC listening", text)

    def test_example_tokens_file_loads(self):
        secret = [d for d in documents("pod-with-sidecar.yaml")
                  if d["kind"] == "Secret"][0]
        with tempfile.TemporaryDirectory(
                dir=os.environ.get("TEST_TMPDIR")) as tmp:
            for key, value in secret["stringData"].items():
                with open(os.path.join(tmp, key), "w") as f:
                    f.write(value)
            text = self.start_until(
                ["--resources=pods,configmaps",
                 "--tokens_file=" + os.path.join(tmp, "tokens.yaml")],
                "bearer tokens required", tmp)
            self.assertIn("bearer tokens required", text)
            self.assertIn("tokens.yaml: app)", text)
            # Never the token itself.
            self.assertNotIn(secret["stringData"]["app.token"], text)

    def test_node_cache_serves_https_for_its_service_name_with_ns_tokens(self):
        """The node cache's own flags, with its mounts filled as the
        documented commands fill them (certificates from
        node-cache-certs.sh with its defaults, the tokens file), on the demo
        cluster: HTTPS verifies for the Service name the pod sidecar dials,
        and each namespace's token reads only its namespace."""
        facade = [sc for sc in sidecars() if sc.flag("kube_api_listen")][0]
        pod = [sc for sc in sidecars() if sc.flag("cache_upstream")][0]
        service_host = urllib.parse.urlsplit(
            pod.flag("cache_upstream")).hostname
        # The node's name from the downward API selects the node's pods.
        env = {e["name"]: e for e in facade.container["env"]}
        self.assertEqual(
            env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"],
            "spec.nodeName")
        selectors = {r["resource"]: r.get("fieldSelector")
                     for r in facade.config()["resources"]}
        self.assertEqual(selectors["pods"], "spec.nodeName=${NODE_NAME}")
        tokens = self.node_cache_tokens(facade)
        # A test-only token for all namespaces, to see what the cache holds.
        tokens["tokens"].append({"name": "test-all", "token": "t" * 40,
                                 "resources": ["*"]})
        values = {g["name"]: secrets.token_urlsafe(32)
                  for g in tokens["tokens"] if "tokenFile" in g}
        with tempfile.TemporaryDirectory(
                dir=os.environ.get("TEST_TMPDIR")) as tmp:
            certs = os.path.join(tmp, "certs")
            subprocess.run([os.path.join(HERE, "node-cache-certs.sh"), certs],
                           check=True, capture_output=True, timeout=60)
            # The Secrets' contents, where the volumes mount them.
            mounts = {}
            for m in facade.container["volumeMounts"]:
                mounts[m["mountPath"]] = os.path.join(tmp, m["name"])
                os.mkdir(mounts[m["mountPath"]])
            tls_dir = os.path.dirname(facade.flag("kube_api_tls_cert_file"))
            for key in ("tls.crt", "tls.key"):
                shutil.copy(os.path.join(certs, key),
                            os.path.join(mounts[tls_dir], key))
            tokens_path = facade.flag("tokens_file")
            tokens_dir = mounts[os.path.dirname(tokens_path)]
            with open(os.path.join(tokens_dir, "tokens.yaml"), "w") as f:
                yaml.safe_dump(tokens, f)
            for g in tokens["tokens"]:
                if "tokenFile" in g:
                    with open(os.path.join(tokens_dir, g["tokenFile"]),
                              "w") as f:
                        f.write(values[g["name"]] + "\n")
            config = os.path.join(mounts["/tmp"], "sidecar.yaml")
            with open(config, "w") as f:
                yaml.safe_dump(facade.config(), f)
            with open(config) as f:
                text = f.read().replace("${NODE_NAME}", "node-1")
            with open(config, "w") as f:
                f.write(text)
            argv = ["--demo"]
            for arg in facade.argv:
                name = flag_name(arg)
                value = flag_value(facade.argv, name)
                if name == "in_cluster":
                    continue  # the demo cluster instead
                if name == "kube_api_advertised_address":
                    # The facade logs this address instead of the bound
                    # port, which the test needs; the Service test checks
                    # the value.
                    continue
                if name in ("grpc_listen", "http_listen", "kube_api_listen"):
                    value = "127.0.0.1:0"
                elif name.endswith("_file") or name == "config":
                    directory, base = posixpath.split(value)
                    value = os.path.join(mounts[directory], base)
                argv.append("--%s=%s" % (name, value))
            env = dict(os.environ, HOME=tmp)
            env.pop("KUBECONFIG", None)
            env.pop("KUBERNETES_SERVICE_HOST", None)
            proc = subprocess.Popen([BINARY, *argv], stderr=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, text=True,
                                    env=env)
            log = []
            try:
                port = None
                for line in proc.stderr:
                    log.append(line)
                    m = re.search(r"Kubernetes API facade serving 2 resources"
                                  r" on https://127\.0\.0\.1:(\d+)", line)
                    if m:
                        port = int(m.group(1))
                        break
                    if line.startswith(("E", "F")):
                        break
                self.assertIsNotNone(port, "".join(log))
                # Keep reading the log so the sidecar never blocks on it.
                drain = threading.Thread(target=lambda: log.extend(proc.stderr),
                                         daemon=True)
                drain.start()
                self.check_node_cache(port, os.path.join(certs, "ca.crt"),
                                      service_host, values)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
            drain.join(timeout=30)
            proc.stderr.close()
        text = "".join(log)
        self.assertIn("bearer tokens required", text)
        self.assertIn("team-a, team-b, test-all", text)
        for value in values.values():
            self.assertNotIn(value, text)

    @staticmethod
    def https_get(port, ca, server_name, path, token=None):
        """(status, parsed JSON body) of one GET over TLS to 127.0.0.1:port,
        verifying the certificate for `server_name` against `ca`."""
        context = ssl.create_default_context(cafile=ca)
        with socket.create_connection(("127.0.0.1", port), timeout=60) as raw:
            with context.wrap_socket(raw, server_hostname=server_name) as s:
                request = "GET %s HTTP/1.1\r\nHost: %s\r\n" % (path,
                                                                 server_name)
                if token:
                    request += "Authorization: Bearer %s\r\n" % token
                s.sendall((request + "Connection: close\r\n\r\n").encode())
                response = http.client.HTTPResponse(s)
                response.begin()
                return response.status, json.loads(response.read())

    def check_node_cache(self, port, ca, service_host, values):
        get = lambda path, token=None: self.https_get(port, ca, service_host,
                                                      path, token)
        # Discovery needs no token.
        status, api = get("/api")
        self.assertEqual((status, api["kind"]), (200, "APIVersions"))
        # The first list waits for the caches to sync.
        status, pods = get("/api/v1/namespaces/team-a/pods", values["team-a"])
        self.assertEqual((status, pods["kind"]), (200, "PodList"))
        status, cms = get("/api/v1/namespaces/team-b/configmaps",
                          values["team-b"])
        self.assertEqual((status, cms["kind"]), (200, "ConfigMapList"))
        # A namespace's token reads nothing else.
        for path in ("/api/v1/namespaces/team-b/pods", "/api/v1/pods",
                     "/api/v1/configmaps", "/api/v1/namespaces/demo/pods"):
            status, body = get(path, values["team-a"])
            self.assertEqual((status, body["reason"]), (403, "Forbidden"),
                             path)
        status, body = get("/api/v1/namespaces/team-a/pods")
        self.assertEqual((status, body["reason"]), (401, "Unauthorized"))
        status, body = get("/api/v1/namespaces/team-a/pods", "wrong-token")
        self.assertEqual(status, 401)
        # The cache holds the node's pods only (the demo spreads its pods
        # over node-1..node-3).
        status, pods = get("/api/v1/pods", "t" * 40)
        self.assertEqual(status, 200)
        nodes = {p["spec"]["nodeName"] for p in pods["items"]}
        self.assertEqual(nodes, {"node-1"})
        # The certificate is for the Service's name, nothing else.
        with self.assertRaises(ssl.SSLCertVerificationError):
            self.https_get(port, ca, "informer-node-cache.other.svc", "/api")


if __name__ == "__main__":
    unittest.main()
