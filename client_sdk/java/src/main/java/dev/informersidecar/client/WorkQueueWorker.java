package dev.informersidecar.client;

import io.grpc.Context;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import informer.v1.WorkQueueGrpc;
import informer.v1.Workqueue.Lease;
import informer.v1.Workqueue.LeaseOutcome;
import informer.v1.Workqueue.LeaseRequest;
import informer.v1.Workqueue.LeaseResponse;
import informer.v1.Workqueue.LeaseResult;
import informer.v1.Workqueue.RejectedResult;
import java.time.Duration;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import java.util.logging.Level;

/**
 * Runs a handler for the keys a remote work queue leases to it.
 *
 * <p>Up to {@code credit} keys are processed at once, each on the worker's
 * executor (its own pool of {@code credit} threads, or the app's). When the
 * handler returns, the lease is reported FORGET (done, back-off reset); when
 * it throws, FAIL (logged at WARNING; the sidecar retries the key after the
 * queue's rate-limited back-off). A lease the sidecar reports expired is not
 * reported (its key went back to the queue); the handler is not interrupted,
 * but {@link #isExpired} tells it.
 *
 * <p>The Lease stream reconnects by itself with exponential back-off; keys
 * leased on a broken stream go back to the queue on the sidecar's side, and
 * their results are dropped. Every failed attempt (UNAVAILABLE, NOT_FOUND for
 * a queue not declared yet: every code is retried) is logged and passed to
 * {@code onError}; the first response after failures calls
 * {@code onRecovered(failures)}. Both run on a gRPC or stream thread and must
 * not block.
 *
 * <p>Thread-safety: every method may be called from any thread.
 */
public final class WorkQueueWorker implements AutoCloseable {
  /** Processes one key; throwing reports the lease FAIL (retried). */
  @FunctionalInterface
  public interface KeyHandler {
    void process(String key, LeaseInfo lease) throws Exception;
  }

  /**
   * One lease: its id (see {@link #isExpired}), the key and its parts, the
   * key's failures so far, and how long the worker may hold it.
   */
  public record LeaseInfo(long leaseId, String key, String namespace, String name,
      int failures, Duration timeout) {}

  private final String queue;
  private final KeyHandler handler;
  private final int credit;
  private final String name;
  private final Executor executor;
  private final ExecutorService ownedExecutor;
  private final StreamHealth health;
  private final StreamThread stream;

  private final Object lock = new Object();
  // Guarded by lock.
  private int generation;
  private int busy;
  private final Set<Long> expired = new HashSet<>();
  private StreamObserver<LeaseRequest> outbox;
  private int processed;
  private int failed;
  private int rejected;

  private WorkQueueWorker(Builder b) {
    if (b.queue == null || b.queue.isEmpty()) {
      throw new IllegalArgumentException("queue: required");
    }
    if (b.credit < 1) {
      throw new IllegalArgumentException("credit: must be at least 1");
    }
    this.queue = b.queue;
    this.handler = b.handler;
    this.credit = b.credit;
    this.name = b.name;
    if (b.executor != null) {
      executor = b.executor;
      ownedExecutor = null;
    } else {
      AtomicInteger n = new AtomicInteger();
      ownedExecutor = Executors.newFixedThreadPool(credit, r -> {
        Thread t = new Thread(r, "WorkQueueWorker(" + queue + ")-" + n.incrementAndGet());
        t.setDaemon(true);
        return t;
      });
      executor = ownedExecutor;
    }
    health = new StreamHealth(new Backoff(b.initialBackoff, b.maxBackoff, null), lock,
        "WorkQueueWorker(" + queue + "): lease stream failed",
        "WorkQueueWorker(" + queue + "): lease stream works again", b.onError,
        b.onRecovered, Set.of(), Runnable::run);
    stream = b.newStreamThread(lock, "WorkQueueWorker", queue);
  }

  /** A builder of a worker of {@code queue} running {@code handler}. */
  public static Builder builder(String queue, KeyHandler handler) {
    return new Builder(queue, handler);
  }

  /** Options of a {@link WorkQueueWorker}; not thread-safe. */
  public static final class Builder extends StreamBuilder<Builder> {
    private final String queue;
    private final KeyHandler handler;
    private int credit = 1;
    private String name = "";

    private Builder(String queue, KeyHandler handler) {
      this.queue = queue;
      this.handler = handler;
    }

    @Override
    Builder self() {
      return this;
    }

    /** Keys processed at once (default 1). */
    public Builder credit(int credit) {
      this.credit = credit;
      return this;
    }

    /** The worker's name in the sidecar's stats and logs. */
    public Builder name(String name) {
      this.name = name == null ? "" : name;
      return this;
    }

    public WorkQueueWorker build() {
      return new WorkQueueWorker(this);
    }
  }

  /** Starts the Lease stream on a background thread. */
  public WorkQueueWorker start() {
    stream.start(ch -> run(WorkQueueGrpc.newStub(ch)));
    return this;
  }

  /**
   * Ends the stream (unfinished leases return to the queue), waits for the
   * running handler calls (up to 10 s) and the stream thread. Idempotent.
   */
  @Override
  public void close() {
    stream.close(() -> {
      if (ownedExecutor != null) {
        ownedExecutor.shutdown();
        ownedExecutor.awaitTermination(10, TimeUnit.SECONDS);
      }
    });
  }

  /** Leases reported FORGET (the handler returned). */
  public int processed() {
    synchronized (lock) {
      return processed;
    }
  }

  /** Leases reported FAIL (the handler threw). */
  public int failed() {
    synchronized (lock) {
      return failed;
    }
  }

  /** Results the sidecar rejected (logged at WARNING). */
  public int rejected() {
    synchronized (lock) {
      return rejected;
    }
  }

