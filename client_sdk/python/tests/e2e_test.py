"""End-to-end tests of the installed informer_sidecar package against the
real sidecar binary in demo mode (objects change every second).

Run by //client_sdk/python:python_sdk_test in a venv where the package was
pip-installed; $INFORMER_SIDECAR_BINARY names the sidecar binary and
$INFORMER_SIDECAR_EXAMPLES the examples directory. Every wait is on a
condition with a deadline, never a fixed sleep.
"""

import concurrent.futures
import contextlib
import json
import os
import queue
import tempfile
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

import grpc

import informer_sidecar
from informer_sidecar import (InformerClient, RemoteInformer, StreamError,
                              WorkQueueWorker, create_queue, object_key,
                              queue_stats, record_event)
from informer_sidecar._grpc import (events_pb2, events_pb2_grpc,
                                    informer_pb2, informer_pb2_grpc)
from informer_sidecar.demo import DemoSidecar

BINARY = os.environ.get("INFORMER_SIDECAR_BINARY", "")
EXAMPLES = os.environ.get("INFORMER_SIDECAR_EXAMPLES", "")
TIMEOUT = 60.0


class Recorder:
    """Records handler calls and checks they tell a consistent story: an add
    only for a key the handlers do not have, an update or delete only for
    one they have (so a duplicate add fails the test)."""

    def __init__(self, informer: RemoteInformer) -> None:
        self.cond = threading.Condition()
        self.model = {}
        self.calls = []  # (kind, key, flag)
        self.errors = []
        informer.on_add(self._add)
        informer.on_update(self._update)
        informer.on_delete(self._delete)

    def _add(self, obj, is_initial):
        key = object_key(obj)
        with self.cond:
            if key in self.model:
                self.errors.append(f"duplicate add of {key}")
            self.model[key] = obj
            self.calls.append(("add", key, is_initial))
            self.cond.notify_all()

    def _update(self, old, new):
        key = object_key(new)
        with self.cond:
            if key not in self.model:
                self.errors.append(f"update of unknown {key}")
            elif self.model[key] != old:
                self.errors.append(f"update of {key}: old is not the last seen")
            self.model[key] = new
            self.calls.append(("update", key, None))
            self.cond.notify_all()

    def _delete(self, obj, tombstone):
        key = object_key(obj)
        with self.cond:
            if key not in self.model:
                self.errors.append(f"delete of unknown {key}")
            self.model.pop(key, None)
            self.calls.append(("delete", key, tombstone))
            self.cond.notify_all()

    def wait(self, predicate, timeout=TIMEOUT) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: predicate(self), timeout)


def list_keys(target: str, resource: str, selector: str = ""):
    """{key: resourceVersion} of the sidecar's cache."""
    with grpc.insecure_channel(target) as ch:
        stub = informer_pb2_grpc.InformerStub(ch)
        out = {}
        token = ""
        while True:
            r = stub.List(informer_pb2.ListRequest(resource=resource,
                                                   label_selector=selector,
                                                   continue_token=token),
                          timeout=10, wait_for_ready=True)
            for o in r.objects:
                obj = json.loads(o.json)
                out[object_key(obj)] = obj["metadata"]["resourceVersion"]
            token = r.continue_token
            if not token:
                return out


def mirror_rvs(informer: RemoteInformer):
    return {
        object_key(o): o["metadata"]["resourceVersion"]
        for o in informer.list()
    }


