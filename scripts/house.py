#!/usr/bin/env python3
"""Structure report of the workspace's non-test Rust code (issue 26): import circles between the
modules of one crate, files over 600 lines, functions over 80 lines, copies between services, the
services' lib.rs + main.rs lines and the README's lines. Python 3 standard library only; run it
through scripts/house.sh (see its header and docs/testing.md, "Structure report").

What counts as test code (left out of every number): any path with a `tests` or `target`
component, files named `tests.rs` or `*_tests.rs`, files declared by a `#[cfg(test)] mod x;`, and
every item under `#[cfg(test)]` (a `mod tests { ... }` block, an `impl`, a `fn`) inside a file.

Circles: per crate root (src/lib.rs, src/main.rs), the modules reachable through `mod x;` (a module
is a file `x.rs` or `x/mod.rs`). An edge M -> T is a `use` in M, or a path in M's code starting with
`crate::`, `super::`, `self::` or the name of one of M's child modules, that resolves to T: the
deepest existing module of the path, followed through `use` re-exports to where the item is
defined (so `use crate::Foo`, with lib.rs saying `pub use a::Foo`, is an edge to `a`). A `mod`
declaration is no edge, and neither is a `pub use` whose names M's own code does not use (a
facade). Every strongly connected component of more than one module is a circle.
"""

import argparse
import bisect
import contextlib
import io
import os
import re
import sys
import tempfile
import time
from collections import defaultdict

FILE_LIMIT = 600
FN_LIMIT = 80
COPY_MIN = 6

# The bars, used by --check unless a --max-* flag says otherwise (None: not checked).
DEFAULT_BARS = {
    "circles": 0,
    "files_over_600": 0,
    "service_functions_over_80": 1,
    "functions_over_80": None,
    "copies_between_services": 0,
    "service_entry_lines": 500,
    "readme_lines": 600,
}

# --------------------------------------------------------------------------------------------
# Lexing: blank comments (and, for `code`, literals) so that braces and paths are real tokens.

_LEX_RE = re.compile(r"""//|/\*|(?<![\w])(?:b|c)?r\#*"|"|'""")
_RAW_RE = re.compile(r'(?:b|c)?r(#*)"')
_NOT_NL = re.compile(r"[^\n]")


def _blank(s):
    return _NOT_NL.sub(" ", s)


def lex(text):
    """Return (code, nocomment), both as long as `text` with the same newlines: `code` has comments
    and string/char literals blanked, `nocomment` only comments."""
    n = len(text)
    code, noc = [], []
    pos = 0
    i = 0
    while True:
        m = _LEX_RE.search(text, i)
        if not m:
            break
        s = m.start()
        tok = m.group(0)
        kind = None
        if tok == "//":
            e = text.find("\n", s)
            e = n if e < 0 else e
            kind = "comment"
        elif tok == "/*":
            depth, e = 1, s + 2
            while e < n and depth:
                if text.startswith("/*", e):
                    depth, e = depth + 1, e + 2
                elif text.startswith("*/", e):
                    depth, e = depth - 1, e + 2
                else:
                    e += 1
            kind = "comment"
        elif tok == '"':
            e = s + 1
            while e < n and text[e] != '"':
                e += 2 if text[e] == "\\" else 1
            e = min(e + 1, n)
            kind = "literal"
        elif tok == "'":
            if s + 1 < n and text[s + 1] == "\\":
                e = text.find("'", s + 3)
                e = n if e < 0 else e + 1
                kind = "literal"
            elif s + 2 < n and text[s + 2] == "'" and text[s + 1] != "\n":
                e = s + 3
                kind = "literal"
            else:  # a lifetime or a label
                i = s + 1
                continue
        else:  # raw string
            rm = _RAW_RE.match(text, s)
            close = '"' + rm.group(1)
            f = text.find(close, rm.end())
            e = n if f < 0 else f + len(close)
            kind = "literal"
        code.append(text[pos:s])
        noc.append(text[pos:s])
        seg = text[s:e]
        code.append(_blank(seg))
        noc.append(_blank(seg) if kind == "comment" else seg)
        pos = i = e
    code.append(text[pos:])
    noc.append(text[pos:])
    return "".join(code), "".join(noc)


def brace_pairs(code):
    """Map each `{` offset to the offset of its matching `}` (unmatched: end of text)."""
    pairs, stack = {}, []
    for m in re.finditer(r"[{}]", code):
        if m.group(0) == "{":
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.start()
    for o in stack:
        pairs[o] = len(code) - 1
    return pairs


_ITEM_END_RE = re.compile(r"[{};()\[\]]")


