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
  5. server/ is in rooms (server/<room>/...; //server itself holds the
     binary): the app (app/ and //server) wires everything; the services
     (SERVICE_ROOMS) depend on no other service and not on the app; the
     support rooms (SUPPORT_ROOMS: ops/, security/, rpc/, registry/,
     config/) depend on no service and not on the app. Outside server/,
     only integration_tests/ names a service's or the app's targets
     (everyone may run //server:informer_sidecar). Direct edges, tests
     included; a package under server/ in no known room is reported.
  6. Tests of a product package sit in that package: a test source
     X_test.cc (or .py) of a test under informer/, server/, emulator/ or
     client_sdk/ whose package has no product source X.* while another
     package of the same top directory has one is misplaced.
  7. Function length in product source files (those of rule 4): past
     FUNCTION_WARN lines a warning, past FUNCTION_MAX a violation, unless
     the function is in FUNCTION_EXCEPTIONS (each with its reason; an
     entry that no longer applies is itself reported). How a function is
     measured: see function_lengths().

Prints every violation and exits 1 if there is any; 2 if the query fails.
Tests: tools/check_layering_test.py.
Reads the query's XML from --xml FILE instead of running Bazel (for tests of
this script).
"""

import argparse
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

PRODUCT_DIRS = ("informer", "server", "emulator", "client_sdk")
MAX_LINES = 900

# server/'s rooms (the directory under server/; "" is //server, the binary).
APP_ROOMS = ("", "app")
SERVICE_ROOMS = ("informer_service", "workqueue_service", "events_service",
                 "kubeapi")
SUPPORT_ROOMS = ("ops", "security", "rpc", "registry", "config")
# Run by tests, deploy/ and the SDKs' tests: not "wiring".
SIDECAR_BINARY = "//server:informer_sidecar"

FUNCTION_WARN = 80
FUNCTION_MAX = 100
# "path:Function" (the name as written at its definition, e.g.
# "server/app/sidecar_app.cc:Sidecar::Start") -> why it may exceed
# FUNCTION_MAX. Keep it short: split a function rather than list it.
FUNCTION_EXCEPTIONS = {}
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


def product_files(rules, workspace):
    """Workspace-relative paths of the .cc/.h sources of product rules
    under PRODUCT_DIRS (tests, benchmarks and fuzzers excluded), sorted;
    generated files (not in the tree) left out."""
    labels = set()
    for r in rules.values():
        if (top_dir(r.package) in PRODUCT_DIRS and r.product and
                not is_bench(r.label)):
            for s in r.sources:
                if s.endswith((".cc", ".h")) and not is_test_file(s):
                    labels.add(s)
    paths = set()
    for label in labels:
        rel = label[2:].replace(":", "/", 1).lstrip("/")
        if os.path.isfile(os.path.join(workspace, rel)):
            paths.add(rel)
    return sorted(paths)


def check_file_sizes(rules, workspace):
    problems = []
    for rel in product_files(rules, workspace):
        with open(os.path.join(workspace, rel), "rb") as f:
            n = sum(1 for _ in f)
        if n > MAX_LINES:
            problems.append(f"{rel}: {n} lines "
                            f"(product files: at most {MAX_LINES})")
    return problems


def room_of(package):
    """server/'s room of a package ("" for //server), None outside."""
    if package == "server":
        return ""
    if package.startswith("server/"):
        return package.split("/")[1]
    return None


def room_name(room):
    return "//server" if room == "" else f"server/{room}/"


def check_server_rooms(rules, graph):
    problems, unknown = set(), set()
    known = APP_ROOMS + SERVICE_ROOMS + SUPPORT_ROOMS
    for src, dsts in graph.items():
        src_pkg = package_of(src)
        src_room = room_of(src_pkg)
        if src_room is not None and src_room not in known:
            unknown.add(src_room)
        for dst in dsts:
            dst_room = room_of(package_of(dst))
            if dst_room is None or dst_room == src_room:
                continue
            if dst_room not in known:
                unknown.add(dst_room)
                continue
            wired = dst_room in SERVICE_ROOMS or dst_room in APP_ROOMS
            what = "the app" if dst_room in APP_ROOMS else "a service"
            if src_room is None:
                if (wired and dst != SIDECAR_BINARY and
                        top_dir(src_pkg) != "integration_tests"):
                    problems.add(f"only the app wires {what} "
                                 f"({room_name(dst_room)}): {src} -> {dst}")
            elif src_room in SERVICE_ROOMS and wired:
                problems.add(f"service {room_name(src_room)} depends on "
                             f"{what}: {src} -> {dst}")
            elif src_room in SUPPORT_ROOMS and wired:
                problems.add(f"{room_name(src_room)} depends on {what}: "
                             f"{src} -> {dst}")
            elif src_room == "app" and dst_room == "":
                problems.add(f"server/app/ depends on //server: "
                             f"{src} -> {dst}")
    for room in sorted(unknown):
        problems.add(f"server/{room}/ is in no room of tools/"
                     f"check_layering.py (APP_ROOMS, SERVICE_ROOMS, "
                     f"SUPPORT_ROOMS)")
    return sorted(problems)


def _stem(label):
    name = label.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[0]


def check_test_placement(rules):
    """A test named after a product source sits in that source's package."""
    stems = {}  # (top dir, stem) -> packages with a product source `stem`
    for r in rules.values():
        if top_dir(r.package) in PRODUCT_DIRS and not r.is_test:
            for s in r.sources:
                if not is_test_file(s):
                    stems.setdefault((top_dir(r.package), _stem(s)),
                                     set()).add(package_of(s))
    problems = []
    for r in sorted(rules.values(), key=lambda r: r.label):
        if not r.is_test or top_dir(r.package) not in PRODUCT_DIRS:
            continue
        for s in r.sources:
            stem = _stem(s)
            if not stem.endswith("_test"):
                continue
            homes = stems.get((top_dir(r.package), stem[:-len("_test")]),
                              set())
            if homes and package_of(s) not in homes:
                where = ", ".join(pkg_name(p) for p in sorted(homes))
                problems.append(f"test away from its subject: {s} tests "
                                f"{stem[:-len('_test')]} of {where}")
    return problems


# --- Function length -------------------------------------------------------
#
# How a function is measured: comments, string and character literals
# (raw strings too) and preprocessor lines are blanked first, keeping line
# breaks. Then a brace-matching scan walks the file at namespace and class
# scope: `namespace ... {` and `extern "C" {` are entered, as are the bodies
# of class/struct/union definitions (so inline member functions count);
# any other `{` there opens a function body when the text since the last
# `;`, `{` or `}` reads as a function header: a name and its parameter
# list, followed only by qualifiers (const, override, noexcept,
# ALL_CAPS(...) annotation macros...), a trailing return type, or a
# constructor's initializer list (where `member_{...}` is an initializer
# and the `{` after `)` or `}` the body). Everything else (an enum, a
# braced initializer, a lambda assigned at namespace scope, a default
# argument) is skipped whole. A function's length is the number of lines
# from its opening brace to its closing brace, both included; lambdas and
# local classes inside count toward the function that holds them. The scan
# is not a C++ parser: it only has to be right for code clang-format
# formats, which it is on this tree (tools/check_layering_test.py).

_ACCESS = re.compile(r"\b(public|private|protected)\s*:(?!:)")
_NAME = re.compile(r"((?:[A-Za-z_]\w*\s*::\s*)*(?:operator\s*\(\s*\)|"
                   r"operator\s*[^\s\w(]+|~?[A-Za-z_]\w*))\s*\(")
_AFTER_PARAMS = re.compile(
    r"(\s|const|override|final|noexcept|mutable|volatile|&|"
    r"[A-Z][A-Z0-9_]*\([^()]*\))*")


def _blank(text):
    return re.sub(r"[^\n]", " ", text)


def strip_code(text):
    """`text` with comments, literals and preprocessor lines blanked (line
    breaks kept), so that braces and lines can be counted."""
    out, i, n, line_start = [], 0, len(text), True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":
            j = i
            while j < n and text[j] != "\n":
                j += 2 if text.startswith("\\\n", j) else 1
            out.append(_blank(text[i:j]))
            i = j
            continue
        line_start = c == "\n"
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif (text.startswith('R"', i) and
              (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))):
            m = re.match(r'R"([^()\\\s]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            close = ")" + m.group(1) + '"'
            j = text.find(close, i + m.end())
            j = n if j < 0 else j + len(close)
        elif c == "'" and 0 < i < n - 1 and text[i - 1].isalnum() and \
                text[i + 1].isalnum():
            j = i + 1  # a digit separator: 1'000'000
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] not in (c, "\n"):
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        else:
            out.append(c)
            i += 1
            continue
        out.append(_blank(text[i:j]))
        i = j
    return "".join(out)


