"""A soak under faults against the real kube-apiserver v1.37 and etcd
(control_plane.py): the real informer_sidecar for --duration (30 minutes
by default) with steady churn of ConfigMaps written through the real API,
the faults the real control plane can produce, and three Watch consumers,
checking at every checkpoint that nothing was lost. The real-server twin
of soak_bench (the emulator's); run by hand, not in CI:

    REALKUBE_BIN=$(tools/realkube.sh bin-dir) \\
    INFORMER_SIDECAR_BIN=bazel-bin/server/informer_sidecar \\
        /usr/bin/python3 integration_tests/real_soak_bench.py [--duration=15m]

Churn: --churn_per_s changes a second over --objects ConfigMaps, from
writer threads on keep-alive HTTPS connections as the admin: merge
patches, and one in ten a delete and a re-create under the same name (a
new uid). Writes that fail (the API server restarting) are counted apart.

The sidecar (the unprivileged user with `view`) reaches the API server
through a TCP relay in this process, so connections can die while new
ones work. Faults, each on its own period (0 turns one off):
- cut: every relayed connection closed (dropped connections);
- stuck: every relayed connection stops forwarding but stays open for
  --stuck_for (a stuck peer; --api_watch_idle_timeout notices);
- drop: nftables drops the packets of every relayed connection for
  --drop_for (--api_tcp_timeout notices); only as root with `ip` and
  `nft`, in a network namespace of its own (everything runs there);
- freeze: the sidecar stopped (SIGSTOP) for --freeze_for while the churn
  goes on, then continued;
- compact: etcd compacted at its current revision;
- restart: kube-apiserver restarted against the same etcd (a new watch
  cache: a re-watch from before it, or from a compacted revision, gets
  410 and relists).

Consumers: three gRPC Watch streams on connections of their own, each
keeping a mirror (name -> resourceVersion) and resuming with its last
resume token when its stream ends: prompt, slow (--slow_delay after each
message), stalled (reads nothing between checkpoints).

Checkpoint, every --checkpoint_every: churn and faults pause (a frozen
sidecar is continued), and the soak's clock with them (--duration counts
the time under load, not the checkpoints'). The API server's list is the
truth; polling against a deadline, the sidecar's cache (gRPC List) must
equal it object by object (every field the sidecar keeps) and every
mirror name by name and resourceVersion by resourceVersion. Reported per
checkpoint: faults so far, 410s the server answered, relists, the time
the cache took to catch up (cache staleness) and the consumers, VmRSS and
thread count. A relist is forced when the server answered 410 to the
watch before it, or the list before it failed before its end (the
sidecar's log says which); any other relist fails the run, as does a
checkpoint that does not converge.

Flat, as soak_bench judges it: after warm-up. The Watch history is a
buffer bounded by --history_cap_bytes and --history_cap_events (passed to
the sidecar): while it fills, RSS grows by design; and each relist's
transient stays resident until the next release, so a checkpoint before
the first relist has none of it. Warm-up ends at the first checkpoint
where the sidecar's /metrics show the history at least
--warmup_history_fill of either cap and at least --warmup_relists relists;
that checkpoint is the baseline. Every checkpoint is reported, those
before it marked warm-up, with the spreads over all checkpoints and after
warm-up; VmRSS and threads must stay within --flat_within of each other
from the baseline on. Exit status: 2 when a checkpoint did not converge
or a relist was not forced, else 3 when not flat after warm-up (or
warm-up never ended).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import grpc

import real_sidecar
from real_sidecar import RealSidecar
import real_dead_connection_test as dead  # the netns and nft tooling
from real_soak_parts import (NS, RESOURCE, Churn, Consumer, Relay, seed,
                             proc_status, versions)

import control_plane  # noqa: E402  (on sys.path through real_sidecar)

RELISTS = "informer_sidecar_informer_relists_total"
ERRORS = "informer_sidecar_informer_errors_total"
RESTARTS = "informer_sidecar_informer_watch_restarts_total"
HEAP = "informer_sidecar_heap_in_use_bytes"
HEAP_AGE = "informer_sidecar_heap_in_use_age_seconds"
HISTORY = "informer_sidecar_watch_history_bytes"
HISTORY_EVENTS = "informer_sidecar_watch_history_events"


def duration(text):
    """"90s", "15m", "1h", "2m30s", "250ms" or plain seconds -> seconds."""
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise argparse.ArgumentTypeError("not a duration: " + text)
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * scale[u] for n, u in parts)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    d = duration
    p.add_argument("--duration", type=d, default=d("30m"))
    p.add_argument("--checkpoint_every", type=d, default=d("2m"))
    p.add_argument("--catch_up_timeout", type=d, default=d("4m"),
                   help="How long a checkpoint waits to converge.")
    p.add_argument("--objects", type=int, default=2000)
    p.add_argument("--churn_per_s", type=float, default=50)
    p.add_argument("--writers", type=int, default=3)
    p.add_argument("--cut_every", type=d, default=d("45s"))
    p.add_argument("--stuck_every", type=d, default=d("7m"))
    p.add_argument("--stuck_for", type=d, default=d("90s"))
    p.add_argument("--drop_every", type=d, default=d("5m"))
    p.add_argument("--drop_for", type=d, default=d("60s"))
    p.add_argument("--freeze_every", type=d, default=d("6m"))
    p.add_argument("--freeze_for", type=d, default=d("20s"))
    p.add_argument("--compact_every", type=d, default=d("2m"))
    p.add_argument("--restart_every", type=d, default=d("4m"))
    p.add_argument("--slow_delay", type=d, default=d("20ms"))
    p.add_argument("--bin_dir", default=os.environ.get("REALKUBE_BIN", ""),
                   help="The peers (default $REALKUBE_BIN).")
    p.add_argument("--log_dir", default="",
                   help="Where to keep the sidecar's log and the faults' "
                   "(default: removed with the run's directory).")
    p.add_argument("--sidecar_flag", action="append", default=[],
                   help="An extra informer_sidecar flag (repeatable).")
    p.add_argument("--history_cap_bytes", type=int, default=16 << 20,
                   help="The sidecar's --watch_history_bytes (its default): "
                   "the Watch history's byte cap, which warm-up waits for.")
    p.add_argument("--history_cap_events", type=int, default=10000,
                   help="The sidecar's --watch_history (its default): the "
                   "Watch history's event cap, which warm-up waits for.")
    p.add_argument("--warmup_history_fill", type=float, default=0.99,
                   help="Warm-up lasts until the Watch history holds at "
                   "least this fraction of either cap (a full history stays "
                   "within an event of its cap); 0: do not wait for it.")
    p.add_argument("--warmup_relists", type=int, default=1,
                   help="Warm-up lasts until at least this many relists "
                   "were applied (a relist's transient in the baseline); "
                   "0: do not wait for one.")
    p.add_argument("--flat_within", type=float, default=10,
                   help="Percent: VmRSS and threads are flat when their "
                   "checkpoints after warm-up stay within this of each "
                   "other (max/min - 1).")
    return p.parse_args(argv)


def warmed_up(args, row):
    """Whether warm-up is over at checkpoint `row`: the Watch history at
    least --warmup_history_fill of either cap and --warmup_relists
    relists applied."""
    fill = args.warmup_history_fill
    full = fill <= 0 or \
        row["history_mb"] * 1e6 >= fill * args.history_cap_bytes or \
        row["history_events"] >= fill * args.history_cap_events
    return full and row["relists"] >= args.warmup_relists


def relist_causes(log):
    """The cause of each relist the reflector logged: "410" (the server
    no longer had the resourceVersion it watched from), "failed list" (the
    list or WatchList before it failed before its end, so it is tried
    again) or the text of the error before it (not forced)."""
    causes, error, listing, failed_list = [], None, False, False
    for line in log.splitlines():
        _, sep, text = line.partition(" %s: " % RESOURCE)
        if not sep:
            continue
        if text.startswith(("listing", "relisting")):
            if text.startswith("relisting"):
                causes.append(_cause(error, failed_list))
            listing, error, failed_list = True, None, False
        elif text.startswith(("listed ", "relist of ", "cache synced")):
            listing = False  # the list is complete
        elif line.startswith(("W", "E")):
            error, failed_list = text, listing
    return causes


def _cause(error, failed_list):
    if failed_list:
        return "failed list"
    if error is None:
        return "no error logged"
    if "410" in error or "Expired" in error:
        return "410"
    return error[:100]


FORCED = ("410", "failed list")


class Faults:
    """The faults' schedule. Driven by the thread that started the control
    plane: its children die with that thread (PR_SET_PDEATHSIG), so the
    API server is restarted from it too. A fault still in progress (stuck,
    drop, freeze) is not begun again before it ends."""

    KINDS = ("cut", "stuck", "drop", "freeze", "compact", "restart")

    def __init__(self, args, cp, relay, sidecar, can_drop):
        self.args, self.cp, self.relay, self.sidecar = args, cp, relay, sidecar
        now = time.monotonic()
        self.due = {}
        for kind in self.KINDS:
            if self.every(kind) > 0 and (kind != "drop" or can_drop):
                self.due[kind] = now + self.every(kind)
        self.count = dict.fromkeys(self.KINDS, 0)
        self.ends = {}  # a fault in progress -> when it ends
        self.nft_table = "soak_drop_%d" % os.getpid()

    def note(self, what):
        """One line per fault begun or ended, to stderr."""
        print("%s %s" % (time.strftime("%H:%M:%S"), what), file=sys.stderr,
              flush=True)

    def every(self, kind):
        return getattr(self.args, kind + "_every")

    def tick(self):
        now = time.monotonic()
        for kind, at in list(self.ends.items()):
            if now >= at:
                self.end(kind)
        for kind in sorted(self.due, key=self.due.get):
            if now < self.due[kind]:
                continue
            if kind in self.ends:
                pass  # still in progress: skip this one
            elif getattr(self, "_" + kind)():
                self.count[kind] += 1
                self.note(kind)
            else:
                continue  # no connection to fault right now: soon again
            while self.due[kind] <= now:
                self.due[kind] += self.every(kind)

    def _cut(self):
        return self.relay.cut() > 0

    def _stuck(self):
        if not self.relay.stick():
            return False
        self.ends["stuck"] = time.monotonic() + self.args.stuck_for
        return True

    def _drop(self):
        ports = self.relay.ports()
        if not ports:
            return False
        listed = ", ".join(str(p) for p in sorted(ports))
        rules = (
            "add table inet {t}\n"
            "add chain inet {t} input {{ type filter hook input priority 0;"
            " }}\n"
            "add rule inet {t} input iif lo tcp sport {r} tcp dport {{ {p} }}"
            " drop\n"
            "add rule inet {t} input iif lo tcp dport {r} tcp sport {{ {p} }}"
            " drop\n").format(t=self.nft_table, r=self.relay.port, p=listed)
        subprocess.run([dead.tool("nft"), "-f", "-"], input=rules, text=True,
                       check=True)
        self.ends["drop"] = time.monotonic() + self.args.drop_for
        return True

    def _freeze(self):
        self.sidecar.freeze()
        self.ends["freeze"] = time.monotonic() + self.args.freeze_for
        return True

    def _compact(self):
        self.cp.compact_etcd()
        return True

    def _restart(self):
        self.cp.restart_apiserver()
        return True

    def postpone(self, seconds):
        """Moves every fault not yet begun `seconds` later."""
        for kind in self.due:
            self.due[kind] += seconds

    def end(self, kind):
        """Ends a fault in progress."""
        if self.ends.pop(kind, None) is None:
            return
        self.note(kind + " ended")
        if kind == "stuck":
            self.relay.release_stuck()
        elif kind == "drop":
            subprocess.run([dead.tool("nft"), "delete", "table", "inet",
                            self.nft_table], check=True)
        elif kind == "freeze":
            self.sidecar.thaw()

    def end_all(self):
        for kind in list(self.ends):
            self.end(kind)

    def summary(self):
        return ", ".join("%d %s" % (self.count[k], k) for k in self.KINDS
                         if k in self.due)

class Soak:
    """One run: the control plane, the relay, the sidecar, the churn, the
    consumers and the faults, in `tmp`. Not thread-safe: the thread that
    made it runs it."""

    def __init__(self, args, tmp, can_drop, out):
        self.args, self.tmp, self.out = args, tmp, out
        self.can_drop = can_drop
        self.cp = self.relay = self.sidecar = None
        self.churn = self.faults = None
        self.consumers = []

    def start(self):
        """Everything up, the sidecar synced; close() undoes a partial
        start too."""
        args, tmp = self.args, self.tmp
        self.pb = real_sidecar.generate_messages(tmp)
        self.cp = control_plane.ControlPlane(
            args.bin_dir, state_dir=os.path.join(tmp, "control-plane"))
        self.cp.start()
        self.cp.bind_cluster_role(control_plane.UNPRIVILEGED_USER, "view")
        self.cp.create_namespace(NS)
        seed(self.cp, args.objects)
        self.relay = Relay(self.cp.port)
        kubeconfig = real_sidecar.kubeconfig_through(
            self.cp, self.relay.port, os.path.join(tmp, "relay.kubeconfig"))
        self.sidecar = RealSidecar(
            os.path.join(tmp, "sidecar"), kubeconfig,
            ["--resources=" + RESOURCE, "--namespace=" + NS,
             "--print_events=false",
             "--watch_history_bytes=%d" % args.history_cap_bytes,
             "--watch_history=%d" % args.history_cap_events] +
            args.sidecar_flag).start()
        target = "unix:" + self.sidecar.socket
        self.consumers = [Consumer(name, target, self.pb, name,
                                   args.slow_delay)
                          for name in ("prompt", "slow", "stalled")]
        self.churn = Churn(self.cp, args.objects, args.churn_per_s,
                           args.writers)
        self.faults = Faults(args, self.cp, self.relay, self.sidecar,
                             self.can_drop)

    def close(self):
        if self.faults is not None:
            self.faults.end_all()
        if self.churn is not None:
            self.churn.stop()
        for c in self.consumers:
            c.stop()
        if self.sidecar is not None:
            self.sidecar.stop()
        if self.relay is not None:
            self.relay.close()
        if self.cp is not None:
            self.cp.stop()

    def metric(self, name, **labels):
        return int(self.sidecar.metric(name, resource=RESOURCE, **labels))

    def fresh_heap_in_use(self):
        """The heap in use, measured at most 10 s before: the sidecar
        measures it off the scrape path, after a scrape that finds its value
        older (which still gets the old one), so wait for that one."""
        for _ in range(50):
            metrics = self.sidecar.metrics()
            age = metrics.get((HEAP_AGE, frozenset()))
            if age is not None and age < 10:
                return metrics.get((HEAP, frozenset()), 0.0)
            time.sleep(0.1)
        return self.sidecar.metric(HEAP)

    def catch_up(self):
        """Churn and faults paused: polls until the sidecar's cache and
        every mirror equal the server's list, or the deadline."""
        self.churn.pause()
        self.faults.end("freeze")
        for c in self.consumers:
            c.set_open(True)
        t0 = time.monotonic()
        truth = real_sidecar.server_objects(self.cp, RESOURCE, NS)
        truth_rv = versions(truth)
        r = {"cache_stale": None, "cache": None, "mirrors_ok": 0}
        deadline = t0 + self.args.catch_up_timeout
        while True:
            try:
                r["cache"] = real_sidecar.grpc_list(
                    self.sidecar.channel, self.pb, RESOURCE, NS, limit=1000,
                    timeout=60)
            except grpc.RpcError:
                r["cache"] = None
            cache_ok = r["cache"] is not None and \
                versions(r["cache"]) == truth_rv
            if cache_ok and r["cache_stale"] is None:
                r["cache_stale"] = time.monotonic() - t0
            r["mirrors_ok"] = sum(c.mirror() == truth_rv
                                  for c in self.consumers)
            done = cache_ok and r["mirrors_ok"] == len(self.consumers)
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # polled against the deadline
        r["all_stale"] = time.monotonic() - t0
        # Object by object, every field the sidecar keeps.
        r["cache_ok"] = r["cache"] == truth
        r["objects"] = len(truth)
        for c in self.consumers:
            c.set_open(False)
        self.churn.resume()
        return r

    def checkpoint(self, start):
        c = self.catch_up()
        changes, failed = self.churn.counts()
        pid = self.sidecar.process.pid
        row = {
            "elapsed": (time.monotonic() - start) / 60, "changes": changes,
            "failed": failed, "faults": dict(self.faults.count),
            "expired": self.metric(ERRORS, kind="http_410"),
            "relists": self.metric(RELISTS),
            "rewatches": self.metric(RESTARTS),
            "cache_stale": c["cache_stale"], "all_stale": c["all_stale"],
            "cache_ok": c["cache_ok"], "mirrors_ok": c["mirrors_ok"],
            "objects": c["objects"],
            "rss_mb": proc_status(pid, "VmRSS") / 1024,
            # RSS above the heap in use is memory the allocator keeps.
            "heap_mb": self.fresh_heap_in_use() / 1e6,
            "history_mb": self.sidecar.metric(
                HISTORY, resource=RESOURCE) / 1e6,
            "history_events": self.sidecar.metric(
                HISTORY_EVENTS, resource=RESOURCE),
            "threads": proc_status(pid, "Threads"),
        }
        return row

    HEADER = ("| elapsed | phase | changes (failed) | cuts | stuck | drops | "
              "freezes | compactions | restarts | 410s | relists | "
              "re-watches | cache staleness | consumers caught up | "
              "cache = server | mirrors = server | VmRSS | heap in use | "
              "history | history events | threads |\n" + "| --- " * 21 +
              "|")

    def print_row(self, r):
        f = r["faults"]
        stale = ("%.2f s" % r["cache_stale"] if r["cache_stale"] is not None
                 else "never")
        print("| %.1f min | %s | %d (%d) | %d | %d | %d | %d | %d | %d | %d | "
              "%d | %d | %s | %.2f s | %s | %d/%d | %.1f MB | %.1f MB | "
              "%.1f MB | %.0f | %.0f |" % (
                  r["elapsed"], r["phase"], r["changes"], r["failed"],
                  f["cut"],
                  f["stuck"], f["drop"], f["freeze"], f["compact"],
                  f["restart"], r["expired"], r["relists"], r["rewatches"],
                  stale, r["all_stale"],
                  "yes (%d)" % r["objects"] if r["cache_ok"] else "NO",
                  r["mirrors_ok"], len(self.consumers), r["rss_mb"],
                  r["heap_mb"], r["history_mb"], r["history_events"],
                  r["threads"]),
              file=self.out, flush=True)

    def run(self):
        """The soak's clock stops during checkpoints: each interval between
        them has --checkpoint_every of churn and faults, and no fault
        falls due while one runs."""
        print(self.HEADER, file=self.out, flush=True)
        start = time.monotonic()
        paused = 0.0
        rows = []
        baseline = None  # the first checkpoint after warm-up
        next_at = self.args.checkpoint_every
        while next_at <= self.args.duration + 1e-6:
            if time.monotonic() - start - paused >= next_at:
                # Before the faults due at the same time: they come after
                # it (a freeze begun now would end at once).
                began = time.monotonic()
                row = self.checkpoint(start)
                if baseline is None and warmed_up(self.args, row):
                    baseline = len(rows)
                row["phase"] = ("warm-up" if baseline is None else
                                "baseline" if baseline == len(rows) else
                                "after warm-up")
                self.print_row(row)
                rows.append(row)
                paused += time.monotonic() - began
                self.faults.postpone(time.monotonic() - began)
                next_at += self.args.checkpoint_every
                continue
            self.faults.tick()
            time.sleep(0.2)  # the faults' clock
        return self.summarize(rows, baseline)

    def summarize(self, rows, baseline):
        """The run's figures. Relists the log does not explain (a build
        that logs none for WatchList) count as unforced."""
        relists = self.metric(RELISTS)
        expired = self.metric(ERRORS, kind="http_410")
        causes = relist_causes(self.sidecar.log())
        forced = sum(c in FORCED for c in causes)
        stale = [r["cache_stale"] for r in rows
                 if r["cache_stale"] is not None]
        rss = [r["rss_mb"] for r in rows]
        heap = [r["heap_mb"] for r in rows]
        threads = [r["threads"] for r in rows]
        result = {
            "rows": rows, "relists": relists, "expired": expired,
            "causes": causes, "unforced": max(0, relists - forced),
            "failures": sum(not (r["cache_ok"] and r["mirrors_ok"] ==
                                 len(self.consumers)) for r in rows),
            "max_stale": max(stale) if stale else None,
            "reconnects": {c.name: (c.reconnects, dict(c.ends))
                           for c in self.consumers},
            "faults": dict(self.faults.count),
            "baseline": baseline,
            "flat": {},
        }
        print("\nfaults: %s; %d 410s; relists %d (%s; unforced %d); max "
              "cache staleness %s; consumer reconnects: %s; checkpoints "
              "failed: %d of %d" % (
                  self.faults.summary(), expired, relists,
                  ", ".join("after %s: %d" % (k, causes.count(k))
                            for k in sorted(set(causes))) or "none logged",
                  result["unforced"],
                  "%.2f s" % max(stale) if stale else "-",
                  ", ".join("%s %d %s" % (n, k, e) for n, (k, e) in
                            result["reconnects"].items()),
                  result["failures"], len(rows)), file=self.out, flush=True)
        if baseline is None:
            print("warm-up did not end in %d checkpoints (see "
                  "--warmup_history_fill, --warmup_relists): no checkpoint "
                  "to judge flatness on" % len(rows), file=self.out)
        else:
            print("warm-up: %d checkpoint(s); baseline the checkpoint at "
                  "%.1f min (history at least %.0f%% of a cap, %d+ relists)"
                  % (baseline, rows[baseline]["elapsed"],
                     self.args.warmup_history_fill * 100,
                     self.args.warmup_relists), file=self.out)
        for name, values, fmt, judged in (
                ("VmRSS", rss, "%.1f MB", True),
                ("threads", threads, "%.0f", True),
                # Not judged: a checkpoint samples it at any point of a
                # relist's transient.
                ("heap in use", heap, "%.1f MB", False)):
            line, flat = flatness(values, fmt, baseline,
                                  self.args.flat_within if judged else None)
            print("%s: %s" % (name, line), file=self.out, flush=True)
            if judged:
                result["flat"][name] = flat
        return result


