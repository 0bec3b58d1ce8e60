package dev.informersidecar.client;

import com.fasterxml.jackson.databind.JsonNode;
import io.grpc.Channel;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.MetadataUtils;
import informer.v1.InformerGrpc;
import informer.v1.InformerOuterClass.ByIndexRequest;
import informer.v1.InformerOuterClass.Encoding;
import informer.v1.InformerOuterClass.GetRequest;
import informer.v1.InformerOuterClass.ListIndexValuesRequest;
import informer.v1.InformerOuterClass.ListRequest;
import informer.v1.InformerOuterClass.ListResourcesRequest;
import informer.v1.InformerOuterClass.ListResponse;
import informer.v1.InformerOuterClass.Object;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * The sidecar's cache queries (informer.v1.Informer's unary calls) with
 * objects decoded as {@link JsonNode}. Each call is a round trip and keeps no
 * copy of the cache in the application; a {@link RemoteInformer} keeps a
 * local mirror instead.
 *
 * <p>Errors throw {@link StatusRuntimeException} with the sidecar's code and
 * message: NOT_FOUND (unknown resource), INVALID_ARGUMENT (malformed
 * selector, unknown index, expired continue token), UNAVAILABLE (not synced
 * yet without allowStale, or the sidecar is away), UNAUTHENTICATED or
 * PERMISSION_DENIED. Every call has the client's deadline.
 *
 * <p>Thread-safety: every method may be called from any thread.
 */
public final class InformerClient implements AutoCloseable {
  // The sidecar's NOT_FOUND for a resource it does not serve starts with
  // this; any other NOT_FOUND of Get is a missing object.
  private static final String UNKNOWN_RESOURCE = "unknown resource";

  private final ManagedChannel ownedChannel;
  private final InformerGrpc.InformerBlockingStub stub;
  private final Duration timeout;
  private final boolean allowStale;

  /** A client with its own channel to {@code target}, 30 s per call. */
  public InformerClient(String target) {
    this(Sidecar.openChannel(target), true, null, Duration.ofSeconds(30), false);
  }

  /** A client on {@code channel} (not closed by close()). */
  public InformerClient(Channel channel) {
    this(channel, false, null, Duration.ofSeconds(30), false);
  }