  /** Consecutive failed attempts of the Lease stream (0 while it works). */
  public int failures() {
    synchronized (lock) {
      return health.failures;
    }
  }

  /** Why the Lease stream last failed, or null. */
  public StreamError lastError() {
    synchronized (lock) {
      return health.lastError;
    }
  }

  /** True if the sidecar took lease {@code leaseId} back (timed out). */
  public boolean isExpired(long leaseId) {
    synchronized (lock) {
      return expired.contains(leaseId);
    }
  }

  /**
   * Waits until {@code predicate(this)} holds, re-evaluated after every
   * processed lease and failed attempt; false on timeout.
   */
  public boolean waitFor(Predicate<WorkQueueWorker> predicate, Duration timeout)
      throws InterruptedException {
    synchronized (lock) {
      return StreamThread.awaitLocked(lock, () -> predicate.test(this), timeout);
    }
  }

  private void run(WorkQueueGrpc.WorkQueueStub stub) {
    while (true) {
      CompletableFuture<Status> done = new CompletableFuture<>();
      Context.CancellableContext ctx = Context.current().withCancellation();
      int gen;
      synchronized (lock) {
        if (!stream.beginCallLocked(ctx)) {
          return;
        }
        gen = ++generation;
        expired.clear();
      }
      StreamObserver<LeaseResponse> responses = new StreamObserver<>() {
        @Override
        public void onNext(LeaseResponse r) {
          if (health.failing()) {
            health.recovered();
          }
          onResponse(r, gen);
        }

        @Override
        public void onError(Throwable t) {
          endStream(gen);
          done.complete(Status.fromThrowable(t));
        }

        @Override
        public void onCompleted() {
          endStream(gen);
          done.complete(Status.OK.withDescription("the sidecar ended the stream"));
        }
      };
      // Not wait-for-ready: a sidecar that is away fails the attempt at once
      // (UNAVAILABLE), which onError reports, instead of a silent wait.
      StreamObserver<LeaseRequest> requests;
      Context previous = ctx.attach();
      try {
        requests = stub.lease(responses);
      } finally {
        ctx.detach(previous);
      }
      synchronized (lock) {
        if (!done.isDone()) {
          outbox = requests;
        }
        safeSend(requests, LeaseRequest.newBuilder().setQueue(queue)
            .setCredit(credit - busy).setWorker(name).build());
      }
      Status status;
      try {
        status = done.get();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        ctx.cancel(null);
        return;
      } catch (ExecutionException e) {
        status = Status.fromThrowable(e.getCause());
      }
      ctx.cancel(null);
      if (!stream.endCall()) {
        return;
      }
      Duration delay = health.failed(status.getCode(),
          status.getDescription() == null ? "" : status.getDescription(),
          status.getCause(), "");
      if (!stream.retryAfter(status.getCode(), delay)) {
        return;
      }
    }
  }

  private void endStream(int gen) {
    synchronized (lock) {
      if (generation == gen) {
        outbox = null;
      }
    }
  }

  private void safeSend(StreamObserver<LeaseRequest> to, LeaseRequest r) {
    try {
      to.onNext(r);
    } catch (RuntimeException e) {
      // The call ended meanwhile; the next stream's first credit counts the slot.
      StreamHealth.LOG.log(Level.FINE, "WorkQueueWorker(" + queue + "): send failed", e);
    }
  }

  private void onResponse(LeaseResponse r, int gen) {
    synchronized (lock) {
      expired.addAll(r.getExpiredLeaseIdsList());
      rejected += r.getRejectedCount();
      lock.notifyAll();
    }
    for (RejectedResult rej : r.getRejectedList()) {
      StreamHealth.LOG.warning(String.format(
          "WorkQueueWorker(%s): result of lease %d rejected: %s", queue,
          rej.getLeaseId(), rej.getMessage()));
    }
    for (Lease lease : r.getLeasesList()) {
      synchronized (lock) {
        busy++;
      }
      executor.execute(() -> process(lease, gen));
    }
  }

  private void process(Lease lease, int gen) {
    LeaseOutcome outcome;
    try {
      handler.process(lease.getKey(), new LeaseInfo(lease.getLeaseId(), lease.getKey(),
          lease.getNamespace(), lease.getName(), lease.getFailures(),
          Duration.ofSeconds(lease.getTimeout().getSeconds(), lease.getTimeout().getNanos())));
      outcome = LeaseOutcome.LEASE_OUTCOME_FORGET;
    } catch (Exception e) {
      // One WARNING line per failure; the stack trace at FINE.
      StreamHealth.LOG.warning(String.format("WorkQueueWorker(%s): %s failed (attempt %d): %s",
          queue, lease.getKey(), lease.getFailures() + 1, e));
      StreamHealth.LOG.log(Level.FINE, "WorkQueueWorker(" + queue + "): " + lease.getKey()
          + " failed", e);
      outcome = LeaseOutcome.LEASE_OUTCOME_FAIL;
    }
    synchronized (lock) {
      busy--;
      if (outcome == LeaseOutcome.LEASE_OUTCOME_FORGET) {
        processed++;
      } else {
        failed++;
      }
      lock.notifyAll();
      if (outbox == null) {
        return; // between streams: the next one's first credit counts this slot
      }
      LeaseRequest.Builder req = LeaseRequest.newBuilder().setCredit(1);
      if (gen != generation) {
        // Leased on a stream that broke: the key went back already.
      } else if (expired.remove(lease.getLeaseId())) {
        // Expired: the sidecar gave the key to the queue again.
      } else {
        req.addResults(LeaseResult.newBuilder().setLeaseId(lease.getLeaseId())
            .setOutcome(outcome));
      }
      safeSend(outbox, req.build());
    }
  }
}
