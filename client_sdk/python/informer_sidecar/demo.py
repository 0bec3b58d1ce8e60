"""Runs the sidecar binary in demo mode as a child process (examples, tests).

The demo cluster is the sidecar's in-process API server emulator, seeded with
namespaces, pods, deployments and configmaps that change every second.
"""

import glob
import os
import shutil
import signal
import subprocess
import tempfile
from typing import List, Optional

import grpc


BINARY_ENV = "INFORMER_SIDECAR_BINARY"
_RELATIVE = os.path.join("server", "informer_sidecar")


def find_sidecar_binary(start: Optional[str] = None) -> str:
    """Locates a built informer_sidecar binary without running Bazel.

    In order: $INFORMER_SIDECAR_BINARY; the newest
    ``bazel-out/<configuration>/bin/server/informer_sidecar`` of the Bazel
    workspace containing `start` (default: the working directory), whatever
    configuration built it (``bazel-bin`` follows only the last build's
    configuration, e.g. ``-c opt``); ``informer_sidecar`` on PATH.
    FileNotFoundError, saying how to build it, when none exists.
    """
    env = os.environ.get(BINARY_ENV, "")
    if env:
        if not os.path.isfile(env):
            raise FileNotFoundError(f"${BINARY_ENV}={env}: no such file")
        return env
    directory = os.path.abspath(start or os.getcwd())
    while True:
        if os.path.isfile(os.path.join(directory, "WORKSPACE")):
            built = [
                p for p in glob.glob(
                    os.path.join(directory, "bazel-out", "*", "bin",
                                 _RELATIVE)) if os.path.isfile(p)
            ]
            if built:
                return max(built, key=os.path.getmtime)
            break
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    on_path = shutil.which("informer_sidecar")
    if on_path:
        return on_path
    raise FileNotFoundError(
        "informer_sidecar binary not found: build it with `bazel build -c "
        "opt //server:informer_sidecar` (in the workspace), or name it: "
        f"--sidecar \"$(bazel info -c opt bazel-bin)/{_RELATIVE}\" or "
        f"${BINARY_ENV}")


class DemoSidecar:
    """A `informer_sidecar --demo` child serving gRPC on a unix socket.

    Usage::

        with DemoSidecar("bazel-bin/server/informer_sidecar") as sidecar:
            RemoteInformer("pods", target=sidecar.target) ...

    :meth:`restart` stops the process and starts a new one on the same
    socket (a new run: Watch resume tokens of the old one get RESET).
    Not thread-safe.
    """

    def __init__(self,
                 binary: str,
                 extra_args: Optional[List[str]] = None,
                 socket_dir: Optional[str] = None,
                 log_path: Optional[str] = None) -> None:
        if not os.path.isfile(binary):
            raise FileNotFoundError(f"binary: {binary} not found")
        self._binary = binary
        self._extra_args = list(extra_args or [])
        # unix socket paths are limited to ~107 bytes: keep it short.
        self._dir = tempfile.mkdtemp(prefix="isd", dir=socket_dir or "/tmp")
        self.socket_path = os.path.join(self._dir, "s.sock")
        self.target = "unix:" + self.socket_path
        self._log_path = log_path or os.path.join(self._dir, "sidecar.log")
        self._proc: Optional[subprocess.Popen] = None

    def start(self, timeout: float = 30.0) -> "DemoSidecar":
        """Starts the child and waits until its gRPC socket accepts
        connections."""
        if self._proc is not None:
            raise RuntimeError("already running")
        args = [
            self._binary, "--demo", "--grpc_listen=" + self.target,
            "--http_listen=127.0.0.1:0", "--print_events=false"
        ] + self._extra_args
        log = open(self._log_path, "ab")  # pylint: disable=consider-using-with
        self._proc = subprocess.Popen(args,
                                      stdout=log,
                                      stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL)
        log.close()
        with grpc.insecure_channel(self.target) as channel:
            try:
                grpc.channel_ready_future(channel).result(timeout=timeout)
            except grpc.FutureTimeoutError:
                self.stop()
                raise RuntimeError(
                    f"sidecar not serving on {self.target} after {timeout}s; "
                    f"log: {self._log_path}") from None
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, then SIGKILL after `timeout`; waits for the exit."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def restart(self, timeout: float = 30.0) -> None:
        """Stops the child and starts a new one on the same socket."""
        self.stop(timeout)
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        self.start(timeout)

    @property
    def log_path(self) -> str:
        """Where the child's stdout and stderr go."""
        return self._log_path

    def close(self) -> None:
        """Stops the child and removes its socket directory."""
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> "DemoSidecar":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
