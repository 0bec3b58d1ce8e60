package dev.informersidecar.client;

import com.fasterxml.jackson.databind.JsonNode;
import io.grpc.Context;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import informer.v1.InformerGrpc;
import informer.v1.InformerOuterClass.Event;
import informer.v1.InformerOuterClass.EventType;
import informer.v1.InformerOuterClass.WatchRequest;
import informer.v1.InformerOuterClass.WatchResponse;
import informer.v1.InformerOuterClass.Encoding;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.logging.Level;

/**
 * A local, indexed mirror of one resource served by the sidecar's Watch.
 *
 * <p>The sidecar streams the resource's current state, then its changes, each
 * event with a resume token. The informer applies them to its mirror, keeps
 * its indexes and calls the handlers: {@code onAdd(obj, isInitial)},
 * {@code onUpdate(old, new)}, {@code onDelete(obj, tombstone)}. When the
 * stream breaks it reconnects with exponential back-off and resumes after the
 * last event it processed; when the sidecar cannot honour the token (it
 * restarted) it answers RESET and a fresh initial state, which the informer
 * reconciles with its mirror so that handlers see only real differences:
 * deletes (tombstone) first, then updates and adds in key order, never a
 * second add of an object they have.
 *
 * <p>Handlers and the error/recovered callbacks run one at a time, in the
 * order of the changes, after the mirror was updated, on the handler
 * executor: a single thread the informer owns, or the app's {@link Executor}
 * (a pool is fine: calls are still serialized). A handler that throws is
 * logged at WARNING and the informer goes on (the Python SDK's contract).
 * Register handlers before {@link #start} to see the initial state;
 * {@code tombstone} is true when the delete was inferred (a relist, or a
 * reconnect found the object gone), with the last state known.
 *
 * <p>Errors: each stream failure is logged and passed to {@code onError} with
 * the code, consecutive failures and the delay before the retry; the mirror
 * keeps its content meanwhile. The first response after failures calls
 * {@code onRecovered(failures)}. NOT_FOUND, PERMISSION_DENIED and
 * INVALID_ARGUMENT are final: reported once with {@code isFinal()}, no retry,
 * mirror kept, {@link #waitForSync} returns false at once if not synced.
 *
 * <p>Thread-safety: every method may be called from any thread. Objects
 * returned and passed to handlers are shared with the mirror: treat them as
 * read-only.
 */
public final class RemoteInformer implements AutoCloseable {
  /** A handler of added objects. */
  @FunctionalInterface
  public interface AddHandler {
    void onAdd(JsonNode obj, boolean isInitial);
  }

  /** A handler of updated objects. */
  @FunctionalInterface
  public interface UpdateHandler {
    void onUpdate(JsonNode oldObj, JsonNode newObj);
  }

  /** A handler of deleted objects ({@code tombstone}: inferred). */
  @FunctionalInterface
  public interface DeleteHandler {
    void onDelete(JsonNode obj, boolean tombstone);
  }

  /** Codes that end a Watch for good: another attempt would get them too. */
  public static final Set<Status.Code> FINAL_WATCH_CODES = Set.of(
      Status.Code.NOT_FOUND, Status.Code.PERMISSION_DENIED,
      Status.Code.INVALID_ARGUMENT);

  // Pending handler calls beyond which the reader waits for the handlers.
  private static final int MAX_PENDING_HANDLER_CALLS = 10_000;

  private final String resource;
  private final String namespace;
  private final String labelSelector;
  private final ExecutorService ownedExecutor;
  private final SerialExecutor handlerExecutor;
  private final StreamHealth health;
  private final StreamThread stream;

  private final Object lock = new Object();
  // Guarded by lock.
  private final Map<String, JsonNode> items = new HashMap<>();
  private final Map<String, Function<JsonNode, Collection<String>>> indexFuncs =
      new HashMap<>();
  private final Map<String, Map<String, Set<String>>> indexes = new HashMap<>();
  private boolean synced;
  private boolean stale;
  private String resumeToken;
  private int reconnects;
  private int resets;

  // Only touched by the reader thread.
  private boolean initialStateDone; // an INITIAL_STATE_DONE was applied
  private boolean relisting;
  private Map<String, JsonNode> relist = new HashMap<>();

