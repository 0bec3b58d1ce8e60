package dev.informersidecar.client;

import io.grpc.Status;
import java.time.Duration;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.IntConsumer;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Back-off, failure count, last error, logs and callbacks of a stream that
 * reconnects by itself. The stream's thread calls {@link #failed} when an
 * attempt ends and {@link #recovered} when one delivers again after failures.
 * Each failure is logged (WARNING when an outage starts or its cause changes,
 * FINE for repeats) and passed to the error callback; a code in
 * {@code finalCodes} is logged at SEVERE and {@link #failed} returns null.
 * Callbacks go through {@code dispatch} (the owner's serial executor, or the
 * stream thread); what they throw is logged.
 *
 * <p>Thread-safety: {@code failures}, {@code lastError} and {@code gaveUp} are
 * guarded by {@code lock} (notified on every change); the rest belongs to the
 * stream's thread.
 */
final class StreamHealth {
  static final Logger LOG = Logger.getLogger("dev.informersidecar.client");

  private final Backoff backoff;
  private final Object lock;
  private final String failedPrefix;
  private final String recoveredPrefix;
  private final Consumer<StreamError> onError;
  private final IntConsumer onRecovered;
  private final Set<Status.Code> finalCodes;
  private final Consumer<Runnable> dispatch;

  int failures; // guarded by lock
  StreamError lastError; // guarded by lock
  boolean gaveUp; // guarded by lock

  StreamHealth(Backoff backoff, Object lock, String failedPrefix,
      String recoveredPrefix, Consumer<StreamError> onError,
      IntConsumer onRecovered, Set<Status.Code> finalCodes,
      Consumer<Runnable> dispatch) {
    this.backoff = backoff;
    this.lock = lock;
    this.failedPrefix = failedPrefix;
    this.recoveredPrefix = recoveredPrefix;
    this.onError = onError;
    this.onRecovered = onRecovered;
    this.finalCodes = finalCodes;
    this.dispatch = dispatch;
  }

  /** True after a failure until the next recovery (stream thread). */
  boolean failing() {
    return backoff.failures() > 0;
  }

  /** Records a failure; returns the wait before retrying, null if final. */
  Duration failed(Status.Code code, String details, Throwable cause,
      String context) {
    boolean fin = finalCodes.contains(code);
    Duration delay = fin ? Duration.ZERO : backoff.nextDelay();
    int n = backoff.failures() + (fin ? 1 : 0);
    StreamError error = new StreamError(code, details, n, delay, fin, cause);
    StreamError previous;
    synchronized (lock) {
      previous = lastError;
      lastError = error;
      failures = n;
      gaveUp = fin;
      lock.notifyAll();
    }
    if (fin) {
      LOG.severe(String.format("%s: %s: %s (final: not retried)", failedPrefix,
          code, details));
    } else {
      boolean repeat = n > 1 && previous != null && previous.code() == code
          && previous.details().equals(details);
      LOG.log(repeat ? Level.FINE : Level.WARNING,
          String.format("%s: %s: %s (%d in a row; retrying in %.2fs%s)",
              failedPrefix, code, details, n, delay.toNanos() / 1e9, context));
    }
    if (onError != null) {
      dispatch.accept(() -> safely(() -> onError.accept(error)));
    }
    return fin ? null : delay;
  }

  /** The stream delivers again: resets the back-off, tells onRecovered. */
  void recovered() {
    int n = backoff.failures();
    backoff.reset();
    synchronized (lock) {
      failures = 0;
      lock.notifyAll();
    }
    LOG.warning(String.format("%s after %d failed attempt(s)", recoveredPrefix, n));
    if (onRecovered != null) {
      dispatch.accept(() -> safely(() -> onRecovered.accept(n)));
    }
  }

  private void safely(Runnable r) {
    try {
      r.run();
    } catch (RuntimeException e) {
      LOG.log(Level.WARNING, failedPrefix + ": callback threw", e);
    }
  }
}
