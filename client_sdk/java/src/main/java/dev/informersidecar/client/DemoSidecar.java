package dev.informersidecar.client;

import io.grpc.ConnectivityState;
import io.grpc.ManagedChannel;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * An {@code informer_sidecar --demo} child process on free loopback ports
 * (examples, tests). The demo cluster is the sidecar's in-process API server
 * emulator, seeded with namespaces, pods, deployments and configmaps that
 * change every second. The ports come from the sidecar's --ports_file, so
 * nothing races for a port. Not thread-safe.
 */
public final class DemoSidecar implements AutoCloseable {
  private final String binary;
  private final List<String> extraArgs;
  private final Path dir;
  private Process process;
  private String target = "";
  // 127.0.0.1:0 until the first start; then that port, kept by restart().
  private String grpcListen = "127.0.0.1:0";

  public DemoSidecar(String binary, String... extraArgs) throws IOException {
    if (binary == null || !new File(binary).canExecute()) {
      throw new IllegalArgumentException("binary: no executable at " + binary);
    }
    this.binary = binary;
    this.extraArgs = List.of(extraArgs);
    this.dir = Files.createTempDirectory("isd-java-");
  }

  /** "127.0.0.1:PORT" once started. */
  public String target() {
    return target;
  }

  public Path logPath() {
    return dir.resolve("sidecar.log");
  }

  /** Starts the child; returns once its gRPC port is connectable. */
  public DemoSidecar start(Duration timeout) throws IOException, InterruptedException {
    if (process != null) {
      throw new IllegalStateException("already running");
    }
    Path ports = dir.resolve("ports");
    Files.deleteIfExists(ports);
    List<String> args = new ArrayList<>(List.of(binary, "--demo",
        "--grpc_listen=" + grpcListen, "--http_listen=127.0.0.1:0",
        "--ports_file=" + ports, "--print_events=false"));
    args.addAll(extraArgs);
    process = new ProcessBuilder(args).redirectErrorStream(true)
        .redirectOutput(ProcessBuilder.Redirect.appendTo(logPath().toFile()))
        .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null"))).start();
    long deadline = System.nanoTime() + timeout.toNanos();
    // The sidecar writes the file (atomically, by rename) once bound.
    while (!Files.exists(ports)) {
      if (!process.isAlive()) {
        throw new IOException("sidecar exited (" + process.exitValue() + "); log: " + logPath());
      }
      if (System.nanoTime() > deadline) {
        close();
        throw new IOException("sidecar wrote no ports file; log: " + logPath());
      }
      process.waitFor(10, TimeUnit.MILLISECONDS);
    }
    Map<String, String> kv = new HashMap<>();
    for (String line : Files.readAllLines(ports)) {
      String[] p = line.trim().split("=", 2);
      if (p.length == 2) {
        kv.put(p[0], p[1]);
      }
    }
    target = "127.0.0.1:" + kv.get("grpc");
    grpcListen = target;
    ManagedChannel ch = Sidecar.openChannel(target);
    try {
      while (ch.getState(true) != ConnectivityState.READY) {
        if (System.nanoTime() > deadline) {
          throw new IOException("sidecar not serving on " + target + "; log: " + logPath());
        }
        ch.resetConnectBackoff();
        process.waitFor(10, TimeUnit.MILLISECONDS);
      }
    } finally {
      ch.shutdownNow();
    }
    return this;
  }

  /** SIGTERM, then SIGKILL after 30 s; waits for the exit. */
  public void stop() throws InterruptedException {
    if (process == null) {
      return;
    }
    process.destroy();
    if (!process.waitFor(30, TimeUnit.SECONDS)) {
      process.destroyForcibly();
      process.waitFor();
    }
    process = null;
  }

  /**
   * Stops the child and starts a new one on the same gRPC port: a new run of
   * the sidecar, whose Watch answers the old run's resume tokens with RESET.
   */
  public void restart(Duration timeout) throws IOException, InterruptedException {
    stop();
    start(timeout);
  }

  /** Stops the child; the temp directory (log) stays for inspection. */
  @Override
  public void close() {
    try {
      stop();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
