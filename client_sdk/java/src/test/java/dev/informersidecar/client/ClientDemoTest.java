package dev.informersidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/** InformerClient, WorkQueues, WorkQueueWorker and EventRecorder on a demo sidecar. */
class ClientDemoTest extends DemoTestBase {

  static List<String> keys(List<JsonNode> objs) {
    return objs.stream().map(Sidecar::objectKey).collect(Collectors.toList());
  }

  static Status.Code code(Runnable r) {
    return assertThrows(StatusRuntimeException.class, r::run).getStatus().getCode();
  }

  @Test
  void informerClientQueriesTheCache() throws Exception {
    try (InformerClient client = new InformerClient(sidecar.target())) {
      eventually("every resource synced", () ->
          client.listResources().stream().allMatch(InformerClient.ResourceStatus::synced));
      List<InformerClient.ResourceStatus> res = client.listResources();
      assertEquals(List.of("configmaps", "deployments.apps", "pods"),
          res.stream().map(InformerClient.ResourceStatus::resource).collect(Collectors.toList()));
      assertEquals(4, res.get(0).objectCount());
      assertTrue(res.get(0).indexes().contains("namespace"));

      List<String> all = keys(client.list("configmaps", null, null));
      assertEquals(List.of("demo/api-config", "demo/web-config", "shop/cart-config",
          "shop/checkout-config"), all);
      List<String> paged = new ArrayList<>();
      client.forEach("configmaps", null, null, 1, o -> paged.add(Sidecar.objectKey(o)));
      assertEquals(all, paged);

      assertEquals("info", client.get("configmaps", "demo", "api-config")
          .path("data").path("LOG_LEVEL").asText());
      assertNull(client.get("configmaps", "demo", "no-such-name"));
      assertEquals(List.of("shop/cart-config", "shop/checkout-config"),
          keys(client.list("configmaps", "shop", null)));
      assertEquals(List.of("shop/cart-config", "shop/checkout-config"),
          keys(client.byIndex("configmaps", "namespace", "shop")));
      assertEquals(List.of("demo", "shop"), client.indexValues("configmaps", "namespace"));

      List<JsonNode> web = client.list("pods", null, "app=app-1");
      assertFalse(web.isEmpty());
      String owner = web.get(0).path("metadata").path("ownerReferences").get(0)
          .path("uid").asText();
      assertTrue(client.indexValues("pods", "ownerUid").contains(owner));
      assertFalse(client.byIndex("pods", "ownerUid", owner).isEmpty());

      assertEquals(Status.Code.NOT_FOUND, code(() -> client.get("nosuchthings", "", "x")));
      assertEquals(Status.Code.INVALID_ARGUMENT,
          code(() -> client.list("pods", null, "app in (")));
      assertEquals(Status.Code.INVALID_ARGUMENT,
          code(() -> client.byIndex("pods", "no-such-index", "x")));
      assertThrows(IllegalArgumentException.class, () -> client.get("pods", "demo", ""));
    }
  }

