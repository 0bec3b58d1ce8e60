"""A RemoteInformer of the installed Python SDK (informer_sidecar), run by
the Python of the venv it was installed into, for the real-cluster tests
(real_sidecar.SdkMirror drives it).

    python sdk_mirror.py TARGET RESOURCE NAMESPACE

Starts the informer with the SDK's defaults and answers each line on
stdin with one JSON line on stdout, at once (nothing here waits):

    state -> {"synced": bool, "stale": bool, "objects": {name: object},
              "events": [[type, name, flag], ...]}

`events` are what the handlers saw after the initial state, in order:
type ADDED, MODIFIED or DELETED, flag the delete's `tombstone` (False for
the others). End of stdin stops the informer and exits.
"""

import json
import sys
import threading

from informer_sidecar import RemoteInformer


def main():
    target, resource, namespace = sys.argv[1:4]
    lock = threading.Lock()
    events = []

    def record(kind, obj, flag=False):
        with lock:
            events.append([kind, obj["metadata"]["name"], flag])

    informer = RemoteInformer(resource, target=target, namespace=namespace)
    informer.on_add(lambda obj, initial: initial or record("ADDED", obj))
    informer.on_update(lambda old, new: record("MODIFIED", new))
    informer.on_delete(lambda obj, tombstone: record("DELETED", obj,
                                                     tombstone))
    informer.start()
    try:
        for line in sys.stdin:
            if line.strip() != "state":
                raise SystemExit("unknown command %r" % line)
            with lock:
                seen = list(events)
            state = {"synced": informer.has_synced(),
                     "stale": informer.is_stale,
                     "objects": {o["metadata"]["name"]: o
                                 for o in informer.list()},
                     "events": seen}
            sys.stdout.write(json.dumps(state) + "\n")
            sys.stdout.flush()
    finally:
        informer.stop()


if __name__ == "__main__":
    main()
