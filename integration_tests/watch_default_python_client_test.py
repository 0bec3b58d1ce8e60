"""A plain grpcio client with DEFAULT options (4 MiB receive limit) watches
a resource whose initial state is over 30 MB: the real sidecar binary
against the real emulator, both child processes.

Before Watch split its responses (--watch_max_message_bytes), the initial
state went out as one message and this client failed with
RESOURCE_EXHAUSTED ("Received message larger than max").

The messages are generated with the system protoc from the repository's
informer.proto (no gRPC plugin needed: the call uses the channel's
unary_stream with the message classes' (de)serializers). Every wait is on a
condition (a pipe read, channel readiness, the stream) with a deadline.
"""

import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import grpc

WORKSPACE = os.environ.get("TEST_WORKSPACE", "informer_sidecar")
RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."), WORKSPACE)
# ~3.4 KB each as the sidecar caches them (managedFields dropped): 32 MB.
SEED_PODS = 9500
MIN_TOTAL_BYTES = 30 * 1000 * 1000
DEFAULT_RECEIVE_LIMIT = 4 * 1024 * 1024
TIMEOUT = 120.0


def runfile(relative):
    path = os.path.join(RUNFILES, relative)
    if not os.path.exists(path):
        raise FileNotFoundError(path)
    return path


def generate_messages(out_dir):
    proto_root = os.path.dirname(os.path.dirname(os.path.dirname(
        runfile("proto/informer/v1/informer.proto"))))
    subprocess.run(["protoc", "-I", proto_root, "-I", "/usr/include",
                    "--python_out=" + out_dir, "informer/v1/informer.proto"],
                   check=True)
    sys.path.insert(0, out_dir)
    return importlib.import_module("informer.v1.informer_pb2")


class WatchDefaultPythonClientTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="wpy")
        self.children = []
        self.pb = generate_messages(self.tmp)
        emulator = subprocess.Popen(
            [runfile("emulator/kube_emulator"), "--port=0",
             "--seed_pods=%d" % SEED_PODS],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.children.append(emulator)
        # The emulator prints its port once it serves (EOF: it died).
        line = emulator.stdout.readline()
        self.assertTrue(line.strip().isdigit(), "emulator port: %r" % line)
        kubeconfig = os.path.join(self.tmp, "kubeconfig")
        with open(kubeconfig, "w") as f:
            f.write("apiVersion: v1\nkind: Config\nclusters:\n"
                    "- name: e\n  cluster:\n    server: http://127.0.0.1:%s\n"
                    "contexts:\n- name: e\n  context:\n    cluster: e\n"
                    "    user: u\ncurrent-context: e\nusers:\n- name: u\n"
                    "  user: {}\n" % line.strip())
        self.socket = os.path.join(self.tmp, "grpc.sock")
        sidecar = subprocess.Popen(
            [runfile("server/informer_sidecar"), "--kubeconfig=" + kubeconfig,
             "--resources=pods", "--grpc_listen=unix:" + self.socket],
            stderr=subprocess.DEVNULL)
        self.children.append(sidecar)

    def tearDown(self):
        for child in self.children:
            child.kill()
            child.wait()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_initial_state_over_30_mb_reaches_a_default_client(self):
        # Default channel: no options at all, so the 4 MiB receive limit.
        with grpc.insecure_channel("unix:" + self.socket) as channel:
            grpc.channel_ready_future(channel).result(timeout=TIMEOUT)
            watch = channel.unary_stream(
                "/informer.v1.Informer/Watch",
                request_serializer=self.pb.WatchRequest.SerializeToString,
                response_deserializer=lambda b: b)
            request = self.pb.WatchRequest(resource="pods",
                                           namespace="benchpods")
            keys = set()
            total = 0
            messages = 0
            largest = 0
            done = False
            stream = watch(request, timeout=TIMEOUT, wait_for_ready=True)
            for raw in stream:
                messages += 1
                largest = max(largest, len(raw))
                response = self.pb.WatchResponse.FromString(raw)
                for event in response.events:
                    if event.type == self.pb.EVENT_TYPE_INITIAL_STATE_DONE:
                        done = True
                        break
                    self.assertEqual(event.type, self.pb.EVENT_TYPE_ADDED)
                    self.assertTrue(event.initial)
                    self.assertTrue(event.resume_token)
                    total += len(event.object.json)
                    obj = json.loads(event.object.json)
                    keys.add(obj["metadata"]["name"])
                if done:
                    break
            stream.cancel()
        self.assertTrue(done, "no INITIAL_STATE_DONE")
        self.assertEqual(len(keys), SEED_PODS)
        self.assertGreaterEqual(total, MIN_TOTAL_BYTES)
        self.assertGreater(messages, 1)
        self.assertLessEqual(largest, DEFAULT_RECEIVE_LIMIT)


if __name__ == "__main__":
    unittest.main()
