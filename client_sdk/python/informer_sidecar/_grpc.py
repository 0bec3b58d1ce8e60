"""Channels and generated stubs shared by the SDK's modules."""

from typing import Optional, Sequence, Tuple

import grpc

try:
    from informer_sidecar._gen import events_pb2, events_pb2_grpc
    from informer_sidecar._gen import informer_pb2, informer_pb2_grpc
    from informer_sidecar._gen import workqueue_pb2, workqueue_pb2_grpc
except ImportError as e:  # pragma: no cover - a broken install
    raise ImportError(
        "informer_sidecar: generated stubs missing; install the package with "
        "pip (its build runs protoc), not from the source tree") from e

DEFAULT_TARGET = "127.0.0.1:50051"

# The channel's own reconnect pacing: short, so that a sidecar that was away
# (restarted, or still starting) is found again within seconds; the SDK's
# callers add their own back-off on top. gRPC's default grows to 120 s, and
# since Watch calls do not wait for ready (an outage is reported, not waited
# out in silence), every call in that window would fail at once.
# Not grpc.min_reconnect_backoff_ms: gRPC also uses it as each connection
# attempt's timeout, so a short one fails a sidecar that is slow to answer
# the handshake (a busy node) instead of waiting for it; gRPC's 20 s stays.
# Message-size limits stay at gRPC's defaults (4 MiB receive): the sidecar
# keeps every message below them.
_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 5000),
]

Metadata = Optional[Sequence[Tuple[str, str]]]


def open_channel(target: str,
                 channel: Optional[grpc.Channel]) -> Tuple[grpc.Channel, bool]:
    """Returns (channel, owned): `channel` if given, else a new insecure one
    to `target` that the caller must close.

    The SDK's channels keep gRPC's default message limits, the 4 MiB receive
    limit included: the sidecar caps its messages below it (a large initial
    state arrives as several messages), so no limit needs raising. Only the
    reconnect back-off is shortened (at most 5 s), so a sidecar that was
    away is connected again quickly; pass your own `channel` to change it."""
    if channel is not None:
        return channel, False
    if not target:
        raise ValueError("target: must be 'host:port' or 'unix:/path'")
    return grpc.insecure_channel(target, options=_CHANNEL_OPTIONS), True


__all__ = [
    "DEFAULT_TARGET", "Metadata", "open_channel", "events_pb2",
    "events_pb2_grpc", "informer_pb2", "informer_pb2_grpc", "workqueue_pb2",
    "workqueue_pb2_grpc"
]
