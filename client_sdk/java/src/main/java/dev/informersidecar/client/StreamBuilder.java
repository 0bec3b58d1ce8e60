package dev.informersidecar.client;

import io.grpc.Channel;
import io.grpc.Metadata;
import java.time.Duration;
import java.util.concurrent.Executor;
import java.util.function.Consumer;
import java.util.function.IntConsumer;

/**
 * The options every stream of this SDK has (the {@link RemoteInformer} Watch, the
 * {@link WorkQueueWorker} lease stream): where the sidecar is, the reconnect back-off, call
 * headers, where callbacks run and the failure callbacks. {@code B} is the concrete builder,
 * which every setter returns. Not thread-safe.
 */
public abstract class StreamBuilder<B extends StreamBuilder<B>> {
  String target = Sidecar.DEFAULT_TARGET;
  Channel channel;
  Duration initialBackoff = Duration.ofMillis(100);
  Duration maxBackoff = Duration.ofSeconds(30);
  Metadata headers;
  Executor executor;
  Consumer<StreamError> onError;
  IntConsumer onRecovered;

  StreamBuilder() {}

  /** This builder, as its own type. */
  abstract B self();

  /** The sidecar, "host:port" or "unix:/path" (default 127.0.0.1:50051). */
  public B target(String target) {
    this.target = target;
    return self();
  }

  /** An existing channel to use instead of target (not closed by close()). */
  public B channel(Channel channel) {
    this.channel = channel;
    return self();
  }

  /** Reconnect delays: doubling from initial to max, with jitter. */
  public B backoff(Duration initial, Duration max) {
    this.initialBackoff = initial;
    this.maxBackoff = max;
    return self();
  }

  /** gRPC metadata on every call, e.g. authorization: Bearer TOKEN. */
  public B header(String key, String value) {
    if (headers == null) {
      headers = new Metadata();
    }
    headers.put(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER), value);
    return self();
  }

  /**
   * Where handlers and callbacks run (default: the built object's own threads: one serialized
   * thread for an informer, {@code credit} threads for a worker).
   */
  public B executor(Executor executor) {
    this.executor = executor;
    return self();
  }

  /** Called with every stream failure (before the back-off wait). */
  public B onError(Consumer<StreamError> onError) {
    this.onError = onError;
    return self();
  }

  /** Called with the count of failures when a stream delivers again. */
  public B onRecovered(IntConsumer onRecovered) {
    this.onRecovered = onRecovered;
    return self();
  }

  /** The stream thread these options describe ({@code kind} and {@code what} name it). */
  StreamThread newStreamThread(Object lock, String kind, String what) {
    return new StreamThread(lock, kind, what, target, channel, headers);
  }
}
