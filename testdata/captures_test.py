"""Checks that the recorded kube-apiserver captures agree with each other.

The emulator's fidelity tests and the parsers' tests both lean on these
files, so a capture that was truncated or mangled must fail loudly here
rather than make two other suites disagree.
"""
import gzip
import json
import os
import re
import unittest

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                    "kube-apiserver-v1.24")


def read(name, mode="r"):
    with open(os.path.join(DATA, name), mode) as f:
        return f.read()


def dechunk(raw):
    """Decodes an HTTP/1.1 chunked body; returns the list of chunk payloads."""
    chunks = []
    pos = 0
    while True:
        eol = raw.index(b"\r\n", pos)
        size = int(raw[pos:eol].split(b";")[0], 16)
        pos = eol + 2
        if size == 0:
            return chunks
        chunks.append(raw[pos:pos + size])
        if raw[pos + size:pos + size + 2] != b"\r\n":
            raise ValueError("chunk at %d not terminated by CRLF" % pos)
        pos += size + 2


class CapturesTest(unittest.TestCase):

    def test_chunked_watch_has_one_event_per_chunk_ending_in_newline(self):
        chunks = dechunk(read("watch-configmaps.http1-chunked-raw.txt", "rb"))
        self.assertGreaterEqual(len(chunks), 4)
        for c in chunks:
            self.assertTrue(c.endswith(b"\n"), c[:40])
            event = json.loads(c)
            self.assertIn(event["type"],
                          {"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})

    def test_jsonl_watch_is_a_valid_event_sequence(self):
        lines = read("watch-configmaps.jsonl").splitlines()
        types = [json.loads(l)["type"] for l in lines if l]
        self.assertEqual(types[0], "ADDED")
        self.assertIn("DELETED", types)
        self.assertEqual(types[-1], "BOOKMARK")
        rvs = [int(json.loads(l)["object"]["metadata"]["resourceVersion"])
               for l in lines if l]
        self.assertEqual(rvs, sorted(rvs))

    def test_too_old_watch_is_a_single_410_error_event(self):
        events = [json.loads(l) for l in
                  read("watch-too-old-rv-410.jsonl").splitlines() if l]
        self.assertEqual(len(events), 1)
        self.assertEqual(events[0]["type"], "ERROR")
        self.assertEqual(events[0]["object"]["code"], 410)
        self.assertEqual(events[0]["object"]["reason"], "Expired")

    def test_pod_list_has_1000_pods_with_managed_fields(self):
        doc = json.loads(gzip.decompress(read("pods-1000.list.json.gz", "rb")))
        self.assertEqual(doc["kind"], "PodList")
        self.assertEqual(len(doc["items"]), 1000)
        names = {p["metadata"]["name"] for p in doc["items"]}
        self.assertEqual(len(names), 1000)
        self.assertTrue(all("managedFields" in p["metadata"]
                            for p in doc["items"]))

    def test_error_bodies_are_status_objects_matching_their_http_code(self):
        for name in ("error-401.txt", "error-403.txt", "error-404.txt",
                     "error-404-resource.txt", "list-expired-continue-410.txt",
                     "watchlist-unsupported-v1.24.txt"):
            # The body's first line is the Status; an "HTTP <code>" line
            # records the response code it came with.
            text = read(name)
            status = json.loads(text.splitlines()[0])
            self.assertEqual(status["kind"], "Status", name)
            self.assertEqual(status["status"], "Failure", name)
            codes = re.findall(r"^HTTP (\d+)", text, re.M)
            self.assertEqual(codes, [str(status["code"])], name)


if __name__ == "__main__":
    unittest.main()
