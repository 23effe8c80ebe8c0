#!/usr/bin/env python3
"""Checks the relative links of the repository's Markdown files.

Every link, image and reference definition of every *.md file git knows
(tracked, or new and not ignored: _output/ is left out) whose target is a
path must name a file or directory that exists, and an anchor (#...) must
name a heading (or an HTML id/name) of the Markdown file it points into, the
way GitHub makes anchors of headings. External links (http:, https:,
mailto:, ...) are not fetched. Links inside code blocks and code spans are
not links.

Usage: hack/docs/check-links.py [-v] [FILE.md...]   (default: every file)
Exit status 1 when a link is broken, with one line per broken link.
"""

import os
import re
import subprocess
import sys
import unicodedata

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
# [text](dest) and ![alt](dest); dest may be <...>, may have a "title".
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*(<[^>]*>|\S+)")
HTML_LINK = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']*)["']""", re.I)
HTML_ID = re.compile(r"""<[a-z][^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
LINE_ANCHOR = re.compile(r"^L\d+(?:C\d+)?(?:-L\d+(?:C\d+)?)?$")


def strip_code_spans(line):
    return CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


def prose_lines(text):
    """Yields (line number, line) of the lines outside fenced code blocks,
    with code spans blanked out, and (line number, None) for fence lines."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            yield n, None
            continue
        if fence is not None:
            if line.strip().startswith(fence) and set(line.strip()) <= {fence[0]}:
                fence = None
            yield n, None
            continue
        yield n, line


def heading_text_to_slug(text):
    """GitHub's anchor of a heading: the text as rendered, lower case,
    punctuation but hyphens and underscores removed, spaces as hyphens."""
    text = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("`", "")
    text = re.sub(r"(\*\*|__|\*)", "", text)
    text = text.strip().lower()
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "-_ " or cat[0] in "LNM":
            out.append(ch)
    return "".join(out).replace(" ", "-")


def anchors_of(text):
    """The anchors a Markdown file defines: its headings' (with GitHub's -1,
    -2 suffixes for repeats) and the ids and names of its HTML elements."""
    anchors = set()
    counts = {}
    previous = None

    def add(slug):
        n = counts.get(slug, 0)
        counts[slug] = n + 1
        anchors.add(slug if n == 0 else "%s-%d" % (slug, n))

    for _, line in prose_lines(text):
        if line is None:
            previous = None
            continue
        m = ATX.match(line)
        if m:
            add(heading_text_to_slug(m.group(2) or ""))
            previous = None
            continue
        s = SETEXT.match(line)
        if s and previous is not None and previous.strip() and not previous.lstrip().startswith(("-", "*", "|", ">")):
            add(heading_text_to_slug(previous.strip()))
            previous = None
            continue
        for m in HTML_ID.finditer(line):
            anchors.add(m.group(1))
        previous = line
    return anchors


def links_of(text):
    """(line number, destination) of every link of a Markdown file."""
    for n, line in prose_lines(text):
        if line is None:
            continue
        line = strip_code_spans(line)
        for m in INLINE.finditer(line):
            yield n, m.group(1)
        m = REFDEF.match(line)
        if m:
            yield n, m.group(2)
        for m in HTML_LINK.finditer(line):
            yield n, m.group(1)


def markdown_files(root):
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "*.md"],
        cwd=root, check=True, capture_output=True).stdout.decode()
    return sorted(f for f in out.split("\0") if f and os.path.isfile(os.path.join(root, f))
                  and not f.startswith("_output/") and "/_output/" not in f)


def check(root, files, verbose=False):
    """Returns the broken links as 'file:line: message' strings."""
    problems = []
    cache = {}

    def anchors(path):
        if path not in cache:
            with open(path, encoding="utf-8") as f:
                cache[path] = anchors_of(f.read())
        return cache[path]

    for rel in files:
        path = os.path.join(root, rel)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        count = 0
        for n, dest in links_of(text):
            if dest.startswith("<") and dest.endswith(">"):
                dest = dest[1:-1]
            if not dest or SCHEME.match(dest) or dest.startswith("//"):
                continue
            count += 1
            target, _, anchor = dest.partition("#")
            target = re.sub(r"%20", " ", target.split("?")[0])
            if target.startswith("/"):
                resolved = os.path.normpath(os.path.join(root, target.lstrip("/")))
            elif target:
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), target))
            else:
                resolved = path
            where = "%s:%d" % (rel, n)
            if not os.path.exists(resolved):
                problems.append("%s: %s: no such file or directory" % (where, dest))
                continue
            if not os.path.realpath(resolved).startswith(os.path.realpath(root) + os.sep) and resolved != root:
                problems.append("%s: %s: leaves the repository" % (where, dest))
                continue
            if not anchor:
                continue
            if resolved.endswith(".md") and os.path.isfile(resolved):
                if anchor not in anchors(resolved):
                    problems.append("%s: %s: no heading or id \"%s\" in %s" % (
                        where, dest, anchor, os.path.relpath(resolved, root)))
            elif not LINE_ANCHOR.match(anchor):
                problems.append("%s: %s: an anchor into a file that is not Markdown can only be a line (#L12)" % (where, dest))
        if verbose:
            print("ok    %s: %d relative links" % (rel, count))
    return problems


def main(argv):
    verbose = False
    if argv and argv[0] == "-v":
        verbose, argv = True, argv[1:]
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True,
                          capture_output=True).stdout.decode().strip()
    files = [os.path.relpath(os.path.abspath(f), root) for f in argv] if argv else markdown_files(root)
    problems = check(root, files, verbose)
    for p in problems:
        print("FAIL: " + p)
    if problems:
        print("%d broken links in %d Markdown files" % (len(problems), len(files)))
        return 1
    print("links: ok (%d Markdown files)" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
