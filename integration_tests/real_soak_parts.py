"""The parts of the real-server soak (real_soak_bench.py): a TCP relay
whose connections can be cut or made stuck, keep-alive HTTPS writes as the
admin, the churn, the Watch consumers keeping mirrors, and the reads that
checkpoints compare (the API server's list, the sidecar's List).
"""

import http.client
import json
import random
import socket
import ssl
import threading
import time

import grpc

NS = "soak"
RESOURCE = "configmaps"
PAYLOAD = "x" * 512


class _Conn:
    """One relayed connection: the sidecar's socket and the server's."""

    def __init__(self, client, upstream):
        self.client = client
        self.upstream = upstream
        self.port = client.getpeername()[1]
        self.stuck = False
        self._lock = threading.Lock()
        self._pumps_done = 0

    def shutdown(self):
        for s in (self.client, self.upstream):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def pump_done(self):
        with self._lock:
            self._pumps_done += 1
            last = self._pumps_done == 2
        if last:  # no thread reads them any more: safe to close
            self.client.close()
            self.upstream.close()


class Relay:
    """A TCP relay on 127.0.0.1 (port 0) to `upstream_port`, a thread per
    direction per connection. cut() closes every connection it holds now;
    stick() stops forwarding on them but keeps them open until
    release_stuck(); connections accepted later are relayed as usual. An
    upstream that refuses (the API server restarting) closes the accepted
    connection at once. Thread-safe."""

    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        self._live = set()
        self._stuck = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(
                    ("127.0.0.1", self.upstream_port), timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            conn = _Conn(client, upstream)
            with self._lock:
                self._live.add(conn)
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(conn, src, dst),
                                 daemon=True).start()

    def _pump(self, conn, src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data or conn.stuck:
                    break
                dst.sendall(data)
        except OSError:
            pass
        if not conn.stuck:
            conn.shutdown()
            with self._lock:
                self._live.discard(conn)
        conn.pump_done()

    def ports(self):
        """The sidecar-side ports of the connections relayed now."""
        with self._lock:
            return {c.port for c in self._live}

    def cut(self):
        with self._lock:
            live = list(self._live)
        for c in live:
            c.shutdown()
        return len(live)

    def stick(self):
        with self._lock:
            stuck, self._live = list(self._live), set()
            for c in stuck:
                c.stuck = True
            self._stuck += stuck
        return len(stuck)

    def release_stuck(self):
        with self._lock:
            stuck, self._stuck = self._stuck, []
        for c in stuck:
            c.shutdown()

    def close(self):
        self.listener.close()
        self.cut()
        self.release_stuck()


class Api:
    """A keep-alive HTTPS connection to the API server as the admin; one
    thread at a time. request() returns the status, or 0 when the
    connection failed (it reconnects on the next call)."""

    def __init__(self, cp):
        self.port = cp.port
        self.headers = {"Authorization": "Bearer " + cp.admin_token}
        self.context = ssl.create_default_context(cafile=cp.ca_file)
        self.conn = None

    def request(self, method, path, body=None, content_type=None):
        headers = dict(self.headers)
        if content_type:
            headers["Content-Type"] = content_type
        try:
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(
                    "127.0.0.1", self.port, context=self.context, timeout=30)
            self.conn.request(method, path, body, headers)
            resp = self.conn.getresponse()
            resp.read()
            return resp.status
        except (OSError, http.client.HTTPException):
            self.close()
            return 0

    def close(self):
        if self.conn is not None:
            self.conn.close()
        self.conn = None


def collection():
    return "/api/v1/namespaces/%s/configmaps" % NS


def configmap(i, gen):
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "cm-%d" % i, "namespace": NS},
                       "data": {"gen": str(gen), "payload": PAYLOAD}})


