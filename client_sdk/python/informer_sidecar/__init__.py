"""Python client of the informer sidecar.

- :class:`InformerClient`: queries of the sidecar's cache (get, list,
  by_index, index_values, resources), a round trip each.
- :class:`RemoteInformer`: a local mirror of one resource kept up to date by
  the sidecar's Watch stream, with handlers, indexes and automatic resume;
  a failing stream is logged at WARNING and reported to ``on_error``.
- :class:`WorkQueueWorker` (alias ``Worker``), :func:`create_queue`, ...:
  workers of the sidecar's remote work queues.
- :func:`record_event`: records a Kubernetes Event through the sidecar.

Every call takes ``target`` (``"host:port"`` or ``"unix:/path"``) or an
existing ``channel`` (a ``grpc.Channel`` the caller owns).
"""

from informer_sidecar.client import InformerClient
from informer_sidecar.events import object_reference, record_event
from informer_sidecar.informer import (RemoteInformer, StreamError,
                                       object_key)
from informer_sidecar.workqueue import (Worker, WorkQueueWorker, add_after,
                                        create_queue, delete_queue, forget,
                                        queue_stats)

__all__ = [
    "InformerClient",
    "RemoteInformer",
    "StreamError",
    "WorkQueueWorker",
    "Worker",
    "add_after",
    "create_queue",
    "delete_queue",
    "forget",
    "object_key",
    "object_reference",
    "queue_stats",
    "record_event",
]