  private InformerClient(Channel channel, boolean owned, Metadata headers,
      Duration timeout, boolean allowStale) {
    this.ownedChannel = owned ? (ManagedChannel) channel : null;
    InformerGrpc.InformerBlockingStub s = InformerGrpc.newBlockingStub(channel);
    if (headers != null) {
      s = s.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(headers));
    }
    this.stub = s;
    this.timeout = timeout;
    this.allowStale = allowStale;
  }

  private InformerClient(InformerClient c, InformerGrpc.InformerBlockingStub stub,
      Duration timeout, boolean allowStale) {
    this.ownedChannel = null; // the original closes it
    this.stub = stub;
    this.timeout = timeout;
    this.allowStale = allowStale;
  }

  /** A view of this client with another per-call deadline. */
  public InformerClient withTimeout(Duration timeout) {
    return new InformerClient(this, stub, timeout, allowStale);
  }

  /** A view answering from a cache that has not synced (yet) too. */
  public InformerClient withAllowStale(boolean allowStale) {
    return new InformerClient(this, stub, timeout, allowStale);
  }

  /** A view sending this header on every call, e.g. authorization. */
  public InformerClient withHeader(String key, String value) {
    Metadata m = new Metadata();
    m.put(Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER), value);
    return new InformerClient(this,
        stub.withInterceptors(MetadataUtils.newAttachHeadersInterceptor(m)), timeout,
        allowStale);
  }

  private InformerGrpc.InformerBlockingStub s() {
    return stub.withDeadlineAfter(timeout.toNanos(), TimeUnit.NANOSECONDS);
  }

  /** Closes the channel if this client opened it. */
  @Override
  public void close() {
    if (ownedChannel != null) {
      ownedChannel.shutdownNow();
    }
  }

  private static JsonNode decode(Object o) {
    if (o.getBodyCase() != Object.BodyCase.JSON) {
      // Requests always ask for JSON: anything else must not pass silently.
      throw new IllegalStateException("sidecar answered without a JSON object body");
    }
    return Sidecar.parse(o.getJson());
  }

  /** The cached object, or null; namespace null or "" if cluster-scoped. */
  public JsonNode get(String resource, String namespace, String name) {
    if (name == null || name.isEmpty()) {
      throw new IllegalArgumentException("name: required");
    }
    try {
      return decode(s().get(GetRequest.newBuilder().setResource(resource)
          .setNamespace(namespace == null ? "" : namespace).setName(name)
          .setAllowStale(allowStale).setEncoding(Encoding.ENCODING_JSON).build())
          .getObject());
    } catch (StatusRuntimeException e) {
      String d = e.getStatus().getDescription();
      if (e.getStatus().getCode() == Status.Code.NOT_FOUND
          && (d == null || !d.startsWith(UNKNOWN_RESOURCE))) {
        return null;
      }
      throw e;
    }
  }

  /**
   * Calls {@code each} with every matching object in key order, fetched
   * {@code pageSize} objects at a time (0: the sidecar's default), all pages
   * from one snapshot: only one page is in memory at a time.
   */
  public void forEach(String resource, String namespace, String labelSelector,
      int pageSize, Consumer<JsonNode> each) {
    if (pageSize < 0) {
      throw new IllegalArgumentException("pageSize: must be >= 0");
    }
    ListRequest.Builder req = ListRequest.newBuilder().setResource(resource)
        .setNamespace(namespace == null ? "" : namespace)
        .setLabelSelector(labelSelector == null ? "" : labelSelector).setLimit(pageSize)
        .setAllowStale(allowStale).setEncoding(Encoding.ENCODING_JSON);
    while (true) {
      ListResponse r = s().list(req.build());
      for (Object o : r.getObjectsList()) {
        each.accept(decode(o));
      }
      if (r.getContinueToken().isEmpty()) {
        return;
      }
      req.setContinueToken(r.getContinueToken());
    }
  }

  /** Every matching object (all pages of one snapshot), in key order. */
  public List<JsonNode> list(String resource, String namespace, String labelSelector) {
    List<JsonNode> out = new ArrayList<>();
    forEach(resource, namespace, labelSelector, 0, out::add);
    return out;
  }

  /**
   * The objects whose index {@code indexName} ("namespace", "ownerUid",
   * "label:KEY", "field:PATH" or one configured) has {@code value}.
   */
  public List<JsonNode> byIndex(String resource, String indexName, String value) {
    if (indexName == null || indexName.isEmpty()) {
      throw new IllegalArgumentException("indexName: required");
    }
    List<JsonNode> out = new ArrayList<>();
    for (Object o : s().byIndex(ByIndexRequest.newBuilder().setResource(resource)
        .setIndexName(indexName).setIndexValue(value).setAllowStale(allowStale)
        .setEncoding(Encoding.ENCODING_JSON).build()).getObjectsList()) {
      out.add(decode(o));
    }
    return out;
  }

  /** The values index {@code indexName} holds objects under. */
  public List<String> indexValues(String resource, String indexName) {
    return new ArrayList<>(s().listIndexValues(ListIndexValuesRequest.newBuilder()
        .setResource(resource).setIndexName(indexName).setAllowStale(allowStale)
        .build()).getValuesList());
  }

  /** What the sidecar serves and in which state. */
  public List<ResourceStatus> listResources() {
    List<ResourceStatus> out = new ArrayList<>();
    for (var r : s().listResources(ListResourcesRequest.getDefaultInstance())
        .getResourcesList()) {
      out.add(new ResourceStatus(r.getResource(), r.getNamespace(), r.getSynced(),
          r.getObjectCount(), r.getLastResourceVersion(), r.getLastError(),
          r.getStreams(), List.copyOf(r.getIndexesList())));
    }
    return out;
  }

  /** One resource the sidecar serves. */
  public record ResourceStatus(String resource, String namespace, boolean synced,
      long objectCount, String lastResourceVersion, String lastError, int streams,
      List<String> indexes) {}
}
