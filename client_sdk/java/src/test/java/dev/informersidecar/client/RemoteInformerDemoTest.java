package dev.informersidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * RemoteInformer against the real sidecar in demo mode (its cluster changes
 * every second: a web Pod of namespace demo is replaced, ConfigMap
 * demo/web-config's data.tick changes).
 */
class RemoteInformerDemoTest extends DemoTestBase {

  /** Handler calls checked for a consistent story against a model. */
  static final class Recorder {
    final Map<String, JsonNode> model = new HashMap<>();
    final List<String> errors = new ArrayList<>();
    int initialAdds;
    int liveAdds;
    int deletes;

    synchronized void add(JsonNode o, boolean initial) {
      String k = Sidecar.objectKey(o);
      if (model.containsKey(k)) {
        errors.add("duplicate add of " + k);
      }
      model.put(k, o);
      if (initial) {
        initialAdds++;
      } else {
        liveAdds++;
      }
    }

    synchronized void update(JsonNode old, JsonNode o) {
      String k = Sidecar.objectKey(o);
      if (model.get(k) != old) {
        errors.add("update of " + k + ": old is not the last seen");
      }
      model.put(k, o);
    }

    synchronized void delete(JsonNode o, boolean tombstone) {
      String k = Sidecar.objectKey(o);
      if (model.remove(k) == null) {
        errors.add("delete of unknown " + k);
      }
      deletes++;
    }

    void attach(RemoteInformer inf) {
      inf.onAdd(this::add).onUpdate(this::update).onDelete(this::delete);
    }
  }

  static String rvs(List<JsonNode> objs) {
    return objs.stream().map(o -> Sidecar.objectKey(o) + "@" + Sidecar.resourceVersion(o))
        .sorted().collect(Collectors.joining(","));
  }

  @Test
  void mirrorsPodsWithIndexesAndLiveChanges() throws Exception {
    Recorder rec = new Recorder();
    try (InformerClient client = new InformerClient(sidecar.target());
        RemoteInformer inf = RemoteInformer.builder("pods").target(sidecar.target())
            .indexer("app", o -> {
              JsonNode v = o.path("metadata").path("labels").get("app");
              return v == null ? List.of() : List.of(v.asText());
            }).build()) {
      rec.attach(inf);
      inf.start();
      assertTrue(inf.waitForSync(TIMEOUT));
      assertTrue(rec.initialAdds > 0);
      assertEquals(List.of("demo", "shop"), inf.indexValues("namespace"));
      for (JsonNode o : inf.byIndex("namespace", "shop")) {
        assertEquals("shop", o.path("metadata").path("namespace").asText());
      }
      assertFalse(inf.indexValues("app").isEmpty());
      assertEquals(inf.indexValues("app"), inf.indexValues("label:app"));
      String app = inf.indexValues("app").get(0);
      assertEquals(rvs(inf.byIndex("app", app)), rvs(inf.byIndex("label:app", app)));
      JsonNode first = inf.list().get(0);
      JsonNode meta = first.path("metadata");
      assertTrue(inf.get(meta.path("namespace").asText(), meta.path("name").asText()) == first);
      assertEquals(inf.keys(), inf.list().stream().map(Sidecar::objectKey)
          .collect(Collectors.toList()));
      // The demo replaces a web Pod every second: live adds and deletes.
      eventually("a live add and a delete", () -> {
        synchronized (rec) {
          return rec.liveAdds > 0 && rec.deletes > 0;
        }
      });
      // The mirror equals the sidecar's cache (retried: the cache moves).
      eventually("mirror == sidecar", () -> rvs(client.list("pods", null, null))
          .equals(rvs(inf.list())));
      assertEquals(0, inf.failures());
    }
    synchronized (rec) {
      assertEquals(List.of(), rec.errors);
    }
  }

  @Test
  void updatesCarryOldAndNewAndHandlersRunOnTheAppExecutor() throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(3, r -> new Thread(r, "app-pool"));
    List<String> ticks = new ArrayList<>();
    List<String> threads = new ArrayList<>();
    try (RemoteInformer inf = RemoteInformer.builder("configmaps").target(sidecar.target())
        .namespace("demo").executor(pool).build()) {
      inf.onUpdate((old, now) -> {
        synchronized (ticks) {
          threads.add(Thread.currentThread().getName());
          if (Sidecar.objectKey(now).equals("demo/web-config")) {
            ticks.add(old.path("data").path("tick").asText() + "->"
                + now.path("data").path("tick").asText());
          }
        }
        // A throwing handler is logged; the informer goes on.
        throw new IllegalStateException("handler failure on purpose");
      });
      inf.start();
      assertTrue(inf.waitForSync(TIMEOUT));
      assertEquals(List.of("demo/api-config", "demo/web-config"), inf.keys());
      eventually("two web-config updates", () -> {
        synchronized (ticks) {
          return ticks.size() >= 2;
        }
      });
      synchronized (ticks) {
        for (String t : ticks) {
          String[] p = t.split("->");
          assertFalse(p[0].equals(p[1]), t);
        }
        assertTrue(threads.stream().allMatch("app-pool"::equals), threads.toString());
      }
      assertEquals(0, inf.failures());
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void labelSelectorFiltersTheMirror() throws Exception {
    try (InformerClient client = new InformerClient(sidecar.target());
        RemoteInformer inf = RemoteInformer.builder("pods").target(sidecar.target())
            .namespace("demo").labelSelector("app=app-1").build()) {
      inf.start();
      assertTrue(inf.waitForSync(TIMEOUT));
      assertFalse(inf.list().isEmpty());
      for (JsonNode o : inf.list()) {
        assertEquals("demo", o.path("metadata").path("namespace").asText());
        assertEquals("app-1", o.path("metadata").path("labels").path("app").asText());
      }
      eventually("mirror == sidecar", () -> rvs(client.list("pods", "demo", "app=app-1"))
          .equals(rvs(inf.list())));
    }
  }

  @Test
  void closeFromAHandlerReturnsAtOnce() throws Exception {
    long[] took = {-1};
    RemoteInformer[] holder = new RemoteInformer[1];
    holder[0] = RemoteInformer.builder("configmaps").target(sidecar.target()).build();
    holder[0].onAdd((o, initial) -> {
      synchronized (took) {
        if (took[0] >= 0) {
          return;
        }
      }
      long start = System.nanoTime();
      holder[0].close(); // must not wait for this very handler
      synchronized (took) {
        took[0] = System.nanoTime() - start;
      }
    });
    holder[0].start();
    eventually("close() returned in the handler", () -> {
      synchronized (took) {
        return took[0] >= 0;
      }
    });
    synchronized (took) {
      assertTrue(took[0] < Duration.ofSeconds(5).toNanos(), "close took " + took[0] + " ns");
    }
    holder[0].close(); // idempotent
  }

  @Test
  void unknownResourceIsFinal() throws Exception {
    List<StreamError> errors = new ArrayList<>();
    try (RemoteInformer inf = RemoteInformer.builder("nosuchthings").target(sidecar.target())
        .backoff(Duration.ofMillis(10), Duration.ofMillis(20))
        .onError(e -> {
          synchronized (errors) {
            errors.add(e);
          }
        }).build()) {
      inf.start();
      // Returns at once after a final error, not after the timeout.
      assertFalse(inf.waitForSync(TIMEOUT));
      StreamError e = inf.lastError();
      assertEquals(Status.Code.NOT_FOUND, e.code());
      assertTrue(e.isFinal());
      eventually("the error callback", () -> {
        synchronized (errors) {
          return errors.size() == 1;
        }
      });
      assertEquals(0, inf.reconnects());
    }
  }

  @Test
  void badSelectorIsFinal() throws Exception {
    try (RemoteInformer inf = RemoteInformer.builder("pods").target(sidecar.target())
        .labelSelector("app in (").build()) {
      inf.start();
      assertFalse(inf.waitForSync(TIMEOUT));
      assertEquals(Status.Code.INVALID_ARGUMENT, inf.lastError().code());
      assertTrue(inf.lastError().isFinal());
    }
  }
}
