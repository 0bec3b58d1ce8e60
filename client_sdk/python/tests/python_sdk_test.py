"""Installs the Python SDK as the README says and runs its end-to-end tests.

Copies client_sdk/python (examples included) and proto/informer/v1 from the
runfiles into $TEST_TMPDIR, makes a venv from Debian's Python with
--system-site-packages, runs `pip install --no-index --no-build-isolation`
(which generates the gRPC stubs with protoc and grpc_python_plugin), then
runs the test files named on the command line (client_sdk/python/tests/,
default e2e_test.py) with the venv's python against the real
//server:informer_sidecar binary (in demo mode, or in front of the
//emulator:kube_emulator binary when the target has it in its data), or
against the conformance suite's scripted server.
"""

import os
import shutil
import subprocess
import sys
import unittest

WORKSPACE = "informer_sidecar"
# Test files of client_sdk/python/tests to run (set from argv in __main__).
TEST_FILES = ["e2e_test.py"]


def runfile(path: str) -> str:
    return os.path.join(os.environ["TEST_SRCDIR"], WORKSPACE, path)


class PythonSdkTest(unittest.TestCase):

    def test_install_and_end_to_end(self):
        tmp = os.environ.get("TEST_TMPDIR") or os.path.abspath("tmp")
        src = os.path.join(tmp, "src")
        shutil.rmtree(src, ignore_errors=True)
        # Dereference runfiles symlinks: pip builds in the source tree.
        ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
        shutil.copytree(runfile("client_sdk/python"),
                        os.path.join(src, "client_sdk", "python"),
                        ignore=ignore)
        shutil.copytree(runfile("proto/informer/v1"),
                        os.path.join(src, "proto", "informer", "v1"))

        # The Bazel stub's PYTHONPATH holds the runfiles tree, whose
        # "informer_sidecar" workspace directory would shadow the package.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        venv = os.path.join(tmp, "venv")
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run(
            ["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv],
            check=True, env=env)
        pip = subprocess.run(
            [os.path.join(venv, "bin", "pip"), "install", "--no-index",
             "--no-build-isolation", "./client_sdk/python"],
            cwd=src, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        self.assertEqual(pip.returncode, 0, pip.stdout)

        env["INFORMER_SIDECAR_BINARY"] = runfile("server/informer_sidecar")
        env["INFORMER_SIDECAR_EXAMPLES"] = os.path.join(
            src, "client_sdk", "python", "examples")
        env["INFORMER_CONFORMANCE_SERVER"] = runfile(
            "client_sdk/conformance/scripted_server")
        env["INFORMER_CONFORMANCE_SCENARIOS"] = runfile(
            "client_sdk/conformance/scenarios")
        if os.path.exists(runfile("emulator/kube_emulator")):
            env["INFORMER_EMULATOR_BINARY"] = runfile("emulator/kube_emulator")
        for test_file in TEST_FILES:
            with self.subTest(test_file):
                tests = subprocess.run(
                    [os.path.join(venv, "bin", "python"),
                     os.path.join(src, "client_sdk", "python", "tests",
                                  test_file), "-v"],
                    cwd=tmp, env=env, check=False)
                self.assertEqual(tests.returncode, 0,
                                 f"{test_file} failed (see log)")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        TEST_FILES = sys.argv[1:]
        del sys.argv[1:]
    sys.exit(unittest.main())
