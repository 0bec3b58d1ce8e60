package dev.informersidecar.client;

import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.DoubleSupplier;

/**
 * The delays between reconnect attempts of a failing stream: the n-th
 * consecutive failure waits {@code min(initial * 2^(n-1), max)} scaled by a
 * jitter factor in [0.5, 1.0), so the clients of a restarted sidecar do not
 * reconnect in lock step. {@link #reset} after a stream delivered data starts
 * again from {@code initial}. Not thread-safe: one stream thread owns it.
 */
final class Backoff {
  private final long initialNanos;
  private final long maxNanos;
  private final DoubleSupplier rand;
  private long nextNanos;
  private int failures;

  Backoff(Duration initial, Duration max, DoubleSupplier rand) {
    if (initial.isNegative() || initial.isZero() || max.compareTo(initial) < 0) {
      throw new IllegalArgumentException(
          "initialBackoff/maxBackoff: need 0 < initial <= max");
    }
    this.initialNanos = initial.toNanos();
    this.maxNanos = max.toNanos();
    this.rand = rand != null ? rand : () -> ThreadLocalRandom.current().nextDouble();
    this.nextNanos = initialNanos;
  }

  int failures() {
    return failures;
  }

  /** Counts one more failure; returns the wait before the next attempt. */
  Duration nextDelay() {
    failures++;
    long delay = (long) (nextNanos * (0.5 + rand.getAsDouble() / 2));
    nextNanos = Math.min(nextNanos * 2, maxNanos);
    return Duration.ofNanos(delay);
  }

  void reset() {
    nextNanos = initialNanos;
    failures = 0;
  }
}
