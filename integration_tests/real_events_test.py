"""The sidecar's Events service writing core/v1 Events to the real
kube-apiserver v1.37, read back with the real kubectl v1.37.2 and checked
against the API server's audit log (what it was asked):

- a new event is one POST that passes v1.37's validation with every field
  the sidecar sets (source, reportingComponent/Instance, seconds-precision
  timestamps, no eventTime); `kubectl describe` and `kubectl events` show it
  on its Pod; repeats are strategic-merge PATCHes of `count` and
  `lastTimestamp` on the same Event;
- similar events (one reason, distinct messages) are combined after ten,
  and the combined Event is patched on the next one;
- an event about a cluster-scoped object is stored in `default`;
- an Event deleted on the server (TTL, kubectl delete) is created again on
  the next repeat after the PATCH's 404;
- a write the server refuses (404: no such namespace) is logged once and
  not retried.

The sidecar runs as the unprivileged user holding only what deploy/rbac.yaml
grants for events (create, patch), in lazy mode (no informers): the event
writes are its only API requests. Every wait polls a condition against a
deadline.
"""

import json
import os
import unittest

import real_sidecar

NS = "real-events"
USER = real_sidecar.USER
POD_NAME = "checkout-7d4b9c8f5-xz2lq"
COMPONENT = "real-events-test"
COMBINED = "(combined from similar events): "


