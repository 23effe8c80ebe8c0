#!/usr/bin/env python3
"""Turns manifests of deploy/base into a Helm template of the chart.

Run by hack/deploy/update-chart.sh, never by hand. Reads the YAML stream of
one kustomization (documents separated by ---) on stdin and writes the
template on stdout:

  - "namespace: vpa-inplace-system" lines (metadata, subjects) become the
    release's namespace;
  - the names of our objects (metadata.name, roleRef.name, policyName,
    resourceNames entries) become the chart's names: the prefix
    vpa-inplace- is replaced by the release's full name
    (vpa-inplace.fullname: nameOverride, fullnameOverride), so that two
    releases never share an object;
  - a subject that is one of our ServiceAccounts, and the ServiceAccount's
    username in the admission policies' match conditions, name the
    ServiceAccount of the values (<component>.serviceAccount.name);
  - a policy variable whose value is one of our names as a CEL string
    ('vpa-inplace-updater-config': the kill switch, 'vpa-inplace-updater':
    the Lease, 'vpa-inplace-records-': the records' prefix) becomes the
    release's, but for the variables of FIXED_VARIABLES (the records' name
    before --records-prefix, the same for every release);
  - each block of our three labels becomes the chart's labels
    (vpa-inplace.labels: the same three, the release's, commonLabels);
  - ServiceAccount documents are left out: the chart writes them itself
    (<component>.serviceAccount.create, annotations);
  - documents named by --switch NAME=CONDITION are wrapped in
    {{- if CONDITION }}; ClusterRoles named by --extra-rules NAME get the
    rules of .Values.rbac.extraRules appended;
  - the whole file is wrapped in {{- if --enabled }}.

Only the standard library: the transformation is line based, on the
layout of deploy/ (which hack/deploy/verify-manifests.sh checks renders to
the same objects as the chart).
"""

import argparse
import re
import sys

NAMESPACE = "vpa-inplace-system"
PREFIX = "vpa-inplace-"
COMPONENTS = ("admission-controller", "updater")
FULLNAME = '{{ include "vpa-inplace.fullname" . }}'
# Policy variables naming what is the same for every release.
FIXED_VARIABLES = ("earlierPrefix",)


def sa_name(component):
    return '{{ include "vpa-inplace.serviceAccountName" (list . "%s") }}' % component


def our_name(value):
    """The chart's expression for one of our object names, or None."""
    if not value.startswith(PREFIX):
        return None
    return FULLNAME + "-" + value[len(PREFIX):]


def split_docs(text):
    docs, cur = [], []
    for line in text.splitlines():
        if re.fullmatch(r"---\s*", line):
            docs.append(cur)
            cur = []
        else:
            cur.append(line)
    docs.append(cur)
    return [d for d in docs if any(re.match(r"kind:", l) for l in d)]


def field(doc, key):
    """A top-level key, or a direct child of metadata."""
    inmeta = False
    for line in doc:
        if re.match(r"\S", line):
            inmeta = line.startswith("metadata:")
            m = re.fullmatch(key + r":\s*(\S+)", line)
            if m:
                return m.group(1)
        elif inmeta:
            m = re.fullmatch(r"  " + key + r":\s*(\S+)", line)
            if m:
                return m.group(1)
    return None


def transform(doc):
    out = []
    skip_labels = None
    prev = ""
    for line in doc:
        if skip_labels is not None:
            m = re.fullmatch(r"(\s*)app\.kubernetes\.io/(component|part-of): \S+", line)
            if m and m.group(1) == skip_labels:
                continue
            skip_labels = None
        m = re.fullmatch(r"(\s*)app\.kubernetes\.io/name: vpa-inplace-(%s)" % "|".join(COMPONENTS), line)
        if m:
            indent = m.group(1)
            out.append('%s{{- include "vpa-inplace.labels" (list . "%s") | nindent %d }}' % (indent, m.group(2), len(indent)))
            skip_labels = indent
            continue
        line = re.sub(r"^(\s*(?:- )?namespace:) " + NAMESPACE + "$", r"\1 {{ .Release.Namespace }}", line)
        m = re.fullmatch(r"(\s*(?:- )?)(name|policyName): (\S+)", line)
        if m and our_name(m.group(3)):
            value = m.group(3)
            if re.fullmatch(r"\s*- kind: ServiceAccount", prev) and value[len(PREFIX):] in COMPONENTS:
                line = f"{m.group(1)}{m.group(2)}: {sa_name(value[len(PREFIX):])}"
            else:
                line = f"{m.group(1)}{m.group(2)}: {our_name(value)}"
        m = re.fullmatch(r"(\s*resourceNames: )\[(.*)\]", line)
        if m:
            names = [n.strip().strip('"') for n in m.group(2).split(",")]
            line = m.group(1) + "[" + ", ".join(f'"{our_name(n) or n}"' for n in names) + "]"
        line = re.sub(r"system:serviceaccount:%s:vpa-inplace-(%s)\b" % (NAMESPACE, "|".join(COMPONENTS)),
                      lambda mm: "system:serviceaccount:{{ .Release.Namespace }}:" + sa_name(mm.group(1)), line)
        m = re.fullmatch(r"""(\s*expression: ")'(%s[a-z0-9-]*)'(")""" % PREFIX, line)
        variable = re.fullmatch(r"\s*- name: (\S+)", prev)
        if m and variable and variable.group(1) not in FIXED_VARIABLES:
            line = f"{m.group(1)}'{our_name(m.group(2))}'{m.group(3)}"
        if not re.fullmatch(r"\s*#.*|\s*", line):
            prev = line
        out.append(line)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True, help="the deploy/ directory named in the header")
    ap.add_argument("--enabled", required=True, help="the condition of the whole file")
    ap.add_argument("--switch", action="append", default=[], help="NAME=CONDITION")
    ap.add_argument("--extra-rules", action="append", default=[], help="a ClusterRole that gets rbac.extraRules")
    args = ap.parse_args()
    switches = dict(s.split("=", 1) for s in args.switch)

    print("{{- /* Generated by hack/deploy/update-chart.sh from %s: do not edit. */}}" % args.source)
    print("{{- if %s }}" % args.enabled)
    unknown = set(switches) | set(args.extra_rules)
    for doc in split_docs(sys.stdin.read()):
        kind, name = field(doc, "kind"), field(doc, "name")
        if kind == "ServiceAccount":
            continue
        unknown.discard(name)
        body = transform(doc)
        if kind == "ClusterRole" and name in args.extra_rules:
            body += ["  {{- with .Values.rbac.extraRules }}", "  {{- toYaml . | nindent 2 }}", "  {{- end }}"]
        if name in switches:
            body = ["{{- if %s }}" % switches[name]] + body + ["{{- end }}"]
        print("---")
        print("\n".join(body))
    print("{{- end }}")
    if unknown:
        sys.exit(f"chart_template.py: no object named {', '.join(sorted(unknown))}")


if __name__ == "__main__":
    main()
