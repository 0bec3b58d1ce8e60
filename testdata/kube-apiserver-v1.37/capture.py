#!/usr/bin/env python3
"""Captures of a real kube-apiserver v1.37.2's answers, and the requests
that make them.

As a script, regenerates the files beside it from the real control plane
(integration_tests/realkube, built by tools/realkube.sh build):

    python3 testdata/kube-apiserver-v1.37/capture.py \\
        --bin-dir "$(tools/realkube.sh bin-dir)"

As a module, emulator_v137_captures_test runs the same requests against the
emulator and compares its answers with the files byte for byte.

Each file is one answer: the body as the server wrote it (compact JSON, or
one line per watch event), then a blank line and "HTTP <code>". What is
volatile is replaced, the same way for both servers: uids ("UID"),
timestamps ("TIMESTAMP"), managedFields (dropped: the emulator keeps none),
resourceVersions (RV(name) for the write that made them, RV(CURRENT) for one
at or after the last setup write, numbers in messages alike), continue
tokens (decoded: CONTINUE{json}), and repeated bookmarks before a watch's end
(collapsed to one; the real watch cache may send two).
"""

import argparse
import base64
import http.client
import json
import os
import re
import socket
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
NS = "capture"
CM = "/api/v1/namespaces/%s/configmaps" % NS
NAMES = ["cm-%d" % i for i in range(5)]
FUTURE = 10 ** 9
WATCH = "?watch=1&timeoutSeconds=%d&"

# (file, method, path, body, token). Paths and bodies may hold {mid} (the
# RV of cm-1), {current} (of cm-4) and {continue} (a limit=2 list's token).
REQUESTS = [
    ("list-configmaps-limit2.json", "GET", CM + "?limit=2", None, "admin"),
    ("list-configmaps-continue.json", "GET",
     CM + "?limit=2&continue={continue}", None, "admin"),
    ("list-rv0-limit2-served-whole.json", "GET",
     CM + "?resourceVersion=0&limit=2", None, "admin"),
    ("list-exact-rv.json", "GET",
     CM + "?resourceVersion={mid}&resourceVersionMatch=Exact", None,
     "admin"),
    ("list-label-selector.json", "GET", CM + "?labelSelector=app%3Da",
     None, "admin"),
    ("error-401.txt", "GET", CM, None, "bogus"),
    ("error-403.txt", "GET", CM, None, "user"),
    ("error-403-unknown-resource.txt", "GET",
     "/api/v1/namespaces/%s/nosuches" % NS, None, "user"),
    ("error-404.txt", "GET", CM + "/does-not-exist", None, "admin"),
    ("error-404-resource.txt", "GET", "/api/v1/namespaces/%s/nosuches" % NS,
     None, "admin"),
    ("error-404-group.txt", "GET", "/apis/nosuch.io/v1/things", None,
     "admin"),
    ("error-409-already-exists.txt", "POST", CM,
     {"metadata": {"name": "cm-0"}}, "admin"),
    ("error-409-conflict.txt", "PUT", CM + "/cm-4",
     {"metadata": {"name": "cm-4", "resourceVersion": "{mid}"}}, "admin"),
    ("error-422-invalid-name.txt", "POST", CM,
     {"metadata": {"name": "Not_Valid"}}, "admin"),
    ("error-422-no-name.txt", "POST", CM, {"metadata": {}}, "admin"),
    ("error-422-namespace-name.txt", "POST", "/api/v1/namespaces",
     {"metadata": {"name": "a.b"}}, "admin"),
    ("error-422-exact-rv0.txt", "GET",
     CM + "?resourceVersion=0&resourceVersionMatch=Exact", None, "admin"),
    ("error-422-list-send-initial-events.txt", "GET",
     CM + "?sendInitialEvents=true", None, "admin"),
    ("error-422-watch-match.txt", "GET",
     CM + "?watch=1&resourceVersion={mid}&resourceVersionMatch=NotOlderThan",
     None, "admin"),
    ("error-422-watchlist-without-match.txt", "GET",
     CM + "?watch=1&sendInitialEvents=true&allowWatchBookmarks=true", None,
     "admin"),
    ("error-400-continue-with-rv.txt", "GET",
     CM + "?limit=2&resourceVersion={mid}&continue={continue}", None,
     "admin"),
    ("error-400-limit.txt", "GET", CM + "?limit=abc", None, "admin"),
    ("error-400-garbage-continue.txt", "GET",
     CM + "?limit=2&continue=garbage", None, "admin"),
    ("error-504-too-large-rv.txt", "GET",
     CM + "?resourceVersion=%d" % FUTURE, None, "admin"),
    ("watch-from-rv.jsonl", "GET", CM + WATCH % 1 + "resourceVersion={mid}",
     None, "admin"),
    ("watchlist.jsonl", "GET", CM + WATCH % 1 + "sendInitialEvents=true&"
     "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true", None,
     "admin"),
    ("watchlist-too-large-rv.jsonl", "GET",
     CM + WATCH % 10 + "sendInitialEvents=true&resourceVersionMatch="
     "NotOlderThan&allowWatchBookmarks=true&resourceVersion=%d" % FUTURE,
     None, "admin"),
]

