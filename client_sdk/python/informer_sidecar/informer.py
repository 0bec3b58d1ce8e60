"""RemoteInformer: a local mirror of one resource fed by the sidecar's Watch.

The sidecar streams the resource's current state, then its changes, each
event with a resume token. RemoteInformer applies them to a local mirror
(objects as dicts parsed from JSON), maintains local indexes on it and calls
the registered handlers. When the stream breaks it reconnects with
exponential back-off and resumes after the last event it processed; when the
sidecar cannot honour the token (e.g. it restarted) it answers RESET and a
fresh initial state, which RemoteInformer reconciles with its mirror so that
handlers only see the differences (adds, updates, deletes): never a second
add of an object they already have.

It relies on the sidecar's token contract: every event's token, the initial
state's included, resumes the stream right after that event, so a stream cut
in the middle of an initial state resumes with the rest of it; a token the
sidecar cannot honour gets RESET. A failing stream is never silent: each
failure is logged at WARNING and passed to the `on_error` callback.
"""

import json
import logging
import threading
from typing import (Any, Callable, Dict, Iterable, List, Optional, Set)

import grpc

from informer_sidecar._grpc import (DEFAULT_TARGET, Metadata, informer_pb2,
                                    informer_pb2_grpc, open_channel)
from informer_sidecar._stream_health import StreamHealth
from informer_sidecar.backoff import Backoff

_LOG = logging.getLogger("informer_sidecar")

Obj = Dict[str, Any]
IndexFunc = Callable[[Obj], Iterable[str]]
AddHandler = Callable[[Obj, bool], None]
UpdateHandler = Callable[[Obj, Obj], None]
DeleteHandler = Callable[[Obj, bool], None]


class StreamError(Exception):
    """Why a Watch stream of a :class:`RemoteInformer` failed.

    Attributes:
      code: the ``grpc.StatusCode`` the stream ended with (e.g. NOT_FOUND for
        an unknown resource, UNAVAILABLE when the sidecar is away,
        RESOURCE_EXHAUSTED for a reader too slow for the sidecar's queue);
        ``INTERNAL`` when the SDK could not decode an event; ``OK`` when the
        sidecar ended the stream without an error.
      details: the status message.
      failures: consecutive failed attempts, this one included (1 for the
        first failure after a working stream).
      retry_in: seconds until the informer tries again (0 when final).
      cause: the underlying exception (a ``grpc.RpcError``), or None.
      final: True when the stream will not be tried again: a Watch that
        ended with NOT_FOUND (unknown resource), PERMISSION_DENIED or
        INVALID_ARGUMENT (a bad selector or index), which another attempt
        would get again (see :data:`FINAL_WATCH_CODES`).
    """

    def __init__(self, code: grpc.StatusCode, details: str, failures: int,
                 retry_in: float,
                 cause: Optional[BaseException] = None,
                 final: bool = False) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details
        self.failures = failures
        self.retry_in = retry_in
        self.cause = cause
        self.final = final


# The codes that end a RemoteInformer's Watch for good: the request itself
# is refused (unknown resource, not allowed, malformed filter), so another
# attempt would fail the same way.
FINAL_WATCH_CODES = frozenset((grpc.StatusCode.NOT_FOUND,
                               grpc.StatusCode.PERMISSION_DENIED,
                               grpc.StatusCode.INVALID_ARGUMENT))


ErrorHandler = Callable[[StreamError], None]
RecoveredHandler = Callable[[int], None]

_EV = informer_pb2