class EventsOnRealServerTest(real_sidecar.ClusterTest):

    CLUSTER_PREFIX = "rkev"
    CLUSTER_AUDIT = True

    @classmethod
    def populate(cls):
        cls.ev = real_sidecar.generate_messages(cls.tmp, "events")
        cls.grant_event_writes()
        cls.cp.create_namespace(NS)
        cls.pod = cls.cp.api(
            "POST", "/api/v1/namespaces/%s/pods" % NS,
            {"metadata": {"name": "web-0"},
             "spec": {"containers": [{"name": "web",
                                      "image": "example.invalid/x"}]}})
        # The downward API's POD_NAME: reportingInstance and source.host.
        os.environ["POD_NAME"] = POD_NAME
        cls.sidecar = cls.cluster.sidecar(
            "sidecar", ["--event_component=" + COMPONENT])

    @classmethod
    def grant_event_writes(cls):
        """deploy/rbac.yaml's rule for events, and nothing else."""
        rbac = "/apis/rbac.authorization.k8s.io/v1/"
        cls.cp.api("POST", rbac + "clusterroles", {
            "metadata": {"name": "event-writer"},
            "rules": [{"apiGroups": [""], "resources": ["events"],
                       "verbs": ["create", "patch"]}]})
        cls.cp.api("POST", rbac + "clusterrolebindings", {
            "metadata": {"name": "event-writer"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole", "name": "event-writer"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io",
                          "kind": "User", "name": USER}]})

    # ---- helpers ---------------------------------------------------------

    def kubectl(self, *args):
        return self.cluster.kubectl(*args)

    def record(self, name, reason, message, kind="Pod", namespace=NS,
               uid=None, field_path=""):
        call = self.sidecar.channel.unary_unary(
            "/informer.v1.Events/Record",
            request_serializer=self.ev.RecordEventRequest.SerializeToString,
            response_deserializer=self.ev.RecordEventResponse.FromString)
        ref = self.ev.ObjectReference(
            kind=kind, namespace=namespace, name=name,
            uid=uid or "uid-" + name, api_version="v1",
            field_path=field_path)
        call(self.ev.RecordEventRequest(object=ref, type="Warning",
                                        reason=reason, message=message),
             timeout=30)

    def server_events(self, name, namespace=NS):
        """The Events the API server stores about object `name`, through
        its field selector."""
        listed = self.cp.api(
            "GET", "/api/v1/namespaces/%s/events?fieldSelector="
            "involvedObject.name%%3D%s" % (namespace, name))
        return listed["items"]

    def wait_events(self, name, condition, what, namespace=NS):
        def check():
            items = self.server_events(name, namespace)
            return (items,) if condition(items) else None
        return real_sidecar.wait_for(check, what)[0]

    def kubectl_events(self, name, namespace=NS):
        doc = json.loads(self.kubectl(
            "get", "events", "-n", namespace, "--field-selector",
            "involvedObject.name=" + name, "-o", "json"))
        return doc["items"]

    def writes(self, since):
        return [(r["verb"], r["code"])
                for r in self.audit.requests(USER, "events", since)]

    # ---- tests -----------------------------------------------------------

    def test_a_new_event_is_created_then_repeats_patch_its_count(self):
        since = self.audit.offset()
        uid = self.pod["metadata"]["uid"]
        self.record("web-0", "BackOff", "Back-off restarting failed "
                    "container", uid=uid, field_path="spec.containers{web}")
        self.wait_events("web-0", lambda items: len(items) == 1,
                         "the event about web-0")
        [e] = self.kubectl_events("web-0")
        self.assertEqual(e["involvedObject"], {
            "kind": "Pod", "namespace": NS, "name": "web-0", "uid": uid,
            "apiVersion": "v1", "fieldPath": "spec.containers{web}"})
        self.assertEqual(e["metadata"]["namespace"], NS)
        self.assertTrue(e["metadata"]["name"].startswith("web-0."), e)
        self.assertEqual((e["type"], e["reason"], e["message"]),
                         ("Warning", "BackOff",
                          "Back-off restarting failed container"))
        self.assertEqual(e["source"], {"component": COMPONENT,
                                       "host": POD_NAME})
        self.assertEqual(e["reportingComponent"], COMPONENT)
        self.assertEqual(e["reportingInstance"], POD_NAME)
        self.assertEqual(e["count"], 1)
        # core/v1 Events as client-go's legacy recorder writes them: the
        # seconds-precision timestamps, no eventTime (which would make
        # v1.37 require action and a qualified reportingComponent).
        self.assertIsNone(e.get("eventTime"), e)
        self.assertRegex(e["firstTimestamp"],
                         r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual(e["firstTimestamp"], e["lastTimestamp"])
        self.assertEqual(self.writes(since), [("create", 201)])
        # The real kubectl shows it on the Pod (matched by uid).
        described = self.kubectl("describe", "pod", "web-0", "-n", NS)
        self.assertRegex(described, r"Warning\s+BackOff\s+.*Back-off "
                         r"restarting failed container")
        self.assertIn("Back-off restarting failed container",
                      self.kubectl("events", "-n", NS, "--for",
                                   "pod/web-0"))

        for _ in range(4):
            self.record("web-0", "BackOff", "Back-off restarting failed "
                        "container", uid=uid,
                        field_path="spec.containers{web}")
        [after] = self.wait_events(
            "web-0", lambda items: len(items) == 1 and
            items[0]["count"] == 5, "count 5 on web-0's event")
        self.assertEqual(after["metadata"]["name"], e["metadata"]["name"])
        self.assertEqual(after["firstTimestamp"], e["firstTimestamp"])
        self.assertGreaterEqual(after["lastTimestamp"],
                                after["firstTimestamp"])
        self.assertEqual(after["message"], e["message"])
        self.assertEqual(self.writes(since),
                         [("create", 201)] + [("patch", 200)] * 4)
        [read] = self.kubectl_events("web-0")
        self.assertEqual(read["count"], 5)

    def test_b_similar_events_are_combined_and_the_combination_patched(self):
        since = self.audit.offset()
        for i in range(11):
            self.record("web-1", "Unhealthy", "probe failed: attempt %d" % i)
        items = self.wait_events(
            "web-1", lambda items: any(
                e["message"].startswith(COMBINED) and e["count"] == 2
                for e in items), "the combined event patched to count 2")
        combined = [e for e in items if e["message"].startswith(COMBINED)]
        single = sorted(e["message"] for e in items
                        if not e["message"].startswith(COMBINED))
        # Nine distinct messages stand alone; the tenth starts the combined
        # Event, the eleventh patches it (count 2, its own message).
        self.assertEqual(single, sorted("probe failed: attempt %d" % i
                                        for i in range(9)))
        self.assertEqual(len(combined), 1, items)
        self.assertEqual(combined[0]["message"],
                         COMBINED + "probe failed: attempt 10")
        self.assertEqual(self.writes(since),
                         [("create", 201)] * 10 + [("patch", 200)])
        self.assertEqual(len(self.kubectl_events("web-1")), 10)

    def test_c_a_cluster_scoped_object_gets_its_event_in_default(self):
        self.record("node-a", "NodeNotReady", "kubelet stopped posting",
                    kind="Node", namespace="")
        [e] = self.wait_events("node-a", lambda items: len(items) == 1,
                               "node-a's event in default",
                               namespace="default")
        self.assertEqual(e["metadata"]["namespace"], "default")
        self.assertNotIn("namespace", e["involvedObject"])
        self.assertEqual(e["involvedObject"]["kind"], "Node")
        self.assertEqual(len(self.kubectl_events("node-a", "default")), 1)

    def test_d_an_event_deleted_on_the_server_is_created_again(self):
        self.record("web-2", "Pulled", "image pulled")
        [e] = self.wait_events("web-2", lambda items: len(items) == 1,
                               "web-2's event")
        self.kubectl("delete", "event", "-n", NS, e["metadata"]["name"])
        self.wait_events("web-2", lambda items: not items,
                         "web-2's event deleted")
        since = self.audit.offset()
        self.record("web-2", "Pulled", "image pulled")
        [again] = self.wait_events("web-2", lambda items: len(items) == 1,
                                   "web-2's event created again")
        self.assertEqual(again["metadata"]["name"], e["metadata"]["name"])
        self.assertEqual(again["count"], 2)
        self.assertEqual(self.writes(since), [("patch", 404),
                                              ("create", 201)])

    def test_e_a_refused_write_is_logged_once_and_not_retried(self):
        since = self.audit.offset()
        self.record("web-3", "Failed", "into a namespace that is not there",
                    namespace="no-such-namespace")
        # The sink writes in order: once the next event lands, the refused
        # one had its only try.
        self.record("web-4", "Marker", "after the refused one")
        self.wait_events("web-4", lambda items: len(items) == 1,
                         "the marker event")
        self.assertEqual(self.writes(since), [("create", 404),
                                              ("create", 201)])
        log = self.sidecar.log()
        self.assertIn("rejected, not retrying", log)
        self.assertRegex(log, r"rejected, not retrying: .*404.*"
                         r"no-such-namespace")


if __name__ == "__main__":
    unittest.main()
