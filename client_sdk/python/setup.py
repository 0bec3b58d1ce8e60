"""Builds the informer_sidecar package, generating its gRPC stubs.

The stubs are never committed: the build runs Debian's `protoc`
(protobuf-compiler) with `grpc_python_plugin` (protobuf-compiler-grpc) on the
sidecar's protos (`../../proto/informer/v1/*.proto` relative to this file, or
the directory in $INFORMER_SIDECAR_PROTO_ROOT holding `proto/informer/v1`),
and places the modules in the `informer_sidecar._gen` subpackage, rewriting
the generated `from proto.informer.v1 import ...` lines to match.
"""

import glob
import os
import re
import shutil
import subprocess
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = ("informer", "workqueue", "events")


def _proto_root() -> str:
    root = os.environ.get("INFORMER_SIDECAR_PROTO_ROOT") or os.path.join(
        HERE, "..", "..")
    root = os.path.abspath(root)
    for name in PROTOS:
        path = os.path.join(root, "proto", "informer", "v1", name + ".proto")
        if not os.path.isfile(path):
            raise RuntimeError(
                f"informer_sidecar: {path} not found; build from the "
                "repository checkout or set INFORMER_SIDECAR_PROTO_ROOT to the "
                "directory holding proto/informer/v1")
    return root


def _tool(name: str, env: str) -> str:
    path = os.environ.get(env) or shutil.which(name) or f"/usr/bin/{name}"
    if not os.path.isfile(path):
        raise RuntimeError(
            f"informer_sidecar: {name} not found (install Debian's "
            "protobuf-compiler and protobuf-compiler-grpc, or set ${env})")
    return path


def generate_stubs(out_dir: str) -> None:
    """Writes informer_pb2.py, informer_pb2_grpc.py, ... into out_dir."""
    root = _proto_root()
    protoc = _tool("protoc", "PROTOC")
    plugin = _tool("grpc_python_plugin", "GRPC_PYTHON_PLUGIN")
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [protoc, f"-I{root}", f"--python_out={tmp}", f"--grpc_out={tmp}",
               f"--plugin=protoc-gen-grpc={plugin}"]
        cmd += [os.path.join(root, "proto", "informer", "v1", n + ".proto")
                for n in PROTOS]
        subprocess.run(cmd, check=True)
        for path in glob.glob(os.path.join(tmp, "proto", "informer", "v1",
                                           "*.py")):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            text = re.sub(r"^from proto\.informer\.v1 import ",
                          "from informer_sidecar._gen import ", text,
                          flags=re.M)
            with open(os.path.join(out_dir, os.path.basename(path)), "w",
                      encoding="utf-8") as f:
                f.write(text)
    with open(os.path.join(out_dir, "__init__.py"), "w",
              encoding="utf-8") as f:
        f.write('"""Generated from proto/informer/v1 at build time."""\n')


def protobuf_requirement() -> str:
    """The protobuf runtimes that load the code this protoc generates.

    protoc 3.20 and later emit modules built with
    google.protobuf.internal.builder (new in the 3.20 runtime); protobuf's
    cross-version guarantee lets a runtime of major version N load code
    generated for major N-1, so the range stops before the runtime two majors
    above the generated code's. Python runtime majors: protoc 3.20-3.21 and
    22-25 generate 4.x code (Debian 12's python3-protobuf 3.21 is that 4.21
    runtime under the C++ version number), 26-29 generate 5.x, 30+ 6.x.
    """
    out = subprocess.run([_tool("protoc", "PROTOC"), "--version"],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    match = re.search(r"(\d+)\.(\d+)", out)
    if not match:
        raise RuntimeError(f"informer_sidecar: protoc --version said {out!r}")
    major, minor = int(match.group(1)), int(match.group(2))
    release = minor if major == 3 else major  # 3.21.12 is release 21
    if release < 20:
        raise RuntimeError(
            f"informer_sidecar: protoc {out.strip()} is older than 3.20")
    if release <= 25:
        return "protobuf>=3.20,<6"
    runtime_major = 5 if release <= 29 else release // 10 + 3
    return (f"protobuf>={runtime_major}.{release}.0,"
            f"<{runtime_major + 2}")


class BuildPyWithStubs(build_py):
    """build_py that also generates informer_sidecar/_gen."""

    def run(self):
        super().run()
        generate_stubs(os.path.join(self.build_lib, "informer_sidecar",
                                    "_gen"))


setup(
    name="informer_sidecar",
    version="0.1.0",
    description="Python client of the informer sidecar: remote informers "
                "with a local mirror, remote work queues, Kubernetes Events",
    packages=["informer_sidecar"],
    python_requires=">=3.9",
    # Debian 12's python3-grpcio (1.51) and python3-protobuf, seen through
    # --system-site-packages, satisfy these. The stubs Debian's
    # grpc_python_plugin (1.51) generates call only grpc APIs that 1.51
    # has and carry no version check, so 1.51 is the oldest grpcio tested
    # and any later 1.x loads them.
    install_requires=["grpcio>=1.51,<2", protobuf_requirement()],
    cmdclass={"build_py": BuildPyWithStubs},
)
