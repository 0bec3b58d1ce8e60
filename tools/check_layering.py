#!/usr/bin/env python3
"""Checks the repository's layering rules with one `bazel query`.

  tools/check_layering.sh            # run from anywhere in the repository

Rules (see docs/architecture.md):
  1. No cycle between Bazel packages. The package graph has an edge P -> Q
     when a rule of P names a target of Q (deps, data, srcs...); tests and
     testonly rules count.
  2. No informer/ target depends, directly or not, on server/ or emulator/
     (the client-go port knows nothing of gRPC or of our fake API server).
  3. No product target (not a test, not testonly) under informer/, server/,
     emulator/ or client_sdk/ depends, directly or not, on integration_tests/.
  4. No product source file (a .cc/.h of a product rule under those
     directories, tests and benchmarks excluded) exceeds 900 lines.

Prints every violation and exits 1 if there is any; 2 if the query fails.
Tests: tools/check_layering_test.py.
Reads the query's XML from --xml FILE instead of running Bazel (for tests of
this script).
"""

import argparse
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

PRODUCT_DIRS = ("informer", "server", "emulator", "client_sdk")
MAX_LINES = 900
QUERY = "kind(rule, //...)"


def package_of(label):
    """'//a/b:c' -> 'a/b'; '//:x' -> '' (the root package)."""
    return label[2:].split(":", 1)[0]


def top_dir(package):
    return package.split("/", 1)[0]


def is_bench(label):
    name = label.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
    return "bench" in name


def is_test_file(label):
    name = label.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
    stem = name.rsplit(".", 1)[0]
    return stem.endswith("_test") or "bench" in stem or "fuzz" in stem


class Rule:
    def __init__(self, elem):
        self.label = elem.get("name")
        self.kind = elem.get("class")
        self.package = package_of(self.label)
        self.testonly = any(
            b.get("name") == "testonly" and b.get("value") == "true"
            for b in elem.findall("boolean"))
        self.is_test = self.kind.endswith("_test") or self.kind == "test_suite"
        self.inputs = [i.get("name") for i in elem.findall("rule-input")
                       if i.get("name").startswith("//")]
        self.outputs = [o.get("name") for o in elem.findall("rule-output")]
        self.sources = []  # labels of srcs/hdrs/textual_hdrs
        for lst in elem.findall("list"):
            if lst.get("name") in ("srcs", "hdrs", "textual_hdrs"):
                self.sources += [l.get("value") for l in lst.findall("label")]

    @property
    def product(self):
        return not (self.is_test or self.testonly)


def load_rules(xml_text):
    root = ET.fromstring(xml_text)
    return {r.label: r for r in (Rule(e) for e in root.findall("rule"))}


def target_graph(rules):
    """Edges between targets of this repository; generated files are
    replaced by the rule that generates them."""
    generator = {}
    for r in rules.values():
        for o in r.outputs:
            generator[o] = r.label
    graph = {}
    for r in rules.values():
        graph[r.label] = sorted({generator.get(i, i) for i in r.inputs} -
                                {r.label})
    return graph


