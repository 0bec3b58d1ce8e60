"""The failure state of one of the SDK's reconnecting streams."""

import logging
import threading
from typing import Callable, Optional

from informer_sidecar.backoff import Backoff

_LOG = logging.getLogger("informer_sidecar")


class StreamHealth:
    """Back-off, failure count, last error, logs and callbacks of a stream
    that reconnects by itself (RemoteInformer's Watch, Worker's Lease).

    The stream's thread calls :meth:`failed` when an attempt ends and
    :meth:`recovered` when one delivers again after failures. Each failure
    is logged (WARNING when an outage starts or its cause changes, INFO for
    repeats of the same one) and passed to `on_error` with the count of
    consecutive failures and the delay before the next attempt; a recovery
    is logged and passed to `on_recovered(failures)`. A failure whose code is
    in `final_codes` is final: logged at ERROR, passed to `on_error` with
    `final` set, and :meth:`failed` returns None (the stream gives up).
    Callbacks run on the stream's thread; what they raise is logged.

    Thread-safety: `failures` and `last_error` are guarded by `lock` (the
    owner's Condition, notified on every change); everything else belongs
    to the stream's thread.
    """

    def __init__(self, backoff: Backoff, lock: threading.Condition,
                 failed_prefix: str, recovered_prefix: str,
                 on_error: Optional[Callable] = None,
                 on_recovered: Optional[Callable[[int], None]] = None,
                 final_codes=frozenset()) -> None:
        self._backoff = backoff
        self._lock = lock
        self._failed_prefix = failed_prefix
        self._recovered_prefix = recovered_prefix
        self._on_error = on_error
        self._on_recovered = on_recovered
        self._final_codes = final_codes
        # Guarded by lock.
        self.failures = 0
        self.last_error = None
        self.gave_up = False

    @property
    def failing(self) -> bool:
        """True after a failure until the next recovery (stream thread)."""
        return self._backoff.failures > 0

    def failed(self, error, context: str = "") -> Optional[float]:
        """Records `error` (a StreamError), logs it, tells on_error; returns
        how long to wait before the next attempt, or None when the error is
        final."""
        final = error.code in self._final_codes
        delay = 0.0 if final else self._backoff.next_delay()
        error.failures = self._backoff.failures + (1 if final else 0)
        error.retry_in = delay
        error.final = final
        with self._lock:
            previous = self.last_error
            self.last_error = error
            self.failures = error.failures
            self.gave_up = final
            self._lock.notify_all()
        if final:
            _LOG.error("%s: %s: %s (final: not retried)", self._failed_prefix,
                       error.code.name, error.details)
        else:
            repeat = (error.failures > 1 and previous is not None and
                      (previous.code, previous.details) == (error.code,
                                                            error.details))
            _LOG.log(logging.INFO if repeat else logging.WARNING,
                     "%s: %s: %s (%d in a row; retrying in %.2fs%s)",
                     self._failed_prefix, error.code.name, error.details,
                     error.failures, delay, context)
        if self._on_error is not None:
            self._call(self._on_error, error)
        return None if final else delay

    def recovered(self) -> None:
        """The stream delivers again: resets the back-off, tells
        on_recovered."""
        failures = self._backoff.failures
        self._backoff.reset()
        with self._lock:
            self.failures = 0
            self._lock.notify_all()
        _LOG.warning("%s after %d failed attempt(s)", self._recovered_prefix,
                     failures)
        if self._on_recovered is not None:
            self._call(self._on_recovered, failures)

    def _call(self, fn, arg) -> None:
        try:
            fn(arg)
        except Exception:  # pylint: disable=broad-except
            _LOG.exception("%s: callback %r raised", self._failed_prefix, fn)