def wait_mirror_matches(test, informer, target, resource, selector=""):
    """Waits until the mirror equals a List of the sidecar (objects change
    every second, so the comparison is retried on every mirror change)."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        want = list_keys(target, resource, selector)
        if informer.wait_for(lambda inf: mirror_rvs(inf) == want, timeout=2):
            return
    test.fail(f"mirror never matched the sidecar: {mirror_rvs(informer)} "
              f"vs {list_keys(target, resource, selector)}")


class SharedSidecarTest(unittest.TestCase):
    """Tests sharing one demo sidecar."""

    @classmethod
    def setUpClass(cls):
        cls.sidecar = DemoSidecar(BINARY).start()
        cls.target = cls.sidecar.target

    @classmethod
    def tearDownClass(cls):
        cls.sidecar.close()

    def test_initial_sync_queries_and_live_events(self):
        informer = RemoteInformer("pods", target=self.target)
        rec = Recorder(informer)
        self.assertFalse(informer.has_synced())
        with informer:
            self.assertTrue(informer.wait_for_sync(TIMEOUT))
            self.assertTrue(informer.has_synced())
            objs = informer.list()
            self.assertGreater(len(objs), 0)
            with rec.cond:
                initial = [c for c in rec.calls if c[0] == "add" and c[2]]
                self.assertGreaterEqual(len(initial), 1)
            first = objs[0]
            meta = first["metadata"]
            self.assertIs(informer.get(meta["namespace"], meta["name"]),
                          informer.get_by_key(object_key(first)))
            self.assertIsNone(informer.get("nope", "nothing"))
            # Indexes agree with the mirror.
            by_ns = informer.by_index("namespace", "demo")
            self.assertTrue(by_ns)
            self.assertTrue(
                all(o["metadata"]["namespace"] == "demo" for o in by_ns))
            apps = informer.index_values("label:app")
            self.assertTrue(apps)
            total = sum(len(informer.by_index("label:app", a)) for a in apps)
            self.assertEqual(
                total,
                len([o for o in informer.list()
                     if "app" in o["metadata"].get("labels", {})]))
            with self.assertRaises(KeyError):
                informer.by_index("nope", "x")
            # Live events arrive (the demo changes objects every second).
            self.assertTrue(
                rec.wait(lambda r: any(not (c[0] == "add" and c[2])
                                       for c in r.calls)),
                "no live event")
            wait_mirror_matches(self, informer, self.target, "pods")
        with rec.cond:
            self.assertEqual(rec.errors, [])
            self.assertEqual(rec.model, {object_key(o): o
                                         for o in informer.list()})

    def test_label_selector_and_namespace(self):
        with RemoteInformer("pods", target=self.target, namespace="demo",
                            label_selector="app=app-1") as informer:
            self.assertTrue(informer.wait_for_sync(TIMEOUT))
            want = {k: v for k, v in list_keys(self.target, "pods",
                                               "app=app-1").items()
                    if k.startswith("demo/")}
            self.assertTrue(want)
            for obj in informer.list():
                self.assertEqual(obj["metadata"]["labels"]["app"], "app-1")
                self.assertEqual(obj["metadata"]["namespace"], "demo")

    def test_bad_resume_token_gets_reset_and_initial_state(self):
        informer = RemoteInformer("configmaps", target=self.target,
                                  resume_token="not-a-token")
        rec = Recorder(informer)
        with informer:
            self.assertTrue(informer.wait_for_sync(TIMEOUT))
            self.assertEqual(informer.resets, 1)
            self.assertNotEqual(informer.resume_token, "not-a-token")
            with rec.cond:
                self.assertEqual(rec.errors, [])
                adds = [c for c in rec.calls if c[0] == "add"]
                self.assertEqual(len(adds), len(informer.list()))
                self.assertTrue(all(c[2] for c in adds), adds)

    def test_unknown_resource_is_a_final_error(self):
        errors = queue.Queue()
        with RemoteInformer("nosuchthings", target=self.target,
                            initial_backoff=0.05, max_backoff=0.1,
                            on_error=errors.put) as informer:
            err = errors.get(timeout=TIMEOUT)
            # Given up: wait_for_sync does not wait for the timeout.
            self.assertFalse(informer.wait_for_sync(TIMEOUT))
            self.assertFalse(informer.has_synced())
            self.assertIs(informer.last_error, err)
            self.assertEqual(informer.reconnects, 0)
        self.assertIsInstance(err, StreamError)
        self.assertEqual(err.code, grpc.StatusCode.NOT_FOUND)
        self.assertIn("unknown resource", err.details)
        self.assertTrue(err.final)
        self.assertEqual((err.failures, err.retry_in), (1, 0.0))
        self.assertIsInstance(err.cause, grpc.RpcError)
        self.assertTrue(errors.empty())

    def test_failure_is_logged_at_warning(self):
        with self.assertLogs("informer_sidecar", level="WARNING") as logs:
            errors = queue.Queue()
            with RemoteInformer("nosuchthings", target=self.target,
                                on_error=errors.put):
                errors.get(timeout=TIMEOUT)
        self.assertTrue(any("NOT_FOUND" in line and "nosuchthings" in line
                            for line in logs.output), logs.output)

    def test_query_client(self):
        # ConfigMaps: the demo churn changes their data, never their keys.
        with InformerClient(self.target, timeout=TIMEOUT) as client:
            resources = {r["resource"]: r for r in client.resources()}
            self.assertIn("configmaps", resources, resources)
            cms = resources["configmaps"]
            self.assertTrue(cms["synced"])
            self.assertGreater(cms["object_count"], 1)
            self.assertIsInstance(cms["object_count"], int)
            self.assertIn("namespace", cms["indexes"])

            everything = client.list("configmaps")
            keys = [object_key(o) for o in everything]
            self.assertEqual(keys, sorted(keys))
            self.assertEqual(set(keys), set(list_keys(self.target,
                                                      "configmaps")))
            self.assertEqual(len(keys), cms["object_count"])
            # One object per page: the same snapshot, page after page.
            paged = [object_key(o)
                     for o in client.iter_list("configmaps", page_size=1)]
            self.assertEqual(paged, keys)

            first = everything[0]
            ns = first["metadata"].get("namespace", "")
            got = client.get("configmaps", ns, first["metadata"]["name"])
            self.assertEqual(object_key(got), keys[0])
            self.assertIsNone(client.get("configmaps", ns, "no-such-name"))

            in_ns = client.list("configmaps", namespace=ns)
            self.assertTrue(in_ns)
            self.assertEqual(
                sorted(object_key(o) for o in client.by_index(
                    "configmaps", "namespace", ns)),
                [object_key(o) for o in in_ns])
            self.assertIn(ns, client.index_values("configmaps", "namespace"))

            # Label selectors and the owner index, on Pods.
            web = client.list("pods", label_selector="app=app-1")
            self.assertTrue(web)
            for obj in web:
                self.assertEqual(obj["metadata"]["labels"]["app"], "app-1")
            owned = [o for o in web if o["metadata"].get("ownerReferences")]
            self.assertTrue(owned)
            owner = owned[0]["metadata"]["ownerReferences"][0]["uid"]
            self.assertIn(owner, client.index_values("pods", "ownerUid"))
            children = client.by_index("pods", "ownerUid", owner)
            self.assertTrue(children)
            for obj in children:
                self.assertIn(owner, [r["uid"] for r in
                                      obj["metadata"]["ownerReferences"]])

            # Errors carry the sidecar's code and message.
            with self.assertRaises(grpc.RpcError) as err:
                client.get("nosuchthings", "", "x")
            self.assertEqual(err.exception.code(), grpc.StatusCode.NOT_FOUND)
            self.assertIn("unknown resource", err.exception.details())
            with self.assertRaises(grpc.RpcError) as err:
                client.list("pods", label_selector="app in (")
            self.assertEqual(err.exception.code(),
                             grpc.StatusCode.INVALID_ARGUMENT)
            with self.assertRaises(grpc.RpcError) as err:
                client.by_index("pods", "no-such-index", "x")
            self.assertEqual(err.exception.code(),
                             grpc.StatusCode.INVALID_ARGUMENT)
            with self.assertRaises(ValueError):
                client.get("pods", "demo", "")
        # A closed client's channel refuses further calls.
        with self.assertRaises(ValueError):
            client.list("configmaps")

    def test_worker_alias_is_work_queue_worker(self):
        # One worker name across the SDKs; the old one stays importable.
        self.assertIs(informer_sidecar.Worker, WorkQueueWorker)
        self.assertIn("WorkQueueWorker", informer_sidecar.__all__)

    def test_worker_reports_unknown_queue_then_recovers(self):
        name = "e2e-late-queue"
        errors, recoveries = queue.Queue(), []
        with WorkQueueWorker(name, lambda key: None, target=self.target,
                             initial_backoff=0.05, max_backoff=0.1,
                             on_error=errors.put,
                             on_recovered=recoveries.append) as worker:
            got = [errors.get(timeout=TIMEOUT) for _ in range(2)]
            for n, err in enumerate(got, start=1):
                self.assertIsInstance(err, StreamError)
                self.assertEqual(err.code, grpc.StatusCode.NOT_FOUND)
                self.assertIn(name, err.details)
                self.assertEqual(err.failures, n)
                cap = min(0.05 * 2 ** (n - 1), 0.1)
                self.assertTrue(cap / 2 <= err.retry_in < cap,
                                (n, err.retry_in))
            self.assertEqual(worker.processed, 0)
            self.assertEqual(worker.last_error.code,
                             grpc.StatusCode.NOT_FOUND)
            # The queue appears: the next attempt leases its keys.
            self.assertTrue(create_queue(name, "configmaps", self.target))
            self.assertTrue(worker.wait_for(
                lambda w: w.processed >= 1 and w.failures == 0,
                timeout=TIMEOUT))
        # Every failure before the recovery was reported, then one recovery
        # that counts them.
        failures = 2 + errors.qsize()
        self.assertEqual(recoveries, [failures])
        informer_sidecar.delete_queue(name, self.target)

    def test_worker_without_sidecar_fails_fast_and_says_so(self):
        tmp = tempfile.mkdtemp(prefix="isdw", dir="/tmp")
        target = "unix:" + os.path.join(tmp, "nobody.sock")
        errors = queue.Queue()
        try:
            with WorkQueueWorker("q", lambda key: None, target=target,
                                 initial_backoff=0.05, max_backoff=0.1,
                                 on_error=errors.put):
                err = errors.get(timeout=TIMEOUT)
            self.assertEqual(err.code, grpc.StatusCode.UNAVAILABLE)
            self.assertEqual(err.failures, 1)
            self.assertIsInstance(err.cause, grpc.RpcError)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_worker_forgets_successes_and_retries_failures(self):
        name = "e2e-worker"
        self.assertTrue(create_queue(name, "configmaps", self.target,
                                     base_delay=0.05, max_delay=1))
        self.assertFalse(create_queue(name, "configmaps", self.target,
                                      base_delay=0.05, max_delay=1))
        keys = set(list_keys(self.target, "configmaps"))
        self.assertTrue(keys)
        attempts = {}
        lock = threading.Lock()

        def fn(key):
            with lock:
                attempts[key] = attempts.get(key, 0) + 1
                if attempts[key] == 1:
                    raise RuntimeError(f"first attempt of {key} fails")

        with WorkQueueWorker(name, fn, target=self.target, credit=2,
                             name="e2e") as worker:
            n = len(keys)
            self.assertTrue(
                worker.wait_for(
                    lambda w: w.failed >= n and w.processed >= n,
                    timeout=TIMEOUT),
                f"failed={worker.failed} processed={worker.processed}")
            with lock:
                # Every key of the cache was leased, failed once and was
                # retried until it succeeded.
                self.assertTrue(keys <= set(attempts), (keys, attempts))
                self.assertTrue(all(attempts[k] >= 2 for k in keys))
        stats = queue_stats(name, self.target)
        self.assertEqual(len(stats), 1)
        self.assertGreaterEqual(stats[0]["failures"], n)
        self.assertGreaterEqual(stats[0]["retries"], n)
        self.assertGreaterEqual(stats[0]["completed"], n)
        informer_sidecar.delete_queue(name, self.target)

    def test_record_event(self):
        with grpc.insecure_channel(self.target) as ch:
            watch = events_pb2_grpc.EventsStub(ch).Watch(
                events_pb2.WatchEventsRequest(), timeout=TIMEOUT)
            watch.initial_metadata()  # registered: later events are streamed
            ref = informer_sidecar.object_reference(
                {"metadata": {"namespace": "demo", "name": "web-config",
                              "uid": "u-1"}}, kind="ConfigMap")
            record_event(ref, "Normal", "E2ETest", "hello from python",
                         target=self.target)
            got = next(iter(watch))
            watch.cancel()
        self.assertEqual(got.event.reason, "E2ETest")
        self.assertEqual(got.event.message, "hello from python")
        self.assertEqual(got.event.object.kind, "ConfigMap")
        self.assertEqual(got.event.object.name, "web-config")
        with self.assertRaises(grpc.RpcError) as err:
            record_event(ref, "Bad", "E2ETest", target=self.target)
        self.assertEqual(err.exception.code(),
                         grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("type", err.exception.details())
        with self.assertRaises(ValueError):
            record_event({"kind": "Pod", "name": "x", "bogus": "y"}, "Normal",
                         "R", target=self.target)

    def run_example(self, args, want):
        return run_example(self, args, [(want, None)])

    def test_pod_watcher_example(self):
        out = self.run_example([
            os.path.join(EXAMPLES, "pod_watcher.py"), "--target",
            self.target, "--selector", "tier=web"
        ], ["(initial)", "SYNCED", "DELETED"])
        self.assertIn("ADDED", out)
        self.assertNotIn("LOST", out)

    def test_configmap_controller_example(self):
        out = self.run_example([
            os.path.join(EXAMPLES, "configmap_controller.py"), "--target",
            self.target, "--queue", "e2e-example"
        ], ["created", "demo/api-config failed (attempt 1)",
            "RECORDED  demo/api-config rv="])
        # Each simulated failure is told once (the worker's WARNING line),
        # and only a retry says so.
        self.assertEqual(out.count("demo/api-config failed"), 1, out)
        self.assertIn("retries it after back-off", out)
        recorded = [l for l in out.splitlines() if l.startswith("RECORDED")]
        self.assertTrue(recorded)
        self.assertFalse([l for l in recorded if "attempt" in l], recorded)
        self.assertIn("RECORDED  demo/api-config", out)
        api = [l for l in recorded if "demo/api-config " in l]
        self.assertIn("(retry, after 1 failure(s))", api[0])

    def test_example_starts_its_own_sidecar(self):
        # --sidecar without a path: the binary is found
        # ($INFORMER_SIDECAR_BINARY here).
        self.run_example([os.path.join(EXAMPLES, "pod_watcher.py"),
                          "--sidecar"], ["SYNCED"])
        self.run_example([
            os.path.join(EXAMPLES, "pod_watcher.py"), "--sidecar", BINARY
        ], ["SYNCED"])


def run_example(test, args, stages):
    """Runs an example; for each (want, action) of `stages` waits until every
    string of `want` appeared in its output, then calls action() (if any).
    Then stops it with SIGTERM and returns the output."""
    proc = subprocess.Popen([sys.executable] + args,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT,
                            text=True,
                            env=dict(os.environ))
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout] +
                     [lines.put(None)], daemon=True).start()
    out = []
    missing = set()
    deadline = time.monotonic() + TIMEOUT
    for want, action in stages:
        missing = {w for w in want if w not in "".join(out)}
        while missing and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.1,
                                             deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            out.append(line)
            missing = {w for w in missing if w not in "".join(out)}
        if missing:
            break
        if action is not None:
            action()
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(TIMEOUT)
        hung = False
    except subprocess.TimeoutExpired:
        # Kill it, so that its output (below) says where it was.
        proc.kill()
        rc = proc.wait()
        hung = True
    # What it printed while stopping, too.
    while True:
        line = lines.get(timeout=TIMEOUT)
        if line is None:
            break
        out.append(line)
    proc.stdout.close()
    text = "".join(out)
    test.assertFalse(missing, f"missing {missing} in:\n{text}")
    test.assertFalse(hung, f"no exit {TIMEOUT}s after SIGTERM:\n{text}")
    test.assertEqual(rc, 0, text)
    return text


class FindSidecarBinaryTest(unittest.TestCase):
    """--sidecar without a path finds the binary whatever configuration
    built it last."""

    def test_newest_configuration_of_the_workspace(self):
        from informer_sidecar.demo import find_sidecar_binary  # pylint: disable=import-outside-toplevel
        root = tempfile.mkdtemp(prefix="isw", dir="/tmp")
        saved = os.environ.pop("INFORMER_SIDECAR_BINARY", None)
        try:
            open(os.path.join(root, "WORKSPACE"), "w").close()
            paths = {}
            for n, config in enumerate(["k8-fastbuild", "k8-opt"]):
                d = os.path.join(root, "bazel-out", config, "bin", "server")
                os.makedirs(d)
                paths[config] = os.path.join(d, "informer_sidecar")
                with open(paths[config], "w") as f:
                    f.write("#!/bin/sh\n")
                os.utime(paths[config], (1000 + n, 1000 + n))
            examples = os.path.join(root, "client_sdk", "python", "examples")
            os.makedirs(examples)
            self.assertEqual(find_sidecar_binary(examples), paths["k8-opt"])
            os.utime(paths["k8-fastbuild"], (5000, 5000))
            self.assertEqual(find_sidecar_binary(examples),
                             paths["k8-fastbuild"])
            os.environ["INFORMER_SIDECAR_BINARY"] = paths["k8-opt"]
            self.assertEqual(find_sidecar_binary(examples), paths["k8-opt"])
            os.environ["INFORMER_SIDECAR_BINARY"] = root + "/nope"
            with self.assertRaises(FileNotFoundError):
                find_sidecar_binary(examples)
            del os.environ["INFORMER_SIDECAR_BINARY"]
            shutil.rmtree(os.path.join(root, "bazel-out"))
            old_path = os.environ.get("PATH", "")
            os.environ["PATH"] = root
            try:
                with self.assertRaises(FileNotFoundError) as err:
                    find_sidecar_binary(examples)
                self.assertIn("bazel info -c opt bazel-bin", str(err.exception))
            finally:
                os.environ["PATH"] = old_path
        finally:
            if saved is not None:
                os.environ["INFORMER_SIDECAR_BINARY"] = saved
            else:
                os.environ.pop("INFORMER_SIDECAR_BINARY", None)
            shutil.rmtree(root, ignore_errors=True)


class PodWatcherOutageTest(unittest.TestCase):
    """pod_watcher tells a sidecar outage once, and its end."""

    def test_says_lost_once_and_resumed(self):
        with DemoSidecar(BINARY) as sidecar:
            out = run_example(self, [
                os.path.join(EXAMPLES, "pod_watcher.py"), "--target",
                sidecar.target
            ], [(["SYNCED"], sidecar.restart), (["LOST", "RESUMED"], None)])
        self.assertEqual(out.count("LOST"), 1, out)
        self.assertEqual(out.count("RESUMED"), 1, out)
        self.assertIn("UNAVAILABLE", out)
        self.assertLess(out.index("LOST"), out.index("RESUMED"))
        # The SDK's per-attempt WARNING lines stay out of its output.
        self.assertNotIn("Watch failed", out)


def _obj(name, rv, data="x"):
    return {"metadata": {"namespace": "ns", "name": name,
                         "resourceVersion": rv}, "data": {"v": data}}


def _ev(etype, obj=None, token="", initial=False):
    ev = informer_pb2.Event(type=etype, resume_token=token, initial=initial)
    if obj is not None:
        ev.object.json = json.dumps(obj)
        ev.resource_version = obj["metadata"]["resourceVersion"]
    return ev


class ScriptedInformer(informer_pb2_grpc.InformerServicer):
    """Answers Watch calls from a script: one list of responses per call; a
    call past its script ends UNAVAILABLE, the last call stays open."""

    def __init__(self, scripts):
        self.scripts = scripts
        self.requests = []
        self.done = threading.Event()

    def Watch(self, request, context):
        self.requests.append(request)
        n = len(self.requests) - 1
        for response in self.scripts[n]:
            yield response
        if n + 1 < len(self.scripts):
            context.abort(grpc.StatusCode.UNAVAILABLE, "scripted break")
        self.done.wait(TIMEOUT)


@contextlib.contextmanager
def scripted_server(scripts):
    """A ScriptedInformer served on a fresh unix socket: yields (servicer,
    target); ends its open calls and stops it on exit."""
    servicer = ScriptedInformer(scripts)
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(4))
    informer_pb2_grpc.add_InformerServicer_to_server(servicer, server)
    tmp = tempfile.mkdtemp(prefix="isdf", dir="/tmp")
    target = "unix:" + os.path.join(tmp, "s.sock")
    server.add_insecure_port(target)
    server.start()
    try:
        yield servicer, target
    finally:
        servicer.done.set()
        server.stop(None)
        shutil.rmtree(tmp, ignore_errors=True)


class ScriptedSidecarTest(unittest.TestCase):
    """Exact handler calls for a scripted stream: resume, then RESET with a
    state that differs from the mirror in known ways."""

    def test_reset_reports_exactly_the_differences(self):
        E = informer_pb2
        a, b, c, d = (_obj("a", "1"), _obj("b", "2"), _obj("c", "3"),
                      _obj("d", "9"))
        c2 = _obj("c", "8", "changed")
        scripts = [
            # First call: initial state a, b, c; then the stream breaks.
            [E.WatchResponse(events=[
                _ev(E.EVENT_TYPE_ADDED, a, "t1", True),
                _ev(E.EVENT_TYPE_ADDED, b, "t2", True),
                _ev(E.EVENT_TYPE_ADDED, c, "t3", True),
                _ev(E.EVENT_TYPE_INITIAL_STATE_DONE, None, "t4")])],
            # Second call (resuming from t4): the token is not honoured.
            [E.WatchResponse(events=[
                _ev(E.EVENT_TYPE_RESET, None, "r0"),
                _ev(E.EVENT_TYPE_ADDED, b, "r1", True),
                _ev(E.EVENT_TYPE_ADDED, c2, "r2", True),
                _ev(E.EVENT_TYPE_ADDED, d, "r3", True),
                _ev(E.EVENT_TYPE_INITIAL_STATE_DONE, None, "r4")]),
             E.WatchResponse(events=[
                 _ev(E.EVENT_TYPE_DELETED, b, "r5")])],
        ]
        with scripted_server(scripts) as (servicer, target):
            informer = RemoteInformer("things", target=target,
                                      initial_backoff=0.01)
            rec = Recorder(informer)
            with informer:
                self.assertTrue(informer.wait_for(
                    lambda inf: inf.resume_token == "r5", timeout=TIMEOUT))
                self.assertEqual(informer.keys(), ["ns/c", "ns/d"])
                self.assertEqual(informer.get("ns", "c"), c2)
                self.assertEqual(informer.by_index("namespace", "ns"),
                                 [c2, d])
                self.assertEqual(informer.resets, 1)
                servicer.done.set()
            self.assertEqual([r.resume_token for r in servicer.requests],
                             ["", "t4"])
            with rec.cond:
                self.assertEqual(rec.errors, [])
                self.assertEqual(rec.calls, [
                    ("add", "ns/a", True),
                    ("add", "ns/b", True),
                    ("add", "ns/c", True),
                    ("delete", "ns/a", True),   # gone: tombstone
                    ("update", "ns/c", None),   # changed
                    ("add", "ns/d", False),     # new since the mirror
                    ("delete", "ns/b", False),  # live delete
                ])  # b unchanged by the RESET: no call at all


class SlowHandshakeProxy:
    """A unix-socket relay to `target` that holds each connection's bytes
    for `delay` seconds before relaying them: a sidecar slow to answer the
    HTTP/2 handshake (a busy node, a throttled container)."""

    def __init__(self, target: str, delay: float):
        self.upstream = target[len("unix:"):]
        self.delay = delay
        self.tmp = tempfile.mkdtemp(prefix="isdp", dir="/tmp")
        self.path = os.path.join(self.tmp, "p.sock")
        self.target = "unix:" + self.path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(8)
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(conn,),
                             daemon=True).start()

    def _serve(self, conn):
        time.sleep(self.delay)  # the slowness under test, not a wait
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        up.connect(self.upstream)

        def pump(src, dst):
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        back = threading.Thread(target=pump, args=(up, conn), daemon=True)
        back.start()
        pump(conn, up)
        back.join()
        conn.close()
        up.close()

    def close(self):
        self.listener.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class SlowHandshakeTest(unittest.TestCase):
    """The SDK's channels wait gRPC's usual connect timeout for a slow
    sidecar's handshake: a connection attempt is not failed after 100 ms
    (what a short grpc.min_reconnect_backoff_ms does, as it also bounds each
    attempt), so the first Watch reports no error."""

    def test_a_slow_handshake_is_waited_for_not_reported(self):
        E = informer_pb2
        scripts = [[E.WatchResponse(events=[
            _ev(E.EVENT_TYPE_ADDED, _obj("a", "1"), "t1", True),
            _ev(E.EVENT_TYPE_INITIAL_STATE_DONE, None, "t2")])]]
        errors = queue.Queue()
        with scripted_server(scripts) as (_, target), \
                SlowHandshakeProxy(target, delay=0.5) as proxy:
            with RemoteInformer("things", target=proxy.target,
                                on_error=errors.put) as informer:
                self.assertTrue(informer.wait_for(
                    lambda inf: inf.has_synced(), timeout=TIMEOUT))
                self.assertEqual(informer.keys(), ["ns/a"])
            self.assertTrue(errors.empty(), errors.get_nowait()
                            if not errors.empty() else None)


class ScriptedResumeTest(unittest.TestCase):
    """The token contract: a stream cut inside the initial state resumes
    with the token of the last initial event and gets the rest of it."""

    def test_cut_inside_initial_state_resumes_with_the_rest(self):
        E = informer_pb2
        a, b, c = _obj("a", "1"), _obj("b", "2"), _obj("c", "3")
        scripts = [
            [E.WatchResponse(events=[
                _ev(E.EVENT_TYPE_ADDED, a, "t1", True),
                _ev(E.EVENT_TYPE_ADDED, b, "t2", True)])],
            [E.WatchResponse(events=[
                _ev(E.EVENT_TYPE_ADDED, c, "t3", True),
                _ev(E.EVENT_TYPE_INITIAL_STATE_DONE, None, "t4")])],
        ]
        errors, recoveries = [], []
        with scripted_server(scripts) as (servicer, target):
            informer = RemoteInformer("things", target=target,
                                      initial_backoff=0.01,
                                      on_error=errors.append,
                                      on_recovered=recoveries.append)
            rec = Recorder(informer)
            with informer:
                self.assertTrue(informer.wait_for_sync(TIMEOUT))
                self.assertEqual(informer.keys(), ["ns/a", "ns/b", "ns/c"])
            # Only now (stopped): a stream ended by the server would be one
            # more error.
            self.assertEqual([r.resume_token for r in servicer.requests],
                             ["", "t2"])
            self.assertEqual([(e.code, e.details, e.failures)
                              for e in errors],
                             [(grpc.StatusCode.UNAVAILABLE, "scripted break",
                               1)])
            self.assertEqual(recoveries, [1])
            with rec.cond:
                self.assertEqual(rec.errors, [])
                self.assertEqual(rec.calls, [("add", "ns/a", True),
                                             ("add", "ns/b", True),
                                             ("add", "ns/c", True)])


class RestartTest(unittest.TestCase):
    """The sidecar restarts under a live informer."""

    def test_reconnect_after_restart_reconciles_mirror(self):
        with DemoSidecar(BINARY) as sidecar:
            errors = []
            recoveries = []
            informer = RemoteInformer("pods", target=sidecar.target,
                                      initial_backoff=0.05, max_backoff=0.5,
                                      on_error=errors.append,
                                      on_recovered=recoveries.append)
            rec = Recorder(informer)
            with informer:
                self.assertTrue(informer.wait_for_sync(TIMEOUT))
                token = informer.resume_token
                self.assertTrue(token)
                before = mirror_rvs(informer)
                with rec.cond:
                    calls_before = len(rec.calls)
                self.assertEqual(errors, [])
                sidecar.restart()
                # The new run does not know the token: RESET, reconcile.
                self.assertTrue(informer.wait_for(
                    lambda inf: inf.resets >= 1, timeout=TIMEOUT))
                # The application was told: the stream broke (the sidecar
                # ends Watch streams with UNAVAILABLE on SIGTERM), attempts
                # failed while it was away (UNAVAILABLE, or CANCELLED while
                # the old run shut down), then one recovery.
                self.assertGreaterEqual(len(errors), 1)
                self.assertEqual(errors[0].code, grpc.StatusCode.UNAVAILABLE)
                self.assertTrue(all(e.code in (grpc.StatusCode.UNAVAILABLE,
                                               grpc.StatusCode.CANCELLED)
                                    for e in errors), errors)
                self.assertEqual([e.failures for e in errors],
                                 list(range(1, len(errors) + 1)))
                self.assertEqual(recoveries, [len(errors)])
                self.assertEqual(informer.failures, 0)
                self.assertGreaterEqual(informer.reconnects, 1)
                wait_mirror_matches(self, informer, sidecar.target, "pods")
                with rec.cond:
                    self.assertEqual(rec.errors, [])
                    self.assertEqual(rec.model,
                                     {object_key(o): o
                                      for o in informer.list()})
                    after_calls = rec.calls[calls_before:]
                # Objects the handlers already had were never added again:
                # they arrived as updates (the new run's objects differ) or
                # deletes (tombstones).
                readded = [c for c in after_calls
                           if c[0] == "add" and c[1] in before and
                           not any(d[0] == "delete" and d[1] == c[1]
                                   for d in after_calls)]
                self.assertEqual(readded, [])
                self.assertFalse(any(c[0] == "add" and c[2]
                                     for c in after_calls),
                                 "adds after a RESET are not initial")
                self.assertTrue(informer.has_synced())


if __name__ == "__main__":
    if not BINARY:
        sys.exit("INFORMER_SIDECAR_BINARY is not set")
    unittest.main()