  @Test
  void workerForgetsSuccessesAndRetriesFailures() throws Exception {
    String name = "java-e2e-worker";
    WorkQueues.QueueSpec spec = new WorkQueues.QueueSpec(name, "configmaps")
        .rateLimit(Duration.ofMillis(50), Duration.ofSeconds(1), null, null);
    try (WorkQueues queues = new WorkQueues(sidecar.target());
        InformerClient client = new InformerClient(sidecar.target())) {
      eventually("configmaps synced", () -> client.listResources().stream()
          .allMatch(InformerClient.ResourceStatus::synced));
      assertTrue(queues.createQueue(spec));
      assertFalse(queues.createQueue(spec));
      assertEquals(Status.Code.ALREADY_EXISTS, code(() -> queues.createQueue(
          new WorkQueues.QueueSpec(name, "configmaps")
              .rateLimit(Duration.ofMillis(50), Duration.ofSeconds(2), null, null))));
      assertEquals(Status.Code.NOT_FOUND, code(() -> queues.createQueue(
          new WorkQueues.QueueSpec("java-e2e-bad", "nosuchthings"))));
      List<String> keys = keys(client.list("configmaps", null, null));
      Map<String, List<WorkQueueWorker.LeaseInfo>> leases = new HashMap<>();
      AtomicInteger running = new AtomicInteger();
      AtomicInteger maxRunning = new AtomicInteger();
      WorkQueueWorker worker = WorkQueueWorker.builder(name, (key, lease) -> {
        maxRunning.accumulateAndGet(running.incrementAndGet(), Math::max);
        try {
          int seen;
          synchronized (leases) {
            leases.computeIfAbsent(key, k -> new ArrayList<>()).add(lease);
            seen = leases.get(key).size();
          }
          if (seen == 1) {
            throw new Exception("first attempt of " + key + " fails");
          }
        } finally {
          running.decrementAndGet();
        }
      }).target(sidecar.target()).credit(2).name("java-e2e").build().start();
      try {
        int n = keys.size();
        // demo/web-config changes every second, so it is leased again and
        // again: wait for each key's retry, not for counts.
        assertTrue(worker.waitFor(w -> {
          synchronized (leases) {
            return keys.stream().allMatch(k -> leases.getOrDefault(k, List.of()).size() >= 2)
                && w.failed() >= n && w.processed() >= n;
          }
        }, TIMEOUT), () -> "leases " + leases);
        synchronized (leases) {
          for (String key : keys) {
            List<WorkQueueWorker.LeaseInfo> got = leases.get(key);
            assertEquals(0, got.get(0).failures());
            assertEquals(1, got.get(1).failures());
            assertEquals(key, got.get(0).namespace() + "/" + got.get(0).name());
            assertTrue(got.get(0).timeout().compareTo(Duration.ZERO) > 0);
            assertTrue(got.get(0).leaseId() != got.get(1).leaseId());
          }
        }
        assertTrue(maxRunning.get() <= 2, "credit 2 but " + maxRunning + " at once");
        assertEquals(0, worker.rejected());
        // A key added by hand is leased too (fails once, then succeeds).
        queues.addAfter(name, "custom/key", Duration.ZERO);
        assertTrue(worker.waitFor(w -> {
          synchronized (leases) {
            return leases.getOrDefault("custom/key", List.of()).size() >= 2;
          }
        }, TIMEOUT));
        queues.forget(name, "custom/key");
        eventually("results reached the sidecar",
            () -> queues.stats(name).get(0).completed() >= 2L * (n + 1));
        WorkQueues.QueueStats st = queues.stats(name).get(0);
        assertEquals(name, st.name());
        assertEquals("configmaps", st.resource());
        assertEquals(1, st.workers());
        assertTrue(st.failures() >= n + 1, st.toString());
        assertTrue(st.retries() >= n + 1, st.toString());
      } finally {
        worker.close();
      }
      queues.deleteQueue(name);
      assertEquals(Status.Code.NOT_FOUND, code(() -> queues.stats(name)));
    }
  }

  @Test
  void expiredLeaseIsNotReportedAndLeasedAgain() throws Exception {
    String name = "java-e2e-expiry";
    List<WorkQueueWorker.LeaseInfo> leases = new ArrayList<>();
    WorkQueueWorker[] holder = new WorkQueueWorker[1];
    try (WorkQueues queues = new WorkQueues(sidecar.target())) {
      eventually("queue declared", () -> {
        try {
          // demo/api-config only: the demo's churn never changes it.
          queues.createQueue(new WorkQueues.QueueSpec(name, "configmaps")
              .labelSelector("app=api").leaseTimeout(Duration.ofMillis(300)));
          return true;
        } catch (StatusRuntimeException e) {
          return false; // not synced yet
        }
      });
      WorkQueueWorker worker = WorkQueueWorker.builder(name, (key, lease) -> {
        int seen;
        synchronized (leases) {
          leases.add(lease);
          seen = leases.size();
        }
        if (seen == 1) {
          // Holds the first lease until the sidecar takes it back.
          eventually("lease expired", () -> holder[0].isExpired(lease.leaseId()));
        }
      }).target(sidecar.target()).build();
      holder[0] = worker;
      worker.start();
      try {
        assertTrue(worker.waitFor(w -> w.processed() >= 2, TIMEOUT));
        synchronized (leases) {
          assertEquals(List.of("demo/api-config", "demo/api-config"),
              leases.stream().map(WorkQueueWorker.LeaseInfo::key).collect(Collectors.toList()));
        }
        assertEquals(0, worker.rejected());
        eventually("completed", () -> queues.stats(name).get(0).completed() >= 1);
        assertEquals(1, queues.stats(name).get(0).expired());
        assertEquals(1, queues.stats(name).get(0).completed());
      } finally {
        worker.close();
        queues.deleteQueue(name);
      }
    }
  }

  @Test
  void recordsEvents() throws Exception {
    try (EventRecorder events = new EventRecorder(sidecar.target());
        InformerClient client = new InformerClient(sidecar.target())) {
      eventually("configmaps synced", () -> client.listResources().stream()
          .allMatch(InformerClient.ResourceStatus::synced));
      JsonNode cm = client.get("configmaps", "demo", "api-config");
      EventRecorder.ObjectRef ref = EventRecorder.ObjectRef.of(cm, "ConfigMap", "v1");
      assertEquals("api-config", ref.name());
      events.recordEvent(ref, "Normal", "Reconciled", "from the Java SDK test");
      assertEquals(Status.Code.INVALID_ARGUMENT,
          code(() -> events.recordEvent(ref, "Sideways", "Reconciled", "bad type")));
      // No kind in the object and none passed: refused before any call.
      JsonNode kindless = Sidecar.JSON.createObjectNode().set("metadata", cm.path("metadata"));
      assertThrows(IllegalArgumentException.class,
          () -> EventRecorder.ObjectRef.of(kindless, null, null));
    }
  }
}
