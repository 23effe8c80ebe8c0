"""Checks that deploy/'s objects name the namespace they are in, wherever
an overlay puts them. Used by hack/deploy/verify_manifests.py.

kustomize's namespace: moves every object and every field that is a
namespace, but not a namespace written inside a string: the admission
policies' username (system:serviceaccount:<namespace>:vpa-inplace-updater),
the pods webhook's exclusion of its own namespace, the binaries' flags. An
overlay that moves the namespace without deriving those gets policies that
match nobody, silently. So:

  - check_policy_identity, for every rendered root: each policy's username
    names the updater's ServiceAccount as it is rendered, its namespace and
    its name;
  - check_moved, for an overlay in another namespace
    (overlays/another-namespace): it is its reference overlay
    (overlays/self-managed-certs) with exactly the namespace changed, the
    strings derived, the flags that name the namespace removed (the binaries
    then read it from POD_NAMESPACE), and no string naming the old one;
  - check_moved_without_replacements: an overlay that sets namespace: alone
    (rendered by hack/deploy/verify-manifests.sh in a throwaway copy) fails
    check_policy_identity, so the check above catches what it is for.
"""

import copy
import json
import re

NAMESPACE = "vpa-inplace-system"
UPDATER_SA = "vpa-inplace-updater"
ADMISSION_SA = "vpa-inplace-admission-controller"
POD_WEBHOOK = "vpa-inplace-pods"
CLUSTER_SCOPED = {
    "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
    "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
}
# The flags that name the namespace, removed by overlays/another-namespace
# (each binary then reads it from POD_NAMESPACE).
NAMESPACE_FLAGS = {
    "updater": ("--leader-elect-resource-namespace=", "--config-map=", "--records-namespace="),
    "admission-controller": ("--cert-secret-namespace=", "--cert-hosts=", "--records-namespace="),
}
USERNAME = re.compile(r"^request\.userInfo\.username == 'system:serviceaccount:([^:']+):([^:']+)'$")


def _find(objs, kind, name=None):
    return [o for o in objs if o.get("kind") == kind and (name is None or (o.get("metadata") or {}).get("name") == name)]


def _canonical(objs):
    return sorted(json.dumps(o, sort_keys=True) for o in objs)


def service_account(objs, name):
    """(namespace, name) of the ServiceAccount name in objs, or None."""
    sas = _find(objs, "ServiceAccount", name)
    if len(sas) != 1:
        return None
    return sas[0]["metadata"].get("namespace"), name


def check_policy_identity(c, where, objs):
    """Each admission policy matches the username of the updater's
    ServiceAccount as rendered (its namespace, its name)."""
    sa = service_account(objs, UPDATER_SA)
    policies = _find(objs, "ValidatingAdmissionPolicy")
    if sa is None or not policies:
        return
    for p in policies:
        conds = (p.get("spec") or {}).get("matchConditions") or []
        users = [USERNAME.match((m.get("expression") or "").strip()) for m in conds]
        got = [u.groups() for u in users if u]
        c.check(got == [sa], f"{where}: {p['metadata']['name']} matches the updater's ServiceAccount "
                f"{sa[0]}/{sa[1]}, in the namespace it is rendered in", str(got))


def root_namespace(objs):
    """The namespace deploy/'s objects are rendered in: the ServiceAccounts'."""
    for name in (UPDATER_SA, ADMISSION_SA):
        sa = service_account(objs, name)
        if sa is not None:
            return sa[0]
    return NAMESPACE


