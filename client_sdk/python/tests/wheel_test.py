"""Builds the SDK's wheel and uses it outside the source tree.

Copies client_sdk/python and proto/informer/v1 from the runfiles into
$TEST_TMPDIR, builds a wheel with Debian's pip (`pip wheel --no-deps
--no-build-isolation`, Debian's setuptools and wheel; the build generates
the gRPC stubs with protoc and grpc_python_plugin), deletes the source copy,
installs the wheel offline into a fresh venv made from Debian's Python with
--system-site-packages (its python3-grpcio and python3-protobuf satisfy the
wheel's requirements), and runs the README's quick start, extracted from
README.md as written, against the real //server:informer_sidecar in --demo
mode.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import unittest
import zipfile

WORKSPACE = "informer_sidecar"


def runfile(path: str) -> str:
    return os.path.join(os.environ["TEST_SRCDIR"], WORKSPACE, path)


def quick_start() -> str:
    """The first ```python block of the README's "Quick start" section."""
    with open(runfile("client_sdk/python/README.md"), encoding="utf-8") as f:
        readme = f.read()
    section = readme.split("## Quick start", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, flags=re.S)
    if not match:
        raise AssertionError("README.md: no python block in Quick start")
    return match.group(1)


# Run with the venv's python: starts the sidecar (argv[1]) in --demo mode
# and runs the quick start (argv[2]) with its target as the argument.
DRIVER = """
import subprocess, sys
from informer_sidecar.demo import DemoSidecar
with DemoSidecar(sys.argv[1]) as sidecar:
    sys.exit(subprocess.run([sys.executable, sys.argv[2], sidecar.target],
                            check=False).returncode)
"""


class WheelTest(unittest.TestCase):

    def setUp(self):
        self.tmp = os.environ["TEST_TMPDIR"]
        # The Bazel stub's PYTHONPATH holds the runfiles tree, whose
        # "informer_sidecar" workspace directory would shadow the package.
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run_ok(self, args, **kwargs):
        proc = subprocess.run(args, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, check=False,
                              **kwargs)
        self.assertEqual(proc.returncode, 0,
                         f"{' '.join(args)}:\n{proc.stdout}")
        return proc.stdout

    def build_wheel(self) -> str:
        src = os.path.join(self.tmp, "src")
        shutil.rmtree(src, ignore_errors=True)
        ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
        shutil.copytree(runfile("client_sdk/python"),
                        os.path.join(src, "client_sdk", "python"),
                        ignore=ignore)
        shutil.copytree(runfile("proto/informer/v1"),
                        os.path.join(src, "proto", "informer", "v1"))
        dist = os.path.join(self.tmp, "dist")
        shutil.rmtree(dist, ignore_errors=True)
        self.run_ok([
            "/usr/bin/python3", "-m", "pip", "wheel", "--no-deps",
            "--no-build-isolation", "--no-index", "-w", dist,
            os.path.join(src, "client_sdk", "python")
        ])
        # Nothing of the source tree may be needed from here on.
        shutil.rmtree(src)
        wheels = glob.glob(os.path.join(dist, "informer_sidecar-*.whl"))
        self.assertEqual(len(wheels), 1, os.listdir(dist))
        return wheels[0]

    def check_wheel_contents(self, wheel: str) -> None:
        with zipfile.ZipFile(wheel) as z:
            names = set(z.namelist())
            meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
            metadata = z.read(meta).decode()
        for stub in ("informer", "workqueue", "events"):
            self.assertIn(f"informer_sidecar/_gen/{stub}_pb2.py", names)
            self.assertIn(f"informer_sidecar/_gen/{stub}_pb2_grpc.py", names)
        self.assertFalse([n for n in names if "/tests/" in n or
                          "/examples/" in n], names)
        requires = sorted(
            line.split(":", 1)[1].strip()
            for line in metadata.splitlines()
            if line.startswith("Requires-Dist:"))
        # Debian 12's protoc 3.21 generates code for the 4.x runtime
        # (builder API of 3.20+); runtimes up to 5.x load it.
        self.assertEqual(requires,
                         ["grpcio (<2,>=1.51)", "protobuf (<6,>=3.20)"])

    def test_wheel_installs_in_fresh_venv_and_quick_start_works(self):
        wheel = self.build_wheel()
        self.check_wheel_contents(wheel)

        venv = os.path.join(self.tmp, "venv")
        shutil.rmtree(venv, ignore_errors=True)
        self.run_ok(["/usr/bin/python3", "-m", "venv",
                     "--system-site-packages", venv])
        python = os.path.join(venv, "bin", "python")
        # --no-index: the requirements must be met by Debian's packages.
        self.run_ok([os.path.join(venv, "bin", "pip"), "install",
                     "--no-index", wheel])
        app = os.path.join(self.tmp, "app")
        os.makedirs(app, exist_ok=True)
        where = self.run_ok([
            python, "-c", "import informer_sidecar, grpc, google.protobuf;"
            "print(informer_sidecar.__file__)"
        ], cwd=app)
        self.assertTrue(where.strip().startswith(venv), where)

        script = os.path.join(app, "quickstart.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write(quick_start())
        # The quick start's sidecar: the real binary in --demo mode on a
        # unix socket (no fixed port), started by the DemoSidecar the wheel
        # ships, in the venv (this interpreter may lack grpcio).
        driver = os.path.join(app, "driver.py")
        with open(driver, "w", encoding="utf-8") as f:
            f.write(DRIVER)
        out = self.run_ok([python, driver, runfile("server/informer_sidecar"),
                           script], cwd=app, timeout=180)
        keys = re.findall(r"'(demo/[^']+)'", out)
        self.assertTrue(keys, out)
        self.assertNotIn("not synced", out)


if __name__ == "__main__":
    sys.exit(unittest.main())
