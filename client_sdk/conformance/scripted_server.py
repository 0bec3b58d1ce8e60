"""Plays one conformance scenario as a scripted informer.v1 gRPC server.

Usage: scripted_server SCENARIO.json

Serves informer.v1.Informer/Watch and informer.v1.WorkQueue/Lease on
127.0.0.1, port 0 (or the port the sidecar "restarts" on), and plays the
scenario's steps in order (see README.md for the format). It talks to the
runner that drives an SDK over its stdin and stdout, one JSON object per
line:

  server -> runner  {"listening": PORT, "scenario": NAME, "client": {...}}
                    {"checkpoint": NAME}    then answers every "observe"
                    {"match": true} | {"match": false, "diff": "..."}
                    {"release": KEY, "after_expired": ID}  (work queues)
                    {"done": true, "ok": true | false, "error": "..."}
  runner -> server  {"observe": {...}}      what the SDK shows now

The comparison of observations with checkpoints happens here, once for every
SDK, so that no runner can apply the contract more leniently than another.
Every wait is bounded by the scenario's `timeout_ms` (default 20000).
"""

import json
import queue
import re
import sys
import threading
import time
from concurrent import futures

import grpc

import informer_pb2
import informer_pb2_grpc
import workqueue_pb2
import workqueue_pb2_grpc


class ScenarioError(Exception):
    """The SDK did something the scenario does not allow (or the scenario
    is malformed)."""


def out(msg: dict) -> None:
    sys.stdout.write(json.dumps(msg, sort_keys=True) + "\n")
    sys.stdout.flush()


class Call:
    """One RPC the SDK opened: its request(s) and an outbox of steps."""

    def __init__(self, kind: str, request=None) -> None:
        self.kind = kind  # "watch" or "lease"
        self.request = request  # the WatchRequest
        self.arrived = time.monotonic()
        self.outbox: "queue.Queue" = queue.Queue()
        self.cond = threading.Condition()
        self.requests = []  # LeaseRequests received so far
        self.requests_closed = False
        self.finished = threading.Event()  # the handler returned

    def add_request(self, req) -> None:
        with self.cond:
            self.requests.append(req)
            self.cond.notify_all()

    def close_requests(self) -> None:
        with self.cond:
            self.requests_closed = True
            self.cond.notify_all()


