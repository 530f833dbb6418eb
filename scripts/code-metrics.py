#!/usr/bin/env python3
"""Static code metrics of the service crate's src/, to re-run at any commit.

    python3 scripts/code-metrics.py [--rev GIT_REV] [--top N]

Reads src/**/*.rs from the working tree, or from git revision GIT_REV (git ls-tree, git show),
and prints in Markdown: 1. the lines of Rust (as `wc -l` counts them) and the files; 2. the N
longest non-test functions, from the `fn` line to the closing brace inclusive, and how many
are over 50 and 100 lines; 3. import cycles: a graph file -> file from `use` trees (crate::,
super::, self::, a child module's name) and inline crate::/super::/self:: paths, each resolved
to the deepest existing module file, and its strongly connected components (Tarjan) of more
than one file, flagged as spanning modules unless one (non-root) module's file and its direct
children hold them all.

How: a small lexer blanks comments and the contents of string and char literals (keeping
offsets and newlines), so braces and paths are only seen in code. Test code is left out: files
named tests.rs, proptests.rs or test_support.rs or under tests/ or proptests/, files declared
by `#[cfg(test)] mod x;` (`#[path]` too) or by a test file, and the whole item after
`#[cfg(test)]`, `#[cfg(all(test, ..))]`, `#[test]` or `#[tokio::test]`. Regex-level, not a
parser: macros are not expanded, and inline `mod x { .. }` blocks are not modules of their own.
"""
import argparse
import os
import re
import subprocess
from pathlib import Path

LEXEME = re.compile(r"""//[^\n]*|/\*|(?<!\w)[bc]?r(#*)"|"(?:\\.|[^"\\])*"|'(?:\\.[^']*|[^\\'])'""", re.S)
COMMENT_MARK = re.compile(r"/\*|\*/")
TEST_ATTR = re.compile(r"#\s*\[\s*(?:cfg\s*\(\s*(?:all\s*\(\s*)?test\b|(?:tokio\s*::\s*)?test\b)")
MOD_DECL = re.compile(r"\bmod\s+(\w+)\s*;")
PATH_ATTR = re.compile(r'#\s*\[\s*path\s*=\s*"')
FN = re.compile(r"\bfn\s+(\w+)")
USE = re.compile(r"\buse\s+([^;]+);")
VISIBILITY = re.compile(r"\bpub\s*\(\s*in\b[^)]*\)")  # pub(in crate::x) is no dependency
INLINE = re.compile(r"(?<![\w:])(crate|super|self)((?:\s*::\s*\w+)+)")


def read_sources(rev):
    """Return {path: text} of the .rs files under src/, from the working tree or `rev`."""
    if rev is None:
        return {str(p): p.read_text(encoding="utf-8") for p in sorted(Path("src").rglob("*.rs"))}

    def git(*args):
        return subprocess.run(["git", *args], check=True, capture_output=True, encoding="utf-8").stdout
    names = git("ls-tree", "-r", "--name-only", rev, "--", "src").split()
    return {n: git("show", f"{rev}:{n}") for n in names if n.endswith(".rs")}


def blank(text):
    """Return `text` with comments (nested /* */ too) and the contents of string, raw string,
    byte string and char literals replaced by spaces: same length, newlines and quotes kept."""
    out, kept, end = [], 0, 0
    while m := LEXEME.search(text, end):  # a lifetime 'a is no char literal: not matched
        tok, start, stop, end = m.group(), m.start() + 1, m.end() - 1, m.end()  # a string's contents
        if tok.startswith("//"):
            start, stop = m.start(), m.end()
        elif tok == "/*":
            depth, start, stop = 0, m.start(), len(text)
            for mark in COMMENT_MARK.finditer(text, m.start()):
                depth += 1 if mark.group() == "/*" else -1
                if depth == 0:
                    stop = mark.end()
                    break
            end = stop
        elif m.group(1) is not None:  # r"..", r#".."#, br".."
            start, stop = m.end(), text.find('"' + m.group(1), m.end()) % (len(text) + 1)
            end = stop + 1
        out += [text[kept:start], re.sub(r"[^\n]", " ", text[start:stop])]
        kept = stop
    return "".join(out) + text[kept:]


def match_close(code, i):
    """Index of the bracket closing the '{', '(' or '[' at `i`."""
    depth = 0
    for j in range(i, len(code)):
        depth += (code[j] in "{([") - (code[j] in "})]")
        if depth == 0:
            return j
    return len(code) - 1


