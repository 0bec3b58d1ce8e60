"""Checks the deployment files against the sidecar binary they deploy.

The manifests and the Dockerfile cannot be applied or built here, so this
test checks what can go stale silently: every YAML document parses and has
the fields the examples promise, every --flag they pass exists in
`informer_sidecar --helpfull`, the RBAC rules cover the resources the
manifests configure, the runtime image installs every package providing a
shared library the binary links, and the example tokens file loads.
"""
import os
import re
import shlex
import subprocess
import tempfile
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
MANIFESTS = ("rbac.yaml", "pod-with-sidecar.yaml", "daemonset.yaml")
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


def pod_specs():
    """(file, kind/name, pod spec) for every Pod and workload template."""
    for name, doc in all_documents():
        kind = doc["kind"]
        ident = "%s %s/%s" % (name, kind, doc["metadata"]["name"])
        if kind == "Pod":
            yield name, ident, doc["spec"]
        elif kind in ("DaemonSet", "Deployment", "StatefulSet"):
            yield name, ident, doc["spec"]["template"]["spec"]


def sidecar_containers():
    """(where, container, sidecar argv) for each container running it."""
    for _, ident, spec in pod_specs():
        for c in spec.get("initContainers", []) + spec["containers"]:
            if SIDECAR_IMAGE not in c.get("image", ""):
                continue
            where = "%s container %s" % (ident, c["name"])
            if "command" not in c:
                yield where, c, list(c.get("args", []))
                continue
            # A shell wrapper: the words after the binary's path, with
            # shell line continuations joined.
            script = " ".join(c["command"] + c.get("args", []))
            script = script.replace("\\\n", " ")
            m = re.search(r"informer_sidecar\s(.*)", script)
            if m is None:
                continue  # another program of the same image (init step)
            yield where, c, shlex.split(m.group(1).splitlines()[0])


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

    def test_manifest_flags_exist(self):
        found = 0
        for where, _, argv in sidecar_containers():
            found += 1
            self.assertTrue(argv, where)
            self.assert_flags_exist(where, argv)
        self.assertEqual(found, 2, "one sidecar in the Pod, one in the "
                         "DaemonSet")

    def test_dockerfile_flags_exist_and_build_matches_development(self):
        text = dockerfile()
        self.assertRegex(text, r"(?m)^FROM debian:bookworm AS build$")
        self.assertRegex(text, r"(?m)^FROM debian:bookworm-slim$")
        self.assertIn("tools/install_deps.sh", text)
        self.assertIn("bazel build -c opt //server:informer_sidecar", text)
        m = re.search(r"(?m)^CMD (\[.*\])$", text)
        self.assertIsNotNone(m, "the Dockerfile sets default flags in CMD")
        self.assert_flags_exist("Dockerfile CMD", yaml.safe_load(m.group(1)))

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

    def test_rbac_covers_what_the_manifests_watch_and_events(self):
        docs = {d["kind"]: d for d in documents("rbac.yaml")}
        sa = docs["ServiceAccount"]["metadata"]
        binding = docs["ClusterRoleBinding"]
        self.assertEqual(binding["roleRef"]["name"],
                         docs["ClusterRole"]["metadata"]["name"])
        self.assertIn({"kind": "ServiceAccount", "name": sa["name"],
                       "namespace": sa["namespace"]}, binding["subjects"])
        granted = set()
        for rule in docs["ClusterRole"]["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        granted.add((group, resource, verb))
        # Never Secrets (withheld unless --allow_secrets), never writes to
        # the cached resources.
        for group, resource, verb in granted:
            self.assertNotEqual(resource, "secrets")
            if resource != "events":
                self.assertIn(verb, ("list", "watch"))
        for group in ("", "events.k8s.io"):
            for verb in ("create", "patch"):
                self.assertIn((group, "events", verb), granted)
        for _, ident, spec in pod_specs():
            self.assertEqual(spec["serviceAccountName"], sa["name"], ident)
        # The resources each sidecar watches ("pods", "deployments.apps").
        watched = set()
        for where, _, argv in sidecar_containers():
            for r in (flag_value(argv, "resources") or "").split(","):
                if r:
                    watched.add(r)
        # The DaemonSet's --config lists "resource: pods".
        watched.add("pods")
        for r in watched:
            resource, _, group = r.partition(".")
            for verb in ("list", "watch"):
                self.assertIn((group, resource, verb), granted,
                              "rbac.yaml must grant %s on %s" % (verb, r))

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


if __name__ == "__main__":
    unittest.main()