class Churn:
    """Writer threads making --churn_per_s changes a second between them,
    paced by one shared schedule. pause() returns once no write is in
    flight; resume() restarts the schedule from now (no burst to catch
    up). Counters are read under the lock."""

    def __init__(self, cp, objects, per_s, writers):
        self.objects = objects
        self.tick = 1.0 / max(per_s, 0.001)
        self.cond = threading.Condition()
        self.paused = False
        self.in_flight = 0
        self.done = False
        self.next_at = time.monotonic()
        self.gen = 0
        self.changes = 0
        self.failed = 0
        self.rng = random.Random(7)
        self.threads = [threading.Thread(target=self._write, args=(Api(cp),),
                                         daemon=True) for _ in range(writers)]
        for t in self.threads:
            t.start()

    def _slot(self):
        """Waits for this writer's turn; None once done."""
        with self.cond:
            while self.paused and not self.done:
                self.cond.wait()
            if self.done:
                return None
            at = self.next_at
            self.next_at += self.tick
            self.gen += 1
            self.in_flight += 1
            # One in ten: deleted and created again (a new uid).
            return (at, self.rng.randrange(self.objects), self.gen,
                    self.rng.randrange(10) == 0)

    def _finish(self, ok):
        with self.cond:
            self.in_flight -= 1
            self.changes += 1 if ok else 0
            self.failed += 0 if ok else 1
            self.cond.notify_all()

    def _write(self, api):
        while True:
            slot = self._slot()
            if slot is None:
                api.close()
                return
            at, i, gen, recreate = slot
            # The churn's pace (the load), not a wait for a condition.
            time.sleep(max(0.0, at - time.monotonic()))
            path = "%s/cm-%d" % (collection(), i)
            if recreate:
                api.request("DELETE", path)
                status = api.request("POST", collection(), configmap(i, gen),
                                     "application/json")
            else:
                status = api.request(
                    "PATCH", path, json.dumps({"data": {"gen": str(gen)}}),
                    "application/merge-patch+json")
            self._finish(200 <= status < 300)

    def pause(self):
        with self.cond:
            self.paused = True
            while self.in_flight:
                self.cond.wait()

    def resume(self):
        with self.cond:
            self.paused = False
            self.next_at = time.monotonic()
            self.cond.notify_all()

    def stop(self):
        with self.cond:
            self.done = True
            self.cond.notify_all()
        for t in self.threads:
            t.join(timeout=60)

    def counts(self):
        with self.cond:
            return self.changes, self.failed


class Consumer:
    """One Watch stream on a connection of its own, keeping a mirror
    (name -> resourceVersion) and resuming with its last token whenever
    the stream ends. A stalled consumer reads only while open."""

    def __init__(self, name, target, pb, mode, slow_delay):
        self.name = name
        self.pb = pb
        self.mode = mode
        self.slow_delay = slow_delay
        self.channel = grpc.insecure_channel(
            target, options=[("grpc.use_local_subchannel_pool", 1)])
        self.watch = self.channel.unary_stream(
            "/informer.v1.Informer/Watch",
            request_serializer=pb.WatchRequest.SerializeToString,
            response_deserializer=pb.WatchResponse.FromString)
        self.lock = threading.Lock()
        self.mirror_ = {}
        self.token = ""
        self.reconnects = 0
        self.ends = {}  # how its streams ended: code name -> count
        self.call = None
        self.stopping = False
        self.open = threading.Event()
        if mode != "stalled":
            self.open.set()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            with self.lock:
                if self.stopping:
                    return
                self.call = self.watch(self.pb.WatchRequest(
                    resource=RESOURCE, namespace=NS, resume_token=self.token),
                    wait_for_ready=True)
                call = self.call
            end = "OK"
            try:
                while True:
                    self.open.wait()
                    self._apply(next(call))
                    if self.mode == "slow":
                        # The slow consumer's deliberate pace (the fault).
                        time.sleep(self.slow_delay)
            except StopIteration:
                pass
            except grpc.RpcError as e:
                end = e.code().name
            with self.lock:
                if self.stopping:
                    return
                self.reconnects += 1
                self.ends[end] = self.ends.get(end, 0) + 1

    def _apply(self, resp):
        pb = self.pb
        with self.lock:
            for e in resp.events:
                if e.type == pb.EVENT_TYPE_RESET:
                    self.mirror_.clear()
                elif e.type in (pb.EVENT_TYPE_ADDED, pb.EVENT_TYPE_MODIFIED):
                    meta = json.loads(e.object.json)["metadata"]
                    self.mirror_[meta["name"]] = meta["resourceVersion"]
                elif e.type == pb.EVENT_TYPE_DELETED:
                    meta = json.loads(e.object.json)["metadata"]
                    self.mirror_.pop(meta["name"], None)
                if e.resume_token:
                    self.token = e.resume_token

    def set_open(self, is_open):
        if is_open or self.mode != "stalled":
            self.open.set()
        else:
            self.open.clear()

    def mirror(self):
        with self.lock:
            return dict(self.mirror_)

    def stop(self):
        with self.lock:
            self.stopping = True
            if self.call is not None:
                self.call.cancel()
        self.open.set()
        self.thread.join(timeout=30)
        self.channel.close()


def proc_status(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return float(line.split()[1])
    return 0.0


def seed(cp, objects, workers=4):
    """The namespace's ConfigMaps cm-0 .. cm-(objects-1), generation 0."""
    def post(first):
        api = Api(cp)
        for i in range(first, objects, workers):
            status = api.request("POST", collection(), configmap(i, 0),
                                 "application/json")
            if status not in (201, 409):
                raise RuntimeError("seeding cm-%d: HTTP %d" % (i, status))
        api.close()
    threads = [threading.Thread(target=post, args=(w,))
               for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def versions(objects):
    return {n: o["metadata"]["resourceVersion"] for n, o in objects.items()}
