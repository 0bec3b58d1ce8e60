#!/usr/bin/env python3
"""Prints the adds, updates and deletes of pods matching a label selector.

Against a running sidecar (default 127.0.0.1:50051):
    VENV/bin/python client_sdk/python/examples/pod_watcher.py --selector 'tier=web'
Or starting the sidecar in demo mode itself (the binary built by
`bazel build //server:informer_sidecar`, found whatever the configuration):
    VENV/bin/python client_sdk/python/examples/pod_watcher.py --sidecar

When the stream to the sidecar breaks (e.g. it restarts) the watcher says so
once, keeps the pods it has, and says so again when the stream is back.
"""

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading

from informer_sidecar import RemoteInformer, StreamError, object_key


def _rv(obj) -> str:
    return obj.get("metadata", {}).get("resourceVersion", "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="127.0.0.1:50051",
                        help="the sidecar: host:port or unix:/path")
    parser.add_argument("--sidecar", nargs="?", const="", default=None,
                        metavar="BINARY",
                        help="run an informer_sidecar binary in demo mode "
                        "instead of connecting to --target; without BINARY "
                        "the one Bazel built is found")
    parser.add_argument("--selector", default="tier=web",
                        help="Kubernetes label selector")
    parser.add_argument("--namespace", default="",
                        help="only this namespace (default: all)")
    parser.add_argument("--duration", type=float, default=0,
                        help="exit after this many seconds (0: on Ctrl-C)")
    args = parser.parse_args()

    done = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: done.set())
    signal.signal(signal.SIGTERM, lambda *_: done.set())

    # Stream errors are reported below (once per outage); the SDK's own
    # WARNING lines about each failed attempt would repeat them.
    logging.getLogger("informer_sidecar").setLevel(logging.ERROR)

    def lost(err: StreamError) -> None:
        if err.failures == 1:  # the first failure of an outage
            print(f"LOST     the stream to the sidecar ({err.code.name}: "
                  f"{err.details}); retrying in the background", flush=True)

    def back(failures: int) -> None:
        print(f"RESUMED  the stream to the sidecar (after {failures} failed "
              "attempt(s))", flush=True)

    with contextlib.ExitStack() as stack:
        target = args.target
        if args.sidecar is not None:
            from informer_sidecar.demo import DemoSidecar, find_sidecar_binary  # pylint: disable=import-outside-toplevel
            binary = args.sidecar or find_sidecar_binary(
                os.path.dirname(os.path.abspath(__file__)))
            target = stack.enter_context(DemoSidecar(binary)).target
        informer = RemoteInformer("pods",
                                  target=target,
                                  namespace=args.namespace or None,
                                  label_selector=args.selector,
                                  on_error=lost,
                                  on_recovered=back)

        @informer.on_add
        def _added(obj, is_initial):
            print(f"ADDED    {object_key(obj):40} rv={_rv(obj)}"
                  f"{'  (initial)' if is_initial else ''}", flush=True)

        @informer.on_update
        def _updated(old, new):
            print(f"UPDATED  {object_key(new):40} rv={_rv(old)}->{_rv(new)}",
                  flush=True)

        @informer.on_delete
        def _deleted(obj, tombstone):
            print(f"DELETED  {object_key(obj):40} rv={_rv(obj)}"
                  f"{'  (tombstone)' if tombstone else ''}", flush=True)

        with informer:
            if not informer.wait_for_sync(30):
                print("not synced after 30s", file=sys.stderr)
                return 1
            apps = informer.index_values("label:app")
            print(f"SYNCED   {len(informer.list())} pods; by label app: " +
                  ", ".join(f"{a}={len(informer.by_index('label:app', a))}"
                            for a in apps),
                  flush=True)
            done.wait(args.duration or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
