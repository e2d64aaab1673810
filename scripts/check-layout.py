#!/usr/bin/env python3
"""The house stays small: no source file over the line limit, no import circle between modules.

Reads every `crates/*/src/**/*.rs`, maps each file to its module path (`a.rs` and `a/mod.rs`
are `crate::a`), and follows the paths it names through `crate::`, `super::` and `self::`
(in `use` trees, braces expanded, and inline). A reference from a module to one that is
neither its ancestor nor its descendant is an edge; a strongly connected set of two or more
modules is a circle, and so is one between subtrees (`classify/*` naming `formats/*` and
`formats/*` naming `classify/*`, whichever files they are). A child naming its parent's items
(and the parent declaring its children) is how Rust modules nest, not a circle.

Exit 0 when clean; 1 with every file over the limit and every circle named. `--json` prints
the figures for scripts.
"""

import json
import os
import re
import sys

LIMIT = 700
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
USE_RE = re.compile(r"\buse\s+((?:crate|super|self)\b[^;]*);", re.S)
INLINE_RE = re.compile(r"\b((?:crate|super|self)(?:::" + IDENT + r")+)")


def strip_comments_and_strings(text):
    """Blank out comments and string literals, keeping line structure."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            close = '"' + m.group(1)
            j = text.find(close, i + len(m.group(0)))
            j = n if j < 0 else j + len(close)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]) or (c == "'" and text[i:i + 2] == "'\\"):
            m = re.match(r"'(\\[^']*|[^\\'])'", text[i:])
            j = i + (len(m.group(0)) if m else 1)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_use_tree(tree):
    """`a::{b, c::{d, e}}` -> [a::b, a::c::d, a::c::e]."""
    tree = re.sub(r"\s+", "", tree)
    m = re.search(r"\{", tree)
    if not m:
        return [re.sub(r"\bas\b.*$", "", tree)]
    prefix = tree[: m.start()]
    depth, start, parts = 0, m.end(), []
    for k in range(m.start(), len(tree)):
        ch = tree[k]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                parts.append(tree[start:k])
                break
        elif ch == "," and depth == 1:
            parts.append(tree[start:k])
            start = k + 1
    out = []
    for p in parts:
        if p:
            out.extend(prefix + q for q in expand_use_tree(p))
    return out


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel[-1] in ("lib", "main", "mod"):
        rel = rel[:-1]
    if rel and rel[0] == "bin":
        return None
    return tuple(rel)


def resolve(current, path, modules):
    parts = path.split("::")
    if parts[0] == "crate":
        base, parts = (), parts[1:]
    else:
        base = current
        while parts and parts[0] in ("super", "self"):
            if parts[0] == "super":
                base = base[:-1]
            parts = parts[1:]
    target = base
    for p in parts:
        if target + (p,) in modules:
            target = target + (p,)
        else:
            break
    return target


def related(a, b):
    return a[: len(b)] == b or b[: len(a)] == a


def sccs(nodes, edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    as_json = "--json" in sys.argv
    crates_dir = os.path.join(ROOT, "crates")
    long_files, circles, files = [], [], 0
    for crate in sorted(os.listdir(crates_dir)):
        src = os.path.join(crates_dir, crate, "src")
        if not os.path.isdir(src):
            continue
        modules, texts = {}, {}
        for dirpath, _, names in os.walk(src):
            for name in names:
                if not name.endswith(".rs"):
                    continue
                path = os.path.join(dirpath, name)
                files += 1
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                lines = text.count("\n")
                rel = os.path.relpath(path, ROOT)
                if lines > LIMIT:
                    long_files.append((rel, lines))
                mod = module_of(src, path)
                if mod is not None:
                    modules[mod] = rel
                    texts[mod] = strip_comments_and_strings(text)
        edges = {}
        for mod, text in texts.items():
            paths = []
            for m in USE_RE.finditer(text):
                paths.extend(expand_use_tree(m.group(1)))
            paths.extend(m.group(1) for m in INLINE_RE.finditer(USE_RE.sub(" ", text)))
            for p in paths:
                target = resolve(mod, p, modules)
                if target != mod and not related(mod, target):
                    edges.setdefault(mod, set()).add(target)
        for comp in sccs(modules.keys(), edges):
            circles.append([modules[m] for m in comp])
        # The same between subtrees: an edge from a::x to b::y is one between the siblings
        # a and b (their nearest common ancestor's children), so `classify/* <-> formats/*`
        # is a circle even when no single file of either names the other's file back.
        subtree_edges = {}
        for a, targets in edges.items():
            for b in targets:
                k = 0
                while k < min(len(a), len(b)) and a[k] == b[k]:
                    k += 1
                subtree_edges.setdefault(a[: k + 1], set()).add(b[: k + 1])
        nodes = set(subtree_edges) | {t for ts in subtree_edges.values() for t in ts}
        for comp in sccs(nodes, subtree_edges):
            names = ["/".join(m) for m in comp]
            if not any(set(c) == {modules.get(m) for m in comp} for c in circles):
                circles.append([f"crates/{crate}/src/{n}/*" for n in names])
    if as_json:
        print(json.dumps({"files": files, "limit": LIMIT,
                          "over_limit": [{"file": f, "lines": n} for f, n in long_files],
                          "circles": circles}))
    else:
        for f, n in sorted(long_files, key=lambda x: -x[1]):
            print(f"over {LIMIT} lines: {f} ({n}); split it by responsibility")
        for c in circles:
            print("import circle: " + " <-> ".join(c) + "; move what both need into a module both use")
        print(f"{files} source files, {len(long_files)} over {LIMIT} lines, {len(circles)} import circles")
    return 1 if long_files or circles else 0


if __name__ == "__main__":
    sys.exit(main())