class Player:
    """The scenario's state shared by the RPC handlers and the step loop."""

    def __init__(self, scenario: dict) -> None:
        self.scenario = scenario
        self.timeout = scenario.get("timeout_ms", 20000) / 1000.0
        self.arrivals: "queue.Queue[Call]" = queue.Queue()
        self.current = None
        self.last_end = None  # when the server last ended a call
        self.last_ended = None  # that call
        self.server = None
        self.port = 0

    # ----- RPC handlers (gRPC threads) -----

    def serve(self, call: Call, context):
        context.add_callback(lambda: call.outbox.put(("cancelled",)))
        self.arrivals.put(call)
        try:
            while True:
                item = call.outbox.get()
                if item[0] == "send":
                    yield item[1]
                elif item[0] == "end":
                    context.set_code(getattr(grpc.StatusCode, item[1]))
                    context.set_details(item[2])
                    return
                else:  # cancelled by the client, or the server goes down
                    return
        finally:
            call.finished.set()

    # ----- the server -----

    def start_server(self) -> None:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
        informer_pb2_grpc.add_InformerServicer_to_server(
            InformerService(self), server)
        workqueue_pb2_grpc.add_WorkQueueServicer_to_server(
            WorkQueueService(self), server)
        port = server.add_insecure_port(f"127.0.0.1:{self.port}")
        if port == 0:
            raise ScenarioError(f"cannot bind 127.0.0.1:{self.port}")
        self.port = port
        server.start()
        self.server = server

    def stop_server(self) -> None:
        # A grace period, so that a call the scenario just ended gets its
        # status out before the listener goes (with none, the client may see
        # the connection reset instead: INTERNAL); calls that arrive meanwhile
        # are refused (CANCELLED), calls still open after it cancelled.
        server, self.server = self.server, None
        if server is not None:
            server.stop(grace=self.timeout / 4).wait(self.timeout)

    # ----- steps -----

    def need_current(self, step: dict) -> Call:
        if self.current is None:
            raise ScenarioError(f"step {step} before any await_call")
        return self.current

    def step_await_call(self, want: dict) -> None:
        try:
            call = self.arrivals.get(timeout=self.timeout)
        except queue.Empty:
            raise ScenarioError(
                f"the SDK opened no call within {self.timeout}s "
                f"(expected {want})") from None
        self.current = call
        if "min_gap_ms" in want and self.last_end is not None:
            gap = (call.arrived - self.last_end) * 1000
            if gap < want["min_gap_ms"]:
                raise ScenarioError(
                    f"reconnected after {gap:.1f} ms, expected a back-off of "
                    f"at least {want['min_gap_ms']} ms")
        if "max_gap_ms" in want and self.last_end is not None:
            gap = (call.arrived - self.last_end) * 1000
            if gap > want["max_gap_ms"]:
                raise ScenarioError(
                    f"reconnected after {gap:.1f} ms, expected at most "
                    f"{want['max_gap_ms']} ms")
        if call.kind == "watch":
            r = call.request
            got = {"resource": r.resource, "namespace": r.namespace,
                   "label_selector": r.label_selector,
                   "resume_token": r.resume_token,
                   "encoding": informer_pb2.Encoding.Name(r.encoding)}
        else:
            with call.cond:
                if not call.cond.wait_for(
                        lambda: call.requests or call.requests_closed,
                        self.timeout):
                    raise ScenarioError("no first LeaseRequest")
                if not call.requests:
                    raise ScenarioError("Lease call without a request")
                first = call.requests[0]
            got = {"queue": first.queue, "worker": first.worker}
        for k, v in want.items():
            if k in ("min_gap_ms", "max_gap_ms"):
                continue
            if got.get(k) != v:
                raise ScenarioError(
                    f"call {k} is {got.get(k)!r}, expected {v!r} "
                    f"(request {got})")

    def step_send(self, what) -> None:
        call = self.need_current({"send": what})
        if call.kind == "watch":
            call.outbox.put(("send", watch_response(what)))
        else:
            call.outbox.put(("send", lease_response(what)))

    def step_end(self, what: dict) -> None:
        call = self.need_current({"end": what})
        call.outbox.put(("end", what["code"], what.get("message", "")))
        self.last_end = time.monotonic()
        self.last_ended = call
        self.current = None

    def step_await_requests(self, want: dict) -> None:
        """Waits until the credit granted on the current Lease call adds up
        to want["credit"]; the results reported on it must then be exactly
        want["results"] (default: none)."""
        call = self.need_current({"await_requests": want})

        def credit():
            return sum(r.credit for r in call.requests)

        with call.cond:
            call.cond.wait_for(lambda: credit() >= want["credit"],
                               self.timeout)
            got_credit = credit()
            results = [
                f"{r.lease_id} "
                f"{workqueue_pb2.LeaseOutcome.Name(r.outcome)[14:]}"
                for req in call.requests for r in req.results
            ]
        if got_credit != want["credit"]:
            raise ScenarioError(
                f"credit granted on the call: {got_credit}, expected "
                f"{want['credit']}")
        if results != want.get("results", []):
            raise ScenarioError(
                f"results on the call: {results}, expected "
                f"{want.get('results', [])}")

    def step_server(self, what: str) -> None:
        if what == "down":
            # The call the scenario just ended first gets its status out.
            if self.last_ended is not None:
                self.last_ended.finished.wait(self.timeout)
            self.stop_server()
            self.last_end = time.monotonic()
        elif what == "up":
            self.start_server()
        else:
            raise ScenarioError(f"server: {what!r} (want down or up)")

    def step_checkpoint(self, cp: dict) -> None:
        out({"checkpoint": cp.get("name", "")})
        while True:
            line = sys.stdin.readline()
            if not line:
                raise ScenarioError(
                    f"the runner left at checkpoint {cp.get('name')!r}")
            msg = json.loads(line)
            if "observe" not in msg:
                raise ScenarioError(f"unexpected runner message {msg}")
            diff = compare(cp.get("expect", {}), msg["observe"])
            out({"match": not diff, "diff": diff})
            if not diff:
                return

    def step_release(self, what: dict) -> None:
        out({"release": what["key"],
             "after_expired": what.get("after_expired", "")})

    def play(self) -> None:
        for step in self.scenario["steps"]:
            if len(step) != 1:
                raise ScenarioError(f"a step has one key: {step}")
            (kind, arg), = step.items()
            handler = getattr(self, f"step_{kind}", None)
            if handler is None:
                raise ScenarioError(f"unknown step {kind!r}")
            handler(arg)
        # Calls nobody expected: e.g. a reconnect after a final error.
        extra = []
        while not self.arrivals.empty():
            call = self.arrivals.get()
            extra.append(call.request.resume_token
                         if call.kind == "watch" else "lease")
        if extra:
            raise ScenarioError(f"unexpected calls at the end: {extra}")


class InformerService(informer_pb2_grpc.InformerServicer):

    def __init__(self, player: Player) -> None:
        self._player = player

    def Watch(self, request, context):
        return self._player.serve(Call("watch", request), context)


class WorkQueueService(workqueue_pb2_grpc.WorkQueueServicer):

    def __init__(self, player: Player) -> None:
        self._player = player

    def Lease(self, request_iterator, context):
        call = Call("lease")

        def read():
            try:
                for req in request_iterator:
                    call.add_request(req)
            except Exception:  # pylint: disable=broad-except
                pass  # the call ended
            call.close_requests()

        threading.Thread(target=read, daemon=True).start()
        return self._player.serve(call, context)


