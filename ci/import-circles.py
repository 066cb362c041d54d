#!/usr/bin/env python3
"""Fails when files of a Rust crate's src/ import each other in a circle.

    ci/import-circles.py [--allow FILE,FILE...] [SRC]   # default: src
    ci/import-circles.py --self-test

Exit 1 when a circle exists that is not exactly one named by an `--allow`
(a circle known and being dissolved elsewhere; say where in .ci/run).

The charter's rule is "no import circles between files of src/": data flows one
way between rooms, and a circle is two files that can only be understood (and
changed) together. This script draws the graph file by file and prints every
strongly connected set of more than one file, with the names that tie them.

What counts as an edge A -> B: code in A (outside `#[cfg(test)]` items) names an
item defined in B through a path -- a `use` tree or a path in code beginning
with `crate::`, `$crate::`, `super::` or `self::`, or, in a module's own file,
one of its child modules. A name is followed to the file that defines it, through
re-exports (`pub use x::Y` in a mod.rs leads to x's file), so importing a
sibling's type through the parent still counts as importing the sibling.

What does not: a file and its own ancestors' mod.rs. A parent declares and
re-exports its children, and children use the parent's shared types; that is one
room's inside, not a circle between rooms. Test-only code (`#[cfg(test)]` items,
and files only reachable through them) is left out: tests may reach anywhere.
"""
import os
import re
import sys
import tempfile

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
ITEM_DEF = re.compile(
    r"\b(?:struct|enum|fn|trait|type|const|static|union|mod)\s+(" + IDENT + r")"
    r"|\bmacro_rules!\s*(" + IDENT + r")"
)
PATH_IN_CODE = re.compile(
    r"(?<![A-Za-z0-9_:$])(\$crate|crate|super|self)((?:\s*::\s*" + IDENT + r")+)"
)
CHILD_MOD = re.compile(r"\bmod\s+(" + IDENT + r")\s*;")
CFG_TEST = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]")