def _closing(code, i):
    """Index of the brace that closes the one at `i`."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def _declarator(header):
    """(name, index after its parameter list) of the first name followed
    by '(' outside template brackets in `header`, or None."""
    for m in _NAME.finditer(header):
        before = header[:m.start()].replace("->", "")
        if before.count("<") > before.count(">"):
            continue
        depth = 0
        for j in range(m.end() - 1, len(header)):
            depth += {"(": 1, ")": -1}.get(header[j], 0)
            if depth == 0:
                return re.sub(r"\s+", "", m.group(1)), j + 1
        return None
    return None


def _opens_function(header, prev):
    """Whether the `{` after `header` (at namespace or class scope) opens a
    function body; `prev` is the character before that brace."""
    if header.count("(") != header.count(")"):
        return False  # a default argument's or a call's braces
    decl = _declarator(header)
    if decl is None or re.fullmatch(r"[A-Z][A-Z0-9]*_[A-Z0-9_]*", decl[0]):
        return False  # no parameter list, or a macro: X_GUARDED_BY(mu){}
    unnamed = re.sub(r"operator\s*[^\s\w(]+(?=\s*\()", "operator", header)
    if "=" in unnamed[:unnamed.find("(")] or re.match(r"\s*enum\b", header):
        return False  # an initializer
    tail = header[decl[1]:]
    rest = tail[_AFTER_PARAMS.match(tail).end():]
    if not rest.strip() or "->" in tail:
        return True
    if re.match(r":(?!:)", rest):  # a constructor's initializer list
        return prev in ")}"
    return False


def function_lengths(text):
    """[(name, first line, last line)] of every function body in the C++
    source `text` (see the comment above for what counts)."""
    code = strip_code(text)
    line_of = [0] * (len(code) + 1)
    for k, ch in enumerate(code):
        line_of[k + 1] = line_of[k] + (ch == "\n")
    out, start, i = [], 0, 0
    while i < len(code):
        c = code[i]
        if c in ";}":
            start = i + 1
        elif c == "{":
            header = _ACCESS.sub(" ", code[start:i])
            head = re.sub(r"^\s*template\s*<.*?>\s*(?=[a-z])", "", header,
                          flags=re.S)
            if (re.search(r"\bnamespace\b", header) or
                    re.fullmatch(r'\s*extern\s*"\s*"\s*', header) or
                    (re.match(r"\s*(class|struct|union)\b", head) and
                     "=" not in head.split("(")[0])):
                start = i + 1  # entered: its members are scanned
            elif _opens_function(header, code[:i].rstrip()[-1:]):
                end = _closing(code, i)
                out.append((_declarator(header)[0], line_of[i] + 1,
                            line_of[end] + 1))
                i = end
                start = i + 1
            else:
                i = _closing(code, i)  # skipped whole
        i += 1
    return out


def check_function_lengths(rules, workspace, warnings=None):
    """Violations (over FUNCTION_MAX, not excepted; stale exceptions);
    functions over FUNCTION_WARN are appended to `warnings`."""
    problems, seen = [], set()
    for rel in product_files(rules, workspace):
        with open(os.path.join(workspace, rel), encoding="utf-8",
                  errors="replace") as f:
            text = f.read()
        for name, first, last in function_lengths(text):
            n = last - first + 1
            key = f"{rel}:{name}"
            if n > FUNCTION_MAX and key in FUNCTION_EXCEPTIONS:
                seen.add(key)
            elif n > FUNCTION_MAX:
                problems.append(f"{rel}:{first}: {name} is {n} lines "
                                f"(product functions: at most "
                                f"{FUNCTION_MAX}; split it, or list it in "
                                f"FUNCTION_EXCEPTIONS with the reason)")
            elif n > FUNCTION_WARN and warnings is not None:
                warnings.append(f"warning: {rel}:{first}: {name} is {n} "
                                f"lines (aim for at most {FUNCTION_WARN})")
    for key in sorted(set(FUNCTION_EXCEPTIONS) - seen):
        problems.append(f"FUNCTION_EXCEPTIONS lists {key}, which is not "
                        f"over {FUNCTION_MAX} lines (any more): remove it")
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
    warnings = []
    problems = (check_package_cycles(rules, graph) +
                check_forbidden(rules, graph) +
                check_file_sizes(rules, workspace) +
                check_server_rooms(rules, graph) +
                check_test_placement(rules) +
                check_function_lengths(rules, workspace, warnings))
    for w in warnings:
        print(w)
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
          f"file over {MAX_LINES} lines, server/'s rooms kept, tests beside "
          f"their subject, no product function over {FUNCTION_MAX} lines; "
          f"{len(warnings)} function(s) over {FUNCTION_WARN})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
