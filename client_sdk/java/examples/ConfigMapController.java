// A controller on a remote work queue: records an Event for every ConfigMap
// with a given label, retrying failures with back-off.
//
// The sidecar enqueues the key of every matching ConfigMap when it changes;
// the worker looks the object up in a local mirror (a RemoteInformer) and
// records a "Reconciled" Event about it. To show retries, the first attempt
// of every key fails once (disable with --no-fail-first): the worker logs
// the failure (one WARNING) and the sidecar hands the key out again after
// the queue's exponential back-off.
//
// Against a running sidecar (default 127.0.0.1:50051):
//   java -cp 'lib/*' ConfigMapController.java
// Or starting the sidecar in demo mode itself:
//   java -cp 'lib/*' ConfigMapController.java --sidecar PATH/TO/informer_sidecar

import com.fasterxml.jackson.databind.JsonNode;
import dev.informersidecar.client.DemoSidecar;
import dev.informersidecar.client.EventRecorder;
import dev.informersidecar.client.RemoteInformer;
import dev.informersidecar.client.Sidecar;
import dev.informersidecar.client.WorkQueueWorker;
import dev.informersidecar.client.WorkQueues;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

public class ConfigMapController {
  public static void main(String[] argv) throws Exception {
    String target = Sidecar.DEFAULT_TARGET;
    String sidecarBinary = null;
    String selector = "app";
    String queue = "configmap-controller";
    int workers = 2;
    boolean failFirst = true;
    double duration = 0;
    for (int i = 0; i < argv.length; i++) {
      switch (argv[i]) {
        case "--target" -> target = argv[++i];
        case "--sidecar" -> sidecarBinary = argv[++i];
        case "--selector" -> selector = argv[++i];
        case "--queue" -> queue = argv[++i];
        case "--workers" -> workers = Integer.parseInt(argv[++i]);
        case "--no-fail-first" -> failFirst = false;
        case "--duration" -> duration = Double.parseDouble(argv[++i]);
        default -> {
          System.err.println("usage: ConfigMapController [--target HOST:PORT | --sidecar BINARY]"
              + " [--selector SEL] [--queue NAME] [--workers N] [--no-fail-first]"
              + " [--duration SECONDS]");
          System.exit(2);
        }
      }
    }
    DemoSidecar demo = null;
    if (sidecarBinary != null) {
      demo = new DemoSidecar(sidecarBinary).start(Duration.ofSeconds(60));
      target = demo.target();
    }
    CountDownLatch done = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(done::countDown));
    final boolean fail = failFirst;
    Set<String> failedOnce = new HashSet<>();
    Map<String, Integer> failures = new HashMap<>();
    try (RemoteInformer mirror = RemoteInformer.builder("configmaps").target(target)
            .labelSelector(selector).build().start();
        WorkQueues queues = new WorkQueues(target);
        EventRecorder events = new EventRecorder(target)) {
      if (!mirror.waitForSync(Duration.ofSeconds(30))) {
        System.err.println("configmaps not synced after 30s");
        System.exit(1);
      }
      boolean created = queues.createQueue(new WorkQueues.QueueSpec(queue, "configmaps")
          .labelSelector(selector)
          .rateLimit(Duration.ofMillis(200), Duration.ofSeconds(10), null, null));
      System.out.printf("queue '%s' %s%n", queue, created ? "created" : "exists");

      WorkQueueWorker.KeyHandler reconcile = (key, lease) -> {
        JsonNode obj = mirror.getByKey(key);
        if (obj == null) {
          System.out.printf("GONE      %s%n", key);
          return;
        }
        synchronized (failedOnce) {
          if (fail && failedOnce.add(key)) {
            failures.merge(key, 1, Integer::sum);
            // The worker logs it (one WARNING) and reports FAIL.
            throw new IllegalStateException("simulated failure (fail-first), "
                + "the queue retries it after back-off");
          }
        }
        String rv = Sidecar.resourceVersion(obj);
        events.recordEvent(EventRecorder.ObjectRef.of(obj, "ConfigMap", "v1"), "Normal",
            "Reconciled", "configmap-controller saw resourceVersion " + rv);
        Integer failed;
        synchronized (failedOnce) {
          failed = failures.remove(key);
        }
        System.out.printf("RECORDED  %s rv=%s%s%n", key, rv,
            failed == null ? "" : "  (retry, after " + failed + " failure(s))");
      };
      try (WorkQueueWorker worker = WorkQueueWorker.builder(queue, reconcile).target(target)
          .credit(workers).name("configmap-controller").build().start()) {
        if (duration > 0) {
          done.await((long) (duration * 1000), TimeUnit.MILLISECONDS);
        } else {
          done.await();
        }
      }
    } finally {
      if (demo != null) {
        demo.close();
      }
    }
  }
}