def sccs(nodes, edges):
    """Tarjan's strongly connected components, iteratively."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(edges.get(start, ())))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(edges.get(nxt, ()))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    n = stack.pop()
                    on_stack.discard(n)
                    comp.append(n)
                    if n == node:
                        break
                out.append(comp)
    return out


def shortest_path(graph, start, goal_pred):
    """Breadth-first path from start to the first node with goal_pred."""
    prev = {start: None}
    queue = [start]
    for node in queue:
        if node != start and goal_pred(node):
            path = [node]
            while prev[path[-1]] is not None:
                path.append(prev[path[-1]])
            return list(reversed(path))
        for nxt in graph.get(node, ()):
            if nxt not in prev:
                prev[nxt] = node
                queue.append(nxt)
    return None


def pkg_name(p):
    return "//" + p


def check_package_cycles(rules, graph):
    pkg_edges, witness = {}, {}
    for src, dsts in graph.items():
        sp = package_of(src)
        for d in dsts:
            dp = package_of(d)
            if dp != sp:
                pkg_edges.setdefault(sp, set()).add(dp)
                witness.setdefault((sp, dp), (src, d))
    nodes = sorted(set(pkg_edges) |
                   {p for ds in pkg_edges.values() for p in ds})
    problems = []
    for comp in sccs(nodes, pkg_edges):
        if len(comp) < 2:
            continue
        members = set(comp)
        # One concrete cycle through the component, with the target edges.
        first = min(comp)
        sub = {p: [q for q in sorted(pkg_edges.get(p, ())) if q in members]
               for p in members}
        path = shortest_path(sub, first, lambda n: first in sub.get(n, ()))
        if path is None:
            path = [first]
        cycle = path + [first]
        lines = [f"package cycle: {' -> '.join(pkg_name(p) for p in cycle)}"]
        for a, b in zip(cycle, cycle[1:]):
            s, d = witness[(a, b)]
            lines.append(f"    {s} -> {d}")
        problems.append("\n".join(lines))
    return problems


def check_forbidden(rules, graph):
    """Reports each forbidden crossing edge once, with one target that
    reaches it and how many do."""
    crossings = {}  # (what, from, to) -> [a path, how many targets reach it]
    for r in sorted(rules.values(), key=lambda r: r.label):
        top = top_dir(r.package)
        checks = []
        if top == "informer":
            checks.append(("informer/ depends on server/ or emulator/",
                           ("server", "emulator")))
        if top in PRODUCT_DIRS and r.product:
            checks.append(("product target depends on integration_tests/",
                           ("integration_tests",)))
        for what, banned in checks:
            path = shortest_path(
                graph, r.label,
                lambda n, banned=banned: top_dir(package_of(n)) in banned)
            if path:
                entry = crossings.setdefault((what, path[-2], path[-1]),
                                             [path, 0])
                entry[1] += 1
    problems = []
    for (what, src, dst), (path, count) in sorted(crossings.items()):
        msg = f"{what}: {src} -> {dst}"
        if count > 1:
            msg += f" (and {count - 1} target(s) depending on {src})"
        problems.append(msg)
    return problems


def check_file_sizes(rules, workspace):
    files = set()
    for r in rules.values():
        if (top_dir(r.package) in PRODUCT_DIRS and r.product and
                not is_bench(r.label)):
            for s in r.sources:
                if s.endswith((".cc", ".h")) and not is_test_file(s):
                    files.add(s)
    problems = []
    for label in sorted(files):
        path = os.path.join(workspace, label[2:].replace(":", "/", 1)
                            .lstrip("/"))
        if not os.path.isfile(path):
            continue  # generated
        with open(path, "rb") as f:
            n = sum(1 for _ in f)
        if n > MAX_LINES:
            problems.append(f"{os.path.relpath(path, workspace)}: {n} lines "
                            f"(product files: at most {MAX_LINES})")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--xml", help="query output to read instead of Bazel")
    args = parser.parse_args()
    workspace = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if args.xml:
        with open(args.xml, encoding="utf-8") as f:
            xml_text = f.read()
    else:
        proc = subprocess.run(
            ["bazel", "query", QUERY, "--output=xml", "--noshow_progress"],
            cwd=workspace, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            check=False)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr.decode(errors="replace"))
            print(f"check_layering: bazel query '{QUERY}' failed",
                  file=sys.stderr)
            return 2
        xml_text = proc.stdout.decode("utf-8")
    rules = load_rules(xml_text)
    graph = target_graph(rules)
    problems = (check_package_cycles(rules, graph) +
                check_forbidden(rules, graph) +
                check_file_sizes(rules, workspace))
    for p in problems:
        print(p)
    packages = len({r.package for r in rules.values()})
    if problems:
        print(f"check_layering: {len(problems)} violation(s) "
              f"({len(rules)} rules in {packages} packages)")
        return 1
    print(f"check_layering: ok ({len(rules)} rules in {packages} packages: "
          f"no package cycle, informer/ independent of server/ and "
          f"emulator/, no product target on integration_tests/, no product "
          f"file over {MAX_LINES} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