def item_end(code, i):
    """End offset of the item at `i`, after its attributes: past its `;` or its braced body, or
    at the `,` (outside <..>) or the closing bracket that ends a field or an argument."""
    while (i := len(code) - len(code[i:].lstrip())) < len(code) and code[i] == "#":
        i = match_close(code, code.index("[", i)) + 1
    angles = 0
    while i < len(code):
        if code[i] in "([":
            i = match_close(code, i)
        elif code[i] == "{":
            return match_close(code, i) + 1
        elif code[i] == ";":
            return i + 1
        elif code[i] in "})]" or code[i] == "," and angles <= 0:
            return i
        angles += (code[i] == "<") - (code[i] == ">" and code[i - 1] not in "-=")
        i += 1
    return i


def crate_of(path):
    """(directory, root file, name) of the crate of `path`: the library (src/main.rs is named
    `main`), or a binary of its own under src/bin/ (src/bin/x.rs, src/bin/x/main.rs)."""
    p = Path(path).parts
    if p[1] == "bin":
        return (f"src/bin/{p[2]}", f"src/bin/{p[2]}/main.rs", p[2]) if len(p) > 3 else \
            ("src/bin", path, Path(path).stem)
    return "src", "src/lib.rs", "main" if path == "src/main.rs" else ""


def module_of(path):
    """Module path of a file in its crate: src/a/b.rs, src/a/b/mod.rs -> ['a', 'b']; a root -> []."""
    directory, root, _ = crate_of(path)
    parts = list(Path(path).relative_to(directory).with_suffix("").parts)
    return [] if path in (root, "src/main.rs") else parts[:-1] if parts[-1] == "mod" else parts


def file_of(module, files, path):
    """File of a module path in the crate of `path`: dir/a/b.rs, else dir/a/b/mod.rs, else
    None; the crate's root file for []."""
    directory, root, _ = crate_of(path)
    base = f"{directory}/{'/'.join(module)}"
    return root if not module else next((f for f in (base + ".rs", base + "/mod.rs") if f in files), None)


def analyse(path, text):
    """Lex one file. Return (its code with test items blanked, its `mod x;` declarations
    as [('dir/x.rs|dir/x/mod.rs' or the #[path] file, declared under test)])."""
    code = blank(text)
    prod, decls = list(code), []
    for m in MOD_DECL.finditer(code):
        start = max(code.rfind(c, 0, m.start()) for c in ";{}") + 1  # its attributes begin here
        attrs = code[start:m.start()]
        if p := PATH_ATTR.search(attrs):
            lit = start + p.end()
            child = os.path.normpath(os.path.join(os.path.dirname(path), text[lit:code.index('"', lit)]))
        else:
            own = os.path.dirname(path) if Path(path).name in ("mod.rs", "lib.rs", "main.rs") else path[:-3]
            child = f"{own}/{m.group(1)}.rs|{own}/{m.group(1)}/mod.rs"
        decls.append((child, bool(TEST_ATTR.search(attrs))))
    for m in TEST_ATTR.finditer(code):
        end = item_end(code, match_close(code, code.index("[", m.start())) + 1)
        prod[m.start():end] = re.sub(r"[^\n]", " ", code[m.start():end])
    return "".join(prod), decls


def test_files(files, code, decls):
    """The files that are test code: by name, by `#![cfg(test)]`, or declared under test."""
    test = {f for f in files if Path(f).name in ("tests.rs", "proptests.rs", "test_support.rs")
            or {"tests", "proptests"} & set(Path(f).parent.parts)
            or re.search(r"#\s*!\s*\[\s*cfg\s*\(\s*test\s*\)", code[f])}
    while new := {c for f in files for child, under_test in decls[f] if under_test or f in test
                  for c in child.split("|") if c in files} - test:
        test |= new
    return test


def functions(path, code):
    """Yield (lines, 'module::fn_name') of each function with a body in `code`."""
    name = crate_of(path)[2]
    prefix = "::".join(([name] if name else []) + module_of(path)) or "crate"
    for m in FN.finditer(code):
        i = m.end()
        while i < len(code) and code[i] not in "{;":  # past the signature to body or `;`
            i = match_close(code, i) + 1 if code[i] in "([" else i + 1
        if i < len(code) and code[i] == "{":
            yield code.count("\n", m.start(), match_close(code, i)) + 1, f"{prefix}::{m.group(1)}"


def use_paths(tokens, i, prefix):
    """Expand the `use` tree in tokens[i:] into full paths; return (paths, next index)."""
    path = list(prefix)
    while i < len(tokens) and tokens[i] not in (",", "}"):
        if tokens[i] == "{":
            out, i = [], i + 1
            while i < len(tokens) and tokens[i] != "}":
                sub, i = use_paths(tokens, i, path)
                out += sub
                i += tokens[i:i + 1] == [","]
            return out, i + 1
        if tokens[i] == "as":
            i += 1  # skip the alias
        elif tokens[i] not in ("::", "*"):
            path.append(tokens[i])
        i += 1
    return [path], i


