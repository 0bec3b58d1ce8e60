"""Workers of the sidecar's remote work queues (informer.v1.WorkQueue).

A queue is declared with :func:`create_queue`; the sidecar enqueues the key
of every matching object as its informer sees changes. A
:class:`WorkQueueWorker` (also importable as ``Worker``) holds a Lease
stream, runs ``fn(key)`` for every key leased to it on a pool of `credit`
threads and reports each lease: FORGET when fn returns, FAIL
(retried by the sidecar after the queue's rate-limited back-off) when it
raises. A failing Lease stream is never silent: each failure is logged and
passed to the worker's `on_error` callback, and the first working stream
after failures to `on_recovered`.
"""

import concurrent.futures
import datetime
import logging
import queue as queue_lib
import threading
from typing import Callable, Dict, Iterable, List, Optional

import grpc
from google.protobuf import duration_pb2

from informer_sidecar._grpc import (DEFAULT_TARGET, Metadata, open_channel,
                                    workqueue_pb2, workqueue_pb2_grpc)
from informer_sidecar._stream_health import StreamHealth
from informer_sidecar.backoff import Backoff
from informer_sidecar.informer import (ErrorHandler, RecoveredHandler,
                                       StreamError)

_LOG = logging.getLogger("informer_sidecar")

_EVENTS = {
    "added": workqueue_pb2.QUEUE_EVENT_ADDED,
    "modified": workqueue_pb2.QUEUE_EVENT_MODIFIED,
    "deleted": workqueue_pb2.QUEUE_EVENT_DELETED,
    "sync": workqueue_pb2.QUEUE_EVENT_SYNC,
}


def _duration(seconds: Optional[float], field: str) -> Optional[
        duration_pb2.Duration]:
    if seconds is None:
        return None
    if seconds < 0:
        raise ValueError(f"{field}: must not be negative")
    d = duration_pb2.Duration()
    d.FromTimedelta(datetime.timedelta(seconds=seconds))
    return d


def _call(target: str, channel: Optional[grpc.Channel], method: str, request,
          timeout: Optional[float], metadata: Metadata):
    ch, owned = open_channel(target, channel)
    try:
        stub = workqueue_pb2_grpc.WorkQueueStub(ch)
        return getattr(stub, method)(request,
                                     timeout=timeout,
                                     metadata=metadata)
    finally:
        if owned:
            ch.close()


def create_queue(name: str,
                 resource: str,
                 target: str = DEFAULT_TARGET,
                 *,
                 namespace: Optional[str] = None,
                 label_selector: Optional[str] = None,
                 events: Optional[Iterable[str]] = None,
                 resync_period: Optional[float] = None,
                 base_delay: Optional[float] = None,
                 max_delay: Optional[float] = None,
                 qps: Optional[float] = None,
                 burst: Optional[int] = None,
                 lease_timeout: Optional[float] = None,
                 channel: Optional[grpc.Channel] = None,
                 timeout: Optional[float] = 10.0,
                 metadata: Metadata = None) -> bool:
    """Declares queue `name` fed by the informer of `resource`.

    Idempotent: returns True if this call created it, False if an identical
    queue existed (a different declaration raises ALREADY_EXISTS).

    Args:
      events: which informer events enqueue a key, among "added",
        "modified", "deleted", "sync" (None: all).
      resync_period: seconds; enqueue every matching key periodically.
      base_delay, max_delay, qps, burst: retry pacing of failed keys
        (seconds; None: client-go's defaults 5ms, 1000s, 10/s, 100).
      lease_timeout: seconds a worker may hold a key (None: 5 minutes).
    """
    request = workqueue_pb2.CreateQueueRequest(
        name=name,
        resource=resource,
        namespace=namespace or "",
        label_selector=label_selector or "")
    for e in events or ():
        if e not in _EVENTS:
            raise ValueError(
                f"events: unknown event {e!r} (want one of {sorted(_EVENTS)})")
        request.events.append(_EVENTS[e])
    if resync_period is not None:
        request.resync_period.CopyFrom(_duration(resync_period,
                                                 "resync_period"))
    if lease_timeout is not None:
        request.lease_timeout.CopyFrom(_duration(lease_timeout,
                                                 "lease_timeout"))
    if any(v is not None for v in (base_delay, max_delay, qps, burst)):
        rl = request.rate_limiter
        if base_delay is not None:
            rl.base_delay.CopyFrom(_duration(base_delay, "base_delay"))
        if max_delay is not None:
            rl.max_delay.CopyFrom(_duration(max_delay, "max_delay"))
        if qps is not None:
            rl.qps = qps
        if burst is not None:
            rl.burst = burst
    return _call(target, channel, "CreateQueue", request, timeout,
                 metadata).created


