"""Queries of the sidecar's cache (informer.v1.Informer's unary calls).

:class:`InformerClient` asks the sidecar each time, so it costs a round trip
per call but keeps no copy of the cache in the application; a
:class:`~informer_sidecar.RemoteInformer` keeps a local mirror instead.
"""

import json
from typing import Any, Dict, Iterator, List, Optional

import grpc

from informer_sidecar._grpc import (DEFAULT_TARGET, Metadata, informer_pb2,
                                    informer_pb2_grpc, open_channel)

Obj = Dict[str, Any]

# The sidecar's NOT_FOUND for a resource it does not serve starts with this
# (informer.proto documents it); any other NOT_FOUND of Get is a missing
# object.
_UNKNOWN_RESOURCE = "unknown resource"


def _decode(objects) -> List[Obj]:
    out = []
    for o in objects:
        if o.WhichOneof("body") != "json":
            # Requests here always ask for JSON; anything else is a sidecar
            # that ignored the encoding, which must not pass silently.
            raise ValueError("sidecar answered without a JSON object body")
        out.append(json.loads(o.json))
    return out


class InformerClient:
    """The sidecar's cache queries with decoded objects (dicts).

    Usage::

        with InformerClient("127.0.0.1:50051") as c:
            pod = c.get("pods", "default", "web-0")      # None if absent
            web = c.list("pods", label_selector="app=web")
            on_node = c.by_index("pods", "field:spec.nodeName", "node-1")

    Errors raise ``grpc.RpcError`` with the sidecar's code and message:
    NOT_FOUND (unknown resource; the message lists those available),
    INVALID_ARGUMENT (malformed selector, unknown index, expired continue
    token), UNAVAILABLE (not synced yet without ``allow_stale``, or the
    sidecar is shutting down or unreachable), UNAUTHENTICATED or
    PERMISSION_DENIED (tokens file). Every call has the client's
    ``timeout`` in seconds.

    Thread-safety: every method may be called from any thread (gRPC channels
    and stubs are thread-safe and the client keeps no other state).
    """

    def __init__(self,
                 target: str = DEFAULT_TARGET,
                 *,
                 channel: Optional[grpc.Channel] = None,
                 timeout: Optional[float] = 30.0,
                 metadata: Metadata = None) -> None:
        """Args:
          target: the sidecar, "host:port" or "unix:/path" (unused with
            `channel`).
          channel: an existing grpc.Channel to use (not closed by close()).
          timeout: deadline of each call in seconds (None: no deadline).
          metadata: gRPC metadata for every call, e.g.
            [("authorization", "Bearer TOKEN")].
        """
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout: must be positive (or None)")
        self._channel, self._owns_channel = open_channel(target, channel)
        self._stub = informer_pb2_grpc.InformerStub(self._channel)
        self._timeout = timeout
        self._metadata = metadata

    def close(self) -> None:
        """Closes the channel if the client opened it."""
        if self._owns_channel:
            self._channel.close()
            self._owns_channel = False

    def __enter__(self) -> "InformerClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method, request):
        return method(request, timeout=self._timeout, metadata=self._metadata)

    def get(self,
            resource: str,
            namespace: Optional[str],
            name: str,
            *,
            allow_stale: bool = False) -> Optional[Obj]:
        """The cached object, or None when the cache has no such object.

        `namespace` is None or "" for cluster-scoped objects.
        """
        if not name:
            raise ValueError("name: required")
        try:
            r = self._call(
                self._stub.Get,
                informer_pb2.GetRequest(resource=resource,
                                        namespace=namespace or "",
                                        name=name,
                                        allow_stale=allow_stale))
        except grpc.RpcError as e:
            if (e.code() == grpc.StatusCode.NOT_FOUND and
                    not (e.details() or "").startswith(_UNKNOWN_RESOURCE)):
                return None
            raise
        return _decode([r.object])[0]

    def iter_list(self,
                  resource: str,
                  namespace: Optional[str] = None,
                  label_selector: Optional[str] = None,
                  *,
                  page_size: int = 0,
                  allow_stale: bool = False) -> Iterator[Obj]:
        """Every matching object in key order, fetched a page at a time
        (`page_size` objects, 0: the sidecar's default), all pages from one
        snapshot of the cache. Use it for large caches: only one page is in
        memory at a time."""
        if page_size < 0:
            raise ValueError("page_size: must be >= 0")
        request = informer_pb2.ListRequest(resource=resource,
                                           namespace=namespace or "",
                                           label_selector=label_selector or "",
                                           limit=page_size,
                                           allow_stale=allow_stale)
        while True:
            r = self._call(self._stub.List, request)
            yield from _decode(r.objects)
            if not r.continue_token:
                return
            request.continue_token = r.continue_token

    def list(self,
             resource: str,
             namespace: Optional[str] = None,
             label_selector: Optional[str] = None,
             *,
             allow_stale: bool = False) -> List[Obj]:
        """Every matching object (all pages of one snapshot), in key
        order."""
        return list(
            self.iter_list(resource,
                           namespace,
                           label_selector,
                           allow_stale=allow_stale))

    def by_index(self,
                 resource: str,
                 index_name: str,
                 index_value: str,
                 *,
                 allow_stale: bool = False) -> List[Obj]:
        """The objects whose index `index_name` ("namespace", "ownerUid",
        "label:<key>", "field:<path>" or one configured for the resource)
        has `index_value`."""
        if not index_name:
            raise ValueError("index_name: required")
        r = self._call(
            self._stub.ByIndex,
            informer_pb2.ByIndexRequest(resource=resource,
                                        index_name=index_name,
                                        index_value=index_value,
                                        allow_stale=allow_stale))
        return _decode(r.objects)

    def index_values(self,
                     resource: str,
                     index_name: str,
                     *,
                     allow_stale: bool = False) -> List[str]:
        """The values index `index_name` has objects for."""
        if not index_name:
            raise ValueError("index_name: required")
        r = self._call(
            self._stub.ListIndexValues,
            informer_pb2.ListIndexValuesRequest(resource=resource,
                                                index_name=index_name,
                                                allow_stale=allow_stale))
        return list(r.values)

    def resources(self) -> List[Dict[str, Any]]:
        """The resources the sidecar has informers for, each a dict with
        ``resource``, ``namespace``, ``synced``, ``object_count``,
        ``last_resource_version``, ``last_error``, ``streams`` and
        ``indexes`` (every field present, defaults included)."""
        r = self._call(self._stub.ListResources,
                       informer_pb2.ListResourcesRequest())
        return [{
            "resource": s.resource,
            "namespace": s.namespace,
            "synced": s.synced,
            "object_count": s.object_count,
            "last_resource_version": s.last_resource_version,
            "last_error": s.last_error,
            "streams": s.streams,
            "indexes": list(s.indexes),
        } for s in r.resources]


__all__ = ["InformerClient"]
