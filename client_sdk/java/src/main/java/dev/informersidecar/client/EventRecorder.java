package dev.informersidecar.client;

import com.fasterxml.jackson.databind.JsonNode;
import io.grpc.Channel;
import io.grpc.ManagedChannel;
import informer.v1.EventsGrpc;
import informer.v1.EventsOuterClass.ObjectReference;
import informer.v1.EventsOuterClass.RecordEventRequest;
import java.util.concurrent.TimeUnit;

/**
 * Records Kubernetes Events through the sidecar (informer.v1.Events/Record).
 * Thread-safety: every method may be called from any thread.
 */
public final class EventRecorder implements AutoCloseable {
  private final ManagedChannel ownedChannel;
  private final EventsGrpc.EventsBlockingStub stub;

  /** A recorder with its own channel to {@code target}. */
  public EventRecorder(String target) {
    this.ownedChannel = Sidecar.openChannel(target);
    this.stub = EventsGrpc.newBlockingStub(ownedChannel);
  }

  /** A recorder on {@code channel} (not closed by close()). */
  public EventRecorder(Channel channel) {
    this.ownedChannel = null;
    this.stub = EventsGrpc.newBlockingStub(channel);
  }

  @Override
  public void close() {
    if (ownedChannel != null) {
      ownedChannel.shutdownNow();
    }
  }

  /** What an Event is about; kind and name are required. */
  public record ObjectRef(String kind, String namespace, String name, String uid,
      String apiVersion, String fieldPath) {
    /**
     * A reference to a mirrored object. The sidecar's cached objects usually
     * carry no kind: pass it (e.g. "ConfigMap"), null to take the object's.
     */
    public static ObjectRef of(JsonNode obj, String kind, String apiVersion) {
      JsonNode meta = obj.path("metadata");
      String k = kind != null ? kind : obj.path("kind").asText("");
      if (k.isEmpty()) {
        throw new IllegalArgumentException("kind: the object has no kind; pass one");
      }
      return new ObjectRef(k, meta.path("namespace").asText(""),
          meta.path("name").asText(""), meta.path("uid").asText(""),
          apiVersion != null ? apiVersion : obj.path("apiVersion").asText(""), "");
    }
  }

  /**
   * Records one Event ("Normal" or "Warning") about {@code ref}; returns once
   * the sidecar queued it for the API server. Throws StatusRuntimeException:
   * INVALID_ARGUMENT (the message names the field), RESOURCE_EXHAUSTED (the
   * sidecar's queue is full; retry later), UNAVAILABLE.
   */
  public void recordEvent(ObjectRef ref, String type, String reason, String message) {
    ObjectReference.Builder o = ObjectReference.newBuilder().setKind(nz(ref.kind()))
        .setNamespace(nz(ref.namespace())).setName(nz(ref.name())).setUid(nz(ref.uid()))
        .setApiVersion(nz(ref.apiVersion())).setFieldPath(nz(ref.fieldPath()));
    stub.withDeadlineAfter(10, TimeUnit.SECONDS).record(RecordEventRequest.newBuilder()
        .setObject(o).setType(type).setReason(reason).setMessage(nz(message)).build());
  }

  private static String nz(String s) {
    return s == null ? "" : s;
  }
}