def delete_queue(name: str,
                 target: str = DEFAULT_TARGET,
                 *,
                 channel: Optional[grpc.Channel] = None,
                 timeout: Optional[float] = 10.0,
                 metadata: Metadata = None) -> None:
    """Removes queue `name` (its Lease streams end with NOT_FOUND)."""
    _call(target, channel, "DeleteQueue",
          workqueue_pb2.DeleteQueueRequest(name=name), timeout, metadata)


def add_after(queue: str,
              key: str,
              delay: float = 0.0,
              target: str = DEFAULT_TARGET,
              *,
              channel: Optional[grpc.Channel] = None,
              timeout: Optional[float] = 10.0,
              metadata: Metadata = None) -> None:
    """Adds `key` to `queue` now or after `delay` seconds."""
    request = workqueue_pb2.AddAfterRequest(queue=queue, key=key)
    if delay > 0:
        request.delay.CopyFrom(_duration(delay, "delay"))
    _call(target, channel, "AddAfter", request, timeout, metadata)


def forget(queue: str,
           key: str,
           target: str = DEFAULT_TARGET,
           *,
           channel: Optional[grpc.Channel] = None,
           timeout: Optional[float] = 10.0,
           metadata: Metadata = None) -> None:
    """Resets the failure count (back-off) of `key` in `queue`."""
    _call(target, channel, "Forget",
          workqueue_pb2.ForgetRequest(queue=queue, key=key), timeout, metadata)


def queue_stats(queue: str = "",
                target: str = DEFAULT_TARGET,
                *,
                channel: Optional[grpc.Channel] = None,
                timeout: Optional[float] = 10.0,
                metadata: Metadata = None) -> List[Dict[str, int]]:
    """Stats of one queue (or of every queue) as dicts: name, resource,
    depth, waiting, in_flight, workers, adds, retries, failures, expired,
    returned, completed."""
    response = _call(target, channel, "Stats",
                     workqueue_pb2.StatsRequest(queue=queue), timeout,
                     metadata)
    fields = [f.name for f in workqueue_pb2.QueueStats.DESCRIPTOR.fields]
    return [{f: getattr(q, f) for f in fields} for q in response.queues]


_DONE = object()