def moved(reference, namespace):
    """reference, as an overlay that moves it to namespace is to render it."""
    out = []
    for o in copy.deepcopy(reference):
        md = o.setdefault("metadata", {})
        kind = o.get("kind")
        if kind == "Namespace" and md.get("name") == NAMESPACE:
            md["name"] = namespace
        if kind not in CLUSTER_SCOPED and md.get("namespace") == NAMESPACE:
            md["namespace"] = namespace
        for s in o.get("subjects") or []:
            if s.get("kind") == "ServiceAccount" and s.get("namespace") == NAMESPACE:
                s["namespace"] = namespace
        for wh in (o.get("webhooks") or []) if kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration") else []:
            svc = (wh.get("clientConfig") or {}).get("service") or {}
            if svc.get("namespace") == NAMESPACE:
                svc["namespace"] = namespace
            if kind == "MutatingWebhookConfiguration" and md.get("name") == POD_WEBHOOK:
                for e in (wh.get("namespaceSelector") or {}).get("matchExpressions") or []:
                    e["values"] = [namespace if v == NAMESPACE else v for v in e.get("values") or []]
        if kind == "ValidatingAdmissionPolicy":
            for m in (o.get("spec") or {}).get("matchConditions") or []:
                m["expression"] = m["expression"].replace(f":{NAMESPACE}:", f":{namespace}:")
        if kind == "Deployment":
            for container in o["spec"]["template"]["spec"]["containers"]:
                drop = NAMESPACE_FLAGS.get(container["name"], ())
                container["args"] = [a for a in container.get("args") or [] if not a.startswith(drop)]
        out.append(o)
    return out


def check_moved(c, where, objs, reference):
    """An overlay in another namespace: its reference overlay moved, and
    nothing naming the old namespace."""
    namespace = root_namespace(objs)
    c.check(namespace != NAMESPACE, f"{where}: is rendered in another namespace than {NAMESPACE}", namespace)
    for o in objs:
        md = o.get("metadata") or {}
        if o.get("kind") not in CLUSTER_SCOPED:
            c.check(md.get("namespace") == namespace, f"{where}: {o.get('kind')} {md.get('name')} is in {namespace}")
    text = json.dumps(objs)
    c.check(NAMESPACE not in text, f"{where}: no string names {NAMESPACE}",
            ", ".join(sorted(set(re.findall(r'"[^"]*' + NAMESPACE + r'[^"]*"', text))))[:300])
    check_policy_identity(c, where, objs)
    hooks = _find(objs, "MutatingWebhookConfiguration", POD_WEBHOOK)
    excluded = {v for h in hooks for wh in h.get("webhooks") or []
                for e in (wh.get("namespaceSelector") or {}).get("matchExpressions") or []
                if e.get("operator") == "NotIn" for v in e.get("values") or []}
    c.check(bool(hooks) and namespace in excluded, f"{where}: the pods webhook leaves out its own namespace {namespace}",
            str(sorted(excluded)))
    for d in _find(objs, "Deployment"):
        for container in d["spec"]["template"]["spec"]["containers"]:
            env = {e.get("name"): e for e in container.get("env") or []}
            c.check(((env.get("POD_NAMESPACE") or {}).get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath")
                    == "metadata.namespace",
                    f"{where}: {container['name']} reads its namespace from the pod (POD_NAMESPACE)")
    if c.check(reference is not None, f"{where}: its reference overlay is rendered"):
        want = moved(reference, namespace)
        c.check(_canonical(objs) == _canonical(want),
                f"{where}: is its reference overlay but for the namespace, the strings that name it, "
                "and the flags that name it (removed)",
                str(sorted(set(_canonical(objs)) ^ set(_canonical(want))))[:400])


class _Quiet:
    """A Checker that only counts: for a check expected to fail."""

    def __init__(self):
        self.failed = 0

    def check(self, ok, what, detail=""):  # pylint: disable=unused-argument
        if not ok:
            self.failed += 1
        return ok


def check_moved_without_replacements(c, where, objs):
    """An overlay that sets namespace: alone: check_policy_identity must
    refuse it (its policies still name vpa-inplace-system)."""
    probe = _Quiet()
    check_policy_identity(probe, where, objs)
    c.check(root_namespace(objs) != NAMESPACE and probe.failed > 0,
            f"{where}: an overlay that moves the namespace without the replacements of overlays/another-namespace "
            "is caught (its policies match nobody)")
