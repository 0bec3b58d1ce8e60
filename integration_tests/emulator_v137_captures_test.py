"""The emulator (--server_version=1.37) answers as the real kube-apiserver
v1.37.2 did: the requests of testdata/kube-apiserver-v1.37/capture.py go to
the emulator, and each normalised answer must equal its capture byte for
byte. No real server is needed: the captures were taken from it (capture.py
regenerates them).
"""

import difflib
import os
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
CAPTURES = os.path.join(HERE, "..", "testdata", "kube-apiserver-v1.37")
sys.path.insert(0, CAPTURES)

import capture  # noqa: E402

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", "."),
                        os.environ.get("TEST_WORKSPACE", "informer_sidecar"))
DEADLINE = 60.0
ADMIN = "admin-token"
USER = "user-token"


def emulator_binary():
    for path in (os.path.join(RUNFILES, "emulator", "kube_emulator"),
                 os.path.join(HERE, "..", "emulator", "kube_emulator")):
        if os.path.exists(path):
            return path
    raise FileNotFoundError("emulator/kube_emulator")


def wait_for_port(path, proc):
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("kube_emulator exited %d" % proc.returncode)
        try:
            with open(path) as f:
                text = f.read().strip()
            if text:
                return int(text)
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise TimeoutError("no port from kube_emulator")


class EmulatorMatchesV137CapturesTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="v137cap")
        port_file = os.path.join(cls.tmp, "port")
        cls.proc = subprocess.Popen(
            [emulator_binary(), "--port=0", "--server_version=1.37",
             "--print_port_file=" + port_file,
             "--token=%s:admin,%s:realkube-user:deny" % (ADMIN, USER)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            url = "http://127.0.0.1:%d" % wait_for_port(port_file, cls.proc)

            def control(op):
                req = urllib.request.Request(url + "/_emulator/" + op,
                                             data=b"", method="POST")
                urllib.request.urlopen(req, timeout=30).close()

            target = capture.Target(
                url, {"admin": ADMIN, "user": USER, "bogus": "bogus"},
                compact=lambda: control("compact"),
                restart=lambda: control("restart"))
            cls.answers = capture.collect(target)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait(timeout=30)
        subprocess.run(["rm", "-rf", cls.tmp], check=False)

    def test_every_capture_is_checked(self):
        on_disk = sorted(f for f in os.listdir(CAPTURES)
                         if f.endswith((".txt", ".json", ".jsonl")))
        self.assertEqual(on_disk, sorted(capture.FILES))

    def test_answers_equal_the_captures(self):
        differing = []
        for name in capture.FILES:
            with open(os.path.join(CAPTURES, name)) as f:
                want = f.read()
            got = self.answers[name]
            if got != want:
                differing.append("%s:\n%s" % (name, "".join(
                    difflib.unified_diff(want.splitlines(True),
                                         got.splitlines(True),
                                         "real v1.37.2", "emulator"))))
        self.assertEqual(differing, [], "\n".join(differing))


if __name__ == "__main__":
    unittest.main()
