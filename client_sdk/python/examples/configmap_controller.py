#!/usr/bin/env python3
"""A controller on a remote work queue: records an Event for every ConfigMap
with a given label, retrying failures with back-off.

The sidecar enqueues the key of every matching ConfigMap when it changes; the
worker looks the object up in a local mirror (a RemoteInformer) and records a
"Reconciled" Event about it. To show retries, the first attempt of every
key fails once (--fail_first): the SDK's WorkQueueWorker logs the failure (one
WARNING line) and the sidecar hands the key out again after the queue's
exponential back-off. Keys come back later too when their ConfigMap changes:
that is a new reconcile, not a retry.

Against a running sidecar (default 127.0.0.1:50051):
    VENV/bin/python client_sdk/python/examples/configmap_controller.py
Or starting the sidecar in demo mode itself (the binary built by
`bazel build //server:informer_sidecar`, found whatever the configuration):
    VENV/bin/python client_sdk/python/examples/configmap_controller.py --sidecar
"""

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading

from informer_sidecar import (RemoteInformer, WorkQueueWorker, create_queue,
                              object_reference, record_event)


class TransientError(Exception):
    """A simulated failure, retried by the queue."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="127.0.0.1:50051",
                        help="the sidecar: host:port or unix:/path")
    parser.add_argument("--sidecar", nargs="?", const="", default=None,
                        metavar="BINARY",
                        help="run an informer_sidecar binary in demo mode "
                        "instead of connecting to --target; without BINARY "
                        "the one Bazel built is found")
    parser.add_argument("--selector", default="app",
                        help="label selector of the ConfigMaps to handle")
    parser.add_argument("--queue", default="configmap-controller")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--fail_first", action=argparse.BooleanOptionalAction,
                        default=True,
                        help="fail the first attempt of every key")
    parser.add_argument("--duration", type=float, default=0,
                        help="exit after this many seconds (0: on Ctrl-C)")
    args = parser.parse_args()

    done = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: done.set())
    signal.signal(signal.SIGTERM, lambda *_: done.set())

    # The SDK's WARNING lines (a failed key, a broken stream) in the same
    # columns as this program's own output.
    logging.basicConfig(format="%(levelname)-9s %(message)s")

    with contextlib.ExitStack() as stack:
        target = args.target
        if args.sidecar is not None:
            from informer_sidecar.demo import DemoSidecar, find_sidecar_binary  # pylint: disable=import-outside-toplevel
            binary = args.sidecar or find_sidecar_binary(
                os.path.dirname(os.path.abspath(__file__)))
            target = stack.enter_context(DemoSidecar(binary)).target

        mirror = stack.enter_context(
            RemoteInformer("configmaps",
                           target=target,
                           label_selector=args.selector))
        if not mirror.wait_for_sync(30):
            print("configmaps not synced after 30s", file=sys.stderr)
            return 1
        created = create_queue(args.queue,
                               "configmaps",
                               target,
                               label_selector=args.selector,
                               base_delay=0.2,
                               max_delay=10)
        print(f"queue {args.queue!r} {'created' if created else 'exists'}",
              flush=True)

        failed_once = set()  # keys whose simulated failure happened
        failures = {}  # key -> failed attempts since its last success
        lock = threading.Lock()

        def reconcile(key: str) -> None:
            obj = mirror.get_by_key(key)
            if obj is None:
                print(f"GONE      {key}", flush=True)
                return
            with lock:
                fail = args.fail_first and key not in failed_once
                if fail:
                    failed_once.add(key)
                    failures[key] = failures.get(key, 0) + 1
            if fail:
                # The WorkQueueWorker logs it (one WARNING line) and reports FAIL.
                raise TransientError("simulated failure (--fail_first), "
                                     "the queue retries it after back-off")
            rv = obj["metadata"].get("resourceVersion", "")
            record_event(object_reference(obj, kind="ConfigMap",
                                          api_version="v1"),
                         "Normal",
                         "Reconciled",
                         f"configmap-controller saw resourceVersion {rv}",
                         target=target)
            with lock:
                failed = failures.pop(key, 0)
            retried = f"  (retry, after {failed} failure(s))" if failed else ""
            print(f"RECORDED  {key} rv={rv}{retried}", flush=True)

        stack.enter_context(
            WorkQueueWorker(args.queue,
                            reconcile,
                            target=target,
                            credit=args.workers,
                            name="configmap-controller"))
        done.wait(args.duration or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
