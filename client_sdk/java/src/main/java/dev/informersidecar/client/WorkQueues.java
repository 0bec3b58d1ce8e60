package dev.informersidecar.client;

import io.grpc.Channel;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.stub.MetadataUtils;
import informer.v1.WorkQueueGrpc;
import informer.v1.Workqueue.AddAfterRequest;
import informer.v1.Workqueue.CreateQueueRequest;
import informer.v1.Workqueue.DeleteQueueRequest;
import informer.v1.Workqueue.ForgetRequest;
import informer.v1.Workqueue.QueueEvent;
import informer.v1.Workqueue.RateLimiter;
import informer.v1.Workqueue.StatsRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;

/**
 * The work-queue helpers (informer.v1.WorkQueue's unary calls): declare and
 * remove queues, add keys, reset a key's back-off, read stats. The sidecar
 * enqueues the key of every matching object of a declared queue as its
 * informer sees changes; a {@link WorkQueueWorker} processes them.
 *
 * <p>Errors throw {@code StatusRuntimeException}. Thread-safety: every method
 * may be called from any thread.
 */
public final class WorkQueues implements AutoCloseable {
  /** Which informer events enqueue a key. */
  public enum Event { ADDED, MODIFIED, DELETED, SYNC }

  private final ManagedChannel ownedChannel;
  private final WorkQueueGrpc.WorkQueueBlockingStub stub;
  private final Duration timeout = Duration.ofSeconds(10);

  /** Helpers with their own channel to {@code target}. */
  public WorkQueues(String target) {
    this.ownedChannel = Sidecar.openChannel(target);
    this.stub = WorkQueueGrpc.newBlockingStub(ownedChannel);
  }

  /** Helpers on {@code channel} (not closed by close()). */
  public WorkQueues(Channel channel) {
    this.ownedChannel = null;
    this.stub = WorkQueueGrpc.newBlockingStub(channel);
  }

  private WorkQueues(WorkQueueGrpc.WorkQueueBlockingStub stub) {
    this.ownedChannel = null;
    this.stub = stub;
  }

  /** A view sending this header on every call (the original owns the channel). */
  public WorkQueues withHeader(String key, String value) {
    Metadata m = new Metadata();
    m.put(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER), value);
    return new WorkQueues(stub.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(m)));
  }

  @Override
  public void close() {
    if (ownedChannel != null) {
      ownedChannel.shutdownNow();
    }
  }

  private WorkQueueGrpc.WorkQueueBlockingStub s() {
    return stub.withDeadlineAfter(timeout.toNanos(), TimeUnit.NANOSECONDS);
  }

  private static com.google.protobuf.Duration pb(Duration d, String field) {
    if (d.isNegative()) {
      throw new IllegalArgumentException(field + ": must not be negative");
    }
    return com.google.protobuf.Duration.newBuilder().setSeconds(d.getSeconds())
        .setNanos(d.getNano()).build();
  }

  /**
   * Declares a queue. Idempotent: true if this call created it, false if an
   * identical queue existed (a different declaration: ALREADY_EXISTS).
   */
  public boolean createQueue(QueueSpec spec) {
    CreateQueueRequest.Builder r = CreateQueueRequest.newBuilder().setName(spec.name)
        .setResource(spec.resource).setNamespace(spec.namespace)
        .setLabelSelector(spec.labelSelector);
    for (Event e : spec.events) {
      r.addEvents(QueueEvent.valueOf("QUEUE_EVENT_" + e.name()));
    }
    if (spec.resyncPeriod != null) {
      r.setResyncPeriod(pb(spec.resyncPeriod, "resyncPeriod"));
    }
    if (spec.leaseTimeout != null) {
      r.setLeaseTimeout(pb(spec.leaseTimeout, "leaseTimeout"));
    }
    if (spec.baseDelay != null || spec.maxDelay != null || spec.qps != null
        || spec.burst != null) {
      RateLimiter.Builder rl = RateLimiter.newBuilder();
      if (spec.baseDelay != null) {
        rl.setBaseDelay(pb(spec.baseDelay, "baseDelay"));
      }
      if (spec.maxDelay != null) {
        rl.setMaxDelay(pb(spec.maxDelay, "maxDelay"));
      }
      if (spec.qps != null) {
        rl.setQps(spec.qps);
      }
      if (spec.burst != null) {
        rl.setBurst(spec.burst);
      }
      r.setRateLimiter(rl);
    }
    return s().createQueue(r.build()).getCreated();
  }

  /** Removes a queue (its Lease streams end with NOT_FOUND). */
  public void deleteQueue(String name) {
    s().deleteQueue(DeleteQueueRequest.newBuilder().setName(name).build());
  }

  /** Adds {@code key} to {@code queue} now or after {@code delay}. */
  public void addAfter(String queue, String key, Duration delay) {
    AddAfterRequest.Builder r = AddAfterRequest.newBuilder().setQueue(queue).setKey(key);
    if (delay != null && !delay.isZero()) {
      r.setDelay(pb(delay, "delay"));
    }
    s().addAfter(r.build());
  }

  /** Resets the failure count (back-off) of {@code key}. */
  public void forget(String queue, String key) {
    s().forget(ForgetRequest.newBuilder().setQueue(queue).setKey(key).build());
  }

  /** Stats of one queue, or of every queue for "". */
  public List<QueueStats> stats(String queue) {
    List<QueueStats> out = new ArrayList<>();
    for (var q : s().stats(StatsRequest.newBuilder().setQueue(queue).build())
        .getQueuesList()) {
      out.add(new QueueStats(q.getName(), q.getResource(), q.getDepth(), q.getWaiting(),
          q.getInFlight(), q.getWorkers(), q.getAdds(), q.getRetries(), q.getFailures(),
          q.getExpired(), q.getReturned(), q.getCompleted()));
    }
    return out;
  }

  /** A queue's counters. */
  public record QueueStats(String name, String resource, long depth, long waiting,
      long inFlight, int workers, long adds, long retries, long failures, long expired,
      long returned, long completed) {}

  /** A queue declaration; null options take the sidecar's defaults. */
  public static final class QueueSpec {
    private final String name;
    private final String resource;
    private String namespace = "";
    private String labelSelector = "";
    private Set<Event> events = EnumSet.noneOf(Event.class);
    private Duration resyncPeriod;
    private Duration baseDelay;
    private Duration maxDelay;
    private Double qps;
    private Integer burst;
    private Duration leaseTimeout;

    /** Queue {@code name} fed by the informer of {@code resource}. */
    public QueueSpec(String name, String resource) {
      this.name = name;
      this.resource = resource;
    }

    public QueueSpec namespace(String v) {
      namespace = v;
      return this;
    }

    public QueueSpec labelSelector(String v) {
      labelSelector = v;
      return this;
    }

    /** Which events enqueue a key (default: all). */
    public QueueSpec events(Event... v) {
      events = v.length == 0 ? EnumSet.noneOf(Event.class) : EnumSet.of(v[0], v);
      return this;
    }

    public QueueSpec resyncPeriod(Duration v) {
      resyncPeriod = v;
      return this;
    }

    /** Retry pacing of failed keys (defaults 5 ms, 1000 s, 10/s, 100). */
    public QueueSpec rateLimit(Duration base, Duration max, Double qps, Integer burst) {
      this.baseDelay = base;
      this.maxDelay = max;
      this.qps = qps;
      this.burst = burst;
      return this;
    }

    /** How long a worker may hold a key (default 5 minutes). */
    public QueueSpec leaseTimeout(Duration v) {
      leaseTimeout = v;
      return this;
    }
  }
}
