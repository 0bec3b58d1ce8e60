package dev.informersidecar.client;

import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The Java SDK through every scenario of the conformance suite
 * (client_sdk/conformance/README.md): for each scenario file, starts the
 * scripted server ($INFORMER_CONFORMANCE_SERVER) on it, drives a
 * RemoteInformer or a WorkQueueWorker as the scenario's "client" says, and at
 * every checkpoint sends what the SDK shows until the server finds it
 * matches, or fails after the deadline with the last difference.
 */
class ConformanceTest {
  static final String SERVER = System.getenv().getOrDefault(
      "INFORMER_CONFORMANCE_SERVER", "../../bazel-bin/client_sdk/conformance/scripted_server");
  static final Path SCENARIOS = Paths.get("../conformance/scenarios");
  static final long DEADLINE_MS = 20_000;

  interface Driver extends AutoCloseable {
    JsonNode observe();

    void release(String key, long afterExpired) throws Exception;

    Object lock();

    @Override
    void close();
  }

  static String errorText(StreamError e) {
    return e.code().name() + (e.isFinal() ? " final" : "");
  }

  static final class InformerDriver implements Driver {
    final Object lock = new Object();
    final List<String> calls = new ArrayList<>();
    final List<String> errors = new ArrayList<>();
    final List<Integer> recoveries = new ArrayList<>();
    final RemoteInformer informer;

    InformerDriver(JsonNode c, String target) {
      informer = RemoteInformer.builder(c.path("resource").asText()).target(target)
          .namespace(c.path("namespace").asText(""))
          .labelSelector(c.path("label_selector").asText(""))
          .backoff(Duration.ofMillis(c.path("initial_backoff_ms").asLong()),
              Duration.ofMillis(c.path("max_backoff_ms").asLong()))
          .onError(e -> note(errors, errorText(e)))
          .onRecovered(n -> note(recoveries, n))
          .build();
      informer.onAdd((o, initial) -> note(calls, "add " + Sidecar.objectKey(o) + " "
          + Sidecar.resourceVersion(o) + (initial ? " initial" : "")));
      informer.onUpdate((o, n) -> note(calls, "update " + Sidecar.objectKey(n) + " "
          + Sidecar.resourceVersion(o) + " " + Sidecar.resourceVersion(n)));
      informer.onDelete((o, tomb) -> note(calls, "delete " + Sidecar.objectKey(o) + " "
          + Sidecar.resourceVersion(o) + (tomb ? " tombstone" : "")));
      informer.start();
    }

    <T> void note(List<T> where, T what) {
      synchronized (lock) {
        where.add(what);
        lock.notifyAll();
      }
    }

    @Override
    public Object lock() {
      return lock;
    }

    @Override
    public JsonNode observe() {
      ObjectNode o = Sidecar.JSON.createObjectNode();
      synchronized (lock) {
        o.set("calls", Sidecar.JSON.valueToTree(calls));
        o.set("errors", Sidecar.JSON.valueToTree(errors));
        o.set("recoveries", Sidecar.JSON.valueToTree(recoveries));
      }
      ObjectNode mirror = o.putObject("mirror");
      for (JsonNode obj : informer.list()) {
        mirror.put(Sidecar.objectKey(obj), Sidecar.resourceVersion(obj));
      }
      o.put("resume_token", informer.resumeToken());
      o.put("synced", informer.hasSynced());
      o.put("stale", informer.isStale());
      return o;
    }

    @Override
    public void release(String key, long afterExpired) {
      throw new AssertionError("release " + key + " for an informer");
    }

    @Override
    public void close() {
      informer.close();
    }
  }

  static final class WorkerDriver implements Driver {
    final Object lock = new Object();
    final List<String> errors = new ArrayList<>();
    final List<Integer> recoveries = new ArrayList<>();
    final List<String> started = new ArrayList<>();
    final List<String> processed = new ArrayList<>();
    final Map<String, Integer> attempts = new HashMap<>();
    final Map<String, Integer> fail = new HashMap<>();
    final Set<String> hold = new HashSet<>();
    final Set<String> released = new HashSet<>();
    final WorkQueueWorker worker;

    WorkerDriver(JsonNode c, String target) {
      c.path("fail").fields().forEachRemaining(e -> fail.put(e.getKey(), e.getValue().asInt()));
      c.path("hold").forEach(k -> hold.add(k.asText()));
      worker = WorkQueueWorker.builder(c.path("queue").asText(), (k, l) -> process(k))
          .target(target).credit(1).name(c.path("name").asText(""))
          .backoff(Duration.ofMillis(c.path("initial_backoff_ms").asLong()),
              Duration.ofMillis(c.path("max_backoff_ms").asLong()))
          .onError(e -> note(errors, errorText(e)))
          .onRecovered(n -> note(recoveries, n))
          .build();
      worker.start();
    }

    <T> void note(List<T> where, T what) {
      synchronized (lock) {
        where.add(what);
        lock.notifyAll();
      }
    }