# ----- messages -----

_TYPES = {"ADDED", "MODIFIED", "DELETED", "SYNC", "BOOKMARK",
          "INITIAL_STATE_DONE", "RESET", "FRESH"}


def object_json(ev: dict, pad: int = 0) -> str:
    ns, _, name = ev["key"].rpartition("/")
    meta = {"name": name, "resourceVersion": ev["rv"]}
    if ns:
        meta["namespace"] = ns
    if ev.get("labels"):
        meta["labels"] = ev["labels"]
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
           "data": dict(ev.get("data", {}))}
    if pad:
        obj["data"]["pad"] = "x" * pad
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)


def event_pb(ev: dict, pad: int = 0):
    if ev["type"] not in _TYPES:
        raise ScenarioError(f"unknown event type {ev['type']!r}")
    e = informer_pb2.Event(
        type=informer_pb2.EventType.Value("EVENT_TYPE_" + ev["type"]),
        resume_token=ev["token"], initial=ev.get("initial", False),
        tombstone=ev.get("tombstone", False), stale=ev.get("stale", False))
    if "key" in ev:
        e.object.json = object_json(ev, pad)
        e.resource_version = ev["rv"]
    elif "rv" in ev:
        e.resource_version = ev["rv"]
    return e


def watch_response(what):
    """`what`: a list of events, or {"events": [...], "size": BYTES} for a
    message padded (in its last event's object) to exactly BYTES."""
    if isinstance(what, list):
        return informer_pb2.WatchResponse(events=[event_pb(e) for e in what])
    events, size = what["events"], what["size"]
    pad = 0
    for _ in range(8):
        msg = informer_pb2.WatchResponse(
            events=[event_pb(e) for e in events[:-1]] +
            [event_pb(events[-1], pad)])
        have = msg.ByteSize()
        if have == size:
            return msg
        pad += size - have
        if pad < 1:
            raise ScenarioError(f"size {size}: the events alone are larger")
    raise ScenarioError(f"cannot pad a message to exactly {size} bytes")


def lease_response(what: dict):
    msg = workqueue_pb2.LeaseResponse()
    for lease in what.get("leases", []):
        ns, _, name = lease["key"].partition("/")
        if not name:
            ns, name = "", lease["key"]
        le = msg.leases.add(lease_id=lease["id"], key=lease["key"],
                            namespace=ns, name=name,
                            failures=lease.get("failures", 0))
        le.timeout.FromMilliseconds(lease.get("timeout_ms", 60000))
    msg.expired_lease_ids.extend(what.get("expired", []))
    for r in what.get("rejected", []):
        msg.rejected.add(lease_id=r["id"], code=r.get("code", 9),
                         message=r.get("message", "rejected"))
    return msg


# ----- comparison -----


def _item_regex(w: str) -> str:
    # ANY: any code that is not final (a restart's refused connections may
    # say UNAVAILABLE or CANCELLED, as gRPC reports them).
    return "[A-Z_]+" if w == "ANY" else re.escape(w)


def _pattern_match(want: list, got: list) -> bool:
    """`want` items match `got` in order; an item ending in "+" matches one
    or more matching items in a row; "ANY" matches any non-final code."""
    regex = "".join(
        f"(?:{_item_regex(w[:-1])}\n)+" if w.endswith("+") else
        f"{_item_regex(w)}\n" for w in want)
    return re.fullmatch(regex, "".join(f"{g}\n" for g in got)) is not None


def compare(expect: dict, got: dict) -> str:
    """'' when `got` shows everything `expect` says, else what differs."""
    diffs = []
    for field, want in expect.items():
        have = got.get(field)
        if field in ("errors", "processed", "started"):
            ok = isinstance(have, list) and _pattern_match(want, have)
        elif field == "recoveries":
            ok = (isinstance(have, list) and len(have) == len(want) and
                  all(w == "*" or w == h for w, h in zip(want, have)))
        else:
            ok = have == want
        if not ok:
            diffs.append(f"{field}: want {json.dumps(want)}, "
                         f"got {json.dumps(have)}")
    return "; ".join(diffs)


def main() -> int:
    if len(sys.argv) != 2:
        sys.stderr.write("usage: scripted_server SCENARIO.json\n")
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        scenario = json.load(f)
    player = Player(scenario)
    player.start_server()
    out({"listening": player.port, "scenario": scenario["name"],
         "client": scenario["client"]})
    try:
        player.play()
    except ScenarioError as e:
        out({"done": True, "ok": False, "error": str(e)})
        player.stop_server()
        return 1
    out({"done": True, "ok": True})
    # The runner stops the SDK, then closes our stdin.
    sys.stdin.read()
    player.stop_server()
    return 0


if __name__ == "__main__":
    sys.exit(main())