def item_body(code, start):
    """From `start` (inside an item's header), the offset of the body's `{`, or None if a `;`
    comes first (a declaration without body), skipping parentheses and brackets."""
    depth = 0
    for m in _ITEM_END_RE.finditer(code, start):
        c = m.group(0)
        if c in "([":
            depth += 1
        elif c in ")]":
            depth = max(0, depth - 1)
        elif depth == 0:
            return m.start() if c == "{" else None
        elif c == "}":  # unbalanced: give up
            return None
    return None


# --------------------------------------------------------------------------------------------
# One source file: test parts removed, lines, functions, modules, paths.

_CFG_TEST_RE = re.compile(r"#\s*\[\s*cfg\s*\(\s*(?:test\s*\)|all\s*\(\s*test\b)")
_ATTR_RE = re.compile(r"\s*#\s*!?\s*\[")
_PATH_ATTR_RE = re.compile(r'#\[path\s*=\s*"([^"]+)"\]')
_MOD_DECL_RE = re.compile(r"^[ \t]*(?:pub(?:\([^)]*\))?[ \t]+)?mod[ \t]+(\w+)[ \t]*;", re.M)
_FN_RE = re.compile(r"\bfn\s+(r#)?(\w+)")
_IMPL_RE = re.compile(r"^[ \t]*(?:unsafe[ \t]+)?impl\b", re.M)
_TRAIT_RE = re.compile(
    r"^[ \t]*(?:pub(?:\([^)]*\))?[ \t]+)?(?:unsafe[ \t]+)?(?:auto[ \t]+)?trait[ \t]+(\w+)", re.M
)
_USE_RE = re.compile(r"^[ \t]*(pub(?:\([^)]*\))?[ \t]+)?use[ \t]+", re.M)
_DEF_RE = re.compile(
    r"^(?:pub(?:\([^)]*\))?[ \t]+)?(?:(?:async|const|unsafe|extern(?:[ \t]+\"[^\"]*\")?)[ \t]+)*"
    r"(?:struct|enum|union|trait|fn|const|static|type|mod)[ \t]+(?:mut[ \t]+)?(\w+)",
    re.M,
)
_MACRO_DEF_RE = re.compile(r"^[ \t]*macro_rules!\s*(\w+)", re.M)
_PATH_RE = re.compile(r"(?<![\w:$.])(\w+)((?:::\w+)+)")
_USE_TOKEN_RE = re.compile(r"::|\w+|[{},*]")
_SIGNIFICANT_RE = re.compile(r"[\w\"']")


def match_bracket(code, start):
    """`code[start]` is `[`: the offset just past its matching `]`."""
    depth = 0
    for i in range(start, len(code)):
        c = code[i]
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(code)


