// Prints the adds, updates and deletes of pods matching a label selector.
//
// Against a running sidecar (default 127.0.0.1:50051), with the jar and its
// dependencies in lib/ (see ../README.md):
//   java -cp 'lib/*' PodWatcher.java --selector tier=web
// Or starting the sidecar in demo mode itself:
//   java -cp 'lib/*' PodWatcher.java --sidecar PATH/TO/informer_sidecar
// When the stream to the sidecar breaks (e.g. it restarts) the watcher says
// so once, keeps the pods it has, and says so again when the stream is back.

import com.fasterxml.jackson.databind.JsonNode;
import dev.informersidecar.client.DemoSidecar;
import dev.informersidecar.client.RemoteInformer;
import dev.informersidecar.client.Sidecar;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;
import java.util.stream.Collectors;

public class PodWatcher {
  static String rv(JsonNode o) {
    return Sidecar.resourceVersion(o);
  }

  public static void main(String[] argv) throws Exception {
    String target = Sidecar.DEFAULT_TARGET;
    String sidecarBinary = null;
    String selector = "tier=web";
    String namespace = "";
    double duration = 0;
    for (int i = 0; i < argv.length; i++) {
      switch (argv[i]) {
        case "--target" -> target = argv[++i];
        case "--sidecar" -> sidecarBinary = argv[++i];
        case "--selector" -> selector = argv[++i];
        case "--namespace" -> namespace = argv[++i];
        case "--duration" -> duration = Double.parseDouble(argv[++i]);
        default -> {
          System.err.println("usage: PodWatcher [--target HOST:PORT | --sidecar BINARY]"
              + " [--selector SEL] [--namespace NS] [--duration SECONDS]");
          System.exit(2);
        }
      }
    }
    // Stream errors are reported below (once per outage); the SDK's own
    // WARNING lines about each failed attempt would repeat them.
    Logger.getLogger("dev.informersidecar.client").setLevel(Level.SEVERE);

    DemoSidecar demo = null;
    if (sidecarBinary != null) {
      demo = new DemoSidecar(sidecarBinary).start(Duration.ofSeconds(60));
      target = demo.target();
    }
    CountDownLatch done = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(done::countDown));
    try (RemoteInformer informer = RemoteInformer.builder("pods").target(target)
        .namespace(namespace).labelSelector(selector)
        .onError(e -> {
          if (e.failures() == 1) { // the first failure of an outage
            System.out.printf("LOST     the stream to the sidecar (%s: %s); retrying in the"
                + " background%n", e.code(), e.details());
          }
        })
        .onRecovered(n -> System.out.printf(
            "RESUMED  the stream to the sidecar (after %d failed attempt(s))%n", n))
        .build()) {
      informer.onAdd((obj, initial) -> System.out.printf("ADDED    %-40s rv=%s%s%n",
          Sidecar.objectKey(obj), rv(obj), initial ? "  (initial)" : ""));
      informer.onUpdate((old, obj) -> System.out.printf("UPDATED  %-40s rv=%s->%s%n",
          Sidecar.objectKey(obj), rv(old), rv(obj)));
      informer.onDelete((obj, tombstone) -> System.out.printf("DELETED  %-40s rv=%s%s%n",
          Sidecar.objectKey(obj), rv(obj), tombstone ? "  (tombstone)" : ""));
      informer.start();
      if (!informer.waitForSync(Duration.ofSeconds(30))) {
        System.err.println("not synced after 30s");
        System.exit(1);
      }
      System.out.printf("SYNCED   %d pods; by label app: %s%n", informer.list().size(),
          informer.indexValues("label:app").stream()
              .map(a -> a + "=" + informer.byIndex("label:app", a).size())
              .collect(Collectors.joining(", ")));
      if (duration > 0) {
        done.await((long) (duration * 1000), TimeUnit.MILLISECONDS);
      } else {
        done.await();
      }
    } finally {
      if (demo != null) {
        demo.close();
      }
    }
  }
}
