package dev.informersidecar.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;

/**
 * Shared pieces of the SDK: the default target, channels, and how objects are
 * keyed and decoded.
 *
 * <p>Objects reach the application as Jackson {@link JsonNode} trees parsed
 * from the sidecar's JSON: Jackson is the JSON library most Kubernetes Java
 * code already carries (fabric8 models are Jackson-annotated, so
 * {@code mapper.treeToValue(node, Pod.class)} converts), and a tree compares
 * structurally, which RESET reconciliation needs to call handlers only for
 * real differences. Thread-safe: only immutable state.
 */
public final class Sidecar {
  /** The sidecar's default gRPC address. */
  public static final String DEFAULT_TARGET = "127.0.0.1:50051";

  /** The parser of every object; shared (ObjectMapper is thread-safe). */
  public static final ObjectMapper JSON = new ObjectMapper();

  private Sidecar() {}

  /**
   * A new plaintext channel to {@code target}: "host:port" or "unix:/path".
   * The caller closes it. gRPC's default 4 MiB receive limit stays: the
   * sidecar keeps every message below it.
   */
  public static ManagedChannel openChannel(String target) {
    if (target == null || target.isEmpty()) {
      throw new IllegalArgumentException(
          "target: must be 'host:port' or 'unix:/path'");
    }
    return Grpc.newChannelBuilder(target, InsecureChannelCredentials.create())
        .build();
  }

  /** The object's key: "namespace/name", or "name" if cluster-scoped. */
  public static String objectKey(JsonNode obj) {
    JsonNode meta = obj.path("metadata");
    String ns = meta.path("namespace").asText("");
    String name = meta.path("name").asText("");
    return ns.isEmpty() ? name : ns + "/" + name;
  }

  /** metadata.resourceVersion, or "". */
  public static String resourceVersion(JsonNode obj) {
    return obj.path("metadata").path("resourceVersion").asText("");
  }

  static JsonNode parse(String json) {
    try {
      return JSON.readTree(json);
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("bad object JSON: " + e.getMessage(), e);
    }
  }
}