class WorkQueueWorker:
    """Runs ``fn(key)`` for the keys a remote work queue leases to it.

    Up to `credit` keys are processed at once, each on a thread of the
    worker's pool. When fn returns, the lease is reported FORGET (done,
    back-off reset); when it raises, FAIL (the sidecar retries the key after
    its rate-limited back-off; :attr:`Lease.failures` grows). A lease the
    sidecar reports expired is not reported (its key was given back to the
    queue); `fn` is not interrupted, but :meth:`is_expired` tells it.

    The Lease stream reconnects by itself with exponential back-off; keys
    leased on a broken stream return to the queue on the sidecar's side, and
    their results are dropped. Every failed attempt (the sidecar away:
    UNAVAILABLE; an unknown or deleted queue: NOT_FOUND; a refused token:
    UNAUTHENTICATED/PERMISSION_DENIED) is logged (WARNING when an outage
    starts or its cause changes, INFO for repeats) and passed to
    ``on_error(StreamError)`` with the count of consecutive failures and the
    delay before the next attempt; the first stream that delivers after
    failures calls ``on_recovered(failures)``. Both run on the worker's
    stream thread and must not block; exceptions they raise are logged.

    Thread-safety: start/stop from any thread; fn runs on pool threads.
    """

    def __init__(self,
                 queue: str,
                 fn: Callable[[str], None],
                 target: str = DEFAULT_TARGET,
                 credit: int = 1,
                 *,
                 channel: Optional[grpc.Channel] = None,
                 name: str = "",
                 initial_backoff: float = 0.1,
                 max_backoff: float = 30.0,
                 metadata: Metadata = None,
                 on_error: Optional[ErrorHandler] = None,
                 on_recovered: Optional[RecoveredHandler] = None) -> None:
        if not queue:
            raise ValueError("queue: required")
        if credit < 1:
            raise ValueError("credit: must be at least 1")
        self._queue = queue
        self._fn = fn
        self._target = target
        self._credit = credit
        self._user_channel = channel
        self._name = name
        backoff = Backoff(initial_backoff, max_backoff)
        self._metadata = metadata

        self._lock = threading.Condition()
        self._health = StreamHealth(
            backoff, self._lock,
            f"WorkQueueWorker({queue}): lease stream failed",
            f"WorkQueueWorker({queue}): lease stream works again", on_error,
            on_recovered)
        # Guarded by _lock.
        self._generation = 0  # of the current stream
        self._busy = 0  # fn calls running
        self._expired: set = set()
        self._outbox: Optional[queue_lib.Queue] = None
        self._call = None
        self._processed = 0
        self._failed = 0
        self._rejected = 0

        self._stop = threading.Event()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=credit,
            thread_name_prefix=f"WorkQueueWorker({queue})")
        self._thread: Optional[threading.Thread] = None
        self._channel = None
        self._owns_channel = False

    def start(self) -> "WorkQueueWorker":
        """Starts the Lease stream on a background thread."""
        if self._thread is not None:
            raise RuntimeError("WorkQueueWorker already started")
        self._channel, self._owns_channel = open_channel(
            self._target, self._user_channel)
        self._thread = threading.Thread(
            target=self._run, name=f"WorkQueueWorker({self._queue})",
            daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: Optional[float] = 10.0) -> None:
        """Ends the stream (unfinished leases return to the queue), waits for
        running fn calls and the background thread. Idempotent."""
        self._stop.set()
        with self._lock:
            call, outbox = self._call, self._outbox
            self._lock.notify_all()
        if outbox is not None:
            outbox.put(_DONE)
        if call is not None:
            call.cancel()
        if self._thread is not None:
            self._thread.join(timeout)
        self._pool.shutdown(wait=True)
        if self._owns_channel and self._channel is not None:
            self._channel.close()
            self._owns_channel = False

    def __enter__(self) -> "WorkQueueWorker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def processed(self) -> int:
        """Leases reported FORGET (fn returned)."""
        with self._lock:
            return self._processed

    @property
    def failed(self) -> int:
        """Leases reported FAIL (fn raised)."""
        with self._lock:
            return self._failed

    @property
    def failures(self) -> int:
        """Consecutive failed attempts of the Lease stream (0 while it
        works)."""
        with self._lock:
            return self._health.failures

    @property
    def last_error(self) -> Optional[StreamError]:
        """Why the Lease stream last failed, or None if it never did."""
        with self._lock:
            return self._health.last_error

    def wait_for(self, predicate: Callable[["WorkQueueWorker"], bool],
                 timeout: Optional[float] = None) -> bool:
        """Waits until predicate(self) holds, re-evaluated after every
        processed lease and failed attempt; False on timeout. Runs under the
        worker's lock: it may read :attr:`processed`, :attr:`failed` and
        :attr:`failures` only."""
        with self._lock:
            return self._lock.wait_for(lambda: predicate(self), timeout)

    def is_expired(self, lease_id: int) -> bool:
        """True if the sidecar took lease `lease_id` back (timed out)."""
        with self._lock:
            return lease_id in self._expired

    def _requests(self, outbox: queue_lib.Queue):
        while True:
            item = outbox.get()
            if item is _DONE:
                return
            yield item

    def _run(self) -> None:
        stub = workqueue_pb2_grpc.WorkQueueStub(self._channel)
        while not self._stop.is_set():
            outbox: queue_lib.Queue = queue_lib.Queue()
            with self._lock:
                self._generation += 1
                generation = self._generation
                free = self._credit - self._busy
                self._outbox = outbox
                self._expired.clear()
            outbox.put(
                workqueue_pb2.LeaseRequest(queue=self._queue,
                                           credit=free,
                                           worker=self._name))
            # No wait_for_ready: a sidecar that is away fails the attempt at
            # once (UNAVAILABLE), which on_error reports, instead of hanging
            # silently until it is back.
            call = stub.Lease(self._requests(outbox), metadata=self._metadata)
            with self._lock:
                self._call = call
            if self._stop.is_set():
                call.cancel()
            error = self._read(call, generation)
            outbox.put(_DONE)
            with self._lock:
                self._call = None
                self._outbox = None
            if self._stop.is_set():
                break
            self._stop.wait(self._health.failed(error))

    def _read(self, call, generation: int) -> StreamError:
        """Handles the stream's responses until it ends; returns why it ended
        (failures and retry_in are filled in by StreamHealth.failed)."""
        try:
            for response in call:
                if self._health.failing:
                    self._health.recovered()
                self._on_response(response, generation)
            return StreamError(grpc.StatusCode.OK,
                               "the sidecar ended the stream", 0, 0)
        except grpc.RpcError as e:
            return StreamError(e.code(), e.details() or "", 0, 0, e)

    def _on_response(self, response, generation: int) -> None:
        with self._lock:
            self._expired.update(response.expired_lease_ids)
            self._rejected += len(response.rejected)
        for r in response.rejected:
            _LOG.warning(
                "WorkQueueWorker(%s): result of lease %d rejected: %s",
                self._queue, r.lease_id, r.message)
        for lease in response.leases:
            with self._lock:
                self._busy += 1
            self._pool.submit(self._process, lease, generation)

    def _process(self, lease, generation: int) -> None:
        try:
            self._fn(lease.key)
            outcome = workqueue_pb2.LEASE_OUTCOME_FORGET
        except Exception as e:  # pylint: disable=broad-except
            _LOG.warning("WorkQueueWorker(%s): %s failed (attempt %d): %s",
                         self._queue, lease.key, lease.failures + 1, e)
            _LOG.debug("WorkQueueWorker(%s): %s failed", self._queue,
                       lease.key, exc_info=True)
            outcome = workqueue_pb2.LEASE_OUTCOME_FAIL
        with self._lock:
            self._busy -= 1
            if outcome == workqueue_pb2.LEASE_OUTCOME_FORGET:
                self._processed += 1
            else:
                self._failed += 1
            self._lock.notify_all()
            if self._outbox is None:
                # Between streams: the next one's first credit counts this
                # free slot.
                return
            request = workqueue_pb2.LeaseRequest(credit=1)
            if generation != self._generation:
                # Leased on a stream that broke: the sidecar already gave the
                # key back, so only the slot is returned.
                pass
            elif lease.lease_id in self._expired:
                self._expired.discard(lease.lease_id)
            else:
                request.results.append(
                    workqueue_pb2.LeaseResult(lease_id=lease.lease_id,
                                              outcome=outcome))
            self._outbox.put(request)


# The name before the SDKs agreed on WorkQueueWorker; kept for existing code.
Worker = WorkQueueWorker