  private final List<AddHandler> addHandlers = new CopyOnWriteArrayList<>();
  private final List<UpdateHandler> updateHandlers = new CopyOnWriteArrayList<>();
  private final List<DeleteHandler> deleteHandlers = new CopyOnWriteArrayList<>();

  private RemoteInformer(Builder b) {
    if (b.resource == null || b.resource.isEmpty()) {
      throw new IllegalArgumentException("resource: required");
    }
    this.resource = b.resource;
    this.namespace = b.namespace;
    this.labelSelector = b.labelSelector;
    this.stream = b.newStreamThread(lock, "RemoteInformer", resource);
    this.resumeToken = b.resumeToken;
    Backoff backoff = new Backoff(b.initialBackoff, b.maxBackoff, b.rand);
    String name = "RemoteInformer(" + resource + ")";
    if (b.executor != null) {
      ownedExecutor = null;
      handlerExecutor = new SerialExecutor(b.executor, name);
    } else {
      ownedExecutor = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, name + "-handlers");
        t.setDaemon(true);
        return t;
      });
      handlerExecutor = new SerialExecutor(ownedExecutor, name);
    }
    this.health = new StreamHealth(backoff, lock, name + ": Watch failed",
        name + ": Watch stream works again", b.onError, b.onRecovered,
        FINAL_WATCH_CODES, handlerExecutor::execute);
    indexFuncs.put("namespace", o -> List.of(o.path("metadata").path("namespace").asText("")));
    indexFuncs.putAll(b.indexers);
    for (String n : indexFuncs.keySet()) {
      indexes.put(n, new HashMap<>());
    }
  }

  /** A builder of an informer of {@code resource} ("pods", "deployments.apps"). */
  public static Builder builder(String resource) {
    return new Builder(resource);
  }

  /** Options of a {@link RemoteInformer}; not thread-safe. */
  public static final class Builder extends StreamBuilder<Builder> {
    private final String resource;
    private String namespace = "";
    private String labelSelector = "";
    private String resumeToken = "";
    private java.util.function.DoubleSupplier rand;
    private final Map<String, Function<JsonNode, Collection<String>>> indexers =
        new HashMap<>();

    private Builder(String resource) {
      this.resource = resource;
    }

    @Override
    Builder self() {
      return this;
    }

    /** Only objects of this namespace (default: all). */
    public Builder namespace(String namespace) {
      this.namespace = namespace == null ? "" : namespace;
      return this;
    }

    /** A Kubernetes label selector (default: all objects). */
    public Builder labelSelector(String selector) {
      this.labelSelector = selector == null ? "" : selector;
      return this;
    }

    /** Starts after this token (normally left empty). */
    public Builder resumeToken(String token) {
      this.resumeToken = token == null ? "" : token;
      return this;
    }

    /** Jitter source in [0, 1) (tests: a constant gives exact delays). */
    Builder random(java.util.function.DoubleSupplier rand) {
      this.rand = rand;
      return this;
    }

    /**
     * An extra local index: name -> the index values of an object.
     * "namespace" and "label:KEY" always exist.
     */
    public Builder indexer(String name, Function<JsonNode, Collection<String>> fn) {
      indexers.put(name, fn);
      return this;
    }

    /** A stopped informer: register handlers, then {@link RemoteInformer#start}. */
    public RemoteInformer build() {
      return new RemoteInformer(this);
    }
  }

  // ----- handlers -----

  public RemoteInformer onAdd(AddHandler h) {
    addHandlers.add(h);
    return this;
  }

  public RemoteInformer onUpdate(UpdateHandler h) {
    updateHandlers.add(h);
    return this;
  }

  public RemoteInformer onDelete(DeleteHandler h) {
    deleteHandlers.add(h);
    return this;
  }

  // ----- lifecycle -----

  /** Starts the background thread reading the Watch stream. */
  public RemoteInformer start() {
    stream.start(ch -> run(InformerGrpc.newBlockingStub(ch)));
    return this;
  }

  /**
   * Ends the stream, joins the reader thread and lets the handler calls
   * queued so far run (waiting up to 10 s; not when called from a handler).
   * Idempotent.
   */
  @Override
  public void close() {
    stream.close(() -> {
      handlerExecutor.awaitIdle(Duration.ofSeconds(10));
      if (ownedExecutor != null) {
        ownedExecutor.shutdown();
      }
    });
  }

  // ----- state -----

  /**
   * True once the initial state was received completely and the handlers
   * were called for it.
   */
  public boolean hasSynced() {
    synchronized (lock) {
      return synced;
    }
  }

  /**
   * True while the sidecar serves stale data: it started from its disk cache
   * ({@code --serve_stale_on_start}) and has not reached the API server yet. Set
   * by a stale INITIAL_STATE_DONE, cleared by FRESH (or a fresh
   * INITIAL_STATE_DONE). The mirror is usable meanwhile; the changes since the
   * cache arrive as ordinary events.
   */
  public boolean isStale() {
    synchronized (lock) {
      return stale;
    }
  }

  /**
   * Waits until {@link #hasSynced}; false on timeout, or at once after a final
   * error (see {@link #lastError}).
   */
  public boolean waitForSync(Duration timeout) throws InterruptedException {
    synchronized (lock) {
      waitLocked(() -> synced || health.gaveUp, timeout);
      return synced;
    }
  }

  /**
   * Waits until {@code predicate(this)} holds, re-evaluated after every change
   * of the mirror; false on timeout. The predicate runs under the informer's
   * lock: it may call the query methods but must be quick.
   */
  public boolean waitFor(Predicate<RemoteInformer> predicate, Duration timeout)
      throws InterruptedException {
    synchronized (lock) {
      return waitLocked(() -> predicate.test(this), timeout);
    }
  }

  private boolean waitLocked(java.util.function.BooleanSupplier cond, Duration timeout)
      throws InterruptedException {
    return StreamThread.awaitLocked(lock, cond, timeout);
  }

  /** The token of the last event processed. */
  public String resumeToken() {
    synchronized (lock) {
      return resumeToken;
    }
  }

  /** How many times the stream was re-established. */
  public int reconnects() {
    synchronized (lock) {
      return reconnects;
    }
  }

  /** How many RESETs the sidecar sent. */
  public int resets() {
    synchronized (lock) {
      return resets;
    }
  }

  /** The error of the last stream that failed, or null. */
  public StreamError lastError() {
    synchronized (lock) {
      return health.lastError;
    }
  }

  /** Consecutive failed streams: 0 while the stream works. */
  public int failures() {
    synchronized (lock) {
      return health.failures;
    }
  }

  // ----- queries on the mirror -----

  /** The mirrored object, or null; namespace null or "" if cluster-scoped. */
  public JsonNode get(String namespace, String name) {
    String key = namespace == null || namespace.isEmpty() ? name : namespace + "/" + name;
    return getByKey(key);
  }

  /** The mirrored object with key "namespace/name" (or "name"), or null. */
  public JsonNode getByKey(String key) {
    synchronized (lock) {
      return items.get(key);
    }
  }

  /** Every mirrored object, in key order. */
  public List<JsonNode> list() {
    synchronized (lock) {
      return new ArrayList<>(new TreeMap<>(items).values());
    }
  }

  /** Every mirrored key, sorted. */
  public List<String> keys() {
    synchronized (lock) {
      return new ArrayList<>(new TreeSet<>(items.keySet()));
    }
  }

  /**
   * Objects indexed under {@code value} by index {@code name} ("namespace",
   * "label:KEY" or a builder indexer), in key order.
   */
  public List<JsonNode> byIndex(String name, String value) {
    synchronized (lock) {
      ensureIndexLocked(name);
      List<JsonNode> out = new ArrayList<>();
      for (String k : new TreeSet<>(indexes.get(name).getOrDefault(value, Set.of()))) {
        out.add(items.get(k));
      }
      return out;
    }
  }

  /** The values index {@code name} holds objects under, sorted. */
  public List<String> indexValues(String name) {
    synchronized (lock) {
      ensureIndexLocked(name);
      return new ArrayList<>(new TreeSet<>(indexes.get(name).keySet()));
    }
  }

  // ----- internals (lock held: *Locked) -----

  private void ensureIndexLocked(String name) {
    if (indexes.containsKey(name)) {
      return;
    }
    if (!name.startsWith("label:") || name.length() == "label:".length()) {
      throw new IllegalArgumentException("indexName: unknown index '" + name
          + "' (have " + new TreeSet<>(indexFuncs.keySet()) + " and label:<key>)");
    }
    String label = name.substring("label:".length());
    indexFuncs.put(name, o -> {
      JsonNode v = o.path("metadata").path("labels").get(label);
      return v == null ? List.of() : List.of(v.asText());
    });
    indexes.put(name, new HashMap<>());
    items.forEach((k, o) -> indexLocked(name, k, o));
  }

  private void indexLocked(String name, String key, JsonNode obj) {
    for (String v : indexFuncs.get(name).apply(obj)) {
      indexes.get(name).computeIfAbsent(v, x -> new java.util.HashSet<>()).add(key);
    }
  }

  private void unindexLocked(String name, String key, JsonNode obj) {
    Map<String, Set<String>> idx = indexes.get(name);
    for (String v : indexFuncs.get(name).apply(obj)) {
      Set<String> keys = idx.get(v);
      if (keys != null) {
        keys.remove(key);
        if (keys.isEmpty()) {
          idx.remove(v);
        }
      }
    }
  }

  private JsonNode putLocked(String key, JsonNode obj) {
    JsonNode old = items.put(key, obj);
    for (String n : indexes.keySet()) {
      if (old != null) {
        unindexLocked(n, key, old);
      }
      indexLocked(n, key, obj);
    }
    lock.notifyAll();
    return old;
  }

  private JsonNode removeLocked(String key) {
    JsonNode old = items.remove(key);
    if (old != null) {
      for (String n : indexes.keySet()) {
        unindexLocked(n, key, old);
      }
      lock.notifyAll();
    }
    return old;
  }

  // ----- the reader thread -----

  private void run(InformerGrpc.InformerBlockingStub stub) {
    boolean first = true;
    while (true) {
      WatchRequest request;
      Context.CancellableContext ctx = Context.current().withCancellation();
      synchronized (lock) {
        if (!stream.beginCallLocked(ctx)) {
          break;
        }
        request = WatchRequest.newBuilder().setResource(resource)
            .setNamespace(namespace).setLabelSelector(labelSelector)
            .setResumeToken(resumeToken).setEncoding(Encoding.ENCODING_JSON).build();
        if (!first) {
          reconnects++;
        }
      }
      first = false;
      Status failure = read(stub, request, ctx);
      if (!stream.endCall()) {
        break;
      }
      Duration delay = health.failed(failure.getCode(),
          failure.getDescription() == null ? "" : failure.getDescription(),
          failure.getCause(), ", resuming after token '" + resumeToken() + "'");
      if (delay == null) {
        break; // final: reported, not retried
      }
      if (!stream.retryAfter(failure.getCode(), delay)) {
        break;
      }
    }
  }

  /** Applies the stream's events until it ends; returns why it ended. */
  private Status read(InformerGrpc.InformerBlockingStub stub, WatchRequest request,
      Context.CancellableContext ctx) {
    Context previous = ctx.attach();
    try {
      Iterator<WatchResponse> it = stub.watch(request);
      while (it.hasNext()) {
        WatchResponse response = it.next();
        if (health.failing()) {
          health.recovered();
        }
        for (Event e : response.getEventsList()) {
          apply(e);
        }
        handlerExecutor.awaitBelow(MAX_PENDING_HANDLER_CALLS);
      }
      return Status.OK.withDescription("the sidecar ended the stream");
    } catch (StatusRuntimeException e) {
      return e.getStatus();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Status.CANCELLED.withDescription("interrupted");
    } catch (RuntimeException e) {
      StreamHealth.LOG.log(Level.WARNING, "RemoteInformer(" + resource + "): bad event", e);
      return Status.INTERNAL.withDescription("bad event: " + e.getMessage()).withCause(e);
    } finally {
      ctx.detach(previous);
      ctx.cancel(null);
    }
  }

  private void setToken(String token) {
    synchronized (lock) {
      resumeToken = token;
    }
  }

  /** Applies one Watch event to the mirror and queues the handler calls. */
  private void apply(Event event) {
    EventType type = event.getType();
    if (type == EventType.EVENT_TYPE_RESET) {
      StreamHealth.LOG.info("RemoteInformer(" + resource + "): RESET, reconciling");
      relisting = true;
      relist = new HashMap<>();
      synchronized (lock) {
        resets++;
        resumeToken = event.getResumeToken();
      }
      return;
    }
    if (type == EventType.EVENT_TYPE_INITIAL_STATE_DONE) {
      if (relisting) {
        reconcile();
      }
      initialStateDone = true;
      synchronized (lock) {
        stale = event.getStale();
      }
      setToken(event.getResumeToken());
      // Synced once the handlers saw the initial state too, as when they
      // run on the reader thread (the Python SDK).
      handlerExecutor.execute(() -> {
        synchronized (lock) {
          synced = true;
          lock.notifyAll();
        }
      });
      return;
    }
    if (type == EventType.EVENT_TYPE_FRESH) {
      synchronized (lock) {
        stale = false;
      }
      setToken(event.getResumeToken());
      return;
    }
    if (type != EventType.EVENT_TYPE_ADDED && type != EventType.EVENT_TYPE_MODIFIED
        && type != EventType.EVENT_TYPE_SYNC && type != EventType.EVENT_TYPE_DELETED) {
      setToken(event.getResumeToken()); // BOOKMARK, and types added later
      return;
    }
    String json = event.getObject().getJson();
    JsonNode obj = json.isEmpty() ? Sidecar.JSON.createObjectNode() : Sidecar.parse(json);
    String key = Sidecar.objectKey(obj);
    if (type == EventType.EVENT_TYPE_ADDED && event.getInitial()) {
      if (relisting || initialStateDone) {
        // A fresh initial state over a mirror with content: collected and
        // applied as differences at INITIAL_STATE_DONE.
        relisting = true;
        relist.put(key, obj);
        setToken(event.getResumeToken());
        return;
      }
    }
    if (type == EventType.EVENT_TYPE_DELETED) {
      JsonNode old;
      synchronized (lock) {
        old = removeLocked(key);
        resumeToken = event.getResumeToken();
      }
      if (old != null) {
        fireDelete(obj, event.getTombstone());
      }
      return;
    }
    JsonNode old;
    synchronized (lock) {
      old = putLocked(key, obj);
      resumeToken = event.getResumeToken();
    }
    if (old == null) {
      fireAdd(obj, event.getInitial());
    } else if (type == EventType.EVENT_TYPE_SYNC || !old.equals(obj)) {
      fireUpdate(old, obj);
    }
  }

  /** Replaces the mirror with the relisted state; handlers see differences. */
  private void reconcile() {
    Map<String, JsonNode> fresh = new TreeMap<>(relist);
    relist = new HashMap<>();
    relisting = false;
    boolean initial = !initialStateDone;
    List<String> gone = new ArrayList<>();
    synchronized (lock) {
      for (String k : new TreeSet<>(items.keySet())) {
        if (!fresh.containsKey(k)) {
          gone.add(k);
        }
      }
    }
    for (String k : gone) {
      JsonNode old;
      synchronized (lock) {
        old = removeLocked(k);
      }
      if (old != null) {
        fireDelete(old, true);
      }
    }
    for (Map.Entry<String, JsonNode> e : fresh.entrySet()) {
      JsonNode old;
      synchronized (lock) {
        old = putLocked(e.getKey(), e.getValue());
      }
      if (old == null) {
        fireAdd(e.getValue(), initial);
      } else if (!old.equals(e.getValue())) {
        fireUpdate(old, e.getValue());
      }
    }
  }

  private void fireAdd(JsonNode obj, boolean initial) {
    for (AddHandler h : addHandlers) {
      handlerExecutor.execute(() -> h.onAdd(obj, initial));
    }
  }

  private void fireUpdate(JsonNode old, JsonNode obj) {
    for (UpdateHandler h : updateHandlers) {
      handlerExecutor.execute(() -> h.onUpdate(old, obj));
    }
  }

  private void fireDelete(JsonNode obj, boolean tombstone) {
    for (DeleteHandler h : deleteHandlers) {
      handlerExecutor.execute(() -> h.onDelete(obj, tombstone));
    }
  }

  @Override
  public String toString() {
    return "RemoteInformer(" + resource + ")";
  }
}
