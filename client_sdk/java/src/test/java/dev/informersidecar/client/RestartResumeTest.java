package dev.informersidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.grpc.ConnectivityState;
import io.grpc.ManagedChannel;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * RemoteInformer's mirror across restarts of the real sidecar binary (with
 * --cache_dir) in front of the API server emulator ($INFORMER_EMULATOR_BIN,
 * real HTTP between them): on a fixed Unix socket the informer reconnects to
 * the restarted sidecar and resumes with its last token. Orderly restarts
 * under churn give no RESET, no missed and no repeated event, also when the
 * catching up is a relist (the API server's window passed); a token older
 * than the persisted history, or one a SIGKILLed run issued after its last
 * snapshot, gets RESET and the mirror converges all the same. Every wait
 * is on a condition with a deadline: the test's own state on its monitor,
 * the sidecar process's polled with DemoTestBase's helper.
 */
class RestartResumeTest {
  static final String SIDECAR = System.getenv().getOrDefault("INFORMER_SIDECAR_BIN",
      "../../bazel-bin/server/informer_sidecar");
  static final String EMULATOR = System.getenv().getOrDefault("INFORMER_EMULATOR_BIN",
      "../../bazel-bin/emulator/kube_emulator");
  static final int OBJECTS = 300;
  /** The bound of every wait: only reached when the test fails. */
  static final Duration TIMEOUT = Duration.ofSeconds(90);

  private final HttpClient http = HttpClient.newHttpClient();
  private final List<RemoteInformer> informers = new ArrayList<>();
  private Path dir;
  private Process emulator;
  private int port;
  private Path kubeconfig;
  private Process sidecar;
  private int httpPort;

  /**
   * Checks the handlers' story: an add only of a key not held, an update or
   * delete only of one held, every update newer than what was held (a
   * repeated event would go backwards or stand still). Every handler call
   * notifies its monitor, so that a test can await the count.
   */
  static final class Story {
    final Map<String, Long> held = new HashMap<>();
    final List<String> errors = new ArrayList<>();
    long events;

    Story(RemoteInformer inf) {
      inf.onAdd(this::add).onUpdate((old, o) -> update(o)).onDelete((o, t) -> delete(o));
    }

    private synchronized void add(JsonNode o, boolean initial) {
      String k = Sidecar.objectKey(o);
      if (held.put(k, rv(o)) != null) {
        errors.add("add of held " + k);
      }
      events++;
      notifyAll();
    }

    private synchronized void update(JsonNode o) {
      String k = Sidecar.objectKey(o);
      Long had = held.put(k, rv(o));
      if (had == null) {
        errors.add("update of absent " + k);
      } else if (rv(o) <= had) {
        errors.add("update of " + k + " to " + rv(o) + " over " + had);
      }
      events++;
      notifyAll();
    }

    private synchronized void delete(JsonNode o) {
      String k = Sidecar.objectKey(o);
      if (held.remove(k) == null) {
        errors.add("delete of absent " + k);
      }
      events++;
      notifyAll();
    }

    synchronized long events() {
      return events;
    }

    /** Waits until the handlers were called {@code n} more times. */
    synchronized void awaitMore(long n) throws InterruptedException {
      long until = events + n;
      assertTrue(StreamThread.awaitLocked(this, () -> events >= until, TIMEOUT),
          () -> events + " events, " + until + " awaited");
    }

    synchronized List<String> errors() {
      return new ArrayList<>(errors);
    }

    static long rv(JsonNode o) {
      return Long.parseLong(Sidecar.resourceVersion(o));
    }
  }

  /**
   * Patches the seeded ConfigMaps, and creates and deletes others, until
   * stopped.
   */
  final class Churn implements AutoCloseable {
    /** Rounds of changes made; guarded by the Churn's monitor. */
    private long done;
    private final AtomicBoolean stop = new AtomicBoolean();
    private final Thread thread = new Thread(this::run, "churn");
    private volatile Exception failure;

    Churn start() {
      thread.start();
      return this;
    }

    synchronized long done() {
      return done;
    }

    /** Waits until {@code n} more rounds of changes were made. */
    synchronized void awaitMore(long n) throws InterruptedException {
      long until = done + n;
      assertTrue(StreamThread.awaitLocked(this, () -> done >= until, TIMEOUT),
          () -> done + " rounds, " + until + " awaited");
    }

    private void run() {
      try {
        for (long n = 0; !stop.get(); n++) {
          patch(String.format("cm-%06d", (n * 37) % OBJECTS), "{\"churn\":\"" + n + "\"}");
          if (n % 5 == 0) {
            send("POST", "/api/v1/namespaces/benchcms/configmaps",
                "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"churn-"
                    + n + "\"}}", "application/json");
            if (n >= 15) {
              send("DELETE", "/api/v1/namespaces/benchcms/configmaps/churn-" + (n - 15), null,
                  null);
            }
          }
          synchronized (this) {
            done = n + 1;
            notifyAll();
          }
          // Paces the load (about 200 changes a second, not a wait for a
          // condition): a faster churn outruns the 10000 events the history
          // keeps within a run, and a mirror's token inside a coalesced
          // batch (the position before it) may then fall out of it: a
          // RESET, which is right, but not what this churn means to test.
          Thread.sleep(5);
        }
      } catch (Exception e) {
        failure = e;
      }
    }

    @Override
    public void close() throws Exception {
      stop.set(true);
      thread.join();
      if (failure != null) {
        throw failure;
      }
    }
  }

  @BeforeEach
  void startEmulator() throws Exception {
    // A Unix socket path must stay short: a directory under /tmp.
    dir = Files.createTempDirectory(Path.of("/tmp"), "rrj");
    assertTrue(new File(EMULATOR).canExecute(), "no emulator at " + EMULATOR
        + " (bazel build //emulator:kube_emulator, or set INFORMER_EMULATOR_BIN)");
    emulator = new ProcessBuilder(EMULATOR, "--port=0", "--seed_configmaps=" + OBJECTS)
        .redirectError(ProcessBuilder.Redirect.DISCARD)
        .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null"))).start();
    // It prints its port once serving.
    BufferedReader out = new BufferedReader(
        new InputStreamReader(emulator.getInputStream(), StandardCharsets.UTF_8));
    port = Integer.parseInt(out.readLine().trim());
    // A real cluster has it; the sidecar tells clusters apart by its uid.
    int status = send("POST", "/api/v1/namespaces",
        "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"kube-system\"}}",
        "application/json").statusCode();
    assertTrue(status == 201 || status == 409, String.valueOf(status));
    kubeconfig = dir.resolve("kubeconfig");
    Files.writeString(kubeconfig, "apiVersion: v1\nkind: Config\ncurrent-context: t\n"
        + "clusters:\n- name: t\n  cluster:\n    server: http://127.0.0.1:" + port + "\n"
        + "contexts:\n- name: t\n  context:\n    cluster: t\n    user: t\n"
        + "users:\n- name: t\n  user: {}\n");
  }

  @AfterEach
  void stopAll() throws Exception {
    for (RemoteInformer inf : informers) {
      inf.close();
    }
    terminate();
    emulator.destroy();
    if (!emulator.waitFor(30, TimeUnit.SECONDS)) {
      emulator.destroyForcibly().waitFor();
    }
    try (Stream<Path> files = Files.walk(dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }

  // ----- the emulator over HTTP -----

  HttpResponse<String> send(String method, String path, String body, String type)
      throws IOException, InterruptedException {
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
        .timeout(Duration.ofSeconds(30));
    if (body == null) {
      b.method(method, HttpRequest.BodyPublishers.noBody());
    } else {
      b.header("Content-Type", type).method(method, HttpRequest.BodyPublishers.ofString(body));
    }
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  HttpResponse<String> patch(String name, String data) throws IOException, InterruptedException {
    return send("PATCH", "/api/v1/namespaces/benchcms/configmaps/" + name,
        "{\"data\":" + data + "}", "application/merge-patch+json");
  }

  /** The API server's objects: "namespace/name" -> resourceVersion. */
  Map<String, String> emulatorState() throws IOException, InterruptedException {
    HttpResponse<String> r = send("GET", "/_emulator/state?resource=configmaps", null, null);
    assertEquals(200, r.statusCode(), r.body());
    Map<String, String> out = new TreeMap<>();
    for (JsonNode o : Sidecar.JSON.readTree(r.body()).path("objects")) {
      out.put(o.path("key").asText(), o.path("resourceVersion").asText());
    }
    return out;
  }

  // ----- the sidecar: fixed socket, one cache directory -----

  String target() {
    return "unix:" + dir.resolve("s.sock");
  }

  /** Starts a run logging to {@code log}; returns once it serves gRPC. */
  void start(String log, String... extra) throws Exception {
    Path ports = dir.resolve("ports");
    Files.deleteIfExists(ports);
    List<String> args = new ArrayList<>(List.of(SIDECAR, "--kubeconfig=" + kubeconfig,
        "--resources=configmaps", "--grpc_listen=" + target(), "--http_listen=127.0.0.1:0",
        "--ports_file=" + ports, "--print_events=false", "--cache_dir=" + dir.resolve("cache"),
        "--cache_snapshot_interval=0"));
    args.addAll(List.of(extra));
    sidecar = new ProcessBuilder(args).redirectErrorStream(true)
        .redirectOutput(dir.resolve(log).toFile())
        .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null"))).start();
    // The sidecar writes the file (atomically, by rename) once bound.
    // Another process's state: polled, with the shared helper.
    DemoTestBase.eventually(log + ": ports file", TIMEOUT, () -> {
      assertTrue(sidecar.isAlive(), () -> "sidecar exited: " + log(log));
      return Files.exists(ports);
    });
    for (String line : Files.readAllLines(ports)) {
      if (line.startsWith("http=")) {
        httpPort = Integer.parseInt(line.substring("http=".length()).trim());
      }
    }
    ManagedChannel ch = Sidecar.openChannel(target());
    try {
      DemoTestBase.eventually(log + ": serving gRPC", TIMEOUT, () -> {
        ch.resetConnectBackoff();
        return ch.getState(true) == ConnectivityState.READY;
      });
    } finally {
      ch.shutdownNow();
    }
  }

  /** SIGTERM (the snapshot, with the history, is written at shutdown). */
  int terminate() throws InterruptedException {
    if (sidecar == null) {
      return 0;
    }
    sidecar.destroy();
    if (!sidecar.waitFor(TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
      sidecar.destroyForcibly().waitFor();
    }
    int code = sidecar.exitValue();
    sidecar = null;
    return code;
  }

  /** SIGKILL: no snapshot of this run. */
  void kill() throws InterruptedException {
    sidecar.destroyForcibly().waitFor();
    sidecar = null;
  }

  String log(String name) {
    try {
      return Files.readString(dir.resolve(name));
    } catch (IOException e) {
      return e.toString();
    }
  }

  /** The sum of a metric's samples on the sidecar's /metrics. */
  double metric(String name) throws IOException, InterruptedException {
    String body = http.send(HttpRequest.newBuilder(
        URI.create("http://127.0.0.1:" + httpPort + "/metrics")).build(),
        HttpResponse.BodyHandlers.ofString()).body();
    double sum = 0;
    for (String line : body.split("\n")) {
      if (line.startsWith(name + " ") || line.startsWith(name + "{")) {
        sum += Double.parseDouble(line.substring(line.lastIndexOf(' ') + 1));
      }
    }
    return sum;
  }

  // ----- the mirror -----

  RemoteInformer newInformer(String resumeToken) {
    RemoteInformer inf = RemoteInformer.builder("configmaps").target(target())
        .resumeToken(resumeToken).backoff(Duration.ofMillis(50), Duration.ofSeconds(1)).build();
    informers.add(inf);
    return inf;
  }

  /** Waits until the mirror equals the emulator's objects (keys and
   * resourceVersions); the churn must have stopped. */
  void expectConverged(RemoteInformer inf) throws Exception {
    Map<String, String> want = emulatorState();
    boolean equal = inf.waitFor(i -> {
      Map<String, String> got = new TreeMap<>();
      for (JsonNode o : i.list()) {
        got.put(Sidecar.objectKey(o), Sidecar.resourceVersion(o));
      }
      return got.equals(want);
    }, TIMEOUT);
    assertTrue(equal, "mirror holds " + inf.list().size() + " objects, the API server "
        + want.size());
  }


  // ----- the tests -----

  @Test
  void keepsTheMirrorAcrossTwoRestartsUnderChurnWithoutReset() throws Exception {
    start("run0.log");
    RemoteInformer inf = newInformer("");
    Story story = new Story(inf);
    inf.start();
    assertTrue(inf.waitForSync(TIMEOUT), log("run0.log"));
    Churn churn = new Churn();
    long began = System.nanoTime();
    try (Churn c = churn.start()) {
      story.awaitMore(30);
      for (int run = 1; run <= 2; run++) {
        assertEquals(0, terminate());
        // Changes while no sidecar runs reach the mirror as ordinary events
        // after the restart (the informer catches up from the snapshot).
        churn.awaitMore(20);
        start("run" + run + ".log");
        story.awaitMore(30);
        assertTrue(log("run" + run + ".log").contains("Watch history loaded"),
            log("run" + run + ".log"));
      }
    }
    System.out.printf("churn: %d rounds (1.4 changes each) in %.1f s%n", churn.done(),
        (System.nanoTime() - began) / 1e9);
    expectConverged(inf);
    assertEquals(0, inf.resets(), "after " + churn.done() + " changes");
    assertTrue(inf.reconnects() >= 2, String.valueOf(inf.reconnects()));
    assertEquals(List.of(), story.errors());
  }

  /**
   * Outside the API server's watch window (it restarted while the sidecar was
   * down): the informer relists once, diffed against the snapshot, and those
   * differences continue the history like any event: still no RESET.
   */
  @Test
  void continuesTheHistoryWithARelistAfterTheRestart() throws Exception {
    start("a.log");
    RemoteInformer inf = newInformer("");
    Story story = new Story(inf);
    inf.start();
    assertTrue(inf.waitForSync(TIMEOUT), log("a.log"));
    long initial = story.events();
    assertEquals(0, terminate());
    for (int i : new int[] {4, 40, 140}) {
      HttpResponse<String> r = patch(String.format("cm-%06d", i), "{\"while\":\"down\"}");
      assertEquals(200, r.statusCode(), r.body());
    }
    HttpResponse<String> del =
        send("DELETE", "/api/v1/namespaces/benchcms/configmaps/cm-000009", null, null);
    assertEquals(200, del.statusCode(), del.body());
    // The watch from the snapshot's resourceVersion now gets 410.
    HttpResponse<String> restart =
        send("POST", "/_emulator/restart?resource=configmaps", "", "application/json");
    assertEquals(200, restart.statusCode(), restart.body());

    start("b.log");
    expectConverged(inf);
    assertTrue(log("b.log").contains("Watch history loaded"), log("b.log"));
    // The premise: the catching up was one relist.
    assertEquals(1.0, metric("informer_sidecar_informer_lists_total"), log("b.log"));
    // The differences arrived as events: three updates and a delete.
    assertEquals("down", inf.getByKey("benchcms/cm-000040").path("data").path("while").asText());
    assertNull(inf.getByKey("benchcms/cm-000009"));
    synchronized (story) {
      assertTrue(StreamThread.awaitLocked(story, () -> story.events >= initial + 4, TIMEOUT),
          () -> "the handlers saw " + (story.events - initial) + " changes, not 4");
      assertEquals(initial + 4, story.events);
    }
    assertEquals(0, inf.resets());
    assertEquals(List.of(), story.errors());
  }

  @Test
  void resetsTokensOutsideThePersistedHistoryAndConverges() throws Exception {
    String history = "--watch_history=50";
    start("a.log", history);
    RemoteInformer first = newInformer("");
    Story firstStory = new Story(first);
    first.start();
    assertTrue(first.waitForSync(TIMEOUT), log("a.log"));
    String syncedToken = first.resumeToken();
    try (Churn c = new Churn().start()) {
      // Past the 50 events the history keeps.
      firstStory.awaitMore(120);
    }
    expectConverged(first);
    String lastToken = first.resumeToken();
    first.close();
    assertEquals(0, terminate());

    start("b.log", history);
    // Older than the persisted history: RESET, then the whole state.
    RemoteInformer old = newInformer(syncedToken);
    old.start();
    assertTrue(old.waitForSync(TIMEOUT));
    assertEquals(1, old.resets());
    expectConverged(old);
    old.close();
    // The last position before the restart: resumed; the next event is the
    // next change.
    RemoteInformer last = newInformer(lastToken);
    List<String> calls = new ArrayList<>();
    last.onAdd((o, initial) -> {
      synchronized (calls) {
        calls.add("add " + Sidecar.objectKey(o));
        calls.notifyAll();
      }
    }).onUpdate((o, n) -> {
      synchronized (calls) {
        calls.add("update " + Sidecar.objectKey(n));
        calls.notifyAll();
      }
    });
    last.start();
    HttpResponse<String> r = patch("cm-000001", "{\"after\":\"restart\"}");
    assertEquals(200, r.statusCode(), r.body());
    // Resumed into an empty mirror: the change is its first object, added.
    synchronized (calls) {
      assertTrue(StreamThread.awaitLocked(calls, () -> !calls.isEmpty(), TIMEOUT),
          "the change after the restart never came");
      assertEquals(List.of("add benchcms/cm-000001"), calls);
    }
    assertEquals(0, last.resets());
    assertFalse(last.hasSynced(), "a resumed stream has no initial state");
    last.close();

    // A run that crashed: b issued positions past a's snapshot and was
    // killed before writing its own; c starts from a's snapshot, and a
    // mirror that followed b gets RESET, then converges.
    RemoteInformer second = newInformer("");
    Story secondStory = new Story(second);
    second.start();
    assertTrue(second.waitForSync(TIMEOUT));
    try (Churn c = new Churn().start()) {
      secondStory.awaitMore(30);
    }
    expectConverged(second);
    kill();
    start("c.log", history);
    // Re-evaluated at every change of the mirror: the RESET's
    // reconciliation and its INITIAL_STATE_DONE follow the count.
    assertTrue(second.waitFor(i -> i.resets() >= 1, TIMEOUT), () -> "no RESET: " + log("c.log"));
    expectConverged(second);
    assertEquals(1, second.resets());
    assertEquals(List.of(), secondStory.errors());
  }
}