def strip_comments_and_strings(text):
    """The code with comments, string and char literals blanked (same length)."""
    out, i, n = [], 0, len(text)
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
        elif (m := re.match(r'b?r(#*)"', text[i:i + 260])) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append('"' + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + '"')
            i = j
        elif c == "'":
            # a char literal ('a', '\n', '\u{1F600}') or a lifetime ('a)
            m = re.match(r"'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'", text[i:i + 12])
            if m:
                out.append(" " * m.end())
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def matching_brace(code, open_at):
    depth = 0
    for j in range(open_at, len(code)):
        if code[j] == "{":
            depth += 1
        elif code[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def blank(code, start, end):
    return code[:start] + re.sub(r"[^\n]", " ", code[start:end]) + code[end:]


def drop_test_items(code):
    """Blanks every `#[cfg(test)]` item; answers the code and the names of the
    child modules declared test-only (`#[cfg(test)] mod tests;`)."""
    test_children = set()
    while (m := CFG_TEST.search(code)):
        k = m.end()
        while (a := re.match(r"\s*#\s*\[", code[k:])):  # further attributes
            k = code.index("]", k + a.end()) + 1
        semi, brace = code.find(";", k), code.find("{", k)
        if semi >= 0 and (brace < 0 or semi < brace):
            if (c := CHILD_MOD.search(code, k, semi + 1)):
                test_children.add(c.group(1))
            end = semi + 1
        elif brace >= 0:
            end = matching_brace(code, brace) + 1
        else:
            end = len(code)
        code = blank(code, m.start(), end)
    return code, test_children


def parse_use_tree(tree):
    """`a::{b, c::D as E, f::*}` -> [(["a","b"], "b"), (["a","c","D"], "E"), (["a","f","*"], None)]."""
    tokens = re.findall(r"\$crate|" + IDENT + r"|::|[{},*]", tree)
    pos = 0

    def parse(prefix):
        nonlocal pos
        found, path = [], list(prefix)
        while pos < len(tokens):
            t = tokens[pos]
            if t == "::":
                pos += 1
            elif t == "{":
                pos += 1
                while pos < len(tokens) and tokens[pos] != "}":
                    found += parse(path)
                    if pos < len(tokens) and tokens[pos] == ",":
                        pos += 1
                pos += 1
                return found
            elif t in (",", "}"):
                break
            elif t == "*":
                pos += 1
                return found + [(path + ["*"], None)]
            elif t == "as":
                alias = tokens[pos + 1]
                pos += 2
                return found + [(path, alias)]
            else:
                path.append(t)
                pos += 1
        if path != list(prefix):
            name = path[-1]
            if name == "self":
                path, name = path[:-1], path[-2] if len(path) > 1 else None
            found.append((path, name))
        return found

    return parse([])


class Crate:
    def __init__(self, src):
        self.src = os.path.abspath(src)
        self.files = {}  # module path (tuple) -> file
        for root, _, names in os.walk(self.src):
            for name in sorted(names):
                if name.endswith(".rs"):
                    path = os.path.join(root, name)
                    self.files[self.module_of(path)] = path
        self.code, self.test_only, self.defs, self.uses = {}, set(), {}, {}
        for mod, path in self.files.items():
            with open(path, encoding="utf-8", errors="replace") as f:
                code = strip_comments_and_strings(f.read())
            code, test_children = drop_test_items(code)
            self.test_only |= {mod + (c,) for c in test_children}
            self.code[mod] = code
            self.defs[mod] = {a or b for a, b in ITEM_DEF.findall(code)}
            self.uses[mod] = self.use_trees(mod, code)
        # a file below a test-only module is test-only too
        self.test_only = {m for m in self.files if any(m[:len(t)] == t for t in self.test_only)}

    def module_of(self, path):
        parts = os.path.relpath(path, self.src)[:-3].split(os.sep)
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        return tuple(parts)

    def use_trees(self, mod, code):
        """Name in scope -> absolute path, for every `use` of the file."""
        scope = {}
        for m in re.finditer(r"\buse\s+([^;]*);", code):
            for path, alias in parse_use_tree(m.group(1)):
                absolute = self.absolute(mod, path)
                if absolute is not None and alias is not None:
                    scope[alias] = absolute
                elif absolute is not None and path and path[-1] == "*":
                    scope.setdefault("*", []).append(absolute[:-1])
        return scope

    def absolute(self, mod, path):
        """A path as written in `mod` -> a path from the crate root, or None for
        another crate's."""
        if not path:
            return None
        head, rest = path[0], list(path[1:])
        if head in ("crate", "$crate"):
            return rest
        if head == "self":
            return list(mod) + rest
        if head == "super":
            base = list(mod)
            while head == "super":
                base = base[:-1]
                head, rest = (rest[0], rest[1:]) if rest else (None, [])
            return base + ([head] if head else []) + rest
        if mod + (head,) in self.files:  # a child module, written relatively
            return list(mod) + [head] + rest
        return None

    def resolve(self, path, seen=None):
        """The file module defining what `path` (from the crate root) names."""
        seen = seen or set()
        mod = ()
        for i, seg in enumerate(path):
            if mod + (seg,) in self.files:
                mod = mod + (seg,)
                continue
            key = (mod, seg)
            if seg in self.defs.get(mod, ()) or key in seen:
                return mod
            seen.add(key)
            scope = self.uses.get(mod, {})
            if seg in scope:  # imported (or re-exported) here: follow it
                return self.resolve(scope[seg] + list(path[i + 1:]), seen)
            for glob in scope.get("*", []):
                if glob and tuple(glob) != mod:
                    target = self.resolve(glob + list(path[i:]), seen)
                    if target != tuple(glob):
                        return target
            return mod
        return mod

    def edges(self):
        """(from, to) -> names, between files neither of which is the other's ancestor."""
        found = {}
        for mod, code in self.code.items():
            if mod in self.test_only:
                continue
            paths = []
            for target in self.uses[mod].values():
                paths += target if target and isinstance(target[0], list) else [target]
            for m in PATH_IN_CODE.finditer(code):
                segs = [m.group(1)] + re.findall(IDENT, m.group(2))
                absolute = self.absolute(mod, segs)
                if absolute is not None:
                    paths.append(absolute)
            for path in paths:
                target = self.resolve(path)
                if target == mod or target in self.test_only:
                    continue
                if target[:len(mod)] == mod or mod[:len(target)] == target:
                    continue  # a module and its own ancestor: one room
                name = path[len(target)] if len(path) > len(target) else path[-1] if path else "?"
                found.setdefault((mod, target), set()).add(name)
        return found

    def name(self, mod):
        return os.path.relpath(self.files[mod], os.path.dirname(self.src))


def circles(edges):
    """Strongly connected sets of more than one node (Tarjan), each sorted."""
    graph = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index, low, stack, on_stack, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def report(src, allowed):
    """Prints every circle; answers how many are not allowed."""
    crate = Crate(src)
    edges = crate.edges()
    found = circles(edges)
    failing = 0
    for n, group in enumerate(found, 1):
        names = frozenset(crate.name(m) for m in group)
        tolerated = names in allowed
        failing += not tolerated
        print(f"circle {n}{' (allowed)' if tolerated else ''}: " + ", ".join(sorted(names)))
        for a in group:
            for b in group:
                if (a, b) in edges:
                    print(f"  {crate.name(a)} -> {crate.name(b)}: {', '.join(sorted(edges[(a, b)]))}")
        allowed.discard(names)
    for gone in allowed:
        print("note: the allowed circle " + ", ".join(sorted(gone)) + " is gone; drop its --allow")
    print(f"import circles: {len(found)} ({failing} not allowed)")
    return failing


def self_test():
    """The check must see a circle where there is one, and none where there is none."""
    layouts = {
        "none": {
            "lib.rs": "pub mod a;\npub mod b;\n",
            "a/mod.rs": "mod inner;\npub use inner::Thing;\npub struct Shared;\n",
            "a/inner.rs": "use super::Shared;\npub struct Thing(Shared);\n",
            "b.rs": "use crate::a::Thing; // crate::b::Nothing in a comment\n"
                    "#[cfg(test)]\nmod tests { use crate::a::Shared; }\n",
        },
        "through a re-export": {
            "lib.rs": "pub mod a;\npub mod b;\n",
            "a/mod.rs": "mod inner;\npub use inner::Thing;\n",
            "a/inner.rs": "pub struct Thing(crate::b::Other);\n",
            "b.rs": "use crate::a::{self, Thing};\npub struct Other;\n",
        },
        "in code, three files": {
            "lib.rs": "pub mod x;\n",
            "x/mod.rs": "pub mod p;\npub mod q;\npub mod r;\n",
            "x/p.rs": "pub fn f() { super::q::g() }\n",
            "x/q.rs": "pub fn g() { super::r::h() }\n",
            "x/r.rs": "pub fn h() { let s = \"super::p::f\"; super::p::f() }\n",
        },
    }
    expected = {"none": 0, "through a re-export": 1, "in code, three files": 1}
    ok = True
    for label, files in layouts.items():
        with tempfile.TemporaryDirectory() as root:
            for rel, text in files.items():
                path = os.path.join(root, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
            crate = Crate(root)
            got = len(circles(crate.edges()))
            if got != expected[label]:
                print(f"self-test {label!r}: {got} circles, expected {expected[label]}")
                ok = False
    print("self-test: " + ("ok" if ok else "FAILED"))
    return ok


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(0 if self_test() else 1)
    args, allowed = sys.argv[1:], set()
    while args[:1] == ["--allow"] and len(args) > 1:
        allowed.add(frozenset(f.strip() for f in args[1].split(",") if f.strip()))
        args = args[2:]
    if len(args) > 1 or (args and args[0].startswith("-")):
        sys.exit(__doc__)
    sys.exit(1 if report(args[0] if args else "src", allowed) else 0)