    void process(String key) throws Exception {
      int attempt;
      synchronized (lock) {
        attempt = attempts.merge(key, 1, Integer::sum);
        started.add(key);
        lock.notifyAll();
        if (hold.contains(key) && attempt == 1) {
          long deadline = System.currentTimeMillis() + DEADLINE_MS;
          while (!released.contains(key)) {
            long left = deadline - System.currentTimeMillis();
            if (left <= 0) {
              throw new AssertionError(key + " never released");
            }
            lock.wait(left);
          }
        }
      }
      if (attempt <= fail.getOrDefault(key, 0)) {
        note(processed, key + " FAIL");
        throw new RuntimeException("scripted failure of " + key);
      }
      note(processed, key + " FORGET");
    }

    @Override
    public Object lock() {
      return lock;
    }

    @Override
    public JsonNode observe() {
      ObjectNode o = Sidecar.JSON.createObjectNode();
      synchronized (lock) {
        o.set("errors", Sidecar.JSON.valueToTree(errors));
        o.set("recoveries", Sidecar.JSON.valueToTree(recoveries));
        o.set("started", Sidecar.JSON.valueToTree(started));
        o.set("processed", Sidecar.JSON.valueToTree(processed));
      }
      return o;
    }

    @Override
    public void release(String key, long afterExpired) throws Exception {
      if (afterExpired > 0) {
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (!worker.isExpired(afterExpired)) {
          if (System.currentTimeMillis() > deadline) {
            throw new AssertionError("lease " + afterExpired + " never known as expired");
          }
          Thread.sleep(5); // polls a condition, bounded by the deadline
        }
      }
      synchronized (lock) {
        released.add(key);
        lock.notifyAll();
      }
    }

    @Override
    public void close() {
      worker.close();
    }
  }

  static void runScenario(Path path) throws Exception {
    Process server = new ProcessBuilder(SERVER, path.toString())
        .redirectError(ProcessBuilder.Redirect.INHERIT).start();
    LinkedBlockingQueue<JsonNode> lines = new LinkedBlockingQueue<>();
    JsonNode eof = Sidecar.JSON.createObjectNode().put("eof", true);
    Thread reader = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(
          new InputStreamReader(server.getInputStream(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = r.readLine()) != null) {
          lines.add(Sidecar.JSON.readTree(line));
        }
      } catch (Exception e) {
        // The process ended; eof below tells the runner.
      }
      lines.add(eof);
    });
    reader.setDaemon(true);
    reader.start();
    Writer out = new OutputStreamWriter(server.getOutputStream(), StandardCharsets.UTF_8);
    Driver driver = null;
    try {
      JsonNode hello = next(lines, eof);
      JsonNode client = hello.path("client");
      String target = "127.0.0.1:" + hello.path("listening").asInt();
      driver = client.path("kind").asText().equals("informer")
          ? new InformerDriver(client, target) : new WorkerDriver(client, target);
      while (true) {
        JsonNode msg = next(lines, eof);
        if (msg.has("done")) {
          if (!msg.path("ok").asBoolean()) {
            throw new AssertionError("scenario failed: " + msg.path("error"));
          }
          return;
        }
        if (msg.has("release")) {
          driver.release(msg.path("release").asText(), msg.path("after_expired").asLong(0));
          continue;
        }
        String name = msg.path("checkpoint").asText();
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (true) {
          ObjectNode observe = Sidecar.JSON.createObjectNode();
          observe.set("observe", driver.observe());
          out.write(Sidecar.JSON.writeValueAsString(observe) + "\n");
          out.flush();
          JsonNode reply = next(lines, eof);
          if (reply.path("match").asBoolean()) {
            break;
          }
          if (reply.has("done")) {
            throw new AssertionError("scenario failed: " + reply);
          }
          if (System.currentTimeMillis() > deadline) {
            throw new AssertionError("checkpoint '" + name + "': " + reply.path("diff"));
          }
          // Polls again once the SDK reported something new, or after a
          // short while (mirror and token changes).
          Object lock = driver.lock();
          synchronized (lock) {
            lock.wait(20);
          }
        }
      }
    } finally {
      if (driver != null) {
        driver.close();
      }
      try {
        out.close();
      } catch (Exception e) {
        // already gone
      }
      if (!server.waitFor(DEADLINE_MS, TimeUnit.MILLISECONDS)) {
        server.destroyForcibly();
        server.waitFor();
      }
    }
  }

  static JsonNode next(LinkedBlockingQueue<JsonNode> lines, JsonNode eof) throws Exception {
    JsonNode msg = lines.poll(DEADLINE_MS * 3, TimeUnit.MILLISECONDS);
    if (msg == null) {
      throw new AssertionError("the scripted server went silent");
    }
    if (msg == eof) {
      throw new AssertionError("the scripted server exited");
    }
    return msg;
  }

  static List<Path> scenarios() throws Exception {
    try (Stream<Path> s = Files.list(SCENARIOS)) {
      return s.filter(p -> p.toString().endsWith(".json")).sorted().collect(Collectors.toList());
    }
  }

  @Test
  void suiteIsPresent() throws Exception {
    assertTrue(new File(SERVER).canExecute(), "no scripted server at " + SERVER);
    assertTrue(scenarios().size() >= 16, "scenarios: " + scenarios());
  }

  @TestFactory
  Stream<DynamicTest> everyScenario() throws Exception {
    return scenarios().stream().map(p -> DynamicTest.dynamicTest(
        p.getFileName().toString().replace(".json", ""), () -> runScenario(p)));
  }
}
