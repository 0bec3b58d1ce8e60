"""The installed SDK receives an initial state of more than 30 MB over a
channel with gRPC's default options (4 MiB receive limit).

The real sidecar runs in front of the API server emulator (both as child
processes, real HTTP between them) seeded with 10000 Pods. Run by
//client_sdk/python:python_sdk_large_state_test; $INFORMER_SIDECAR_BINARY and
$INFORMER_EMULATOR_BINARY name the binaries. It passes only when the
sidecar splits a large initial state into messages under the client's
limit: a single 33 MB message fails every attempt with RESOURCE_EXHAUSTED,
which on_error reports and the failure message names.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

import grpc

from informer_sidecar import RemoteInformer
from informer_sidecar._grpc import informer_pb2, informer_pb2_grpc

BINARY = os.environ.get("INFORMER_SIDECAR_BINARY", "")
EMULATOR = os.environ.get("INFORMER_EMULATOR_BINARY", "")
PODS = 10000  # about 33 MB of JSON as the sidecar serves them
MIN_BYTES = 30 * 1000 * 1000
TIMEOUT = 120.0  # failsafe: only reached when the test fails


def listed_json_bytes(channel: grpc.Channel, resource: str):
    """(objects, bytes of object JSON) the sidecar serves, over paged List
    calls (pages are capped, whatever the Watch does)."""
    stub = informer_pb2_grpc.InformerStub(channel)
    count, size, token = 0, 0, ""
    while True:
        r = stub.List(informer_pb2.ListRequest(resource=resource,
                                               continue_token=token),
                      timeout=TIMEOUT)
        count += len(r.objects)
        size += sum(len(o.json) for o in r.objects)
        token = r.continue_token
        if not token:
            return count, size


class LargeInitialStateTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="isl", dir="/tmp")
        self.procs = []
        emulator = self._spawn([EMULATOR, "--port=0",
                                f"--seed_pods={PODS}"],
                               stdout=subprocess.PIPE)
        # The emulator prints its port once it serves.
        port = int(emulator.stdout.readline())
        kubeconfig = os.path.join(self.dir, "kubeconfig")
        with open(kubeconfig, "w", encoding="utf-8") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: t\n"
                    f"clusters:\n- name: t\n  cluster:\n"
                    f"    server: http://127.0.0.1:{port}\n"
                    "contexts:\n- name: t\n  context:\n    cluster: t\n"
                    "    user: t\nusers:\n- name: t\n  user: {}\n")
        self.target = "unix:" + os.path.join(self.dir, "s.sock")
        self._spawn([BINARY, "--kubeconfig=" + kubeconfig,
                     "--resources=pods", "--grpc_listen=" + self.target,
                     "--http_listen=127.0.0.1:0", "--print_events=false"])

    def _spawn(self, args, stdout=subprocess.DEVNULL):
        proc = subprocess.Popen(args, stdout=stdout,
                                stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL, text=True)
        self.procs.append(proc)
        return proc

    def tearDown(self):
        for proc in reversed(self.procs):
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout:
                proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_initial_state_over_30mb_with_default_channel(self):
        # What applications do: a channel with every option at its default.
        with grpc.insecure_channel(self.target) as channel:
            grpc.channel_ready_future(channel).result(timeout=TIMEOUT)
            errors = []
            informer = RemoteInformer("pods", channel=channel,
                                      on_error=errors.append)
            with informer:
                synced = informer.wait_for_sync(TIMEOUT)
                self.assertTrue(
                    synced, f"no sync in {TIMEOUT}s; stream errors: "
                    f"{[str(e) for e in errors]}")
                self.assertEqual(len(informer.list()), PODS)
                self.assertEqual(informer.resets, 0)
            # The sidecar was up throughout: no failed stream.
            self.assertEqual([str(e) for e in errors], [])
            # The premise (checked once the sidecar synced: its queries
            # answer UNAVAILABLE before).
            count, size = listed_json_bytes(channel, "pods")
            self.assertEqual(count, PODS)
            self.assertGreaterEqual(size, MIN_BYTES)

if __name__ == "__main__":
    if not BINARY or not EMULATOR:
        sys.exit("INFORMER_SIDECAR_BINARY and INFORMER_EMULATOR_BINARY must "
                 "be set")
    unittest.main()
