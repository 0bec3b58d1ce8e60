package dev.informersidecar.client;

import io.grpc.Status;
import java.time.Duration;

/**
 * Why a reconnecting stream (a {@link RemoteInformer}'s Watch, a
 * {@link WorkQueueWorker}'s Lease) failed, as passed to the error callback.
 *
 * <p>{@link #code()}: the gRPC code the stream ended with (NOT_FOUND for an
 * unknown resource, UNAVAILABLE while the sidecar is away, RESOURCE_EXHAUSTED
 * for a reader too slow for the sidecar's queue); INTERNAL when the SDK could
 * not decode an event; OK when the sidecar ended the stream without an error.
 * {@link #failures()}: consecutive failed attempts, this one included.
 * {@link #retryIn()}: the wait before the next attempt (zero when final).
 * {@link #isFinal()}: the stream will not be tried again (a Watch refused with
 * NOT_FOUND, PERMISSION_DENIED or INVALID_ARGUMENT). Immutable.
 */
public final class StreamError extends Exception {
  private static final long serialVersionUID = 1L;
  private final Status.Code code;
  private final String details;
  private final int failures;
  private final Duration retryIn;
  private final boolean isFinal;

  StreamError(Status.Code code, String details, int failures, Duration retryIn,
      boolean isFinal, Throwable cause) {
    super(code + ": " + details, cause);
    this.code = code;
    this.details = details;
    this.failures = failures;
    this.retryIn = retryIn;
    this.isFinal = isFinal;
  }

  public Status.Code code() {
    return code;
  }

  public String details() {
    return details;
  }

  public int failures() {
    return failures;
  }

  public Duration retryIn() {
    return retryIn;
  }

  public boolean isFinal() {
    return isFinal;
  }
}
