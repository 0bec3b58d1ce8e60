"""The Python SDK through every scenario of the conformance suite.

For each client_sdk/conformance/scenarios/*.json: starts the scripted server
($INFORMER_CONFORMANCE_SERVER) on it, drives a RemoteInformer or a
WorkQueueWorker of the installed package against it as the scenario's
"client" says, and at every
checkpoint sends what the SDK shows (handler calls, mirror, resume
token, errors and recoveries reported, the worker's handler outcomes) until
the server finds it matches, or fails after the deadline with the last
difference. See client_sdk/conformance/README.md.
"""

import collections
import glob
import json
import os
import queue
import subprocess
import sys
import threading
import time
import unittest

from informer_sidecar import RemoteInformer, WorkQueueWorker, object_key

SERVER = os.environ.get("INFORMER_CONFORMANCE_SERVER", "")
SCENARIOS = os.environ.get("INFORMER_CONFORMANCE_SCENARIOS", "")
DEADLINE = 20.0  # seconds a checkpoint may take to match


def rv(obj) -> str:
    return (obj.get("metadata") or {}).get("resourceVersion", "")


def error_text(err) -> str:
    return err.code.name + (" final" if getattr(err, "final", False) else "")


class InformerDriver:
    """A RemoteInformer recording what the scenario checks."""

    def __init__(self, client: dict, target: str) -> None:
        self.lock = threading.Condition()
        self.calls, self.errors, self.recoveries = [], [], []
        self.informer = RemoteInformer(
            client["resource"], target,
            namespace=client.get("namespace"),
            label_selector=client.get("label_selector"),
            initial_backoff=client["initial_backoff_ms"] / 1000,
            max_backoff=client["max_backoff_ms"] / 1000,
            on_error=lambda e: self._note(self.errors, error_text(e)),
            on_recovered=lambda n: self._note(self.recoveries, n))
        inf = self.informer
        inf.on_add(lambda o, initial: self._note(
            self.calls, f"add {object_key(o)} {rv(o)}" +
            (" initial" if initial else "")))
        inf.on_update(lambda old, new: self._note(
            self.calls, f"update {object_key(new)} {rv(old)} {rv(new)}"))
        inf.on_delete(lambda o, tomb: self._note(
            self.calls, f"delete {object_key(o)} {rv(o)}" +
            (" tombstone" if tomb else "")))
        inf.start()

    def _note(self, where: list, what) -> None:
        with self.lock:
            where.append(what)
            self.lock.notify_all()

    def observe(self) -> dict:
        inf = self.informer
        with self.lock:
            return {
                "calls": list(self.calls),
                "errors": list(self.errors),
                "recoveries": list(self.recoveries),
                "mirror": {object_key(o): rv(o) for o in inf.list()},
                "resume_token": inf.resume_token,
                "synced": inf.has_synced(),
                "stale": inf.is_stale,
            }

    def release(self, key: str, after_expired) -> None:
        raise AssertionError(f"release {key} for an informer")

    def stop(self) -> None:
        self.informer.stop()


class WorkerDriver:
    """A WorkQueueWorker whose handler fails or holds keys as the scenario
    says."""

    def __init__(self, client: dict, target: str) -> None:
        self.lock = threading.Condition()
        self.errors, self.recoveries = [], []
        self.started, self.processed = [], []
        self.attempts = collections.Counter()
        self.fail = client.get("fail", {})
        self.hold = set(client.get("hold", []))
        self.released = set()
        self.worker = WorkQueueWorker(
            client["queue"], self._fn, target, credit=1,
            name=client.get("name", ""),
            initial_backoff=client["initial_backoff_ms"] / 1000,
            max_backoff=client["max_backoff_ms"] / 1000,
            on_error=lambda e: self._note(self.errors, error_text(e)),
            on_recovered=lambda n: self._note(self.recoveries, n))
        self.worker.start()

    def _note(self, where: list, what) -> None:
        with self.lock:
            where.append(what)
            self.lock.notify_all()

    def _fn(self, key: str) -> None:
        with self.lock:
            self.attempts[key] += 1
            attempt = self.attempts[key]
            self.started.append(key)
            self.lock.notify_all()
            if key in self.hold and attempt == 1:
                if not self.lock.wait_for(lambda: key in self.released,
                                          DEADLINE):
                    raise AssertionError(f"{key} never released")
        if attempt <= self.fail.get(key, 0):
            self._note(self.processed, f"{key} FAIL")
            raise RuntimeError(f"scripted failure of {key}")
        self._note(self.processed, f"{key} FORGET")

    def observe(self) -> dict:
        with self.lock:
            return {
                "errors": list(self.errors),
                "recoveries": list(self.recoveries),
                "started": list(self.started),
                "processed": list(self.processed),
            }

    def release(self, key: str, after_expired) -> None:
        if after_expired:
            deadline = time.monotonic() + DEADLINE
            while not self.worker.is_expired(int(after_expired)):
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"lease {after_expired} never known as expired")
                time.sleep(0.005)
        with self.lock:
            self.released.add(key)
            self.lock.notify_all()

    def stop(self) -> None:
        self.worker.stop()


def run_scenario(path: str) -> None:
    server = subprocess.Popen([SERVER, path], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    lines: "queue.Queue" = queue.Queue()

    def read():
        for line in server.stdout:
            lines.put(json.loads(line))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()

    def next_msg() -> dict:
        try:
            msg = lines.get(timeout=DEADLINE * 3)
        except queue.Empty:
            raise AssertionError("the scripted server went silent") from None
        if msg is None:
            raise AssertionError("the scripted server exited")
        return msg

    def send(msg: dict) -> None:
        server.stdin.write(json.dumps(msg) + "\n")
        server.stdin.flush()

    driver = None
    try:
        hello = next_msg()
        client, target = hello["client"], f"127.0.0.1:{hello['listening']}"
        kind = {"informer": InformerDriver, "worker": WorkerDriver}
        driver = kind[client["kind"]](client, target)
        while True:
            msg = next_msg()
            if "done" in msg:
                if not msg["ok"]:
                    raise AssertionError(f"scenario failed: {msg['error']}")
                return
            if "release" in msg:
                driver.release(msg["release"], msg.get("after_expired"))
                continue
            name = msg["checkpoint"]
            deadline = time.monotonic() + DEADLINE
            while True:
                send({"observe": driver.observe()})
                reply = next_msg()
                if reply.get("match"):
                    break
                if "done" in reply:
                    raise AssertionError(f"scenario failed: {reply}")
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"checkpoint {name!r}: {reply['diff']}")
                # Polls again once the SDK reported something new, or
                # after a short while (mirror and token changes).
                with driver.lock:
                    driver.lock.wait(0.02)
    finally:
        if driver is not None:
            driver.stop()
        try:
            server.stdin.close()
        except OSError:
            pass
        try:
            server.wait(DEADLINE)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        server.stdout.close()


class ConformanceTest(unittest.TestCase):
    pass


def _make(path: str):
    def test(self):
        run_scenario(path)
    return test


for _path in sorted(glob.glob(os.path.join(SCENARIOS, "*.json"))):
    _name = os.path.splitext(os.path.basename(_path))[0]
    setattr(ConformanceTest, f"test_{_name}", _make(_path))


class SuiteTest(unittest.TestCase):

    def test_scenarios_present(self):
        self.assertTrue(os.access(SERVER, os.X_OK), SERVER)
        self.assertGreaterEqual(
            len(glob.glob(os.path.join(SCENARIOS, "*.json"))), 16,
            SCENARIOS)


if __name__ == "__main__":
    sys.exit(unittest.main())
