"""Informer.Watch with a label selector against a raw watch of the real
kube-apiserver v1.37 with the same selector, while objects leave and
re-enter it:

- the sidecar's stream sends what the server's watch sends, event by event
  (type, name, resourceVersion, object): leaving the selector is a DELETED
  carrying the last matching state stamped with the new resourceVersion,
  re-entering an ADDED, a change while outside nothing;
- resume tokens from every kind of event (an initial ADDED,
  INITIAL_STATE_DONE, a DELETED on leaving, an ADDED on entering, MODIFIED,
  DELETED, BOOKMARK): a stream resumed with one sends exactly what the
  first stream sent after it, without RESET;
- a stream disconnected while objects change and resumed with its last
  token sends exactly what the server's watch sent meanwhile: nothing
  missed, nothing twice.

Each comparison ends at a BOOKMARK at or past the server's last
resourceVersion (the sidecar's stream is then caught up), so an extra
event would be seen. Every wait polls a condition against a deadline.
"""

import http.client
import json
import socket
import threading
import unittest
import urllib.parse

import grpc

import real_sidecar

NS = "filter"
SELECTOR = "app=web"
TIMEOUT = 90.0


class ServerWatch:
    """A raw watch of the API server (as the admin) on NS's ConfigMaps with
    SELECTOR from `rv`, read on a thread: (type, name, rv, object)."""

    def __init__(self, cp, rv):
        self.events = []
        self.lock = threading.Lock()
        host, port = cp.server[len("https://"):].split(":")
        self.conn = http.client.HTTPSConnection(host, int(port),
                                                context=cp._ssl, timeout=600)
        query = urllib.parse.urlencode({
            "watch": "1", "labelSelector": SELECTOR,
            "resourceVersion": rv, "timeoutSeconds": "600"})
        self.conn.request("GET", "/api/v1/namespaces/%s/configmaps?%s" %
                          (NS, query),
                          headers={"Authorization":
                                   "Bearer " + cp.admin_token})
        self.response = self.conn.getresponse()
        assert self.response.status == 200, self.response.read()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            for line in self.response:
                event = json.loads(line)
                obj = event["object"]
                with self.lock:
                    self.events.append(
                        (event["type"], obj["metadata"]["name"],
                         obj["metadata"]["resourceVersion"],
                         real_sidecar.comparable(obj)))
        except (OSError, ValueError, http.client.HTTPException):
            pass

    def snapshot(self):
        with self.lock:
            return list(self.events)

    def close(self):
        # The reader thread holds the response's buffer: shut the socket
        # down under it first, so it wakes and close() does not wait.
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.thread.join(timeout=10)
        self.conn.close()


