#!/usr/bin/env python3
"""Checks that every test the documentation names exists.

A code span of a Markdown file git knows that is a Go test, benchmark or fuzz
target name (`TestBasicInPlaceUpdate`, `BenchmarkGateFor`, `FuzzParse`),
optionally after its package's name (`resize.TestDecide`: a test of a package
directory named resize), must name a function declared in a *_test.go file of
the repository (of that package, when one is named). The README's versions
table and docs/kubernetes-versions.md back each claim with a test name; a
renamed or deleted test must not leave a claim without one.

Usage: hack/docs/check-test-names.py [FILE.md...]   (default: every file)
Exit status 1 when a named test does not exist, one line per name.
"""

import os
import re
import subprocess
import sys

NAME = re.compile(r"^(?:([a-z][a-z0-9]*)\.)?((?:Test|Benchmark|Fuzz)[A-Z0-9_]\w*)$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
FUNC = re.compile(r"^func ((?:Test|Benchmark|Fuzz)\w+)\(", re.M)


def git_files(root, pattern):
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", pattern],
        cwd=root, check=True, capture_output=True, text=True).stdout
    return [f for f in out.splitlines() if f and not f.startswith("_output/")]


def declared(root, test_files):
    """Maps each test function name to the package directories declaring it."""
    names = {}
    for f in test_files:
        path = os.path.join(root, f)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        pkg = os.path.basename(os.path.dirname(f)) or "."
        for m in FUNC.finditer(text):
            names.setdefault(m.group(1), set()).add(pkg)
    return names


def named(text):
    """Yields (line number, package or None, name) of the test names in code
    spans outside fenced code blocks."""
    fence = None
    for no, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            mark = m.group(1)
            if fence is None:
                fence = mark
            elif mark[0] == fence[0] and len(mark) >= len(fence):
                fence = None
            continue
        if fence is not None:
            continue
        for span in CODE_SPAN.finditer(line):
            n = NAME.match(span.group(2).strip())
            if n:
                yield no, n.group(1), n.group(2)


def check(root, docs, names):
    problems = []
    for doc in docs:
        with open(os.path.join(root, doc), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for no, pkg, name in named(text):
            where = names.get(name)
            if not where:
                problems.append("%s:%d: no test %s is declared in any *_test.go" % (doc, no, name))
            elif pkg and pkg not in where:
                problems.append("%s:%d: %s.%s: %s is declared in %s, not in a package %s" % (
                    doc, no, pkg, name, name, ", ".join(sorted(where)), pkg))
    return problems


def main(argv):
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True,
                          capture_output=True, text=True).stdout.strip()
    docs = argv or git_files(root, "*.md")
    names = declared(root, git_files(root, "*_test.go"))
    problems = check(root, docs, names)
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
