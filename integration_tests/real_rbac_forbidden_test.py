"""A real RBAC 403 from the real kube-apiserver v1.37: the sidecar runs as
the unprivileged user allowed to list and watch Pods but not ConfigMaps in
its namespace. While forbidden, the sidecar says so everywhere the
operations docs promise:

- stderr: a WARNING naming the informer and the API server's message;
- /metrics: informer_errors_total{resource="configmaps",kind="http_403"};
- gRPC: ListResources' last_error, a Watch on configmaps ending UNAVAILABLE
  "cannot sync: 403 ...", Health NOT_SERVING;
- /readyz: 503 naming configmaps, while pods sync;

and it backs off as operations.md says (800 ms doubling, jitter up to
100%), read from the API server's audit log (what it was asked, when).
Then `kubectl create role` + `kubectl create rolebinding` with the real
kubectl: the same process syncs ConfigMaps without a restart, and its cache
equals the server object by object. Every wait polls a condition against a
deadline.
"""

import datetime
import json
import unittest
import urllib.error
import urllib.request

import grpc

import real_sidecar

NS = "rbac"
USER = real_sidecar.USER
OBJECTS = 12
FAILED_ROUNDS = 4
NOT_SERVING = 2


def parse_time(text):
    return datetime.datetime.strptime(text.rstrip("Z")[:26],
                                      "%Y-%m-%dT%H:%M:%S.%f")


