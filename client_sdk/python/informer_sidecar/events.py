"""Recording Kubernetes Events through the sidecar (informer.v1.Events)."""

from typing import Any, Mapping, Optional

import grpc

from informer_sidecar._grpc import (DEFAULT_TARGET, Metadata, events_pb2,
                                    events_pb2_grpc, open_channel)


def object_reference(obj: Mapping[str, Any],
                     kind: Optional[str] = None,
                     api_version: Optional[str] = None) -> dict:
    """An object reference for :func:`record_event` from a Kubernetes object
    dict (as the informer mirror holds it).

    The sidecar's cached objects usually carry no ``kind``: pass it (e.g.
    ``"ConfigMap"``) unless the object has one.
    """
    meta = obj.get("metadata") or {}
    ref = {
        "kind": kind or obj.get("kind", ""),
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "api_version": api_version or obj.get("apiVersion", ""),
    }
    if not ref["kind"]:
        raise ValueError("kind: the object has no kind; pass kind=...")
    return ref


def record_event(object_ref: Mapping[str, str],
                 type: str,  # pylint: disable=redefined-builtin
                 reason: str,
                 message: str = "",
                 target: str = DEFAULT_TARGET,
                 *,
                 channel: Optional[grpc.Channel] = None,
                 timeout: Optional[float] = 10.0,
                 metadata: Metadata = None) -> None:
    """Records one Event about `object_ref` ("Normal" or "Warning").

    `object_ref` is a mapping with ``kind`` and ``name`` (required) and
    optionally ``namespace``, ``uid``, ``api_version``, ``field_path`` (see
    :func:`object_reference`). Returns once the sidecar queued the event for
    the API server. Raises ``grpc.RpcError``: INVALID_ARGUMENT (the message
    names the field), RESOURCE_EXHAUSTED (the sidecar's queue is full; retry
    later), UNAVAILABLE.
    """
    unknown = set(object_ref) - {
        "kind", "namespace", "name", "uid", "api_version", "field_path"
    }
    if unknown:
        raise ValueError(f"object_ref: unknown field(s) {sorted(unknown)}")
    request = events_pb2.RecordEventRequest(
        object=events_pb2.ObjectReference(**dict(object_ref)),
        type=type,
        reason=reason,
        message=message)
    ch, owned = open_channel(target, channel)
    try:
        events_pb2_grpc.EventsStub(ch).Record(request,
                                              timeout=timeout,
                                              metadata=metadata)
    finally:
        if owned:
            ch.close()