def spread(values, fmt):
    """min - max (max/min - 1)."""
    if not values:
        return "-"
    pct = (max(values) / min(values) - 1) * 100 if min(values) else 0.0
    return "%s - %s (%.1f%%)" % (fmt % min(values), fmt % max(values), pct)


def flatness(values, fmt, baseline, within):
    """The spread over all checkpoints and after warm-up (from `baseline`,
    an index; None: warm-up never ended), against the baseline, and with
    the verdict unless `within` (percent) is None. Returns (text, flat):
    flat is False when warm-up never ended."""
    text = "over all %d checkpoints %s" % (len(values), spread(values, fmt))
    if baseline is None or baseline >= len(values):
        return text + "; no checkpoint after warm-up", False
    after = values[baseline:]
    base = values[baseline]
    flat = bool(min(after)) and \
        (max(after) / min(after) - 1) * 100 <= (within or 0)
    text += ("; after warm-up (%d checkpoints) %s, against the baseline "
             "%+.1f%% to %+.1f%%" % (
                 len(after), spread(after, fmt),
                 (min(after) / base - 1) * 100 if base else 0.0,
                 (max(after) / base - 1) * 100 if base else 0.0))
    if within is not None:
        text += ": %s within %g%%" % ("flat" if flat else "NOT flat", within)
    return text, flat


