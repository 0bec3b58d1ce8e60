package dev.informersidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A RemoteInformer across a restart of the real sidecar on the same port:
 * the outage is reported, the new run answers the old token with RESET, the
 * mirror is reconciled (handlers see only differences: the Recorder fails a
 * duplicate add) and the recovery is reported once.
 */
class RestartTest extends DemoTestBase {
  @Test
  void reconcilesAfterASidecarRestart() throws Exception {
    RemoteInformerDemoTest.Recorder rec = new RemoteInformerDemoTest.Recorder();
    List<StreamError> errors = new ArrayList<>();
    List<Integer> recoveries = new ArrayList<>();
    try (RemoteInformer inf = RemoteInformer.builder("pods").target(sidecar.target())
        .backoff(Duration.ofMillis(50), Duration.ofMillis(500))
        .onError(e -> {
          synchronized (errors) {
            errors.add(e);
          }
        })
        .onRecovered(n -> {
          synchronized (recoveries) {
            recoveries.add(n);
          }
        }).build()) {
      rec.attach(inf);
      inf.start();
      assertTrue(inf.waitForSync(TIMEOUT));
      String before = inf.resumeToken();
      sidecar.restart(TIMEOUT);
      eventually("RESET and a recovery", () -> {
        synchronized (recoveries) {
          return inf.resets() >= 1 && !recoveries.isEmpty();
        }
      });
      try (InformerClient client = new InformerClient(sidecar.target())) {
        eventually("mirror == the new run's cache", () -> {
          try {
            return RemoteInformerDemoTest.rvs(client.list("pods", null, null))
                .equals(RemoteInformerDemoTest.rvs(inf.list()));
          } catch (io.grpc.StatusRuntimeException e) {
            return false; // the new run not synced yet
          }
        });
      }
      assertTrue(!before.equals(inf.resumeToken()));
      synchronized (errors) {
        assertTrue(!errors.isEmpty());
        assertTrue(errors.stream().noneMatch(StreamError::isFinal), errors.toString());
      }
      synchronized (recoveries) {
        assertEquals(1, recoveries.size(), recoveries.toString());
      }
    }
    synchronized (rec) {
      assertEquals(List.of(), rec.errors);
    }
  }
}
