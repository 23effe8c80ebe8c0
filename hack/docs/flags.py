#!/usr/bin/env python3
"""Writes the flag tables of docs/flags.md from the binaries' --help output.

Each binary's table sits between the lines
  <!-- BEGIN GENERATED: NAME --help -->
  <!-- END GENERATED: NAME --help -->
and is made from that binary's --help (pflag's usage format) alone, so that
it cannot drift from the flags the binary really takes.

Usage: flags.py [--check] DOC.md NAME=HELP.txt...
  without --check: rewrites the tables in DOC.md;
  with --check: exits 1, printing a diff, when DOC.md differs from what would
  be written.
"""

import difflib
import re
import sys

# "  -v, --v Level    usage" or "      --name type   usage" or "      --bool   usage":
# pflag puts one space before the type and at least two before the usage.
FLAG = re.compile(r"^\s+(?:-(\w), )?--([\w.-]+)(?: (\S+))?  +(.*)$")
DEFAULT = re.compile(r"^(.*?) \(default (.*)\)$")


def parse_help(text):
    """[(short, name, type, default, [usage lines])] of pflag's usage output;
    continuation lines (indented under the usage column) belong to the flag
    above them."""
    flags = []
    column = None
    for line in text.splitlines():
        m = FLAG.match(line)
        if m:
            short, name, typ, usage = m.groups()
            column = len(line) - len(usage)
            flags.append([short, name, typ or "", "", [usage]])
            continue
        if flags and column and line.startswith(" " * column) and line.strip():
            flags[-1][4].append(line.strip())
            continue
        if flags and line.strip():
            raise ValueError("cannot read this line of --help: %r" % line)
    if not flags:
        raise ValueError("no flags in --help")
    for f in flags:
        m = DEFAULT.match(f[4][-1])
        if m:
            f[4][-1], f[3] = m.group(1), m.group(2)
    return flags


def cell(text):
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace("*", "\\*")


def table(flags):
    rows = ["| Flag | Type | Default | Meaning |", "|---|---|---|---|"]
    for short, name, typ, default, usage in flags:
        flag = "`--%s`" % name + (", `-%s`" % short if short else "")
        if not typ:
            # pflag names no type for a bool, and no default when it is false.
            typ, default = "bool", default or "false"
        default = "`%s`" % default.strip('"') if default else ""
        rows.append("| %s | %s | %s | %s |" % (flag, cell(typ), default, "<br>".join(cell(u) for u in usage)))
    return rows


def render(doc, helps):
    lines = doc.split("\n")
    for name, text in helps.items():
        begin, end = "<!-- BEGIN GENERATED: %s --help -->" % name, "<!-- END GENERATED: %s --help -->" % name
        try:
            i, j = lines.index(begin), lines.index(end)
        except ValueError:
            raise ValueError("the document has no %s ... %s" % (begin, end))
        if j < i:
            raise ValueError("%s comes before %s" % (end, begin))
        lines[i + 1:j] = table(parse_help(text))
    return "\n".join(lines)


def main(argv):
    check = False
    if argv and argv[0] == "--check":
        check, argv = True, argv[1:]
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    doc_path, helps = argv[0], {}
    for arg in argv[1:]:
        name, _, path = arg.partition("=")
        with open(path, encoding="utf-8") as f:
            helps[name] = f.read()
    with open(doc_path, encoding="utf-8") as f:
        doc = f.read()
    try:
        new = render(doc, helps)
    except ValueError as e:
        print("%s: %s" % (doc_path, e), file=sys.stderr)
        return 1
    if check:
        if new != doc:
            sys.stdout.writelines(difflib.unified_diff(
                doc.splitlines(True), new.splitlines(True), doc_path, doc_path + " (from --help)"))
            return 1
        return 0
    if new != doc:
        with open(doc_path, "w", encoding="utf-8") as f:
            f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
