#!/usr/bin/env python3
"""A controller on a remote work queue: records an Event for every ConfigMap
with a given label, retrying failures with back-off.

The sidecar enqueues the key of every matching ConfigMap when it changes; the
worker looks the object up in a local mirror (a RemoteInformer) and records a
"Reconciled" Event about it. To show retries, the first attempt of every
key fails (--fail_first): the sidecar retries it after the queue's
exponential back-off.

Against a running sidecar (default 127.0.0.1:50051):
    VENV/bin/python client_sdk/examples/configmap_controller.py
Or starting the sidecar in demo mode itself:
    VENV/bin/python client_sdk/examples/configmap_controller.py \
        --sidecar bazel-bin/server/informer_sidecar
"""

import argparse
import contextlib
import signal
import sys
import threading

from informer_sidecar import (RemoteInformer, Worker, create_queue,
                              object_reference, record_event)


class TransientError(Exception):
    """A simulated failure, retried by the queue."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="127.0.0.1:50051",
                        help="the sidecar: host:port or unix:/path")
    parser.add_argument("--sidecar", default="",
                        help="run this informer_sidecar binary in demo mode "
                        "instead of connecting to --target")
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

    with contextlib.ExitStack() as stack:
        target = args.target
        if args.sidecar:
            from informer_sidecar.demo import DemoSidecar  # pylint: disable=import-outside-toplevel
            target = stack.enter_context(DemoSidecar(args.sidecar)).target

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

        attempts = {}
        lock = threading.Lock()

        def reconcile(key: str) -> None:
            with lock:
                attempts[key] = attempts.get(key, 0) + 1
                attempt = attempts[key]
            obj = mirror.get_by_key(key)
            if obj is None:
                print(f"GONE      {key}", flush=True)
                return
            if args.fail_first and attempt == 1:
                print(f"FAILED    {key} (attempt {attempt}, will retry)",
                      flush=True)
                raise TransientError(f"{key}: simulated failure")
            rv = obj["metadata"].get("resourceVersion", "")
            record_event(object_reference(obj, kind="ConfigMap",
                                          api_version="v1"),
                         "Normal",
                         "Reconciled",
                         f"configmap-controller saw resourceVersion {rv}",
                         target=target)
            print(f"RECORDED  {key} rv={rv} (attempt {attempt})",
                  flush=True)

        stack.enter_context(
            Worker(args.queue,
                   reconcile,
                   target=target,
                   credit=args.workers,
                   name="configmap-controller"))
        done.wait(args.duration or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