def run(args, can_drop, out=sys.stdout):
    """One soak; its result (see Soak.summarize)."""
    tmp = tempfile.mkdtemp(prefix="rksoak", dir="/tmp")
    soak = Soak(args, tmp, can_drop, out)
    try:
        soak.start()
        return soak.run()
    finally:
        soak.close()
        if args.log_dir:
            os.makedirs(args.log_dir, exist_ok=True)
            for d in ("sidecar", "control-plane/logs"):
                subprocess.run(["cp", "-r", os.path.join(tmp, d),
                                args.log_dir], check=False)
        subprocess.run(["rm", "-rf", tmp], check=False)


def main():
    args = parse_args()
    if not args.bin_dir:
        sys.exit("no peers: set REALKUBE_BIN or --bin_dir "
                 "(tools/realkube.sh bin-dir)")
    # Before any thread: the whole soak in a network namespace of its own,
    # where nftables may drop packets without touching the host's.
    why_not = dead.enter_network_namespace()
    print("dropped packets: %s" % ("on" if not why_not else
                                   "off (%s)" % why_not), flush=True)
    result = run(args, can_drop=not why_not)
    if result["failures"] or result["unforced"]:
        sys.exit(2)
    flat = result["flat"]
    sys.exit(0 if flat and all(flat.values()) else 3)


if __name__ == "__main__":
    main()
