"""Exponential back-off with jitter for the SDK's reconnecting streams."""

import random
from typing import Callable, Optional


class Backoff:
    """The delays between reconnect attempts of a failing stream.

    The n-th consecutive failure waits ``min(initial * 2**(n-1), maximum)``
    scaled by a jitter factor in [0.5, 1.0) (so that many clients of one
    restarted sidecar do not reconnect in lock step). :meth:`reset` after a
    stream delivered data starts again from `initial`.

    `rand` returns floats in [0, 1); tests pass a fixed one to get exact
    delays. Not thread-safe: one reader thread owns it.
    """

    def __init__(self,
                 initial: float,
                 maximum: float,
                 rand: Optional[Callable[[], float]] = None) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError(
                "initial_backoff/max_backoff: need 0 < initial <= max")
        self._initial = initial
        self._maximum = maximum
        self._rand = rand or random.random
        self._next = initial
        self._failures = 0

    @property
    def failures(self) -> int:
        """Consecutive failures since the last :meth:`reset`."""
        return self._failures

    def next_delay(self) -> float:
        """Counts one more failure and returns how long to wait (seconds)
        before the next attempt."""
        self._failures += 1
        delay = self._next * (0.5 + self._rand() / 2)
        self._next = min(self._next * 2, self._maximum)
        return delay

    def reset(self) -> None:
        """The stream works again: the next failure waits `initial`."""
        self._next = self._initial
        self._failures = 0