# After a compaction and an API server restart: (file, path) with {old}
# (the RV of a list taken before the compaction) and {old_continue}.
AFTER_RESTART = [
    ("list-expired-continue-410.txt", CM + "?limit=2&continue={old_continue}"),
    ("list-compacted-exact-rv-410.txt", CM + "?resourceVersion={old}&limit=2"),
    ("watch-too-old-rv-410.jsonl", CM + WATCH % 5 + "resourceVersion={old}"),
]

FILES = [r[0] for r in REQUESTS] + [r[0] for r in AFTER_RESTART]


class Target:
    """A server to capture from: URL, tokens, TLS context, and the hooks
    for compaction and restart."""

    def __init__(self, url, tokens, context=None, compact=None,
                 restart=None):
        self.url = url
        self.tokens = tokens
        self.context = context
        self.compact = compact
        self.restart = restart
        self.rvs = {}
        self.current = 0
        self.fills = {}

    def request(self, method, path, body=None, token="admin", timeout=60):
        """(code, text); a watch is read to its end."""
        u = urllib.parse.urlparse(self.url)
        cls = http.client.HTTPSConnection if u.scheme == "https" \
            else http.client.HTTPConnection
        kw = {"context": self.context} if u.scheme == "https" else {}
        conn = cls(u.hostname, u.port, timeout=timeout, **kw)
        headers = {"Content-Type": "application/json",
                   "User-Agent": "capture.py"}
        if self.tokens.get(token):
            headers["Authorization"] = "Bearer " + self.tokens[token]
        data = json.dumps(body) if body is not None else None
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        text = r.read().decode()
        conn.close()
        return r.status, text

    def fill(self, text):
        for key, value in self.fills.items():
            text = text.replace("{%s}" % key, str(value))
        return text

    def rv_name(self, rv):
        """The write an RV belongs to. The last write's and anything after
        it (the real server's leases move its RV on) are CURRENT."""
        rv = int(rv)
        if rv == self.rvs.get("OLD"):
            return "RV(OLD)"
        if rv >= self.current:
            return "RV(CURRENT)"
        for name, value in self.rvs.items():
            if value == rv:
                return "RV(%s)" % name
        return "RV(OTHER)"