class Source:
    def __init__(self, root, rel):
        self.rel = rel
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            self.text = f.read()
        self.lines_total = len(self.text.splitlines())
        code, noc = lex(self.text)
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        self.test_mods = []  # (name, path attribute or None) of `#[cfg(test)] mod x;`
        excluded = self._test_ranges(code)
        self.excluded_lines = set()
        for a, b in excluded:
            self.excluded_lines.update(range(self.line_of(a), self.line_of(b) + 1))
        # Test items blanked out of both views: everything below sees non-test code only.
        if excluded:
            code, noc = list(code), list(noc)
            for a, b in excluded:
                for k in range(a, b + 1):
                    if code[k] != "\n":
                        code[k] = " "
                        noc[k] = " "
            code, noc = "".join(code), "".join(noc)
        self.code, self.noc = code, noc
        self.lines = self.lines_total - len(
            [ln for ln in self.excluded_lines if ln <= self.lines_total]
        )
        self._pairs = None
        self._functions = None

    def line_of(self, offset):
        return bisect.bisect_right(self.line_starts, offset)

    @property
    def pairs(self):
        if self._pairs is None:
            self._pairs = brace_pairs(self.code)
        return self._pairs

    def _test_ranges(self, code):
        ranges, pairs = [], None
        for m in _CFG_TEST_RE.finditer(code):
            if any(a <= m.start() <= b for a, b in ranges):
                continue
            attr_end = match_bracket(code, code.index("[", m.start()))
            p, path_attr = attr_end, None
            while True:  # further attributes of the same item
                am = _ATTR_RE.match(code, p)
                if not am:
                    break
                q = match_bracket(code, am.end() - 1)
                pm = _PATH_ATTR_RE.search(self.text[am.start():q])
                if pm:
                    path_attr = pm.group(1)
                p = q
            body = item_body(code, p)
            semi = code.find(";", p)
            if body is None:
                end = len(code) - 1 if semi < 0 else semi
                dm = re.match(r"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code[p:end + 1])
                if dm:
                    self.test_mods.append((dm.group(1), path_attr))
            else:
                if pairs is None:
                    pairs = brace_pairs(code)
                end = pairs.get(body, len(code) - 1)
            ranges.append((m.start(), end))
        return ranges

    def functions(self):
        """(line, qualified name, length in lines) of every `fn` with a body."""
        if self._functions is None:
            self._functions = self._find_functions()
        return self._functions

    def use_lines(self):
        """Line numbers covered by `use` declarations."""
        out = set()
        for m in _USE_RE.finditer(self.code):
            semi = self.code.find(";", m.end())
            if semi >= 0:
                out.update(range(self.line_of(m.start()), self.line_of(semi) + 1))
        return out

    def _find_functions(self):
        owners = []  # (open, close, name) of impl and trait blocks
        for m in _IMPL_RE.finditer(self.code):
            body = item_body(self.code, m.end())
            if body is not None:
                owners.append((body, self.pairs.get(body, body), impl_type(self.code[m.end():body])))
        for m in _TRAIT_RE.finditer(self.code):
            body = item_body(self.code, m.end())
            if body is not None:
                owners.append((body, self.pairs.get(body, body), m.group(1)))
        out = []
        for m in _FN_RE.finditer(self.code):
            body = item_body(self.code, m.end())
            if body is None:
                continue
            close = self.pairs.get(body)
            if close is None:
                continue
            start, end = self.line_of(m.start()), self.line_of(close)
            name = m.group(2)
            inner = [o for o in owners if o[0] < m.start() < o[1]]
            if inner:
                owner = max(inner, key=lambda o: o[0])[2]
                if owner:
                    name = f"{owner}::{name}"
            out.append((start, name, end - start + 1))
        return out

    def mod_decls(self):
        """(name, path attribute or None, line) of the non-test `mod x;` declarations."""
        out = []
        src_lines = self.text.splitlines()
        for m in _MOD_DECL_RE.finditer(self.code):
            line = self.line_of(m.start())
            path_attr = None
            k = line - 2  # attributes on the lines just above
            while k >= 0 and src_lines[k].strip().startswith("#["):
                pm = _PATH_ATTR_RE.search(src_lines[k])
                if pm:
                    path_attr = pm.group(1)
                k -= 1
            out.append((m.group(1), path_attr, line))
        return out


def impl_type(header):
    """`<T> Trait<X> for Type<T> where ...` -> `Type`."""
    h = re.split(r"\bwhere\b", header)[0].strip()
    if h.startswith("<"):
        depth = 0
        for i, c in enumerate(h):
            if c == "<":
                depth += 1
            elif c == ">" and (i == 0 or h[i - 1] != "-"):
                depth -= 1
                if depth == 0:
                    h = h[i + 1:]
                    break
    depth, cut = 0, None
    for i, c in enumerate(h):
        if c == "<":
            depth += 1
        elif c == ">" and h[i - 1] != "-":
            depth -= 1
        elif depth == 0 and h.startswith("for", i) and re.match(r"\bfor\b", h[i:]) and (
            i == 0 or not (h[i - 1].isalnum() or h[i - 1] == "_")
        ):
            cut = i + 3
    t = h[cut:] if cut is not None else h
    t = re.sub(r"^[\s&]*(?:'\w+\s+)?(?:mut\s+|dyn\s+)*", "", t)
    t = t.split("<")[0].strip()
    return t.split("::")[-1].strip() or None


# --------------------------------------------------------------------------------------------
# Files of the workspace.


def is_test_path(rel):
    parts = rel.split("/")
    name = parts[-1]
    return (
        "tests" in parts[:-1]
        or "target" in parts
        or name == "tests.rs"
        or name.endswith("_tests.rs")
    )


def rust_files(root, top):
    out = []
    base = os.path.join(root, top)
    if not os.path.isdir(base):
        return out
    for d, dirs, files in os.walk(base):
        dirs[:] = sorted(x for x in dirs if x not in ("target", ".git") and not x.startswith("."))
        for f in sorted(files):
            if f.endswith(".rs"):
                out.append(os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/"))
    return out


def package_dirs(root):
    out = []
    for top in ("crates", "services"):
        base = os.path.join(root, top)
        if os.path.isdir(base):
            for name in sorted(os.listdir(base)):
                if os.path.isdir(os.path.join(base, name, "src")):
                    out.append(f"{top}/{name}")
    return out


# --------------------------------------------------------------------------------------------
# Module graphs and circles.


def parse_use_tree(tokens):
    """Tokens of a use tree -> [(segments, alias)]; a leading `::` is kept as a segment."""
    out = []

    def parse(pos, prefix):
        segs = list(prefix)
        while pos < len(tokens):
            tok = tokens[pos]
            if tok == "{":
                pos += 1
                while pos < len(tokens) and tokens[pos] != "}":
                    pos = parse(pos, segs)
                    if pos < len(tokens) and tokens[pos] == ",":
                        pos += 1
                return pos + 1
            if tok == "*":
                out.append((segs + ["*"], None))
                return pos + 1
            if tok == "::":
                if not segs:
                    segs.append("::")
                pos += 1
                continue
            if tok in (",", "}"):
                return pos
            segs.append(tok)
            pos += 1
            if pos < len(tokens) and tokens[pos] == "::":
                pos += 1
                continue
            alias = None
            if pos + 1 < len(tokens) and tokens[pos] == "as":
                alias = tokens[pos + 1]
                pos += 2
            out.append((segs, alias))
            return pos
        return pos

    parse(0, [])
    return out


class Module:
    def __init__(self, path, src):
        self.path = path  # tuple of names; () is the crate root
        self.src = src
        self.children = {}
        self.defs = set()
        self.imports = {}  # name -> segments
        self.globs = []  # segments without the `*`
        self.uses = []  # (segments, is_pub, line, name or None)
        self.paths = []  # (segments, line) in code outside use declarations

    @property
    def name(self):
        return "::".join(self.path) if self.path else "crate"


def analyse_module(mod):
    src = mod.src
    code = src.code
    for m in _DEF_RE.finditer(code):
        mod.defs.add(m.group(1))
    for m in _MACRO_DEF_RE.finditer(code):
        mod.defs.add(m.group(1))
    spans = []
    for m in _USE_RE.finditer(code):
        semi = code.find(";", m.end())
        if semi < 0:
            continue
        spans.append((m.start(), semi))
        tokens = _USE_TOKEN_RE.findall(code[m.end():semi])
        line = src.line_of(m.start())
        for segs, alias in parse_use_tree(tokens):
            if segs and segs[-1] == "self":
                segs = segs[:-1]
            if not segs:
                continue
            if segs[-1] == "*":
                mod.globs.append(segs[:-1])
                mod.uses.append((segs[:-1], bool(m.group(1)), line, None))
                continue
            name = alias if alias is not None else segs[-1]
            if name == "_" or name in ("crate", "super", "self"):
                name = None
            if name:
                mod.imports[name] = segs
            mod.uses.append((segs, bool(m.group(1)), line, name))
    rest = list(code)
    for a, b in spans:
        for k in range(a, b + 1):
            if rest[k] != "\n":
                rest[k] = " "
    rest = "".join(rest)
    mod.rest = rest
    for m in _PATH_RE.finditer(rest):
        first = m.group(1)
        if first in ("crate", "super", "self") or first in mod.children:
            segs = [first] + m.group(2).split("::")[1:]
            mod.paths.append((segs, src.line_of(m.start())))


class Crate:
    def __init__(self, label):
        self.label = label
        self.modules = {}

    def resolve(self, mod, segs, depth=0):
        """The module of this crate that `segs`, written in `mod`, refers to (None: outside)."""
        if depth > 12 or not segs:
            return None
        s0 = segs[0]
        if s0 == "crate":
            cur, rest = (), segs[1:]
        elif s0 == "self":
            cur, rest = mod.path, segs[1:]
        elif s0 == "super":
            cur, rest = mod.path, segs
            while rest and rest[0] == "super":
                if not cur:
                    return None
                cur, rest = cur[:-1], rest[1:]
        elif s0 in mod.children:
            cur, rest = mod.children[s0], segs[1:]
        else:
            return None
        while rest and cur in self.modules:
            here = self.modules[cur]
            s = rest[0]
            if s in here.children:
                cur, rest = here.children[s], rest[1:]
                continue
            if s == "*" or s in here.defs:
                break
            if s in here.imports:  # a re-export (or an import a child reaches through super::)
                return self.resolve(here, here.imports[s] + rest[1:], depth + 1)
            for g in here.globs:
                gm = self.resolve(here, g, depth + 1)
                if gm is not None and gm != cur:
                    other = self.modules[gm]
                    if s in other.defs or s in other.imports or s in other.children:
                        return self.resolve(other, ["self"] + rest, depth + 1)
            break
        return cur

    def edges(self):
        """{(from, to): first (file, line)} between distinct modules."""
        out = {}
        for mod in self.modules.values():
            refs = []
            for segs, is_pub, line, name in mod.uses:
                if is_pub:
                    # A re-export: an edge only if this module's own code uses the name.
                    if name is None or not re.search(r"(?<![\w:])" + re.escape(name) + r"\b", mod.rest):
                        continue
                refs.append((segs, line))
            refs.extend(mod.paths)
            for segs, line in refs:
                t = self.resolve(mod, segs)
                if t is not None and t != mod.path:
                    key = (mod.path, t)
                    if key not in out or (mod.src.rel, line) < out[key]:
                        out[key] = (mod.src.rel, line)
        return out


def build_crates(root, sources):
    """Crates (one per lib.rs / main.rs root) with their module trees."""
    crates = []
    test_files = set()
    for pkg in package_dirs(root):
        roots = []
        for kind, rel in (("lib", "src/lib.rs"), ("bin", "src/main.rs")):
            if os.path.isfile(os.path.join(root, pkg, rel)):
                roots.append((kind, f"{pkg}/{rel}"))
        bindir = os.path.join(root, pkg, "src", "bin")
        if os.path.isdir(bindir):
            for f in sorted(os.listdir(bindir)):
                if f.endswith(".rs"):
                    roots.append((f"bin {f[:-3]}", f"{pkg}/src/bin/{f}"))
        for kind, rel in roots:
            crate = Crate(pkg if kind == "lib" else f"{pkg} ({kind})")
            stack = [((), rel, True)]
            while stack:
                path, frel, dir_owner = stack.pop()
                if frel not in sources or path in crate.modules:
                    continue
                src = sources[frel]
                mod = Module(path, src)
                crate.modules[path] = mod
                d = os.path.dirname(frel)
                base = d if dir_owner else os.path.join(d, os.path.basename(frel)[:-3])
                for name, path_attr, _line in src.mod_decls():
                    if path_attr:
                        cands = [(os.path.normpath(os.path.join(d, path_attr)), path_attr.endswith("mod.rs"))]
                    else:
                        cands = [(f"{base}/{name}.rs", False), (f"{base}/{name}/mod.rs", True)]
                    for c, owner in cands:
                        c = c.replace(os.sep, "/")
                        if c in sources:
                            mod.children[name] = path + (name,)
                            stack.append((path + (name,), c, owner))
                            break
                for name, path_attr in src.test_mods:
                    if path_attr:
                        test_files.add(os.path.normpath(os.path.join(d, path_attr)).replace(os.sep, "/"))
                    else:
                        test_files.update({f"{base}/{name}.rs", f"{base}/{name}/mod.rs"})
            for mod in crate.modules.values():
                analyse_module(mod)
            crates.append(crate)
    return crates, test_files


def strongly_connected(nodes, edges):
    """Tarjan's algorithm (iterative); components of more than one node, sorted."""
    succ = defaultdict(list)
    for a, b in edges:
        succ[a].append(b)
    for a in succ:
        succ[a].sort()
    index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter[0]
                counter[0] += 1
                stack.append(v)
                on.add(v)
            recurse = False
            for j in range(i, len(succ[v])):
                w = succ[v][j]
                if w not in index:
                    work.append((v, j + 1))
                    work.append((w, 0))
                    recurse = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if recurse:
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
    return sorted(comps)


# --------------------------------------------------------------------------------------------
# Copies between services.


def significant_lines(src):
    """(trimmed text, line) of the lines that can make a copy: not blank, not only a comment or
    punctuation, not part of a `use` declaration (the same imports are not a copy)."""
    out = []
    uses = src.use_lines()
    for no, line in enumerate(src.noc.splitlines(), 1):
        s = line.strip()
        if s and no not in uses and _SIGNIFICANT_RE.search(s):
            out.append((s, no))
    return out


def copies_between_services(root, sources):
    by_service = defaultdict(list)  # service -> [(rel, [(text, line)])]
    for rel in sorted(sources):
        parts = rel.split("/")
        if parts[0] == "services" and len(parts) > 2:
            by_service[parts[1]].append((rel, significant_lines(sources[rel])))
    index = defaultdict(list)
    for svc, files in sorted(by_service.items()):
        for rel, lines in files:
            texts = [t for t, _ in lines]
            for k in range(len(texts) - COPY_MIN + 1):
                index[tuple(texts[k:k + COPY_MIN])].append((svc, rel, k, lines))
    runs = set()
    for locs in index.values():
        if len({loc[0] for loc in locs}) < 2:
            continue
        for x in range(len(locs)):
            for y in range(x + 1, len(locs)):
                a, b = sorted((locs[x], locs[y]), key=lambda loc: (loc[0], loc[1], loc[2]))
                if a[0] == b[0]:
                    continue
                la, lb, i, j = a[3], b[3], a[2], b[2]
                if i > 0 and j > 0 and la[i - 1][0] == lb[j - 1][0]:
                    continue  # not where the run starts
                n = COPY_MIN
                while i + n < len(la) and j + n < len(lb) and la[i + n][0] == lb[j + n][0]:
                    n += 1
                runs.add((a[1], la[i][1], la[i + n - 1][1], b[1], lb[j][1], lb[j + n - 1][1], n, la[i][0]))
    return sorted(runs)


# --------------------------------------------------------------------------------------------
# The report.


def count_lines(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return len(f.read().splitlines())
    except FileNotFoundError:
        return 0


def analyse(root):
    all_files = rust_files(root, "crates") + rust_files(root, "services")
    sources = {}
    for rel in all_files:
        if not is_test_path(rel):
            sources[rel] = Source(root, rel)
    crates, test_files = build_crates(root, sources)
    for rel in test_files:  # declared by `#[cfg(test)] mod x;` under another name
        sources.pop(rel, None)
    for crate in crates:
        for path in [p for p, m in crate.modules.items() if m.src.rel in test_files]:
            del crate.modules[path]

    circles, sibling_circles = [], []
    for crate in crates:
        edges = crate.edges()
        for comp in strongly_connected(list(crate.modules), list(edges)):
            members = set(comp)
            inner = sorted((a, b, edges[(a, b)]) for (a, b) in edges if a in members and b in members)
            circles.append((crate, comp, inner))
        # The same without the edges between a module and its own ancestors (a child's `super::`,
        # a parent's `use child::X`): what remains are circles through sibling modules only.
        lateral = [(a, b) for (a, b) in edges if a[:len(b)] != b and b[:len(a)] != a]
        for comp in strongly_connected(list(crate.modules), lateral):
            sibling_circles.append((crate.label, comp))
    circles.sort(key=lambda c: (c[0].label, c[1]))

    big_files = sorted(((s.lines, rel) for rel, s in sources.items() if s.lines > FILE_LIMIT),
                       key=lambda x: (-x[0], x[1]))
    functions = []
    for rel, s in sources.items():
        for line, name, length in s.functions():
            if length > FN_LIMIT:
                functions.append((length, rel, line, name))
    functions.sort(key=lambda x: (-x[0], x[1], x[2]))
    service_functions = [f for f in functions if f[1].startswith("services/")]

    copies = copies_between_services(root, sources)

    entries = []
    sdir = os.path.join(root, "services")
    if os.path.isdir(sdir):
        for svc in sorted(os.listdir(sdir)):
            for f in ("lib.rs", "main.rs"):
                p = os.path.join(sdir, svc, "src", f)
                if os.path.isfile(p):
                    entries.append((f"services/{svc}/src/{f}", count_lines(p)))

    test_big = []
    for rel in rust_files(root, "crates") + rust_files(root, "services") + rust_files(root, "tests"):
        if is_test_path(rel) or rel in test_files:
            n = count_lines(os.path.join(root, rel))
            if n > FILE_LIMIT:
                test_big.append((n, rel))
    test_big.sort(key=lambda x: (-x[0], x[1]))

    return {
        "circles": circles,
        "sibling_circles": sibling_circles,
        "big_files": big_files,
        "functions": functions,
        "service_functions": service_functions,
        "copies": copies,
        "entries": entries,
        "readme": count_lines(os.path.join(root, "README.md")),
        "test_big": test_big,
        "files": len(sources),
        "lines": sum(s.lines for s in sources.values()),
        "all_functions": sum(len(s.functions()) for s in sources.values()),
    }


def summary(r):
    return {
        "circles": len(r["circles"]),
        "files_over_600": len(r["big_files"]),
        "service_functions_over_80": len(r["service_functions"]),
        "functions_over_80": len(r["functions"]),
        "copies_between_services": len(r["copies"]),
        "service_entry_lines": sum(n for _, n in r["entries"]),
        "readme_lines": r["readme"],
    }


def render(r, out):
    s = summary(r)
    w = out.write
    w("house: " + " ".join(f"{k}={v}" for k, v in s.items()) + "\n")
    w(f"scope: {r['files']} non-test files in crates/ and services/, {r['lines']} lines, "
      f"{r['all_functions']} functions\n")
    w("bars (issue 26): circles=0 files_over_600=0 service_functions_over_80<=1 "
      "copies_between_services=0 service_entry_lines<=~500 readme_lines<=~600\n")

    siblings = {(label, tuple(comp)) for label, comp in r["sibling_circles"]}
    w(f"\ncircles ({len(r['circles'])}): modules of one crate that reach each other through use/paths; "
      f"{len(siblings)} remain without the edges between a module and its ancestors\n")
    for crate, comp, inner in r["circles"]:
        names = ", ".join(crate.modules[p].src.rel.split("/src/", 1)[-1] for p in comp)
        if not any(label == crate.label and set(c) <= set(comp) for label, c in siblings):
            names += "  [parent/child only]"
        w(f"  {crate.label}: {names}\n")
        for a, b, (rel, line) in inner:
            w(f"    {crate.modules[a].name} -> {crate.modules[b].name}  ({rel}:{line})\n")

    w(f"\nfiles over {FILE_LIMIT} non-test lines ({len(r['big_files'])}):\n")
    for n, rel in r["big_files"]:
        w(f"  {n:5d}  {rel}\n")

    fs = r["functions"]
    w(f"\nfunctions over {FN_LIMIT} lines ({len(fs)}; services/ {len(r['service_functions'])}, "
      f"crates/ {len(fs) - len(r['service_functions'])}):\n")
    for n, rel, line, name in fs:
        w(f"  {n:5d}  {rel}:{line}  {name}\n")

    w(f"\ncopies between services ({len(r['copies'])}): runs of >= {COPY_MIN} identical lines "
      "(trimmed; blank, comment-only and punctuation-only lines skipped)\n")
    for ra, a0, a1, rb, b0, b1, n, first in r["copies"]:
        w(f"  {n:3d}  {ra}:{a0}-{a1} = {rb}:{b0}-{b1}  `{first[:60]}`\n")

    w(f"\nservice entry lines (lib.rs + main.rs): {sum(n for _, n in r['entries'])}\n")
    for rel, n in r["entries"]:
        w(f"  {n:5d}  {rel}\n")
    w(f"README.md lines: {r['readme']}\n")

    w(f"\nnot judged: test files over {FILE_LIMIT} lines ({len(r['test_big'])}):\n")
    for n, rel in r["test_big"]:
        w(f"  {n:5d}  {rel}\n")


# --------------------------------------------------------------------------------------------
# Self-test on synthetic fixtures.


def _fixture(root, files):
    for rel, text in files.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)


def _long_fn(name, body_lines, indent=""):
    body = "".join(f"{indent}    let x{k} = {k};\n" for k in range(body_lines))
    return f"{indent}fn {name}() {{\n{body}{indent}}}\n"


def self_test():
    failures = []

    def expect(what, got, want):
        ok = got == want
        print(f"  {'ok  ' if ok else 'FAIL'} {what}: {got!r}" + ("" if ok else f" (want {want!r})"))
        if not ok:
            failures.append(what)

    block = "".join(f"    let shared_{k} = compute_{k}(config.value_{k});\n" for k in range(6))
    five = "".join(f"    let near_{k} = other_{k}(config.near_{k});\n" for k in range(5))
    tricky = (
        "pub fn tricky() -> usize {\n"          # line 1
        "    let a = \"{ not a brace\";\n"
        "    let b = '{';\n"
        "    let c = r#\"}\" } \"#;\n"
        "    // } a comment\n"
        "    /* { nested /* } */ still } */\n"
        "    let d = '\\'';\n"
        "    let e: &'static str = \"}\";\n"
        "    a.len() + c.len() + e.len() + (b as usize) + (d as usize)\n"
        "}\n"                                   # line 10
        "pub fn after() {}\n"
    )
    files = {
        # Two modules that use each other: one circle.
        "crates/cyc/src/lib.rs": "pub mod x;\npub mod y;\npub mod solo;\n",
        "crates/cyc/src/x.rs": "use crate::y::Y;\npub struct X(pub Y);\n",
        "crates/cyc/src/y.rs": "pub struct Y;\npub fn make() -> crate::x::X { crate::x::X(Y) }\n",
        # A module referring to itself is no circle.
        "crates/cyc/src/solo.rs": "pub struct S;\npub fn s() -> crate::solo::S { self::S }\n",
        # A facade: lib.rs re-exports a child's type, the child uses lib.rs's type; no circle,
        # and `use crate::Api` in b resolves to a (no b <-> lib circle either).
        "crates/facade/src/lib.rs": "mod a;\nmod b;\npub use a::Api;\npub struct Root;\n",
        "crates/facade/src/a.rs": "use crate::Root;\npub struct Api(pub Root);\n",
        "crates/facade/src/b.rs": "use crate::Api;\npub fn f(_: Api) {}\n",
        # A parent and a child referring to each other: one circle.
        "crates/family/src/lib.rs": "mod parent;\n",
        "crates/family/src/parent/mod.rs": "mod child;\nuse self::child::C;\npub struct P;\npub fn f(_: C) {}\n",
        "crates/family/src/parent/child.rs": "use super::P;\npub struct C(pub P);\n",
        # Functions: 90 lines counted; a long test function (inline and in files) is not.
        "crates/fns/src/lib.rs": (
            "mod long_tests;\n"
            + _long_fn("long", 88)
            + _long_fn("short", 10)
            + "#[cfg(test)]\nmod tests {\n    use super::*;\n" + _long_fn("test_long", 120, "    ") + "}\n"
            + tricky
        ),
        "crates/fns/src/long_tests.rs": _long_fn("in_test_file", 120),
        "crates/fns/src/tests/helpers.rs": _long_fn("in_tests_dir", 120),
        # 580 lines of code plus a 100-line test block: not over 600; 610 lines: over.
        "crates/sizes/src/lib.rs": "mod big;\n" + "pub const A: u8 = 0;\n" * 579
        + "#[cfg(test)]\nmod tests {\n" + "    // test\n" * 98 + "}\n",
        "crates/sizes/src/big.rs": "pub const B: u8 = 0;\n" * 610,
        # A 6-line block copied between services a and b (one copy); 5 lines between a and c: none.
        "services/a/src/lib.rs": "pub fn a(config: &C) {\n" + block + "}\n\npub fn a2(config: &C) {\n" + five + "}\n",
        "services/a/src/main.rs": "fn main() {}\n",
        "services/b/src/lib.rs": "// b\npub fn b(config: &C) {\n    // differs\n" + block + "    done();\n}\n",
        "services/c/src/lib.rs": "pub fn c(config: &C) {\n" + five + "}\n",
        "services/c/src/service.rs": "\n" + _long_fn("serve", 85),
        "README.md": "# r\n\nline\n",
    }
    with tempfile.TemporaryDirectory(prefix="house-self-test.") as root:
        _fixture(root, files)
        r = analyse(root)
        s = summary(r)
        circles = sorted(
            (c.label, tuple(c.modules[p].name for p in comp)) for c, comp, _ in r["circles"]
        )
        expect("circles", circles, [("crates/cyc", ("x", "y")), ("crates/family", ("parent", "parent::child"))])
        fns = {(rel, name): n for n, rel, _, name in r["functions"]}
        expect("functions over 80", sorted(fns),
               [("crates/fns/src/lib.rs", "long"), ("services/c/src/service.rs", "serve")])
        expect("length of the 90-line fn", fns.get(("crates/fns/src/lib.rs", "long")), 90)
        expect("service functions over 80", s["service_functions_over_80"], 1)
        lengths = {name: n for _, name, n in Source(root, "crates/fns/src/lib.rs").functions()}
        expect("braces in strings, chars, comments: tricky", lengths.get("tricky"), 10)
        expect("fn after tricky", lengths.get("after"), 1)
        expect("test functions not seen", "test_long" in lengths, False)
        expect("files over 600", r["big_files"], [(610, "crates/sizes/src/big.rs")])
        expect("lines without the test block", Source(root, "crates/sizes/src/lib.rs").lines, 580)
        expect("copies", [(c[0], c[3], c[6]) for c in r["copies"]],
               [("services/a/src/lib.rs", "services/b/src/lib.rs", 6)])
        expect("service entry lines", s["service_entry_lines"], 16 + 1 + 11 + 7)
        expect("readme lines", s["readme_lines"], 3)
        quiet = io.StringIO()
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            strict = main(["--root", root, "--check", "--quiet"])
            lenient = main(["--root", root, "--check", "--quiet", "--max-circles", "2",
                            "--max-files-over-600", "1", "--max-copies", "1"])
            only = main(["--root", root, "--quiet", "--max-circles", "2"])
            tight = main(["--root", root, "--quiet", "--max-functions-over-80", "1"])
        expect("--check exits 1 on the fixture", strict, 1)
        expect("--check with bars at the numbers exits 0", lenient, 0)
        expect("--max-circles 2 alone exits 0", only, 0)
        expect("--max-functions-over-80 1 alone exits 1", tight, 1)
    print("self-test: " + ("ok" if not failures else f"{len(failures)} FAILED: {', '.join(failures)}"))
    return 1 if failures else 0


# --------------------------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="scripts/house.sh",
        description="Structure report of the non-test Rust code (issue 26).",
    )
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.dirname(here), help="repository root (default: this checkout)")
    ap.add_argument("--self-test", action="store_true", help="run the checks on synthetic fixtures")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when a number exceeds its bar (the issue's, or a --max-* flag)")
    ap.add_argument("--quiet", action="store_true", help="print only the summary line")
    flags = {
        "circles": "--max-circles",
        "files_over_600": "--max-files-over-600",
        "service_functions_over_80": "--max-service-functions-over-80",
        "functions_over_80": "--max-functions-over-80",
        "copies_between_services": "--max-copies",
        "service_entry_lines": "--max-service-entry-lines",
        "readme_lines": "--max-readme-lines",
    }
    for key, flag in flags.items():
        ap.add_argument(flag, type=int, dest=key, metavar="N",
                        help=f"bar for {key}; alone, checks only the bars given (--check's default: "
                        f"{'none' if DEFAULT_BARS[key] is None else DEFAULT_BARS[key]})")
    args = ap.parse_args(argv)
    if args.self_test:
        return self_test()

    t0 = time.monotonic()
    r = analyse(args.root)
    s = summary(r)
    if args.quiet:
        sys.stdout.write("house: " + " ".join(f"{k}={v}" for k, v in s.items()) + "\n")
    else:
        render(r, sys.stdout)
    sys.stdout.flush()
    print(f"house: {time.monotonic() - t0:.1f}s", file=sys.stderr)

    given = {k: getattr(args, k) for k in flags if getattr(args, k) is not None}
    if not (args.check or given):
        return 0
    bars = dict(DEFAULT_BARS) if args.check else {}
    bars.update(given)
    over = [f"{k}={s[k]} > {v}" for k, v in bars.items() if v is not None and s[k] > v]
    if over:
        print("house: over the bar: " + ", ".join(over), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