class SidecarStream:
    """One Informer.Watch stream read on a thread: every event as a dict
    (type name, object name, rv, initial, object, token)."""

    def __init__(self, channel, pb, resume_token=""):
        self.pb = pb
        self.events = []
        self.error = None
        self.lock = threading.Lock()
        call = channel.unary_stream(
            "/informer.v1.Informer/Watch",
            request_serializer=pb.WatchRequest.SerializeToString,
            response_deserializer=pb.WatchResponse.FromString)
        self.stream = call(pb.WatchRequest(
            resource="configmaps", namespace=NS, label_selector=SELECTOR,
            resume_token=resume_token), wait_for_ready=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        names = self.pb.EventType.Name
        try:
            for response in self.stream:
                with self.lock:
                    for e in response.events:
                        obj = (json.loads(e.object.json)
                               if e.HasField("object") else None)
                        self.events.append({
                            "type": names(e.type)[len("EVENT_TYPE_"):],
                            "name": obj["metadata"]["name"] if obj else None,
                            "rv": e.resource_version,
                            "initial": e.initial,
                            "object": (real_sidecar.comparable(obj)
                                       if obj else None),
                            "token": e.resume_token})
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                self.error = e

    def snapshot(self):
        with self.lock:
            return list(self.events)

    def close(self):
        self.stream.cancel()
        self.thread.join(timeout=10)


def without_bookmarks(events):
    return [e for e in events if e["type"] != "BOOKMARK"]


def comparable_event(e):
    """An event without its token (tokens of a replay name the same
    positions but need not be the same bytes). A resumed initial state's
    INITIAL_STATE_DONE carries the informer's resourceVersion at the
    resume, not the snapshot's (the proto leaves a marker's version
    unspecified; the changes that follow carry their own): not compared."""
    out = {k: v for k, v in e.items() if k != "token"}
    if e["type"] == "INITIAL_STATE_DONE":
        out.pop("rv")
    return out


def changes(events):
    return [(e["type"], e["name"], e["rv"], e["object"])
            for e in events
            if e["type"] in ("ADDED", "MODIFIED", "DELETED") and
            not e["initial"]]


def caught_up(stream, count, rv):
    """The stream's events once it holds `count` events other than
    bookmarks followed by a BOOKMARK at `rv` or later; None before."""
    events = stream.snapshot()
    if stream.error is not None:
        raise AssertionError("stream failed: %s" % stream.error)
    seen = 0
    for e in events:
        if e["type"] != "BOOKMARK":
            seen += 1
        elif seen >= count and int(e["rv"]) >= int(rv):
            return events
    return None


class WatchFilterAndResumeOnRealServerTest(real_sidecar.ClusterTest):

    CLUSTER_PREFIX = "rkfr"

    @classmethod
    def populate(cls):
        cls.cluster.view_namespace(NS)
        cls.cluster.create_configmaps(NS, [
            {"metadata": {"name": name, "labels": {"app": app}},
             "data": {"v": "0"}}
            for name, app in (("cm-a", "web"), ("cm-b", "web"),
                              ("cm-c", "web"), ("cm-d", "db"),
                              ("cm-e", "web"))])
        cls.sidecar = cls.cluster.sidecar(
            "sidecar", ["--resources=configmaps", "--namespace=" + NS])

    @staticmethod
    def path(name=""):
        return "/api/v1/namespaces/%s/configmaps%s" % (
            NS, "/" + name if name else "")

    def update(self, name, app=None, value=None):
        cm = self.cp.api("GET", self.path(name))
        if app is not None:
            cm["metadata"]["labels"]["app"] = app
        if value is not None:
            cm["data"]["v"] = value
        return self.cp.api("PUT", self.path(name), cm)

    def create(self, name, app):
        return self.cp.api("POST", self.path(), {
            "metadata": {"name": name, "labels": {"app": app}},
            "data": {"v": "0"}})

    def server_caught_up(self, watch, count):
        return real_sidecar.wait_for(
            lambda: len(watch.snapshot()) >= count and watch.snapshot(),
            "%d events on the server's watch" % count)[:count]

    def wait_caught_up(self, stream, count, rv):
        return real_sidecar.wait_for(lambda: caught_up(stream, count, rv),
                                     "the sidecar's stream at rv %s" % rv,
                                     timeout=TIMEOUT)

    def assert_same_changes(self, sidecar_events, server_events):
        self.assertEqual([e[:3] for e in changes(sidecar_events)],
                         [e[:3] for e in server_events])
        for ours, theirs in zip(changes(sidecar_events), server_events):
            self.assertEqual(ours, theirs)

    def test_filter_leave_enter_and_resume_tokens_match_the_server(self):
        listed = self.cp.api("GET", self.path() + "?labelSelector=" +
                             urllib.parse.quote(SELECTOR))
        first = SidecarStream(self.sidecar.channel, self.pb)
        server = ServerWatch(self.cp, listed["metadata"]["resourceVersion"])
        streams = [first]
        try:
            self.run_phases(listed, first, server, streams)
        finally:
            for s in streams:
                s.close()
            server.close()

    def run_phases(self, listed, first, server, streams):
        # The initial state: what the server lists with the selector.
        initial = real_sidecar.wait_for(
            lambda: [e for e in first.snapshot()
                     if e["type"] == "INITIAL_STATE_DONE"] and
            first.snapshot(), "the initial state")
        added = [e for e in initial if e["initial"]]
        self.assertEqual([(e["name"], e["object"]) for e in added],
                         [(o["metadata"]["name"], real_sidecar.comparable(o))
                          for o in listed["items"]])
        self.assertEqual(without_bookmarks(initial)[len(added)]["type"],
                         "INITIAL_STATE_DONE")

        # Phase 1: leave, change outside, re-enter, modify, delete, create.
        self.update("cm-a", app="db")             # DELETED (left)
        self.update("cm-a", value="changed out")  # nothing
        self.update("cm-a", app="web")            # ADDED (entered)
        self.update("cm-b", value="1")            # MODIFIED
        self.cp.api("DELETE", self.path("cm-c"))  # DELETED
        self.create("cm-f", "web")                # ADDED
        self.create("cm-g", "db")                 # nothing
        self.update("cm-g", app="web")            # ADDED (entered)
        phase1 = self.server_caught_up(server, 6)
        self.assertEqual([e[0] for e in phase1],
                         ["DELETED", "ADDED", "MODIFIED", "DELETED", "ADDED",
                          "ADDED"])
        # The server's DELETED on leaving: the last matching state (label
        # app=web, the value before) with the leaving change's version.
        self.assertEqual(phase1[0][3]["metadata"]["labels"]["app"], "web")
        events = self.wait_caught_up(first, len(added) + 1 + 6, phase1[-1][2])
        self.assert_same_changes(events, phase1)

        # Resume with a token of every kind of event: exactly what the first
        # stream sent after it.
        by_kind = {}
        for i, e in enumerate(events):
            kind = ("initial" if e["initial"] else
                    "left" if (e["type"] == "DELETED" and e["name"] == "cm-a")
                    else "entered" if (e["type"] == "ADDED" and
                                       e["name"] == "cm-a")
                    else e["type"])
            by_kind.setdefault(kind, i)
        self.assertEqual(sorted(by_kind), sorted([
            "initial", "INITIAL_STATE_DONE", "left", "entered", "MODIFIED",
            "DELETED", "ADDED", "BOOKMARK"]))
        resumed = {kind: SidecarStream(self.sidecar.channel, self.pb,
                                       events[i]["token"])
                   for kind, i in by_kind.items()}
        streams.extend(resumed.values())
        for kind, i in by_kind.items():
            expected = without_bookmarks(events[i + 1:])
            got = without_bookmarks(self.wait_caught_up(
                resumed[kind], len(expected), phase1[-1][2]))
            self.assertEqual([comparable_event(e) for e in got],
                             [comparable_event(e) for e in expected],
                             "resumed after " + kind)

        # Phase 2: disconnect, change, resume with the last token.
        last_token = events[-1]["token"]
        first.close()
        self.update("cm-e", app="db")             # DELETED (left)
        self.update("cm-a", value="2")            # MODIFIED
        self.update("cm-e", value="while out")    # nothing
        self.update("cm-e", app="web")            # ADDED (entered)
        self.cp.api("DELETE", self.path("cm-f"))  # DELETED
        self.update("cm-g", app="db")             # DELETED (left)
        phase2 = self.server_caught_up(server, 6 + 5)[6:]
        again = SidecarStream(self.sidecar.channel, self.pb, last_token)
        streams.append(again)
        got = self.wait_caught_up(again, 5, phase2[-1][2])
        self.assertNotIn("RESET", [e["type"] for e in got])
        self.assertNotIn("INITIAL_STATE_DONE", [e["type"] for e in got])
        self.assert_same_changes(got, phase2)
        # And nothing more: the server's watch saw no other event.
        self.assertEqual(len(server.snapshot()), 11)
        self.wait_for_quiet_bookmark(again, phase2[-1][2])

    def wait_for_quiet_bookmark(self, stream, rv):
        """A second BOOKMARK at `rv` after the last change: the stream
        stayed quiet, no late duplicate."""
        def two():
            events = stream.snapshot()
            tail = []
            for e in reversed(events):
                if e["type"] != "BOOKMARK":
                    break
                tail.append(e)
            return len([e for e in tail if int(e["rv"]) >= int(rv)]) >= 2
        real_sidecar.wait_for(two, "two quiet bookmarks", timeout=TIMEOUT)


if __name__ == "__main__":
    unittest.main()