class RbacForbiddenOnRealServerTest(real_sidecar.ClusterTest):

    CLUSTER_PREFIX = "rkrb"
    CLUSTER_AUDIT = True

    @classmethod
    def populate(cls):
        cls.cp.create_namespace(NS)
        cls.cluster.create_configmaps(NS, [
            {"metadata": {"name": "cm-%02d" % i}, "data": {"n": str(i)}}
            for i in range(OBJECTS)])
        cls.kubectl("create", "role", "pod-reader", "-n", NS,
                    "--verb=list,watch", "--resource=pods")
        cls.kubectl("create", "rolebinding", "pod-reader", "-n", NS,
                    "--role=pod-reader", "--user=" + USER)

    @classmethod
    def kubectl(cls, *args):
        return cls.cluster.kubectl(*args)

    def readyz(self):
        url = "http://127.0.0.1:%d/readyz" % self.sidecar.http_port
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def statuses(self):
        call = self.sidecar.channel.unary_unary(
            "/informer.v1.Informer/ListResources",
            request_serializer=self.pb.ListResourcesRequest.SerializeToString,
            response_deserializer=self.pb.ListResourcesResponse.FromString)
        return {r.resource: r for r in
                call(self.pb.ListResourcesRequest(), timeout=30).resources}

    def forbidden_requests(self):
        """The sidecar's ConfigMap requests the server refused with 403:
        (when received, verb), in order."""
        out = []
        with open(self.audit.path) as f:
            for line in f:
                e = json.loads(line)
                if (e.get("stage") == "ResponseComplete" and
                        e["user"].get("username") == USER and
                        (e.get("objectRef") or {}).get("resource") ==
                        "configmaps" and
                        e.get("responseStatus", {}).get("code") == 403):
                    out.append((parse_time(e["requestReceivedTimestamp"]),
                                e["verb"]))
        return out

    def rounds(self, requests):
        """List/watch rounds: a request less than 0.5 s after the previous
        one belongs to its round (a refused WatchList falls back to a LIST
        at once, as client-go does)."""
        starts = []
        for i, (when, _) in enumerate(requests):
            if i == 0 or (when - requests[i - 1][0]).total_seconds() >= 0.5:
                starts.append(when)
        return starts

    def test_forbidden_reported_backed_off_and_healed_by_a_rolebinding(self):
        # It will not be SERVING until ConfigMaps are allowed.
        self.sidecar = self.cluster.sidecar(
            "sidecar", ["--resources=pods,configmaps", "--namespace=" + NS],
            serving=False)
        pid = self.sidecar.process.pid

        real_sidecar.wait_for(
            lambda: len(self.rounds(self.forbidden_requests())) >=
            FAILED_ROUNDS, "%d refused rounds" % FAILED_ROUNDS)
        plain = ('configmaps is forbidden: User "%s" cannot list resource '
                 '"configmaps" in API group "" in the namespace "%s"' %
                 (USER, NS))

        # Backed off: round k waits 0.8 s * 2^(k-1), plus up to 100%.
        starts = self.rounds(self.forbidden_requests())
        gaps = [(b - a).total_seconds() for a, b in zip(starts, starts[1:])]
        for k, gap in enumerate(gaps[:FAILED_ROUNDS - 1]):
            base = 0.8 * 2 ** k
            self.assertGreaterEqual(gap, base * 0.95, gaps)
            self.assertLessEqual(gap, 2 * base + 5.0, gaps)

        # Metrics, readiness, health, gRPC status, a Watch, the log.
        self.assertGreaterEqual(self.sidecar.metric(
            "informer_sidecar_informer_errors_total", resource="configmaps",
            kind="http_403"), FAILED_ROUNDS)
        self.assertEqual(self.sidecar.metric(
            "informer_sidecar_informer_synced", resource="configmaps"), 0)
        real_sidecar.wait_for(
            lambda: self.sidecar.metric("informer_sidecar_informer_synced",
                                        resource="pods") == 1,
            "pods synced")
        code, body = self.readyz()
        self.assertEqual(code, 503, body)
        self.assertIn("configmaps", body)
        self.assertNotIn("pods", body)
        self.assertEqual(self.sidecar.health(), NOT_SERVING)
        status = self.statuses()
        self.assertFalse(status["configmaps"].synced)
        self.assertIn("403", status["configmaps"].last_error)
        self.assertIn(plain, status["configmaps"].last_error)
        self.assertTrue(status["pods"].synced)
        self.assertEqual(status["pods"].last_error, "")
        watch = self.sidecar.channel.unary_stream(
            "/informer.v1.Informer/Watch",
            request_serializer=self.pb.WatchRequest.SerializeToString,
            response_deserializer=self.pb.WatchResponse.FromString)
        with self.assertRaises(grpc.RpcError) as ended:
            for _ in watch(self.pb.WatchRequest(resource="configmaps",
                                                namespace=NS), timeout=60):
                pass
        self.assertEqual(ended.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertIn('the informer of "configmaps" cannot sync: 403',
                      ended.exception.details())
        self.assertIn(plain, ended.exception.details())
        log = self.sidecar.log()
        self.assertRegex(log, r"W\d{8} [^\n]*configmaps[^\n]*403[^\n]*" +
                         r"forbidden")

        # The fix on the server: a Role and a RoleBinding, kubectl's way.
        self.kubectl("create", "role", "cm-reader", "-n", NS,
                     "--verb=list,watch", "--resource=configmaps")
        self.kubectl("create", "rolebinding", "cm-reader", "-n", NS,
                     "--role=cm-reader", "--user=" + USER)
        self.sidecar.wait_serving()
        self.assertEqual(self.sidecar.process.pid, pid)
        self.assertIsNone(self.sidecar.process.poll())
        self.assertEqual(self.readyz(), (200, "ok\n"))
        self.assertEqual(self.sidecar.health(), real_sidecar.SERVING)
        status = self.statuses()
        self.assertTrue(status["configmaps"].synced)
        self.assertEqual(status["configmaps"].object_count, OBJECTS)
        expected = real_sidecar.server_objects(self.cp, "configmaps", NS)
        cached = real_sidecar.grpc_list(self.sidecar.channel, self.pb,
                                        "configmaps", NS)
        self.assert_same_objects(expected, cached, "configmaps")
        self.assertEqual(self.sidecar.metric(
            "informer_sidecar_informer_synced", resource="configmaps"), 1)


if __name__ == "__main__":
    unittest.main()
