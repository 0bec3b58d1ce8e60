package dev.informersidecar.client;

import io.grpc.Channel;
import io.grpc.ClientInterceptors;
import io.grpc.Context;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.stub.MetadataUtils;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * The life of a client that keeps one stream open on a thread of its own
 * ({@link RemoteInformer}, {@link WorkQueueWorker}): the channel (the app's,
 * or one opened to {@code target} and owned), the daemon thread that runs the
 * owner's reconnect loop, the call in progress, and the stop that
 * {@link #close} sends to all three. The loop brackets each attempt with
 * {@link #beginCallLocked} and {@link #endCall}, and waits between attempts
 * with {@link #retryAfter}.
 *
 * <p>Thread-safety: the state is guarded by the owner's {@code lock} (so that
 * the owner's waits on it see the stop too); every method may be called from
 * any thread, {@link #beginCallLocked} with that lock held.
 */
final class StreamThread {
  /** What close() runs after the thread ended: the owner's executor drain. */
  @FunctionalInterface
  interface Drain {
    void run() throws InterruptedException;
  }

  private final Object lock;
  private final String kind;
  private final String name;
  private final String target;
  private final Channel userChannel;
  private final Metadata headers;

  // Guarded by lock.
  private boolean stopped;
  private Thread thread;
  private ManagedChannel ownedChannel;
  private Context.CancellableContext call;

  /**
   * {@code kind} ("RemoteInformer") names the thread {@code kind(subject)};
   * {@code userChannel} null: a channel to {@code target} is opened at
   * start and shut down by close; {@code headers} (may be null) go on every
   * call.
   */
  StreamThread(Object lock, String kind, String subject, String target,
      Channel userChannel, Metadata headers) {
    this.lock = lock;
    this.kind = kind;
    this.name = kind + "(" + subject + ")";
    this.target = target;
    this.userChannel = userChannel;
    this.headers = headers;
  }

  /**
   * Starts {@code loop} on the daemon thread with the channel to make stubs
   * on (headers attached). Throws IllegalStateException on a second call.
   */
  void start(Consumer<Channel> loop) {
    synchronized (lock) {
      if (thread != null) {
        throw new IllegalStateException(kind + " already started");
      }
      Channel ch = userChannel;
      if (ch == null) {
        ownedChannel = Sidecar.openChannel(target);
        ch = ownedChannel;
      }
      if (headers != null) {
        ch = ClientInterceptors.intercept(ch,
            MetadataUtils.newAttachHeadersInterceptor(headers));
      }
      final Channel c = ch;
      thread = new Thread(() -> loop.accept(c), name);
      thread.setDaemon(true);
      thread.start();
    }
  }

  /**
   * Cancels the call in progress, wakes the waits on the lock, joins the
   * thread (up to 10 s; not from the thread itself), runs {@code drain}, then
   * shuts the owned channel down. Idempotent.
   */
  void close(Drain drain) {
    Thread t;
    synchronized (lock) {
      stopped = true;
      if (call != null) {
        call.cancel(null);
      }
      t = thread;
      lock.notifyAll();
    }
    try {
      if (t != null && t != Thread.currentThread()) {
        t.join(10_000);
      }
      drain.run();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    synchronized (lock) {
      if (ownedChannel != null) {
        ownedChannel.shutdownNow();
        ownedChannel = null;
      }
    }
  }

  /**
   * With the lock held: false once closed (the loop ends); else records
   * {@code ctx} as the call that close() cancels.
   */
  boolean beginCallLocked(Context.CancellableContext ctx) {
    if (stopped) {
      return false;
    }
    call = ctx;
    return true;
  }

  /** The attempt ended: forgets its call; false once closed (loop ends). */
  boolean endCall() {
    synchronized (lock) {
      call = null;
      return !stopped;
    }
  }

  /**
   * Waits {@code delay} before the next attempt, or until close(); false
   * when interrupted. After UNAVAILABLE the owned channel's own connect
   * back-off is reset: the SDK's back-off paces reconnects, not the
   * channel's (which grows to 120 s and would fail every attempt until then).
   */
  boolean retryAfter(Status.Code code, Duration delay) {
    ManagedChannel owned;
    synchronized (lock) {
      owned = ownedChannel;
    }
    if (code == Status.Code.UNAVAILABLE && owned != null) {
      owned.resetConnectBackoff();
    }
    synchronized (lock) {
      try {
        awaitLocked(lock, () -> stopped, delay);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
    return true;
  }

  /**
   * With {@code lock} held: waits on it until {@code cond} holds; false on
   * timeout.
   */
  static boolean awaitLocked(Object lock, BooleanSupplier cond, Duration timeout)
      throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!cond.getAsBoolean()) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        return false;
      }
      TimeUnit.NANOSECONDS.timedWait(lock, left);
    }
    return true;
  }
}