def resolve(path, segs, files, relative_ok):
    """The file that a path used in `path` names: its deepest existing module file, or None
    (other crates). With relative_ok, `child::X` names a child module of `path`'s module."""
    mod = module_of(path)
    if segs[0] == "crate":
        base, rest = [], segs[1:]
    elif segs[0] in ("self", "super"):
        base, rest = list(mod), list(segs)
        while rest and rest[0] in ("self", "super"):
            base = base[:-1] if rest.pop(0) == "super" else base
    elif relative_ok and file_of(mod + segs[:1], files, path):
        base, rest = list(mod), segs
    else:
        return None
    full = base + [s for s in rest if s != "self"]
    return next(f for k in range(len(full), -1, -1) if (f := file_of(full[:k], files, path)))


def edges(path, code, files):
    """The files that `path` refers to in `code`, through `use` trees and inline paths."""
    out, rest = set(), VISIBILITY.sub(lambda m: " " * len(m.group()), code)
    for m in USE.finditer(rest):
        for segs in use_paths(re.findall(r"::|[{},*]|\w+", m.group(1)), 0, [])[0]:
            out.add(resolve(path, segs, files, relative_ok=True) if segs else None)
    rest = USE.sub(" ", rest)  # so that `use crate::a::{b::X}` does not count as crate::a
    for m in INLINE.finditer(rest):
        out.add(resolve(path, [m.group(1)] + re.findall(r"\w+", m.group(2)), files, relative_ok=False))
    return out - {None, path}


def sccs(graph):
    """Strongly connected components of {node: {nodes}} (Tarjan; recursion depth <= nodes)."""
    index, low, stack, comps = {}, {}, [], []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:  # v is the root of a component: pop it off the stack
            comps.append(sorted(stack[stack.index(v):]))
            del stack[stack.index(v):]
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def spans_modules(comp):
    """True unless one non-root module P has every file of `comp` as P's or a direct child's."""
    parents = [{m, m[:-1]} - {()} for m in (tuple(module_of(f)) for f in comp)]
    return not set.intersection(*parents)


def main():
    """Parse the arguments, measure and print the three sections."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rev", help="git revision to read (default: the working tree)")
    ap.add_argument("--top", type=int, default=10, help="how many of the longest functions to list")
    args = ap.parse_args()
    os.chdir(Path(__file__).resolve().parent.parent)
    sources = read_sources(args.rev)
    files, prod, decls = set(sources), {}, {}
    for f, text in sources.items():
        prod[f], decls[f] = analyse(f, text)
    test = test_files(files, prod, decls)
    lines = {f: text.count("\n") for f, text in sources.items()}
    print(f"# Code metrics of src/ at {args.rev or 'the working tree'}\n")
    print("## Lines of Rust\n\n| | files | lines |\n|---|---:|---:|")
    rows = [("all", files), ("test files", test), ("other files", files - test)]
    if bins := {f for f in files - test if f.startswith("src/bin/")}:  # other binaries (until 9d00687)
        rows.append(("of which under src/bin/", bins))
    for label, group in rows:
        print(f"| {label} | {len(group)} | {sum(lines[f] for f in group)} |")

    fns = sorted((fn for f in sorted(files - test) for fn in functions(f, prod[f])), key=lambda x: -x[0])
    print(f"\n## Longest non-test functions (of {len(fns)})\n\n| lines | function |\n|---:|---|")
    for n, name in fns[:args.top]:
        print(f"| {n} | `{name}` |")
    print(f"\nOver 50 lines: {sum(n > 50 for n, _ in fns)}; over 100 lines: {sum(n > 100 for n, _ in fns)}.")

    graph = {f: edges(f, prod[f], files) & (files - test) for f in sorted(files - test)}
    cycles = sorted((c for c in sccs(graph) if len(c) > 1), key=lambda c: (-len(c), c))
    print(f"\n## Import cycles (non-test files, {sum(map(len, graph.values()))} edges)\n")
    print(f"{len(cycles)} SCCs of more than one file, {sum(map(len, cycles))} files in them, "
          f"{sum(map(spans_modules, cycles))} spanning modules.\n")
    print("| files | spans modules | members (under src/) |\n|---:|---|---|")
    for c in cycles:
        print(f"| {len(c)} | {'yes' if spans_modules(c) else 'no'} | {', '.join(f[4:] for f in c)} |")


if __name__ == "__main__":
    main()