def populate(t):
    """Namespace, marker, cm-0..cm-4 (labels app=b, a, b, a, b)."""
    t.request("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    for i, name in enumerate(["marker"] + NAMES):
        body = {"metadata": {"name": name}, "data": {"n": "x"}}
        if name != "marker":
            body["metadata"]["labels"] = {"app": "a" if i % 2 == 0 else "b"}
        code, text = t.request("POST", CM, body)
        if code != 201:
            raise RuntimeError("create %s: %d %s" % (name, code, text))
        t.rvs[name] = int(json.loads(text)["metadata"]["resourceVersion"])
    t.current = t.rvs["cm-4"]
    _, text = t.request("GET", CM + "?limit=2")
    t.fills = {"mid": t.rvs["cm-1"], "current": t.current,
               "continue": json.loads(text)["metadata"]["continue"]}


def _token(t, token):
    doc = json.loads(base64.urlsafe_b64decode(token + "=" *
                                              (-len(token) % 4)))
    if doc.get("rv", -1) > 0:
        doc["rv"] = t.rv_name(doc["rv"])
    return "CONTINUE" + json.dumps(doc, separators=(",", ":"))


def _numbers(t, text):
    """RVs in a message ("resource version: N", "current: N", "(N)")."""
    def sub(m):
        n = int(m.group(0))
        return m.group(0) if n == FUTURE else t.rv_name(n)
    return re.sub(r"(?<=version: )\d+|(?<=current: )\d+|(?<=\()\d+(?=\))",
                  sub, text)


def _normalize(t, value, key=None):
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "managedFields":
                continue
            out[k] = _normalize(t, v, k)
        return out
    if isinstance(value, list):
        return [_normalize(t, v) for v in value]
    if not isinstance(value, str):
        return value
    if key == "uid":
        return "UID"
    if key in ("creationTimestamp", "time"):
        return "TIMESTAMP"
    if key == "resourceVersion" and value.isdigit():
        return t.rv_name(value)
    if key == "continue":
        return _token(t, value)
    if key == "message":
        return _numbers(t, value)
    return value


def _line(t, text):
    try:
        doc = json.loads(text)
    except ValueError:
        return text.rstrip("\n")
    return json.dumps(_normalize(t, doc), separators=(",", ":"),
                      ensure_ascii=False)


def normalize(t, code, text, watch):
    if watch and code == 200:
        lines = []
        for raw in text.splitlines():
            if raw.strip():
                line = _line(t, raw)
                if not (lines and line == lines[-1] and
                        '"BOOKMARK"' in line):
                    lines.append(line)
        body = "\n".join(lines)
    else:
        body = _line(t, text)
    return "%s\n\nHTTP %d\n" % (body, code)


def collect(t):
    """{file: normalized answer} of every capture, t populated first."""
    populate(t)
    out = {}
    for name, method, path, body, token in REQUESTS:
        filled = json.loads(t.fill(json.dumps(body))) if body else None
        code, text = t.request(method, t.fill(path), filled, token)
        out[name] = normalize(t, code, text, "watch=1" in path)
    _, text = t.request("GET", CM + "?limit=2")
    page = json.loads(text)
    t.fills.update(old=page["metadata"]["resourceVersion"],
                   old_continue=page["metadata"]["continue"])
    t.rvs["OLD"] = int(t.fills["old"])
    for name in NAMES[:3]:
        t.request("PUT", CM + "/" + name,
                  {"metadata": {"name": name}, "data": {"n": "changed"}})
    t.compact()
    t.restart()
    # After the restart everything new is CURRENT's.
    t.current = t.rvs["OLD"] + 1
    for name, path in AFTER_RESTART:
        code, text = t.request("GET", t.fill(path))
        out[name] = normalize(t, code, text, "watch=1" in path)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin-dir", default=os.environ.get("REALKUBE_BIN", ""))
    args = p.parse_args()
    sys.path.insert(0, os.path.join(HERE, "..", "..", "integration_tests",
                                    "realkube"))
    import control_plane  # pylint: disable=import-outside-toplevel
    with control_plane.ControlPlane(args.bin_dir) as cp:
        t = Target(cp.server, {"admin": cp.admin_token,
                               "user": cp.user_token, "bogus": "bogus"},
                   ssl.create_default_context(cafile=cp.ca_file),
                   compact=cp.compact_etcd, restart=cp.restart_apiserver)
        for name, text in collect(t).items():
            with open(os.path.join(HERE, name), "w") as f:
                f.write(text)
            print("wrote", name)


if __name__ == "__main__":
    main()