def object_key(obj: Obj) -> str:
    """The object's key: "namespace/name", or "name" if cluster-scoped."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or ""
    return f"{ns}/{meta.get('name', '')}" if ns else meta.get("name", "")


def _namespace_index(obj: Obj) -> List[str]:
    return [(obj.get("metadata") or {}).get("namespace") or ""]


def _label_index(label: str) -> IndexFunc:

    def index(obj: Obj) -> List[str]:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return [labels[label]] if label in labels else []

    return index


class RemoteInformer:
    """A local, indexed mirror of one resource served by the sidecar.

    Usage::

        with RemoteInformer("pods", label_selector="app=web") as inf:
            inf.on_add(lambda obj, initial: print("add", object_key(obj)))
            inf.wait_for_sync(10)
            print(len(inf.list()))

    Handlers (``on_add(obj, is_initial)``, ``on_update(old, new)``,
    ``on_delete(obj, tombstone)``) run on the informer's background thread,
    one at a time, in the order of the changes, after the mirror was updated;
    a handler that raises is logged and does not stop the informer. Register
    them before :meth:`start` to see the initial state. ``tombstone`` is True
    when the delete was inferred (the sidecar relisted, or a reconnect found
    the object gone) rather than observed; ``obj`` is then the last state
    known.

    Errors: when the stream fails, the informer logs it (at WARNING when an
    outage starts or its cause changes, repeats at INFO), calls
    ``on_error(StreamError)`` (code, details, consecutive failures, seconds
    until the retry) and retries with exponential back-off, resuming after
    the last event processed; the mirror keeps its content meanwhile. When a
    stream delivers data again after failures, it calls
    ``on_recovered(failures)`` once. Both run on the informer's thread, like
    the handlers. Errors another attempt would get again end the stream for
    good: NOT_FOUND (unknown resource), PERMISSION_DENIED and
    INVALID_ARGUMENT (bad selector or index) reach ``on_error`` once with
    ``final`` set (logged at ERROR); the informer then stops retrying, keeps
    its mirror, and :meth:`wait_for_sync` returns False at once if it had
    not synced. Every other code is retried.

    Thread-safety: every method may be called from any thread. Objects
    returned by :meth:`get`, :meth:`list`, :meth:`by_index` and passed to
    handlers are shared with the mirror: treat them as read-only.
    """

    def __init__(self,
                 resource: str,
                 target: str = DEFAULT_TARGET,
                 namespace: Optional[str] = None,
                 label_selector: Optional[str] = None,
                 *,
                 channel: Optional[grpc.Channel] = None,
                 indexers: Optional[Dict[str, IndexFunc]] = None,
                 resume_token: str = "",
                 initial_backoff: float = 0.1,
                 max_backoff: float = 30.0,
                 metadata: Metadata = None,
                 on_error: Optional[ErrorHandler] = None,
                 on_recovered: Optional[RecoveredHandler] = None,
                 _rand: Optional[Callable[[], float]] = None) -> None:
        """Creates a stopped informer (see :meth:`start`).

        Args:
          resource: as kubectl names it ("pods", "deployments.apps", ...).
          target: the sidecar, "host:port" or "unix:/path" (unused with
            `channel`).
          namespace: only objects of this namespace (None: all).
          label_selector: Kubernetes label selector (None: all objects).
          channel: an existing grpc.Channel to use (not closed by stop()).
          indexers: extra local indexes, name -> function(obj) returning the
            index values of obj. "namespace" and "label:<key>" always exist.
          resume_token: start after this token (normally left empty).
          initial_backoff, max_backoff: reconnect delays in seconds (doubling
            from the first to the second, with jitter).
          metadata: gRPC metadata for every call, e.g.
            [("authorization", "Bearer TOKEN")].
          on_error: called with a :class:`StreamError` every time the
            stream fails (before the back-off wait).
          on_recovered: called with the number of consecutive failures when
            a stream delivers data again after them.
        """
        if not resource:
            raise ValueError("resource: required")
        # Validates the delays; owned by the reader thread from start().
        backoff = Backoff(initial_backoff, max_backoff, _rand)
        self._resource = resource
        self._target = target
        self._namespace = namespace or ""
        self._label_selector = label_selector or ""
        self._user_channel = channel
        self._metadata = metadata

        self._lock = threading.Condition()
        self._health = StreamHealth(
            backoff, self._lock, f"RemoteInformer({resource}): Watch failed",
            f"RemoteInformer({resource}): Watch stream works again",
            on_error, on_recovered, final_codes=FINAL_WATCH_CODES)
        # Guarded by _lock.
        self._items: Dict[str, Obj] = {}
        self._index_funcs: Dict[str, IndexFunc] = {
            "namespace": _namespace_index
        }
        self._index_funcs.update(indexers or {})
        # index name -> value -> keys.
        self._indexes: Dict[str, Dict[str, Set[str]]] = {
            name: {} for name in self._index_funcs
        }
        self._synced = False
        self._stale = False
        self._resume_token = resume_token
        self._reconnects = 0
        self._resets = 0
        self._call = None

        # Only touched by the reader thread.
        self._relisting = False
        self._relist: Dict[str, Obj] = {}

        self._add_handlers: List[AddHandler] = []
        self._update_handlers: List[UpdateHandler] = []
        self._delete_handlers: List[DeleteHandler] = []

        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._channel: Optional[grpc.Channel] = None
        self._owns_channel = False

    # ----- handlers -----

    def on_add(self, fn: AddHandler) -> AddHandler:
        """Registers fn(obj, is_initial); usable as a decorator."""
        self._add_handlers.append(fn)
        return fn

    def on_update(self, fn: UpdateHandler) -> UpdateHandler:
        """Registers fn(old, new); usable as a decorator."""
        self._update_handlers.append(fn)
        return fn

    def on_delete(self, fn: DeleteHandler) -> DeleteHandler:
        """Registers fn(obj, tombstone); usable as a decorator."""
        self._delete_handlers.append(fn)
        return fn

    # ----- lifecycle -----

    def start(self) -> "RemoteInformer":
        """Starts the background thread reading the Watch stream."""
        with self._lock:
            if self._thread is not None:
                raise RuntimeError("RemoteInformer already started")
            self._channel, self._owns_channel = open_channel(
                self._target, self._user_channel)
            self._thread = threading.Thread(
                target=self._run,
                name=f"RemoteInformer({self._resource})",
                daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: Optional[float] = 10.0) -> None:
        """Ends the stream and joins the background thread. Idempotent."""
        self._stop.set()
        with self._lock:
            call = self._call
            thread = self._thread
            self._lock.notify_all()
        if call is not None:
            call.cancel()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        if self._owns_channel and self._channel is not None:
            self._channel.close()
            self._owns_channel = False

    def __enter__(self) -> "RemoteInformer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ----- state -----

    def has_synced(self) -> bool:
        """True once the initial state was received completely."""
        with self._lock:
            return self._synced

    @property
    def is_stale(self) -> bool:
        """True while the sidecar serves stale data: it started from its
        disk cache (``--serve_stale_on_start``) and has not reached the API
        server yet. Set by a stale INITIAL_STATE_DONE, cleared by FRESH (or
        a fresh INITIAL_STATE_DONE). The mirror is usable meanwhile; the
        changes since the cache arrive as ordinary events."""
        with self._lock:
            return self._stale

    def wait_for_sync(self, timeout: Optional[float] = None) -> bool:
        """Waits until :meth:`has_synced`; False on timeout, or at once
        after a final error (see :attr:`last_error`)."""
        with self._lock:
            self._lock.wait_for(
                lambda: self._synced or self._health.gave_up, timeout)
            return self._synced

    def wait_for(self, predicate: Callable[["RemoteInformer"], bool],
                 timeout: Optional[float] = None) -> bool:
        """Waits until predicate(self) is true, re-evaluated after every
        change of the mirror; False on timeout. The predicate runs under the
        informer's lock: it may call the query methods but must be quick."""
        with self._lock:
            return self._lock.wait_for(lambda: predicate(self), timeout)

    @property
    def resume_token(self) -> str:
        """The token of the last event processed."""
        with self._lock:
            return self._resume_token

    @property
    def reconnects(self) -> int:
        """How many times the stream was re-established."""
        with self._lock:
            return self._reconnects

    @property
    def resets(self) -> int:
        """How many RESETs the sidecar sent (each followed by a
        reconciliation of the mirror)."""
        with self._lock:
            return self._resets

    @property
    def last_error(self) -> Optional[StreamError]:
        """The error of the last stream that failed, if any (kept after the
        stream recovered; see :attr:`failures`)."""
        with self._lock:
            return self._health.last_error

    @property
    def failures(self) -> int:
        """Consecutive failed streams: 0 while the stream works."""
        with self._lock:
            return self._health.failures

    # ----- queries on the mirror -----

    def get(self, namespace: Optional[str], name: str) -> Optional[Obj]:
        """The mirrored object, or None."""
        key = f"{namespace}/{name}" if namespace else name
        with self._lock:
            return self._items.get(key)

    def get_by_key(self, key: str) -> Optional[Obj]:
        """The mirrored object with key "namespace/name" (or "name")."""
        with self._lock:
            return self._items.get(key)

    def list(self) -> List[Obj]:
        """Every mirrored object, in key order."""
        with self._lock:
            return [self._items[k] for k in sorted(self._items)]

    def keys(self) -> List[str]:
        """Every mirrored key, sorted."""
        with self._lock:
            return sorted(self._items)

    def by_index(self, name: str, value: str) -> List[Obj]:
        """Mirrored objects indexed under `value` by index `name` ("namespace",
        "label:<key>" or one of `indexers`), in key order."""
        with self._lock:
            self._ensure_index_locked(name)
            keys = self._indexes[name].get(value, set())
            return [self._items[k] for k in sorted(keys)]

    def index_values(self, name: str) -> List[str]:
        """The values index `name` currently holds objects under, sorted."""
        with self._lock:
            self._ensure_index_locked(name)
            return sorted(v for v, keys in self._indexes[name].items() if keys)

    # ----- internals (lock held: *_locked) -----

    def _ensure_index_locked(self, name: str) -> None:
        if name in self._indexes:
            return
        if not name.startswith("label:") or len(name) == len("label:"):
            raise KeyError(
                f"index_name: unknown index {name!r} (have "
                f"{sorted(self._index_funcs)} and label:<key>)")
        self._index_funcs[name] = _label_index(name[len("label:"):])
        self._indexes[name] = {}
        for key, obj in self._items.items():
            self._index_obj_locked(name, key, obj)

    def _index_obj_locked(self, name: str, key: str, obj: Obj) -> None:
        for value in self._index_funcs[name](obj):
            self._indexes[name].setdefault(value, set()).add(key)

    def _unindex_obj_locked(self, name: str, key: str, obj: Obj) -> None:
        for value in self._index_funcs[name](obj):
            keys = self._indexes[name].get(value)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._indexes[name][value]

    def _put_locked(self, key: str, obj: Obj) -> Optional[Obj]:
        old = self._items.get(key)
        if old is not None:
            for name in self._indexes:
                self._unindex_obj_locked(name, key, old)
        self._items[key] = obj
        for name in self._indexes:
            self._index_obj_locked(name, key, obj)
        return old

    def _pop_locked(self, key: str) -> Optional[Obj]:
        old = self._items.pop(key, None)
        if old is not None:
            for name in self._indexes:
                self._unindex_obj_locked(name, key, old)
        return old

    # ----- the reader thread -----

    def _run(self) -> None:
        stub = informer_pb2_grpc.InformerStub(self._channel)
        first = True
        while not self._stop.is_set():
            with self._lock:
                request = informer_pb2.WatchRequest(
                    resource=self._resource,
                    namespace=self._namespace,
                    label_selector=self._label_selector,
                    resume_token=self._resume_token,
                    encoding=informer_pb2.ENCODING_JSON)
                if not first:
                    self._reconnects += 1
                # Not wait_for_ready: an unreachable sidecar fails the call
                # (UNAVAILABLE), which is reported, instead of a silent wait.
                call = stub.Watch(request, metadata=self._metadata)
                self._call = call
            first = False
            if self._stop.is_set():
                call.cancel()
                break
            error = self._read(call)
            with self._lock:
                self._call = None
            if self._stop.is_set():
                break
            delay = self._health.failed(
                error, f", resuming after token {self.resume_token!r}")
            if delay is None:
                break  # a final error: reported, not retried
            # stop() interrupts the wait.
            self._stop.wait(delay)

    def _read(self, call) -> StreamError:
        """Applies the stream's events until it ends; returns why it ended
        (failures and retry_in are filled in by StreamHealth.failed)."""
        try:
            for response in call:
                if self._health.failing:
                    self._health.recovered()
                for event in response.events:
                    self._apply(event)
            return StreamError(grpc.StatusCode.OK,
                               "the sidecar ended the stream", 0, 0)
        except grpc.RpcError as e:
            return StreamError(e.code(), e.details() or "", 0, 0, e)
        except Exception as e:  # pylint: disable=broad-except
            _LOG.exception("RemoteInformer(%s): bad event", self._resource)
            call.cancel()
            return StreamError(grpc.StatusCode.INTERNAL, f"bad event: {e}",
                               0, 0, e)

    def _apply(self, event) -> None:
        """Applies one Watch event to the mirror and calls the handlers."""
        etype = event.type
        if etype == _EV.EVENT_TYPE_RESET:
            _LOG.info("RemoteInformer(%s): RESET, reconciling", self._resource)
            self._relisting = True
            self._relist = {}
            with self._lock:
                self._resets += 1
                self._resume_token = event.resume_token
            return
        if etype == _EV.EVENT_TYPE_INITIAL_STATE_DONE:
            if self._relisting:
                self._reconcile()
            with self._lock:
                self._synced = True
                self._stale = bool(event.stale)
                self._resume_token = event.resume_token
                self._lock.notify_all()
            return
        if etype == _EV.EVENT_TYPE_FRESH:
            with self._lock:
                self._stale = False
                self._resume_token = event.resume_token
                self._lock.notify_all()
            return
        if etype == _EV.EVENT_TYPE_BOOKMARK:
            with self._lock:
                self._resume_token = event.resume_token
            return

        obj = json.loads(event.object.json) if event.object.json else {}
        key = object_key(obj)
        if etype == _EV.EVENT_TYPE_ADDED and event.initial:
            with self._lock:
                synced = self._synced
            if self._relisting or synced:
                # A fresh initial state over a mirror that has content:
                # collected, applied as differences at INITIAL_STATE_DONE.
                self._relisting = True
                self._relist[key] = obj
                with self._lock:
                    self._resume_token = event.resume_token
                return
        if etype in (_EV.EVENT_TYPE_ADDED, _EV.EVENT_TYPE_MODIFIED,
                     _EV.EVENT_TYPE_SYNC):
            with self._lock:
                old = self._put_locked(key, obj)
                self._resume_token = event.resume_token
                self._lock.notify_all()
            if old is None:
                self._fire_add(obj, bool(event.initial))
            elif etype == _EV.EVENT_TYPE_SYNC or old != obj:
                self._fire_update(old, obj)
        elif etype == _EV.EVENT_TYPE_DELETED:
            with self._lock:
                old = self._pop_locked(key)
                self._resume_token = event.resume_token
                self._lock.notify_all()
            if old is not None:
                self._fire_delete(obj, bool(event.tombstone))
        else:
            with self._lock:
                self._resume_token = event.resume_token

    def _reconcile(self) -> None:
        """Replaces the mirror with the relisted state, reporting only the
        differences to the handlers."""
        fresh, self._relist, self._relisting = self._relist, {}, False
        with self._lock:
            initial = not self._synced
            gone = [(k, self._items[k]) for k in sorted(self._items)
                    if k not in fresh]
        for key, old in gone:
            with self._lock:
                self._pop_locked(key)
                self._lock.notify_all()
            self._fire_delete(old, True)
        for key in sorted(fresh):
            obj = fresh[key]
            with self._lock:
                old = self._put_locked(key, obj)
                self._lock.notify_all()
            if old is None:
                self._fire_add(obj, initial)
            elif old != obj:
                self._fire_update(old, obj)

    def _fire_add(self, obj: Obj, initial: bool) -> None:
        for fn in list(self._add_handlers):
            self._safe(fn, obj, initial)

    def _fire_update(self, old: Obj, new: Obj) -> None:
        for fn in list(self._update_handlers):
            self._safe(fn, old, new)

    def _fire_delete(self, obj: Obj, tombstone: bool) -> None:
        for fn in list(self._delete_handlers):
            self._safe(fn, obj, tombstone)

    def _safe(self, fn, *args) -> None:
        try:
            fn(*args)
        except Exception:  # pylint: disable=broad-except
            _LOG.exception("RemoteInformer(%s): handler %r failed",
                           self._resource, fn)
