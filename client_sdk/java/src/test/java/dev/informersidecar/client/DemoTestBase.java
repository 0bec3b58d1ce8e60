package dev.informersidecar.client;

import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** One demo sidecar ($INFORMER_SIDECAR_BIN) shared by a test class. */
abstract class DemoTestBase {
  static final String BINARY = System.getenv().getOrDefault("INFORMER_SIDECAR_BIN",
      "../../bazel-bin/server/informer_sidecar");
  /** The bound of every wait. */
  static final Duration TIMEOUT = Duration.ofSeconds(60);

  static DemoSidecar sidecar;

  @BeforeAll
  static void startSidecar() throws Exception {
    sidecar = new DemoSidecar(BINARY).start(TIMEOUT);
  }

  @AfterAll
  static void stopSidecar() {
    if (sidecar != null) {
      sidecar.close();
    }
  }

  interface Check {
    boolean ok() throws Exception;
  }

  /** Polls {@code check} every 20 ms until it holds; fails after TIMEOUT. */
  static void eventually(String what, Check check) throws Exception {
    eventually(what, TIMEOUT, check);
  }

  /**
   * Polls {@code check} every 20 ms until it holds; fails after
   * {@code timeout}. For state seen only from outside (another process's);
   * state a test owns is better awaited on its monitor.
   */
  static void eventually(String what, Duration timeout, Check check) throws Exception {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!check.ok()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("never: " + what);
      }
      Thread.sleep(20); // polls a condition, bounded by the deadline
    }
  }
}
