#!/usr/bin/env python3
"""Checks the manifests in deploy/. Run through hack/deploy/verify-manifests.sh.

Each kustomization root (deploy/base, deploy/overlays/*), listed in
RENDERED_DIR/roots.txt as base, overlays/local, ..., has been rendered by
hack/deploy/lib.sh into RENDERED_DIR/<root>.yaml, with the list of files it
uses in RENDERED_DIR/<root>.files. When kubectl was found, KUSTOMIZED_DIR holds
the `kubectl kustomize` output of the same roots.

Roots listed in RENDERED_DIR/kustomize-only.txt use more than resources: and
were rendered by kustomize alone. CHART_RENDERED_DIR holds `helm template`
output of the chart for each case in its cases.txt (default, and one per
charts/vpa-inplace/ci/<case>-values.yaml), rendered in namespace
vpa-inplace-system with the CRDs.

YAML is read with PyYAML when it is installed. Otherwise the driver has
converted every file to JSON under JSON_MIRROR (same absolute path plus .json).

Prints FAIL lines (and ok lines with -v) and exits 1 when any check failed.
"""

import argparse
import json
import os
import re
import sys

from verify_namespace import check_moved, check_moved_without_replacements, check_policy_identity, root_namespace
from verify_notes import check_notes

NAMESPACE = "vpa-inplace-system"
UPDATER_SA = "vpa-inplace-updater"
ADMISSION_SA = "vpa-inplace-admission-controller"
SERVICE = "vpa-inplace-webhook"
TLS_SECRET = "vpa-inplace-admission-tls"
# --cert-mode=self-managed: the Secret the admission controller keeps, and
# the Role that lets it.
CERT_SECRET = "vpa-inplace-admission-certs"
CERT_ROLE = "vpa-inplace-admission-controller-certs"
UPDATER_IMAGE = "vpa-inplace/updater:dev"
ADMISSION_IMAGE = "vpa-inplace/admission-controller:dev"
CA_BUNDLE = "__CA_BUNDLE__"
WEBHOOK_PORT = "__WEBHOOK_PORT__"
POD_WEBHOOK = "vpa-inplace-pods"
VPA_WEBHOOK = "vpa-inplace-vpas"
UPDATER_CONFIG = "vpa-inplace-updater-config"
# The updater's leader election Lease, shipped empty (deploy/base/updater/lease).
LEASE = "vpa-inplace-updater"
CERTIFICATE = "vpa-inplace-admission"
INJECT_CA = "cert-manager.io/inject-ca-from"
# Metrics the dashboard must show.
DASHBOARD_METRICS = (
    "vpa_inplace_updater_leader", "vpa_inplace_admission_certificate_expiry_timestamp_seconds",
    "vpa_inplace_updater_job_template_writes_total", "vpa_inplace_updater_suspended_jobs",
    "vpa_inplace_updater_startup_boosts_active", "vpa_inplace_updater_worker_panics_total",
    "vpa_inplace_updater_records_write_failures_total",
    "vpa_inplace_updater_shard_owned", "vpa_inplace_updater_shard_work_lag_seconds_bucket",
    "vpa_inplace_updater_shard_work_longest_running_seconds", "vpa_inplace_updater_noderoom_reservations_total",
)
# Metrics the alerts and the dashboard may use besides ours (none today).
EXTERNAL_METRICS = set()

CLUSTER_SCOPED = {
    "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
    "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
}
READ = ["get", "list", "watch"]
CONTROLLERS = [
    ("", "replicationcontrollers"),
    ("apps", "deployments"), ("apps", "replicasets"),
    ("apps", "statefulsets"), ("apps", "daemonsets"),
    ("batch", "jobs"), ("batch", "cronjobs"),
]


class Checker:
    def __init__(self, verbose):
        self.verbose = verbose
        self.total = 0
        self.failed = 0

    def check(self, ok, what, detail=""):
        self.total += 1
        if ok:
            if self.verbose:
                print(f"ok    {what}")
            return True
        self.failed += 1
        print(f"FAIL  {what}" + (f": {detail}" if detail else ""))
        return False


class Loader:
    def __init__(self, json_mirror):
        self.json_mirror = json_mirror
        self.yaml = None
        if not json_mirror:
            import yaml  # pylint: disable=import-outside-toplevel
            self.yaml = yaml

    def docs(self, path):
        """All non-empty documents of a YAML file."""
        if self.yaml is not None:
            with open(path, encoding="utf-8") as f:
                docs = list(self.yaml.safe_load_all(f))
        else:
            mirrored = self.json_mirror + os.path.abspath(path) + ".json"
            if not os.path.exists(mirrored):
                raise ValueError("does not parse (see the YAML error above)")
            with open(mirrored, encoding="utf-8") as f:
                docs = json.load(f)
        return [d for d in docs if d is not None]


def ident(obj):
    md = obj.get("metadata") or {}
    return (obj.get("kind"), md.get("namespace"), md.get("name"))


def show(obj):
    kind, ns, name = ident(obj)
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


def find(objs, kind, name=None):
    return [o for o in objs if o.get("kind") == kind and (name is None or ident(o)[2] == name)]


# ---------------------------------------------------------------- RBAC

def rule_covers(rule, group, resource):
    """Whether an RBAC rule applies to group/resource (resourceNames ignored:
    a rule limited to some names still counts as granting)."""
    groups = rule.get("apiGroups") or []
    if "*" not in groups and group not in groups:
        return False
    for r in rule.get("resources") or []:
        if r in ("*", resource):
            return True
        if r.startswith("*/") and "/" in resource and resource.split("/", 1)[1] == r[2:]:
            return True
    return False


def rule_allows(rule, group, resource, verb):
    verbs = rule.get("verbs") or []
    return rule_covers(rule, group, resource) and ("*" in verbs or verb in verbs)


def allows(rules, group, resource, verb):
    return any(rule_allows(r, group, resource, verb) for r in rules)


def bound_rules(c, where, objs, sa):
    """Rules of every Role/ClusterRole bound to ServiceAccount sa, split into
    cluster-wide rules and rules of namespaced Roles."""
    roles = {}
    for o in objs:
        if o.get("kind") in ("Role", "ClusterRole"):
            roles[ident(o)] = o
    cluster, namespaced = [], []
    for b in objs:
        if b.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        subjects = b.get("subjects") or []
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa
                   and s.get("namespace") == NAMESPACE for s in subjects):
            continue
        ref = b.get("roleRef") or {}
        ns = ident(b)[1] if ref.get("kind") == "Role" else None
        role = roles.get((ref.get("kind"), ns, ref.get("name")))
        if not c.check(role is not None, f"{where}: {show(b)} binds a role defined in deploy/",
                       f"{ref.get('kind')} {ref.get('name')} is not (no bootstrap or foreign roles)"):
            continue
        if b["kind"] == "ClusterRoleBinding" or ref.get("kind") == "ClusterRole":
            cluster.extend(role.get("rules") or [])
        else:
            namespaced.extend(role.get("rules") or [])
    return cluster, namespaced


def check_rbac_hygiene(c, where, objs):
    for b in objs:
        if b.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        others = [s for s in b.get("subjects") or []
                  if not (s.get("kind") == "ServiceAccount" and s.get("namespace") == NAMESPACE
                          and s.get("name") in (UPDATER_SA, ADMISSION_SA))]
        c.check(not others, f"{where}: {show(b)} binds only our ServiceAccounts", json.dumps(others))
    for role in objs:
        if role.get("kind") not in ("Role", "ClusterRole"):
            continue
        for rule in role.get("rules") or []:
            verbs = rule.get("verbs") or []
            resources = rule.get("resources") or []
            groups = rule.get("apiGroups") or []
            c.check("*" not in verbs, f"{where}: {show(role)} uses no verb wildcard", json.dumps(rule))
            c.check("*" not in resources, f"{where}: {show(role)} uses no resource wildcard", json.dumps(rule))
            c.check("*" not in groups or resources == ["*/scale"],
                    f"{where}: {show(role)} uses apiGroups '*' only for */scale", json.dumps(rule))
            c.check(not set(verbs) & {"escalate", "bind", "impersonate"},
                    f"{where}: {show(role)} grants no escalate/bind/impersonate", json.dumps(rule))
            # Secrets: only the admission controller's own certificate
            # Secret, by name; no create (the manifests ship it).
            own = (role.get("kind") == "Role" and ident(role)[2] == CERT_ROLE
                   and (role.get("metadata") or {}).get("namespace") == NAMESPACE
                   and groups == [""] and resources == ["secrets"]
                   and rule.get("resourceNames") == [CERT_SECRET] and set(verbs) <= {"get", "list", "watch", "update"})
            c.check(own or not rule_covers(rule, "", "secrets"),
                    f"{where}: {show(role)} grants nothing on secrets but Secret {CERT_SECRET} to its Role",
                    json.dumps(rule))


def check_updater_rbac(c, where, objs):
    cluster, namespaced = bound_rules(c, where, objs, UPDATER_SA)
    rules = cluster + namespaced
    w = f"{where}: updater"
    for verb in ("delete", "deletecollection"):
        c.check(not allows(rules, "", "pods", verb), f"{w} cannot {verb} pods")
    c.check(not any(rule_covers(r, "", "pods/eviction") for r in rules),
            f"{w} has no access to pods/eviction")
    for verb in ("create", "update"):
        c.check(not allows(rules, "", "pods", verb), f"{w} cannot {verb} pods (only patch, and pods/resize)")
    # Patch on pods: the removal of startup boost annotations, in a rule of
    # its own, granted exactly when the admission policy that narrows it to
    # that removal ships too.
    patching = [r for r in rules if rule_allows(r, "", "pods", "patch")]
    c.check(all(r.get("apiGroups") == [""] and r.get("resources") == ["pods"] and r.get("verbs") == ["patch"]
                and not r.get("resourceNames") for r in patching),
            f"{w} patches pods through a rule of its own (pods, patch, nothing else)", json.dumps(patching))
    narrowed = bool(find(objs, "ValidatingAdmissionPolicy", PODS_POLICY))
    c.check(not patching or narrowed, f"{w} can patch pods only along with ValidatingAdmissionPolicy {PODS_POLICY}")
    c.check(bool(patching) or not narrowed,
            f"{w} can patch pods where {PODS_POLICY} ships (the end of startup boosts removes their annotations)")
    c.check(allows(rules, "", "pods/resize", "patch"), f"{w} can patch pods/resize")
    # Least privilege: only the verbs the code calls.
    c.check(not allows(rules, "", "pods/resize", "get"), f"{w} cannot get pods/resize (never read)")
    c.check(not allows(rules, "autoscaling.k8s.io", "verticalpodautoscalers/status", "update"),
            f"{w} cannot update verticalpodautoscalers/status (it patches)")
    c.check(not allows(rules, "metrics.k8s.io", "pods", "list"), f"{w} cannot list metrics.k8s.io/pods (it gets one pod's)")
    for verb in READ:
        c.check(allows(rules, "", "pods", verb), f"{w} can {verb} pods")
        c.check(allows(rules, "autoscaling.k8s.io", "verticalpodautoscalers", verb),
                f"{w} can {verb} verticalpodautoscalers")
        c.check(allows(rules, "", "limitranges", verb), f"{w} can {verb} limitranges")
        for group, resource in CONTROLLERS:
            c.check(allows(rules, group, resource, verb), f"{w} can {verb} {group or 'core'}/{resource}")
    c.check(allows(rules, "autoscaling.k8s.io", "verticalpodautoscalers/status", "patch"),
            f"{w} can patch verticalpodautoscalers/status")
    c.check(allows(cluster, "autoscaling.k8s.io", "verticalpodautoscalers", "patch"),
            f"{w} can patch verticalpodautoscalers (the infeasible-records annotation)")
    for verb in ("create", "update", "delete", "deletecollection"):
        c.check(not allows(rules, "autoscaling.k8s.io", "verticalpodautoscalers", verb),
                f"{w} cannot {verb} verticalpodautoscalers (patch of its annotation and status only)")
    c.check(allows(rules, "example.com", "widgets/scale", "get"), f"{w} can get */scale of any group")
    c.check(allows(cluster, "batch", "jobs", "patch"),
            f"{w} can patch jobs (recommendations into suspended Jobs' pod templates)")
    for verb in ("create", "update", "delete", "deletecollection"):
        c.check(not allows(rules, "batch", "jobs", verb), f"{w} cannot {verb} jobs (patch only)")
    for verb in ("create", "update", "patch", "delete", "deletecollection"):
        c.check(not allows(rules, "batch", "cronjobs", verb), f"{w} cannot {verb} cronjobs")
    c.check(allows(rules, "metrics.k8s.io", "pods", "get"), f"{w} can get metrics.k8s.io/pods (memory in use)")
    for verb in ("create", "update", "patch", "delete"):
        c.check(not allows(rules, "metrics.k8s.io", "pods", verb), f"{w} cannot {verb} metrics.k8s.io/pods")
    for group in ("", "events.k8s.io"):
        for verb in ("create", "patch"):
            c.check(allows(rules, group, "events", verb), f"{w} can {verb} {group or 'core'} events")
    c.check(not any(rule_covers(r, "coordination.k8s.io", "leases") for r in cluster),
            f"{w} has no cluster-wide access to leases")
    leases = [r for r in namespaced if rule_covers(r, "coordination.k8s.io", "leases")]
    for verb in ("get", "update"):
        c.check(allows(leases, "coordination.k8s.io", "leases", verb), f"{w} can {verb} its Lease in {NAMESPACE}")
    c.check(all(r.get("resourceNames") == [LEASE] and set(r.get("verbs") or []) <= {"get", "update"} for r in leases),
            f"{w} can only get and update Lease {LEASE}, by name (no create or delete: the manifests ship it)",
            json.dumps(leases))
    c.check(not any(rule_covers(r, "", "configmaps") for r in cluster),
            f"{w} has no cluster-wide access to configmaps")
    for verb in READ:
        c.check(allows(namespaced, "", "configmaps", verb),
                f"{w} can {verb} configmaps in {NAMESPACE} (the kill switch)")
    records = [r for r in namespaced
               if rule_covers(r, "", "configmaps") and not r.get("resourceNames")]
    for verb in ("get", "list", "create", "update", "delete"):
        c.check(allows(records, "", "configmaps", verb),
                f"{w} can {verb} configmaps in {NAMESPACE} (the records)")
    for verb in ("patch", "deletecollection"):
        c.check(not allows(rules, "", "configmaps", verb), f"{w} cannot {verb} configmaps")
    c.check(all(set(r.get("verbs") or []) <= set(READ) and (r.get("resourceNames") or []) == [UPDATER_CONFIG]
                for r in namespaced if rule_covers(r, "", "configmaps") and r.get("resourceNames")),
            f"{w} reads only the ConfigMap {UPDATER_CONFIG} by name")
    c.check(not any("watch" in (r.get("verbs") or []) for r in records),
            f"{w} does not watch every ConfigMap of {NAMESPACE}")


def check_admission_rbac(c, where, objs, self_managed_certs):
    """self_managed_certs: whether the admission controller keeps its own
    certificate there (--cert-mode=self-managed): only then may it patch the
    webhook configurations and keep a Secret."""
    cluster, namespaced = bound_rules(c, where, objs, ADMISSION_SA)
    rules = cluster + namespaced
    w = f"{where}: admission controller"
    for verb in ("create", "update", "patch", "delete", "deletecollection"):
        c.check(not allows(rules, "", "pods", verb), f"{w} cannot {verb} pods")
    c.check(not any(rule_covers(r, "", "pods/eviction") for r in rules), f"{w} has no access to pods/eviction")
    c.check(not any(rule_covers(r, "", "pods/resize") for r in rules), f"{w} has no access to pods/resize")
    for resource, name in (("mutatingwebhookconfigurations", POD_WEBHOOK),
                           ("validatingwebhookconfigurations", VPA_WEBHOOK)):
        covering = [r for r in rules if rule_covers(r, "admissionregistration.k8s.io", resource)]
        c.check(all(r.get("resourceNames") == [name] and set(r.get("verbs") or []) <= {"get", "list", "watch", "patch"}
                    for r in covering),
                f"{w} can only read and patch {resource} {name} (no create, no delete, no other name)",
                json.dumps(covering))
        if self_managed_certs:
            c.check(allows(rules, "admissionregistration.k8s.io", resource, "patch"),
                    f"{w} can patch the caBundle of {name} (--cert-mode=self-managed)")
        else:
            c.check(not covering, f"{w} has no access to {resource} (its certificate is not self-managed)",
                    json.dumps(covering))
    for verb in ("get", "watch", "update"):
        if self_managed_certs:
            c.check(allows(namespaced, "", "secrets", verb), f"{w} can {verb} its certificate Secret in {NAMESPACE}")
        else:
            c.check(not allows(rules, "", "secrets", verb),
                    f"{w} cannot {verb} secrets (its certificate is not self-managed)")
    c.check(not any(rule_covers(r, "", "secrets") for r in cluster), f"{w} has no cluster-wide access to secrets")
    for verb in ("create", "delete"):
        c.check(not allows(rules, "", "secrets", verb),
                f"{w} cannot {verb} secrets (the manifests ship its certificate Secret)")
    # The certificate Secret ships with the rights on it, empty: no data
    # for an apply to overwrite, no type (a kubernetes.io/tls Secret must
    # hold a pair; the type of one the admission controller made is kept).
    secrets = find(objs, "Secret", CERT_SECRET)
    if self_managed_certs:
        if c.check(len(secrets) == 1 and ident(secrets[0])[1] == NAMESPACE,
                   f"{w}: ships its certificate Secret {NAMESPACE}/{CERT_SECRET}", str([ident(o) for o in secrets])):
            sec = secrets[0]
            c.check(not sec.get("data") and not sec.get("stringData") and "type" not in sec,
                    f"{w}: its certificate Secret ships with no data and no type",
                    json.dumps({k: sec.get(k) for k in ("data", "stringData", "type")}))
    else:
        c.check(not secrets, f"{w}: no certificate Secret {CERT_SECRET} (its certificate is not self-managed)")
    # The updater's safety records (the holds after harm): listed and
    # watched in its namespace, read only.
    c.check(not any(rule_covers(r, "", "configmaps") for r in cluster),
            f"{w} has no cluster-wide access to configmaps")
    for verb in ("list", "watch"):
        c.check(allows(namespaced, "", "configmaps", verb), f"{w} can {verb} configmaps in {NAMESPACE} (the holds after harm)")
    for verb in ("get", "create", "update", "patch", "delete", "deletecollection"):
        c.check(not allows(rules, "", "configmaps", verb), f"{w} cannot {verb} configmaps")
    for verb in READ:
        c.check(allows(rules, "autoscaling.k8s.io", "verticalpodautoscalers", verb),
                f"{w} can {verb} verticalpodautoscalers")
        c.check(allows(rules, "", "limitranges", verb), f"{w} can {verb} limitranges")
        c.check(allows(rules, "", "resourcequotas", verb), f"{w} can {verb} resourcequotas (startup boosts within them)")
        for group, resource in CONTROLLERS:
            c.check(allows(rules, group, resource, verb), f"{w} can {verb} {group or 'core'}/{resource}")
    c.check(allows(rules, "example.com", "widgets/scale", "get"), f"{w} can get */scale of any group")
    for verb in ("create", "update", "patch", "delete"):
        c.check(not allows(rules, "", "resourcequotas", verb), f"{w} cannot {verb} resourcequotas")
    for verb in ("create", "update", "patch", "delete"):
        c.check(not allows(rules, "batch", "jobs", verb), f"{w} cannot {verb} jobs")
    for verb in ("create", "update", "patch", "delete"):
        c.check(not any(rule_allows(r, g, res, verb) for r in rules
                        for g, res in [("autoscaling.k8s.io", "verticalpodautoscalers"),
                                       ("autoscaling.k8s.io", "verticalpodautoscalers/status")]),
                f"{w} cannot {verb} verticalpodautoscalers")


# ---------------------------------------------------------------- webhooks

def self_managed(objs):
    """Whether the admission controller keeps its own certificate."""
    for dep in find(objs, "Deployment", "vpa-inplace-admission-controller"):
        for container in dep["spec"]["template"]["spec"].get("containers") or []:
            if flag(container, "cert-mode") == "self-managed":
                return True
    return False


def ca_mode(root, objs):
    """How the webhooks get their caBundle in a rendered root: the placeholder
    of deploy/base (filled by the scripts), cert-manager's CA injector, a
    Secret the user provides (its ca.crt), or the admission controller
    itself (self-managed)."""
    if self_managed(objs):
        return "self-managed"
    if find(objs, "Certificate", CERTIFICATE):
        return "cert-manager"
    if find(objs, "Secret", TLS_SECRET) or root.startswith("chart"):
        return "secret"
    return "placeholder"


# The webhook settings of deploy/ and of the chart's default values
# (admissionController.webhooks).
WEBHOOK_DEFAULTS = {
    "timeoutSeconds": 5,
    "pods": {"failurePolicy": "Ignore"},
    "inPlaceVPAs": {"failurePolicy": "Fail"},
    "quantities": {"enabled": True, "failurePolicy": "Ignore"},
}


def webhook_settings(values):
    """The chart's webhook settings for some values (defaults filled in)."""
    given = ((values or {}).get("admissionController") or {}).get("webhooks") or {}
    out = json.loads(json.dumps(WEBHOOK_DEFAULTS))
    for key, val in given.items():
        if isinstance(val, dict):
            out.setdefault(key, {}).update(val)
        else:
            out[key] = val
    return out


def check_webhooks(c, where, objs, local, mode="placeholder", settings=None):
    settings = settings or WEBHOOK_DEFAULTS
    secret_ca = None
    for sec in find(objs, "Secret", TLS_SECRET):
        secret_ca = (sec.get("data") or {}).get("ca.crt")

    def ca_ok(config, cc):
        annotations = (config.get("metadata") or {}).get("annotations") or {}
        if mode == "cert-manager":
            return "caBundle" not in cc and annotations.get(INJECT_CA) == f"{NAMESPACE}/{CERTIFICATE}"
        if INJECT_CA in annotations:
            return False
        if mode == "self-managed":
            # The admission controller patches it; an applied value would
            # be reset by every apply.
            return "caBundle" not in cc
            return False
        if mode == "secret":
            ca = cc.get("caBundle")
            return bool(ca) and ca != CA_BUNDLE and (secret_ca is None or ca == secret_ca)
        return cc.get("caBundle") == CA_BUNDLE

    def client_ok(config, webhook, path):
        cc = webhook.get("clientConfig") or {}
        ok = ca_ok(config, cc)
        if local:
            return ok and "service" not in cc and cc.get("url") == f"https://127.0.0.1:{WEBHOOK_PORT}{path}"
        svc = cc.get("service") or {}
        return ok and "url" not in cc and svc == {"name": SERVICE, "namespace": NAMESPACE, "path": path, "port": 443}

    target = "URL https://127.0.0.1:<port>" if local else f"Service {SERVICE}"
    muts = find(objs, "MutatingWebhookConfiguration")
    if c.check(len(muts) == 1 and ident(muts[0])[2] == POD_WEBHOOK and len(muts[0].get("webhooks") or []) == 1,
               f"{where}: one MutatingWebhookConfiguration {POD_WEBHOOK} with one webhook"):
        wh = muts[0]["webhooks"][0]
        w = f"{where}: {POD_WEBHOOK}"
        want = settings["pods"]["failurePolicy"]
        c.check(wh.get("failurePolicy") == want, f"{w} failurePolicy {want}", wh.get("failurePolicy"))
        c.check(wh.get("sideEffects") == "None", f"{w} sideEffects None")
        c.check(wh.get("timeoutSeconds") == settings["timeoutSeconds"], f"{w} timeoutSeconds {settings['timeoutSeconds']}")
        c.check(wh.get("reinvocationPolicy") == "Never", f"{w} reinvocationPolicy Never")
        c.check(wh.get("admissionReviewVersions") == ["v1"], f"{w} admissionReviewVersions [v1]")
        c.check(wh.get("rules") == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                     "resources": ["pods"], "scope": "Namespaced"}],
                f"{w} matches pod CREATE only", json.dumps(wh.get("rules")))
        c.check(client_ok(muts[0], wh, "/mutate-pods"), f"{w} calls /mutate-pods through {target}, CA from {mode}",
                json.dumps(wh.get("clientConfig")))
        sel = (wh.get("namespaceSelector") or {}).get("matchExpressions") or []
        excluded = {v for e in sel if e.get("key") == "kubernetes.io/metadata.name"
                    and e.get("operator") == "NotIn" for v in e.get("values") or []}
        c.check({"kube-system", NAMESPACE} <= excluded, f"{w} excludes kube-system and {NAMESPACE}",
                json.dumps(sel))
    vals = find(objs, "ValidatingWebhookConfiguration")
    quantities = settings["quantities"].get("enabled", True)
    if c.check(len(vals) == 1 and ident(vals[0])[2] == VPA_WEBHOOK
               and len(vals[0].get("webhooks") or []) == (2 if quantities else 1),
               f"{where}: one ValidatingWebhookConfiguration {VPA_WEBHOOK} with {2 if quantities else 1} webhooks"):
        in_place = "object.spec.updatePolicy.updateMode == 'InPlace'"
        for wh, path, negated, key in zip(vals[0]["webhooks"], ["/validate-vpas", "/validate-vpa-quantities"],
                                          [False, True], ["inPlaceVPAs", "quantities"]):
            w = f"{where}: {VPA_WEBHOOK} {wh.get('name')}"
            want = settings[key]["failurePolicy"]
            c.check(wh.get("failurePolicy") == want, f"{w} failurePolicy {want}", wh.get("failurePolicy"))
            c.check(wh.get("timeoutSeconds") == settings["timeoutSeconds"], f"{w} timeoutSeconds {settings['timeoutSeconds']}")
            c.check(wh.get("sideEffects") == "None", f"{w} sideEffects None")
            c.check(wh.get("matchPolicy", "Equivalent") == "Equivalent", f"{w} matchPolicy Equivalent")
            c.check(wh.get("admissionReviewVersions") == ["v1"], f"{w} admissionReviewVersions [v1]")
            c.check(wh.get("rules") == [{"apiGroups": ["autoscaling.k8s.io"], "apiVersions": ["v1"],
                                         "operations": ["CREATE", "UPDATE"],
                                         "resources": ["verticalpodautoscalers"], "scope": "Namespaced"}],
                    f"{w} matches VPA CREATE/UPDATE", json.dumps(wh.get("rules")))
            c.check(client_ok(vals[0], wh, path), f"{w} calls {path} through {target}, CA from {mode}",
                    json.dumps(wh.get("clientConfig")))
            # Between them, the two webhooks see every VPA: InPlace ones the
            # first, all others the second.
            conds = wh.get("matchConditions") or []
            expr = " ".join((conds[0].get("expression") or "").split()) if len(conds) == 1 else ""
            ok = in_place in expr and expr.startswith("!(") == negated
            c.check(ok, f"{w} matches {'VPAs not in' if negated else 'VPAs in'} updateMode InPlace", json.dumps(conds))


# ---------------------------------------------------------------- workloads

def container_ports(container):
    return {p.get("name"): p.get("containerPort") for p in container.get("ports") or []}


def flag(container, name):
    prefix = f"--{name}="
    values = [a[len(prefix):] for a in container.get("args") or [] if a.startswith(prefix)]
    return values[-1] if values else None


def check_deployment(c, where, objs, name, sa, image, required_args, host_network=False):
    deps = find(objs, "Deployment", name)
    if not c.check(len(deps) == 1, f"{where}: Deployment {name} exists"):
        return None
    dep = deps[0]
    w = f"{where}: Deployment {name}"
    pod = dep["spec"]["template"]
    spec = pod["spec"]
    labels = (pod.get("metadata") or {}).get("labels") or {}
    selector = dep["spec"].get("selector", {}).get("matchLabels") or {}
    c.check(selector and all(labels.get(k) == v for k, v in selector.items()), f"{w} selector matches its pods")
    c.check(spec.get("serviceAccountName") == sa and find(objs, "ServiceAccount", sa),
            f"{w} runs as ServiceAccount {sa}")
    psc = spec.get("securityContext") or {}
    c.check(psc.get("runAsNonRoot") is True, f"{w} runAsNonRoot")
    c.check((psc.get("seccompProfile") or {}).get("type") == "RuntimeDefault", f"{w} seccomp RuntimeDefault")
    c.check(bool(spec.get("hostNetwork")) == host_network and not spec.get("hostPID") and not spec.get("hostIPC"),
            f"{w} uses no host namespaces" + (" but the network (admissionController.hostNetwork)" if host_network else ""))
    containers = spec.get("containers") or []
    c.check(len(containers) == 1, f"{w} has one container")
    container = containers[0]
    sc = container.get("securityContext") or {}
    c.check(sc.get("allowPrivilegeEscalation") is False, f"{w} allowPrivilegeEscalation false")
    c.check(sc.get("readOnlyRootFilesystem") is True, f"{w} readOnlyRootFilesystem")
    c.check("ALL" in ((sc.get("capabilities") or {}).get("drop") or []), f"{w} drops ALL capabilities")
    c.check(not sc.get("privileged") and not (sc.get("capabilities") or {}).get("add"),
            f"{w} is not privileged and adds no capabilities")
    requests = (container.get("resources") or {}).get("requests") or {}
    c.check("cpu" in requests and "memory" in requests, f"{w} requests cpu and memory")
    if image is None:
        c.check(re.fullmatch(r"[^:@\s]+(:[\w][\w.-]*)(@sha256:[a-f0-9]{64})?", container.get("image") or "") is not None,
                f"{w} image has a tag", container.get("image"))
    else:
        c.check(container.get("image") == image, f"{w} image is the placeholder {image} (apply.sh replaces it)",
                container.get("image"))
    for arg in required_args:
        c.check(arg in (container.get("args") or []), f"{w} has arg {arg}", json.dumps(container.get("args")))
    ports = container_ports(container)
    address = flag(container, "address")
    metrics_port = ports.get("metrics")
    c.check(address is not None and metrics_port is not None and address.endswith(f":{metrics_port}"),
            f"{w} --address matches container port 'metrics'", f"{address} vs {metrics_port}")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = (container.get(probe) or {}).get("httpGet") or {}
        c.check(get.get("path") == path and get.get("port") in ("metrics", metrics_port),
                f"{w} {probe} GET {path} on the metrics port", json.dumps(get))
    return dep


def check_workloads(c, where, objs, chart=False, values=None):
    """The Deployments and the webhook Service. deploy/ ships image
    placeholders and one updater; the chart real images, any replicas (more
    than one updater only with leader election) and ports from its values."""
    if find(objs, "ServiceAccount", UPDATER_SA):
        dep = check_deployment(c, where, objs, "vpa-inplace-updater", UPDATER_SA, None if chart else UPDATER_IMAGE,
                               ["--feature-gates=InPlace=true"] + ([] if chart else ["--leader-elect=true"]))
        if dep is not None:
            container = dep["spec"]["template"]["spec"]["containers"][0]
            # Records where its Role lets it write them (the namespace of
            # the Role vpa-inplace-updater-records).
            c.check(flag(container, "records-namespace") == NAMESPACE,
                    f"{where}: updater keeps its records in {NAMESPACE}, where its Role is", flag(container, "records-namespace"))
            c.check(flag(container, "records-owner") == LEASE and find(objs, "Lease", LEASE),
                    f"{where}: updater's records are owned by the Lease {LEASE} the manifests ship", flag(container, "records-owner"))
            if chart:
                c.check(dep["spec"].get("replicas", 1) <= 1 or flag(container, "leader-elect") == "true",
                        f"{where}: more than one updater replica only with --leader-elect=true")
                c.check(flag(container, "leader-elect-resource-namespace") == NAMESPACE,
                        f"{where}: updater's Lease is in the release namespace (where its Role is)")
                c.check(flag(container, "config-map") == f"{NAMESPACE}/{UPDATER_CONFIG}",
                        f"{where}: updater reads the kill switch its Role allows")
                c.check(flag(container, "leader-elect-resource-name") == UPDATER_SA,
                        f"{where}: updater's Lease is named after the release")
            else:
                sharded = int(flag(container, "shards") or 1) > 1
                c.check(dep["spec"].get("replicas") == 1 or (sharded and flag(container, "leader-elect") == "true"),
                        f"{where}: updater runs 1 replica, or several sharing shards (with leader election)")
                c.check(flag(container, "address") == ":8943",
                        f"{where}: updater serves health and metrics on :8943")
    if find(objs, "ServiceAccount", ADMISSION_SA):
        own = self_managed(objs)
        certs = ([f"--cert-secret-name={CERT_SECRET}", f"--cert-secret-namespace={NAMESPACE}",
                  f"--cert-mutating-webhook-configurations={POD_WEBHOOK}",
                  f"--cert-validating-webhook-configurations={VPA_WEBHOOK}"] if own
                 else ["--tls-cert-file=/etc/tls/tls.crt", "--tls-private-key-file=/etc/tls/tls.key"])
        host_network = (((values or {}).get("admissionController") or {}).get("hostNetwork")) is True
        dep = check_deployment(c, where, objs, "vpa-inplace-admission-controller", ADMISSION_SA,
                               None if chart else ADMISSION_IMAGE, host_network=host_network,
                               required_args=
                               certs + ["--feature-gates=InPlace=true"] + ([] if chart else ["--port=8000"]))
        if dep is None:
            return
        spec = dep["spec"]["template"]["spec"]
        container = spec["containers"][0]
        # Holds after harm read where its Role lets it, and where the
        # updater keeps them.
        c.check(flag(container, "records-namespace") == NAMESPACE,
                f"{where}: admission controller reads the updater's records in {NAMESPACE}, where its Role is",
                flag(container, "records-namespace"))
        vols = {v.get("name"): v for v in spec.get("volumes") or []}
        mounts = {m.get("mountPath"): m for m in container.get("volumeMounts") or []}
        tls = mounts.get("/etc/tls") or {}
        if own:
            c.check(not tls and not any((v.get("secret") or {}).get("secretName") == TLS_SECRET for v in vols.values()),
                    f"{where}: self-managed admission controller mounts no certificate Secret")
            hosts = (flag(container, "cert-hosts") or "").split(",")
            c.check(f"{SERVICE}.{NAMESPACE}.svc" in hosts, f"{where}: self-managed certificate names {SERVICE}.{NAMESPACE}.svc",
                    flag(container, "cert-hosts"))
        else:
            c.check(tls.get("readOnly") is True and (vols.get(tls.get("name")) or {}).get("secret", {}).get("secretName")
                    == TLS_SECRET, f"{where}: admission controller mounts Secret {TLS_SECRET} read-only at /etc/tls")
        ports = container_ports(container)
        c.check(ports.get("webhook") == int(flag(container, "port") or 0),
                f"{where}: admission controller container port 'webhook' is --port")
        svcs = find(objs, "Service", SERVICE)
        if c.check(len(svcs) == 1, f"{where}: Service {SERVICE} exists"):
            svc = svcs[0]["spec"]
            labels = dep["spec"]["template"]["metadata"]["labels"]
            c.check(all(labels.get(k) == v for k, v in (svc.get("selector") or {}).items()) and svc.get("selector"),
                    f"{where}: Service {SERVICE} selects the admission controller pods")
            sp = svc.get("ports") or []
            c.check(len(sp) == 1 and sp[0].get("port") == 443 and sp[0].get("targetPort") in ("webhook", 8000),
                    f"{where}: Service {SERVICE} maps 443 to the webhook port", json.dumps(sp))


def check_lease(c, where, objs):
    """The updater's Lease ships with its Role (which may only read and
    renew it), empty: an apply or an upgrade then leaves alone the spec the
    updater writes."""
    leases = find(objs, "Lease")
    c.check(len(leases) == 1 and ident(leases[0]) == ("Lease", NAMESPACE, LEASE),
            f"{where}: ships the updater's Lease {NAMESPACE}/{LEASE}", str([ident(o) for o in leases]))
    for lease in leases:
        c.check(not lease.get("spec"), f"{where}: {show(lease)} sets no spec (the updater's renewals are its own)",
                json.dumps(lease.get("spec")))


# ---------------------------------------------------------------- admission policies

POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
JOBS_POLICY = "vpa-inplace-updater-jobs"
VPAS_POLICY = "vpa-inplace-updater-vpas"
PODS_POLICY = "vpa-inplace-updater-pods"
CONFIGMAPS_POLICY = "vpa-inplace-updater-configmaps"
# The upstream constant pkg/boost.AnnotationPrefix is, and the file that
# defines it in the VPA module.
BOOST_PREFIX_CONST = "StartupCPUBoostAnnotationPrefix"
BOOST_PREFIX_FILE = "pkg/utils/annotations/vpa_cpu_boost.go"


def go_strings(root, pattern):
    """The string literals matching pattern in the non-test Go files under root."""
    found = set()
    for dirpath, _, files in os.walk(root):
        for name in files:
            if name.endswith(".go") and not name.endswith("_test.go"):
                with open(os.path.join(dirpath, name), encoding="utf-8") as f:
                    found.update(re.findall(pattern, f.read()))
    return found


def policy_text(policy):
    return json.dumps(policy.get("spec") or {})


def upstream_boost_prefix(vpa_module_dir):
    """The value of upstream VPA's annotations.StartupCPUBoostAnnotationPrefix,
    read from the module's source, or None."""
    if not vpa_module_dir:
        return None
    try:
        with open(os.path.join(vpa_module_dir, BOOST_PREFIX_FILE), encoding="utf-8") as f:
            found = re.findall(BOOST_PREFIX_CONST + r'\s*=\s*"([^"]+)"', f.read())
    except OSError:
        return None
    return found[0] if len(found) == 1 else None


def check_admission_policies(c, where, objs, namespace=NAMESPACE, vpa_module_dir=None):
    """The updater's ValidatingAdmissionPolicies: one for Jobs, one for VPAs
    and one for pods, failing closed, matching the updater's ServiceAccount
    only, denying through a binding, every rule with a message; the VPA
    policy knows the updater's condition and leaves the users' annotations
    alone; the pods policy matches pods but not pods/resize, and lets go
    only the annotations whose prefix is the one the code removes; the
    ConfigMaps policy lets the updater write only ConfigMaps named and
    labelled as pkg/records names and labels its records."""
    user = f"system:serviceaccount:{namespace}:{UPDATER_SA}"
    for name, group, resource in ((JOBS_POLICY, "batch", "jobs"),
                                  (VPAS_POLICY, "autoscaling.k8s.io", "verticalpodautoscalers"),
                                  (PODS_POLICY, "", "pods"),
                                  (CONFIGMAPS_POLICY, "", "configmaps")):
        policy = (find(objs, "ValidatingAdmissionPolicy", name) or [None])[0]
        if not c.check(policy is not None, f"{where}: has ValidatingAdmissionPolicy {name}"):
            continue
        spec = policy.get("spec") or {}
        c.check(spec.get("failurePolicy") == "Fail", f"{where}: {name} fails closed")
        rules = ((spec.get("matchConstraints") or {}).get("resourceRules")) or []
        ops = {"CREATE", "UPDATE", "DELETE"}
        if name == CONFIGMAPS_POLICY:
            c.check(len(rules) == 1 and rules[0].get("apiGroups") == [""] and rules[0].get("resources") == ["configmaps"]
                    and ops <= set(rules[0].get("operations") or []),
                    f"{where}: {name} matches configmaps (CREATE, UPDATE, DELETE)", json.dumps(rules))
            c.check(not (spec.get("matchConstraints") or {}).get("excludeResourceRules"),
                    f"{where}: {name} excludes nothing")
        elif name == PODS_POLICY:
            # "pods" matches the pod only; "pods/*", "*/*" or "*/resize"
            # would put the updater's resizes under a policy that refuses
            # resource changes.
            c.check(len(rules) == 1 and rules[0].get("apiGroups") == [""] and rules[0].get("resources") == ["pods"]
                    and ops <= set(rules[0].get("operations") or []),
                    f"{where}: {name} matches pods (CREATE, UPDATE, DELETE), not their subresources", json.dumps(rules))
            c.check(not (spec.get("matchConstraints") or {}).get("excludeResourceRules"),
                    f"{where}: {name} excludes nothing")
        else:
            c.check(any(group in r.get("apiGroups", []) and resource in r.get("resources", [])
                        and f"{resource}/*" in r.get("resources", []) and ops <= set(r.get("operations") or [])
                        for r in rules), f"{where}: {name} matches {resource} and their subresources", json.dumps(rules))
        conds = spec.get("matchConditions") or []
        c.check(len(conds) == 1 and conds[0].get("expression") == f"request.userInfo.username == '{user}'",
                f"{where}: {name} matches only {user}", json.dumps(conds))
        vals = spec.get("validations") or []
        c.check(bool(vals) and all(v.get("message") and v.get("reason") == "Forbidden" for v in vals),
                f"{where}: {name}: every rule refuses with Forbidden and a message")
        bindings = [b for b in find(objs, "ValidatingAdmissionPolicyBinding")
                    if (b.get("spec") or {}).get("policyName") == name]
        c.check(len(bindings) == 1 and bindings[0]["spec"].get("validationActions") == ["Deny"]
                and not bindings[0]["spec"].get("matchResources") and not bindings[0]["spec"].get("paramRef"),
                f"{where}: {name} is bound once, to deny everywhere")
    vpas = (find(objs, "ValidatingAdmissionPolicy", VPAS_POLICY) or [None])[0]
    if vpas is None:
        return
    text = policy_text(vpas)
    conditions = go_strings("pkg/updater/condition", r'const Type\s+[\w.]*\s*=\s*"([^"]+)"')
    c.check(len(conditions) == 1 and all(f"'{t}'" in text for t in conditions),
            f"{where}: {VPAS_POLICY} allows the condition the updater writes", str(sorted(conditions)))
    settings = [v.get("expression", "") for v in (vpas.get("spec") or {}).get("variables") or []
                if v.get("name") == "settings"]
    settings = set(re.findall(r"'([^']+)'", settings[0] if len(settings) == 1 else ""))
    read = go_strings("pkg/updater", r'"(vpa-inplace\.dev/[a-z0-9-]+)"')
    written = go_strings("pkg/records", r'"(vpa-inplace\.dev/[a-z0-9-]+)"')
    c.check(bool(read) and read <= settings, f"{where}: {VPAS_POLICY} keeps the users' vpa-inplace.dev/ annotations "
            "(those pkg/updater reads) from the updater", f"settings {sorted(settings)}, read {sorted(read)}")
    c.check(bool(written) and not written & settings, f"{where}: {VPAS_POLICY} lets the updater write its records' "
            "annotations (those of pkg/records)", f"settings {sorted(settings)}, written {sorted(written)}")
    pods = (find(objs, "ValidatingAdmissionPolicy", PODS_POLICY) or [None])[0]
    if pods is None:
        return
    prefixes = [v.get("expression", "") for v in (pods.get("spec") or {}).get("variables") or []
                if v.get("name") == "prefix"]
    prefix = re.fullmatch(r"'([^']+)'", prefixes[0].strip()) if len(prefixes) == 1 else None
    prefix = prefix.group(1) if prefix else None
    upstream = upstream_boost_prefix(vpa_module_dir)
    c.check(prefix is not None and prefix == upstream,
            f"{where}: {PODS_POLICY} lets the updater remove the annotations of upstream VPA's "
            f"annotations.{BOOST_PREFIX_CONST}", f"policy {prefix!r}, upstream {upstream!r}")
    c.check(bool(go_strings("pkg/boost", r"const AnnotationPrefix\s*=\s*annotations\.(" + BOOST_PREFIX_CONST + r")\b")),
            f"{where}: {PODS_POLICY}: pkg/boost.AnnotationPrefix is upstream's annotations.{BOOST_PREFIX_CONST}")
    text = policy_text(pods)
    c.check(text.count("variables.prefix") == 1 and "startsWith(variables.prefix)" in text,
            f"{where}: {PODS_POLICY} uses the prefix in one rule, on removed annotations")
    cms = (find(objs, "ValidatingAdmissionPolicy", CONFIGMAPS_POLICY) or [None])[0]
    if cms is None:
        return
    variables = {v.get("name"): v.get("expression", "").strip() for v in (cms.get("spec") or {}).get("variables") or []}

    def literal(name):
        m = re.fullmatch(r"'([^']+)'", variables.get(name, ""))
        return m.group(1) if m else None

    names = go_strings("pkg/records", r'DefaultConfigMapPrefix\s*=\s*"([^"]+)"')
    labels = go_strings("pkg/records", r'LabelStore\s*=\s*"([^"]+)"')
    # What the updater runs with: its Deployment's flags (none in
    # overlays/local, whose binaries run with deploy/'s names).
    deps = [d for d in find(objs, "Deployment") if d["spec"]["template"]["spec"]["containers"][0]["name"] == "updater"]
    flags = {}
    for a in (deps[0]["spec"]["template"]["spec"]["containers"][0].get("args") or []) if deps else []:
        if a.startswith("--") and "=" in a:
            flags[a[2:].split("=", 1)[0]] = a.split("=", 1)[1]
    c.check(len(names) == 1 and literal("earlierPrefix") in names,
            f"{where}: {CONFIGMAPS_POLICY} knows the records' default name, pkg/records.DefaultConfigMapPrefix",
            f"policy {literal('earlierPrefix')!r}, pkg/records {sorted(names)}")
    c.check(literal("prefix") == flags.get("records-prefix", next(iter(names), None)),
            f"{where}: {CONFIGMAPS_POLICY} lets the updater write the ConfigMaps of its --records-prefix",
            f"policy {literal('prefix')!r}, --records-prefix={flags.get('records-prefix')}")
    c.check(literal("killSwitch") == flags.get("config-map", "/" + UPDATER_CONFIG).split("/", 1)[1],
            f"{where}: {CONFIGMAPS_POLICY} refuses the updater's kill switch (--config-map)",
            f"policy {literal('killSwitch')!r}, --config-map={flags.get('config-map')}")
    c.check(literal("lease") == flags.get("records-owner", LEASE),
            f"{where}: {CONFIGMAPS_POLICY} lets the records be owned by the updater's --records-owner Lease",
            f"policy {literal('lease')!r}, --records-owner={flags.get('records-owner')}")
    c.check(len(labels) == 1 and literal("label") in labels,
            f"{where}: {CONFIGMAPS_POLICY} keeps the label pkg/records.LabelStore on them",
            f"policy {literal('label')!r}, pkg/records {sorted(labels)}")
    text = policy_text(cms)
    c.check("variables.name != variables.killSwitch" in text and "startsWith(p + variables.store + '-')" in text
            and "variables.label in oldObject" in text and "r.name == variables.lease" in text,
            f"{where}: {CONFIGMAPS_POLICY} refuses the kill switch by name, checks the name's prefix and store, "
            "the label before and after an update, and the owner")


# ---------------------------------------------------------------- per root

def check_identity(c, where, objs):
    seen = set()
    for o in objs:
        md = o.get("metadata") or {}
        ok = isinstance(o, dict) and o.get("apiVersion") and o.get("kind") and md.get("name")
        if not c.check(bool(ok), f"{where}: every object has apiVersion, kind and metadata.name", json.dumps(o)[:120]):
            continue
        c.check(ident(o) not in seen, f"{where}: {show(o)} appears once")
        seen.add(ident(o))
        if o["kind"] in CLUSTER_SCOPED:
            c.check("namespace" not in md, f"{where}: cluster-scoped {show(o)} has no namespace")
        else:
            c.check(md.get("namespace") == NAMESPACE, f"{where}: {show(o)} is in namespace {NAMESPACE}")


def check_crds(c, where, objs):
    names = {ident(o)[2] for o in find(objs, "CustomResourceDefinition")}
    c.check({"verticalpodautoscalers.autoscaling.k8s.io", "verticalpodautoscalercheckpoints.autoscaling.k8s.io"}
            <= names, f"{where}: both VPA CRDs are present", str(sorted(names)))
    for crd in find(objs, "CustomResourceDefinition", "verticalpodautoscalers.autoscaling.k8s.io"):
        v1 = [v for v in crd["spec"]["versions"] if v["name"] == "v1" and v.get("served")]
        enum = []
        if v1:
            props = v1[0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            enum = props["updatePolicy"]["properties"]["updateMode"].get("enum") or []
        c.check("InPlace" in enum, f"{where}: served v1 VPA CRD accepts updateMode InPlace", str(enum))


def strip_client_config(objs):
    out = []
    for o in objs:
        o = json.loads(json.dumps(o))
        for wh in o.get("webhooks") or []:
            wh.pop("clientConfig", None)
        out.append(o)
    return out


def canonical(objs):
    return sorted(json.dumps(o, sort_keys=True) for o in objs)


# ---------------------------------------------------------------- certificates

def without_ca(objs):
    """The objects with what the ways of providing the CA change removed: the
    webhooks' caBundle and annotations."""
    out = []
    for o in objs:
        o = json.loads(json.dumps(o))
        if o.get("kind") in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            (o.get("metadata") or {}).pop("annotations", None)
            for wh in o.get("webhooks") or []:
                (wh.get("clientConfig") or {}).pop("caBundle", None)
        out.append(o)
    return out


def without_certificate_flags(objs):
    """The objects without what distinguishes the certificate modes in the
    admission controller's Deployment: its certificate flags and the Secret
    volume."""
    out = []
    for o in without_ca(objs):
        if o.get("kind") == "Deployment" and ident(o)[2] == "vpa-inplace-admission-controller":
            spec = o["spec"]["template"]["spec"]
            for container in spec.get("containers") or []:
                container["args"] = [a for a in container.get("args") or []
                                     if not a.startswith(("--tls-cert-file=", "--tls-private-key-file=", "--cert-"))]
                container["volumeMounts"] = [m for m in container.get("volumeMounts") or [] if m.get("name") != "tls"]
            spec["volumes"] = [v for v in spec.get("volumes") or [] if v.get("name") != "tls"]
        out.append(o)
    return out


def check_certificate_overlay(c, where, objs, base):
    """An overlay that provides the serving certificate: base's objects, the
    webhooks' CA apart, plus what writes Secret vpa-inplace-admission-tls; or
    base with the admission controller keeping its own (self-managed).
    These overlays are applied with kubectl apply -k alone, so they leave
    out base's NetworkPolicy, whose API server range only a script or the
    user can fill in."""
    c.check(not find(objs, "NetworkPolicy"),
            f"{where}: no NetworkPolicy with the API server range left to fill in (components/without-network-policy)")
    base = [o for o in base if o["kind"] != "NetworkPolicy"]
    if self_managed(objs):
        certs_rbac = [o for o in objs if ident(o)[2] == CERT_ROLE]
        c.check({o["kind"] for o in certs_rbac} == {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"},
                f"{where}: adds the RBAC of --cert-mode=self-managed ({CERT_ROLE})")
        cert_secret = find(objs, "Secret", CERT_SECRET)
        c.check(canonical(without_certificate_flags([o for o in objs if o not in certs_rbac and o not in cert_secret]))
                == canonical(without_certificate_flags(base)),
                f"{where}: base's objects, apart from the webhooks' caBundle and the certificate flags and volume")
        c.check([ident(o)[2] for o in find(objs, "Secret")] == [CERT_SECRET] and not find(objs, "Certificate"),
                f"{where}: ships no Secret but the empty {CERT_SECRET} the admission controller fills in, and no Certificate")
        return
    extra = {"Issuer", "Certificate", "Secret"}
    c.check(canonical(without_ca([o for o in objs if o["kind"] not in extra])) == canonical(without_ca(base)),
            f"{where}: base's objects, apart from the webhooks' caBundle and annotations")
    check_certificate(c, where, objs)


def check_certificate(c, where, objs):
    """Secret vpa-inplace-admission-tls: written by a cert-manager Certificate
    for the Service's DNS name, or given with tls.crt, tls.key and ca.crt."""
    certs = find(objs, "Certificate", CERTIFICATE)
    secrets = find(objs, "Secret", TLS_SECRET)
    c.check(bool(certs) != bool(secrets), f"{where}: Secret {TLS_SECRET} comes from a Certificate or is given")
    for cert in certs:
        spec = cert.get("spec") or {}
        c.check(spec.get("secretName") == TLS_SECRET, f"{where}: Certificate writes Secret {TLS_SECRET}")
        c.check(f"{SERVICE}.{NAMESPACE}.svc" in (spec.get("dnsNames") or []),
                f"{where}: Certificate names {SERVICE}.{NAMESPACE}.svc", json.dumps(spec.get("dnsNames")))
        ref = spec.get("issuerRef") or {}
        c.check(ref.get("kind") == "ClusterIssuer" or bool(find(objs, "Issuer", ref.get("name"))),
                f"{where}: Certificate's issuer {ref.get('name')} exists")
        # A self-signed issuer makes every renewal of the serving
        # certificate a new CA, which the webhooks' caBundle must follow at
        # the same instant; a CA issuer keeps the CA.
        for issuer in find(objs, "Issuer", ref.get("name")) if ref.get("kind", "Issuer") == "Issuer" else []:
            ca = (issuer.get("spec") or {}).get("ca") or {}
            cas = [x for x in find(objs, "Certificate") if (x.get("spec") or {}).get("secretName") == ca.get("secretName")]
            c.check(bool(ca) and len(cas) == 1 and cas[0]["spec"].get("isCA") is True,
                    f"{where}: the serving certificate comes from a CA Issuer whose CA is a Certificate of its own (isCA), "
                    "not from a self-signed Issuer", json.dumps(issuer.get("spec")))
    for sec in secrets:
        c.check(sec.get("type") == "kubernetes.io/tls" and {"tls.crt", "tls.key", "ca.crt"} <= set(sec.get("data") or {}),
                f"{where}: Secret {TLS_SECRET} is kubernetes.io/tls with tls.crt, tls.key and ca.crt")


# ---------------------------------------------------------------- chart

def component_objs(objs, name):
    return [o for o in objs if ((o.get("metadata") or {}).get("labels") or {}).get("app.kubernetes.io/name") == name]


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


# The deploy/ root whose objects the chart renders in each certificate mode.
CHART_MODE_ROOTS = {"self-managed": "overlays/self-managed-certs", "cert-manager": "overlays/cert-manager", "secret": "base"}
# What the chart may set apart from deploy/ even with its default values
# (deploy/README.md, "The Helm chart"): the replicas, the images (deploy/
# has placeholders), the spread over nodes, the history limit (the API's
# default, 10, spelt out) and its own labels (the release's, commonLabels).
CHART_ONLY_DEPLOYMENT_FIELDS = ("replicas", "revisionHistoryLimit")
CHART_ONLY_POD_FIELDS = ("topologySpreadConstraints",)
CHART_ONLY_CONTAINER_FIELDS = ("image",)


def without_labels(objs):
    out = []
    for o in objs:
        o = json.loads(json.dumps(o))
        (o.get("metadata") or {}).pop("labels", None)
        out.append(o)
    return out


def deployment_shape(dep):
    """A Deployment without what the chart may set differently (above)."""
    dep = json.loads(json.dumps(dep))
    for f in CHART_ONLY_DEPLOYMENT_FIELDS:
        dep["spec"].pop(f, None)
    pod = dep["spec"]["template"]
    pod["metadata"].pop("labels", None)
    for f in CHART_ONLY_POD_FIELDS:
        pod["spec"].pop(f, None)
    for container in pod["spec"].get("containers") or []:
        for f in CHART_ONLY_CONTAINER_FIELDS:
            container.pop(f, None)
    dep["metadata"].pop("labels", None)
    dep["spec"]["selector"] = None
    return dep


def only_certificates(values):
    """Whether a values case sets nothing but the certificate mode and its
    settings, so that the chart must render deploy/'s objects for that mode."""
    return set(values) <= {"certificates"}


def chart_replicas(values, component):
    """A component's replicas from its values: the updater's replicas when
    set (null: not set) wins over replicaCount, which defaults to 2."""
    if component == "updater" and values.get("replicas") is not None:
        return values["replicas"]
    return values.get("replicaCount", 2)


SHARDS_ROLE = LEASE + "-shards"
NODEROOM_ROLE = LEASE + "-noderoom"


def split_shards(objs):
    """The objects of updater.shards above 1 (the shards' and members'
    Leases, the node room buckets' ConfigMaps, the Roles and RoleBindings
    naming them), and the others."""
    def shard_obj(o):
        name = ident(o)[2] or ""
        if o["kind"] == "Lease":
            return re.fullmatch(re.escape(LEASE) + r"-(shard|member)-[0-9]+", name) is not None
        if o["kind"] == "ConfigMap":
            return re.fullmatch(re.escape(LEASE) + r"-noderoom-[0-9]+", name) is not None
        return o["kind"] in ("Role", "RoleBinding") and name in (SHARDS_ROLE, NODEROOM_ROLE)
    mine = [o for o in objs if shard_obj(o)]
    return mine, [o for o in objs if not shard_obj(o)]


def check_node_room(c, where, shard_objs, objs, shards, buckets):
    """With updater.shards above 1: a node room bucket per
    updater.nodeRoomBuckets, an empty ConfigMap of the records' namespace; a
    Role that may only get, list, watch and update those, by name (no create,
    no delete, nothing else on configmaps), bound to the updater; the
    Deployment told how many; the ConfigMaps policy, where it ships, naming
    them."""
    want = {f"{LEASE}-noderoom-{b}" for b in range(buckets)} if shards > 1 else set()
    configmaps = find(shard_objs, "ConfigMap")
    c.check({ident(o)[2] for o in configmaps} == want and len(configmaps) == len(want)
            and all(ident(o)[1] == NAMESPACE for o in configmaps),
            f"{where}: a node room bucket per updater.nodeRoomBuckets ({buckets}) in {NAMESPACE}", str(sorted(ident(o)[2] for o in configmaps)))
    for cm in configmaps:
        c.check(not cm.get("data") and not cm.get("binaryData"), f"{where}: {show(cm)} ships empty")
    roles = find(shard_objs, "Role", NODEROOM_ROLE)
    bindings = find(shard_objs, "RoleBinding", NODEROOM_ROLE)
    if shards <= 1:
        c.check(not roles and not bindings, f"{where}: no node room Role without shards")
        return
    if not c.check(len(roles) == 1 and len(bindings) == 1, f"{where}: the node room Role and its binding ship"):
        return
    rules = roles[0].get("rules") or []
    c.check(len(rules) == 1 and (rules[0].get("apiGroups") or []) == [""] and (rules[0].get("resources") or []) == ["configmaps"]
            and set(rules[0].get("resourceNames") or []) == want and set(rules[0].get("verbs") or []) == {"get", "list", "watch", "update"},
            f"{where}: the node room Role may get, list, watch and update exactly the buckets, by name", json.dumps(rules))
    for verb in ("create", "delete", "deletecollection", "patch"):
        c.check(not allows(rules, "", "configmaps", verb), f"{where}: the node room Role cannot {verb} configmaps")
    subjects = bindings[0].get("subjects") or []
    c.check((bindings[0].get("roleRef") or {}).get("name") == NODEROOM_ROLE
            and [(s.get("kind"), s.get("name"), s.get("namespace")) for s in subjects] == [("ServiceAccount", UPDATER_SA, NAMESPACE)],
            f"{where}: the node room Role is bound to the updater's ServiceAccount", json.dumps(subjects))
    dep = (find(objs, "Deployment", UPDATER_SA) or [None])[0]
    if c.check(dep is not None, f"{where}: the updater's Deployment"):
        container = dep["spec"]["template"]["spec"]["containers"][0]
        c.check(flag(container, "node-room-buckets") == str(buckets) and flag(container, "records-namespace") == NAMESPACE,
                f"{where}: the updater reserves node room in {buckets} buckets of {NAMESPACE}", json.dumps(container.get("args")))
    # The ConfigMaps policy, where it ships, must let the updater write
    # them: RBAC alone would, and the policy refuse every reservation.
    policy = (find(objs, "ValidatingAdmissionPolicy", CONFIGMAPS_POLICY) or [None])[0]
    if policy is not None:
        variables = {v.get("name"): v.get("expression") for v in (policy.get("spec") or {}).get("variables") or []}
        c.check(variables.get("buckets") == f"'{LEASE}-noderoom-'",
                f"{where}: {CONFIGMAPS_POLICY} lets the updater write the node room buckets {LEASE}-noderoom-<b>",
                str(variables.get("buckets")))


def check_shards(c, where, shard_objs, objs, shards):
    """With updater.shards above 1: a Lease per shard and per member slot,
    empty; a Role that may only get and update those, by name, and list and
    watch the Leases of the namespace (no create, no delete), bound to the
    updater; the Deployment told the shards and the Leases' prefix."""
    want = set()
    if shards > 1:
        for i in range(shards):
            want |= {f"{LEASE}-shard-{i}", f"{LEASE}-member-{i}"}
    leases = find(shard_objs, "Lease")
    c.check({ident(o)[2] for o in leases} == want and len(leases) == len(want)
            and all(ident(o)[1] == NAMESPACE for o in leases),
            f"{where}: a Lease per shard and per member slot ({shards} shards) in {NAMESPACE}", str(sorted(ident(o)[2] for o in leases)))
    for lease in leases:
        c.check(not lease.get("spec"), f"{where}: {show(lease)} sets no spec", json.dumps(lease.get("spec")))
    roles = find(shard_objs, "Role", SHARDS_ROLE)
    bindings = find(shard_objs, "RoleBinding", SHARDS_ROLE)
    if shards <= 1:
        c.check(not roles and not bindings, f"{where}: no shards' Role without shards")
        return
    if not c.check(len(roles) == 1 and len(bindings) == 1, f"{where}: the shards' Role and its binding ship"):
        return
    rules = roles[0].get("rules") or []
    named = [r for r in rules if r.get("resourceNames")]
    unnamed = [r for r in rules if not r.get("resourceNames")]
    c.check(all(rule_covers(r, "coordination.k8s.io", "leases") and (r.get("resources") or []) == ["leases"] for r in rules),
            f"{where}: the shards' Role grants on leases only", json.dumps(rules))
    c.check(len(named) == 1 and set(named[0].get("resourceNames")) == want and set(named[0].get("verbs") or []) == {"get", "update"},
            f"{where}: the shards' Role may get and update exactly the shards' and members' Leases, by name", json.dumps(named))
    c.check(all(set(r.get("verbs") or []) <= {"list", "watch"} for r in unnamed) and allows(unnamed, "coordination.k8s.io", "leases", "watch"),
            f"{where}: the shards' Role may only list and watch the other Leases", json.dumps(unnamed))
    for verb in ("create", "delete", "deletecollection", "patch"):
        c.check(not allows(rules, "coordination.k8s.io", "leases", verb), f"{where}: the shards' Role cannot {verb} leases")
    subjects = bindings[0].get("subjects") or []
    c.check((bindings[0].get("roleRef") or {}).get("name") == SHARDS_ROLE
            and [(s.get("kind"), s.get("name"), s.get("namespace")) for s in subjects] == [("ServiceAccount", UPDATER_SA, NAMESPACE)],
            f"{where}: the shards' Role is bound to the updater's ServiceAccount", json.dumps(subjects))
    dep = (find(objs, "Deployment", UPDATER_SA) or [None])[0]
    if c.check(dep is not None, f"{where}: the updater's Deployment"):
        container = dep["spec"]["template"]["spec"]["containers"][0]
        c.check(flag(container, "shards") == str(shards) and flag(container, "shard-lease-prefix") == LEASE
                and flag(container, "leader-elect") == "true",
                f"{where}: the updater shares {shards} shards, its Leases named after its own", json.dumps(container.get("args")))


def updater_shards(objs):
    """The --shards of the updater's Deployment among objs; 1 without."""
    for dep in find(objs, "Deployment", UPDATER_SA):
        for container in dep["spec"]["template"]["spec"].get("containers") or []:
            return int(flag(container, "shards") or 1)
    return 1


# The updater's --node-room-buckets when it is not given
# (pkg/updater/noderoom/buckets.DefaultBuckets), the chart's default.
DEFAULT_NODE_ROOM_BUCKETS = 16


def updater_buckets(objs):
    """The --node-room-buckets of the updater's Deployment among objs; the
    default without."""
    for dep in find(objs, "Deployment", UPDATER_SA):
        for container in dep["spec"]["template"]["spec"].get("containers") or []:
            value = flag(container, "node-room-buckets")
            return int(value) if value and value.isdigit() else DEFAULT_NODE_ROOM_BUCKETS
    return DEFAULT_NODE_ROOM_BUCKETS


# The chart's values case a sharded overlay renders the objects of.
SHARDED_CHART_CASE = "sharded"
SHARD_FLAGS = ("--shards=", "--shard-lease-prefix=", "--node-room-buckets=")


def unsharded(dep):
    """The updater's Deployment as overlays/self-managed-certs ships it: one
    replica, no shards' or node room buckets' flags, no spread."""
    dep = json.loads(json.dumps(dep))
    dep["spec"]["replicas"] = 1
    pod = dep["spec"]["template"]["spec"]
    pod.pop("topologySpreadConstraints", None)
    for container in pod.get("containers") or []:
        container["args"] = [a for a in container.get("args") or [] if not a.startswith(SHARD_FLAGS)]
    return dep


def without_selector(objs):
    """Spreads or budgets without their label selectors (the chart's select
    the release's labels too)."""
    out = []
    for o in objs:
        o = json.loads(json.dumps(o))
        o.pop("labelSelector", None)
        o.pop("selector", None)
        out.append(o)
    return out


def check_sharded_overlay(c, where, objs, reference, chart_objs):
    """An overlay that shards the updater (overlays/sharded): the shards'
    objects and the node room buckets (check_shards and check_node_room, run
    for every root), and otherwise
    overlays/self-managed-certs apart from the updater's replicas, its
    shards' flags and spread, and a PodDisruptionBudget of maxUnavailable 1
    for it; and all of that as the chart renders it with the values of
    ci/sharded-values.yaml, apart from labels and selectors."""
    shard_objs, plain = split_shards(objs)
    dep = (find(plain, "Deployment", UPDATER_SA) or [None])[0]
    if not c.check(dep is not None and bool(reference), f"{where}: the updater's Deployment, and overlays/self-managed-certs, rendered"):
        return
    pod = dep["spec"]["template"]
    labels = pod["metadata"].get("labels") or {}
    container = pod["spec"]["containers"][0]
    c.check((dep["spec"].get("replicas") or 1) > 1 and flag(container, "leader-elect") == "true",
            f"{where}: several updater replicas, with leader election", str(dep["spec"].get("replicas")))
    spread = pod["spec"].get("topologySpreadConstraints") or []
    c.check(bool(spread) and all(selects((t.get("labelSelector") or {}).get("matchLabels"), labels) for t in spread),
            f"{where}: the updater's replicas are spread, and the spread selects them", json.dumps(spread))
    pdbs = find(plain, "PodDisruptionBudget")
    c.check(len(pdbs) == 1 and ident(pdbs[0]) == ("PodDisruptionBudget", NAMESPACE, UPDATER_SA)
            and selects(((pdbs[0].get("spec") or {}).get("selector") or {}).get("matchLabels"), labels)
            and (pdbs[0].get("spec") or {}).get("maxUnavailable") == 1 and "minAvailable" not in pdbs[0]["spec"],
            f"{where}: a PodDisruptionBudget of maxUnavailable 1 for the updater alone", json.dumps([p.get("spec") for p in pdbs]))
    rest = [unsharded(o) if ident(o) == ("Deployment", NAMESPACE, UPDATER_SA) else o
            for o in plain if o["kind"] != "PodDisruptionBudget"]
    mine, theirs = canonical(rest), canonical(reference)
    c.check(mine == theirs, f"{where}: overlays/self-managed-certs apart from the shards' objects and node room buckets, "
            "the updater's replicas, shards' and buckets' flags and spread, and its PodDisruptionBudget",
            "differ: " + ", ".join(sorted({show(json.loads(x)) for x in set(mine) ^ set(theirs)}))[:300])
    if not c.check(chart_objs is not None, f"{where}: the chart's {SHARDED_CHART_CASE} case is rendered"):
        return
    chart_shards, chart_plain = split_shards(chart_objs)
    c.check(canonical(without_labels(shard_objs)) == canonical(without_labels(chart_shards)),
            f"{where}: the shards' Leases, the node room buckets, their Roles and bindings are the chart's "
            f"(ci/{SHARDED_CHART_CASE}-values.yaml)",
            "differ: " + ", ".join(sorted({show(json.loads(x)) for x in
                                           set(canonical(without_labels(shard_objs))) ^ set(canonical(without_labels(chart_shards)))}))[:300])
    chart_dep = (find(chart_plain, "Deployment", UPDATER_SA) or [None])[0]
    if not c.check(chart_dep is not None, f"{where}: the chart's updater Deployment ({SHARDED_CHART_CASE})"):
        return
    chart_pod = chart_dep["spec"]["template"]["spec"]
    c.check(container.get("args") == chart_pod["containers"][0].get("args"),
            f"{where}: the updater's args are the chart's ({SHARDED_CHART_CASE})",
            f"overlay {json.dumps(container.get('args'))} vs chart {json.dumps(chart_pod['containers'][0].get('args'))}")
    c.check(dep["spec"].get("replicas") == chart_dep["spec"].get("replicas"),
            f"{where}: the updater's replicas are the chart's ({SHARDED_CHART_CASE})")
    c.check(without_selector(spread) == without_selector(chart_pod.get("topologySpreadConstraints") or []),
            f"{where}: the updater's spread is the chart's ({SHARDED_CHART_CASE}), but for its selector")
    chart_pdbs = [p for p in find(chart_plain, "PodDisruptionBudget") if ident(p)[2] == UPDATER_SA]
    c.check(len(chart_pdbs) == 1 and without_selector([p["spec"] for p in pdbs]) == without_selector([chart_pdbs[0]["spec"]]),
            f"{where}: the updater's PodDisruptionBudget is the chart's ({SHARDED_CHART_CASE}), but for its selector")


def check_chart(c, case, objs, rendered, values):
    """One `helm template` output (release vpa-inplace in vpa-inplace-system)
    against the deploy/ root of its certificate mode (CHART_MODE_ROOTS): the
    same CRDs, ServiceAccounts, RBAC and admission policies (update-chart.sh
    generates them), the same webhooks apart from the CA, and with values
    that set nothing but the certificates, the same Deployments (args, env,
    ports, probes, security, volumes) apart from CHART_ONLY_*; the
    Deployments' security and flags, and the chart's own objects (PDB,
    spread, monitoring)."""
    where = f"chart ({case})"
    shard_objs, objs = split_shards(objs)
    updater_values = values.get("updater") or {}
    check_shards(c, where, shard_objs, objs, int(updater_values.get("shards", 1)))
    check_node_room(c, where, shard_objs, objs, int(updater_values.get("shards", 1)), int(updater_values.get("nodeRoomBuckets", 16)))
    check_rbac_hygiene(c, where, shard_objs)
    mode = ((values.get("certificates") or {}).get("mode")) or "self-managed"
    root = CHART_MODE_ROOTS[mode]
    base = json.loads(json.dumps(rendered.get(root) or []))
    if not c.check(bool(base), f"{where}: deploy/{root}, the objects of certificates.mode {mode}, is rendered"):
        return
    check_identity(c, where, objs)
    check_rbac_hygiene(c, where, objs)
    c.check(canonical(find(objs, "CustomResourceDefinition")) == canonical(find(base, "CustomResourceDefinition")),
            f"{where}: the CRDs are deploy/base's")
    extra_rules = (values.get("rbac") or {}).get("extraRules") or []
    for role in find(objs, "ClusterRole"):
        if ident(role)[2] in (UPDATER_SA, ADMISSION_SA) and extra_rules:
            rules = role.get("rules") or []
            c.check(rules[-len(extra_rules):] == extra_rules, f"{where}: {show(role)} ends with rbac.extraRules")
            role["rules"] = rules[:-len(extra_rules)]
    rbac_kinds = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    policy_on = ((values.get("updater") or {}).get("admissionPolicy") or {}).get("enabled", True)
    for component, sa, key in (("updater", UPDATER_SA, "updater"),
                               ("admission-controller", ADMISSION_SA, "admissionController")):
        enabled = (values.get(key) or {}).get("enabled", True)
        mine = [o for o in component_objs(objs, f"vpa-inplace-{component}") if o["kind"] in rbac_kinds]
        theirs = [o for o in component_objs(base, f"vpa-inplace-{component}") if o["kind"] in rbac_kinds]
        if component == "updater" and not policy_on:
            # The patch on pods ships only with the policy that narrows it.
            theirs = [o for o in theirs if ident(o)[2] != PODS_POLICY]
        for o in mine:
            if o["kind"] == "ServiceAccount":
                o["metadata"].pop("annotations", None)
        c.check(canonical(without_labels(mine)) == canonical(without_labels(theirs) if enabled else []),
                f"{where}: the {component}'s ServiceAccount and RBAC are deploy/{root}'s" if enabled
                else f"{where}: no {component} RBAC when disabled")
        if not enabled:
            c.check(not find(objs, "Deployment", f"vpa-inplace-{component}"), f"{where}: no {component} when disabled")
            if component == "updater":
                c.check(not [o for o in objs if o["kind"] in POLICY_KINDS], f"{where}: no admission policies without the updater")
                c.check(not find(objs, "Lease"), f"{where}: no Lease without the updater")
            continue
        if component == "updater":
            check_updater_rbac(c, where, objs)
            check_lease(c, where, objs)
            c.check(canonical(without_labels(find(objs, "Lease"))) == canonical(without_labels(find(base, "Lease"))),
                    f"{where}: the updater's Lease is deploy/base's")
            policies = [o for o in objs if o["kind"] in POLICY_KINDS]
            on = policy_on
            c.check(canonical(without_labels(policies))
                    == canonical(without_labels([o for o in base if o["kind"] in POLICY_KINDS]) if on else []),
                    f"{where}: the updater's admission policies are deploy/base's" if on
                    else f"{where}: no admission policies when updater.admissionPolicy.enabled is false")
        else:
            check_admission_rbac(c, where, objs, self_managed_certs=mode == "self-managed")
        dep = (find(objs, "Deployment", f"vpa-inplace-{component}") or [None])[0]
        if dep is None:
            continue
        if only_certificates(values):
            theirs = (find(base, "Deployment", f"vpa-inplace-{component}") or [None])[0]
            if c.check(theirs is not None, f"{where}: deploy/{root} has Deployment vpa-inplace-{component}"):
                mine_c = dep["spec"]["template"]["spec"]["containers"]
                their_c = theirs["spec"]["template"]["spec"]["containers"]
                c.check([x.get("args") for x in mine_c] == [x.get("args") for x in their_c],
                        f"{where}: the {component}'s args are deploy/{root}'s",
                        f"chart {json.dumps([x.get('args') for x in mine_c])} vs {json.dumps([x.get('args') for x in their_c])}")
                c.check([x.get("env") for x in mine_c] == [x.get("env") for x in their_c],
                        f"{where}: the {component}'s env is deploy/{root}'s",
                        f"chart {json.dumps([x.get('env') for x in mine_c])} vs {json.dumps([x.get('env') for x in their_c])}")
                c.check(deployment_shape(dep) == deployment_shape(theirs),
                        f"{where}: the {component}'s Deployment is deploy/{root}'s apart from "
                        f"{', '.join(CHART_ONLY_DEPLOYMENT_FIELDS + CHART_ONLY_POD_FIELDS + CHART_ONLY_CONTAINER_FIELDS)} and labels",
                        diff_hint(deployment_shape(dep), deployment_shape(theirs)))
        pod = dep["spec"]["template"]
        labels = pod["metadata"].get("labels") or {}
        c.check(dep["spec"].get("replicas") == chart_replicas(values.get(key) or {}, component),
                f"{where}: {component} replicas as in the values")
        spread = pod["spec"].get("topologySpreadConstraints") or []
        c.check(bool(spread) and all(selects((t.get("labelSelector") or {}).get("matchLabels"), labels) for t in spread
                                     if "labelSelector" in t),
                f"{where}: {component} pods are spread and the spread selects them", json.dumps(spread))
        pdbs = [p for p in find(objs, "PodDisruptionBudget")
                if selects(((p.get("spec") or {}).get("selector") or {}).get("matchLabels"), labels)]
        want_pdb = ((values.get(key) or {}).get("podDisruptionBudget") or {}).get("enabled", True)
        c.check(len(pdbs) == (1 if want_pdb else 0), f"{where}: {component} has {'a' if want_pdb else 'no'} PodDisruptionBudget")
    check_workloads(c, where, objs, chart=True, values=values)
    hooks = [o for o in objs if o["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")]
    if (values.get("admissionController") or {}).get("enabled", True):
        check_webhooks(c, where, objs, local=False, mode=ca_mode("chart", objs), settings=webhook_settings(values))
        if webhook_settings(values) == WEBHOOK_DEFAULTS:
            base_hooks = [o for o in base if o["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")]
            c.check(canonical(without_labels(without_ca(hooks))) == canonical(without_labels(without_ca(base_hooks))),
                    f"{where}: webhooks equal deploy/{root}'s apart from the CA")
        if mode == "cert-manager":
            check_certificate(c, where, objs)
    else:
        c.check(not hooks, f"{where}: no webhooks without the admission controller")
    for sm in find(objs, "ServiceMonitor"):
        sel = ((sm.get("spec") or {}).get("selector") or {}).get("matchLabels")
        svcs = [s for s in find(objs, "Service") if selects(sel, (s.get("metadata") or {}).get("labels") or {})]
        ok = len(svcs) == 1 and any(p.get("name") == "metrics" for p in svcs[0]["spec"].get("ports") or [])
        pods = [d for d in find(objs, "Deployment")
                if svcs and selects(svcs[0]["spec"].get("selector"), d["spec"]["template"]["metadata"]["labels"])]
        c.check(ok and len(pods) == 1, f"{where}: {show(sm)} selects one Service with port metrics, on one Deployment's pods")


def diff_hint(a, b):
    """The first differing path of two JSON values, for a FAIL line."""
    def walk(x, y, path):
        if type(x) is not type(y):
            return f"{path}: {json.dumps(x)[:150]} vs {json.dumps(y)[:150]}"
        if isinstance(x, dict):
            for k in sorted(set(x) | set(y)):
                if x.get(k) != y.get(k):
                    return walk(x.get(k), y.get(k), f"{path}.{k}")
        elif isinstance(x, list) and len(x) == len(y):
            for i, (u, v) in enumerate(zip(x, y)):
                if u != v:
                    return walk(u, v, f"{path}[{i}]")
        return f"{path}: {json.dumps(x)[:150]} vs {json.dumps(y)[:150]}"
    return walk(a, b, "") if a != b else ""


# ---------------------------------------------------------------- the chart's names

def release_refs(c, where, objs, namespace):
    """Every name one object of a release gives another resolves to an
    object of the release (or of the cluster, for ServiceAccounts it is told
    to use), in its namespace."""
    by_id = {ident(o): o for o in objs}
    sas = {ident(o)[2] for o in find(objs, "ServiceAccount")}
    deps = {ident(d)[2]: d for d in find(objs, "Deployment")}
    dep_sas = {d["spec"]["template"]["spec"].get("serviceAccountName") for d in deps.values()}
    for b in find(objs, "RoleBinding") + find(objs, "ClusterRoleBinding"):
        ref = b.get("roleRef") or {}
        ns = namespace if ref.get("kind") == "Role" else None
        c.check((ref.get("kind"), ns, ref.get("name")) in by_id, f"{where}: {show(b)} binds a role of the release",
                json.dumps(ref))
        for s in b.get("subjects") or []:
            c.check(s.get("kind") == "ServiceAccount" and s.get("namespace") == namespace and s.get("name") in dep_sas,
                    f"{where}: {show(b)} binds the ServiceAccount a Deployment of the release runs as", json.dumps(s))
    for d in deps.values():
        sa = d["spec"]["template"]["spec"].get("serviceAccountName")
        c.check(sa in sas or not sas, f"{where}: {show(d)} runs as ServiceAccount {sa} of the release")
    flags = {}
    for d in deps.values():
        for container in d["spec"]["template"]["spec"]["containers"]:
            for a in container.get("args") or []:
                if a.startswith("--") and "=" in a:
                    k, v = a[2:].split("=", 1)
                    flags[k] = v
    roles = find(objs, "Role") + find(objs, "ClusterRole")
    named = {n for r in roles for rule in r.get("rules") or [] for n in rule.get("resourceNames") or []}
    if "config-map" in flags:
        c.check(flags["config-map"].split("/", 1)[0] == namespace and flags["config-map"].split("/", 1)[1] in named,
                f"{where}: --config-map names the ConfigMap a Role of the release lets the updater read", flags["config-map"])
        c.check(flags.get("records-namespace") == namespace, f"{where}: --records-namespace is the release's namespace",
                flags.get("records-namespace"))
        c.check(flags.get("leader-elect-resource-namespace") == namespace, f"{where}: the Lease is in the release's namespace")
        updater = [d for d in deps.values() if d["spec"]["template"]["spec"]["containers"][0]["name"] == "updater"]
        c.check(bool(updater) and flags.get("leader-elect-resource-name") == ident(updater[0])[2],
                f"{where}: the Lease is named after the updater's Deployment", flags.get("leader-elect-resource-name"))
        c.check(flags.get("leader-elect-resource-name") in {ident(o)[2] for o in find(objs, "Lease")}
                and flags.get("leader-elect-resource-name") in named,
                f"{where}: --leader-elect-resource-name is the release's Lease, which its Role names",
                flags.get("leader-elect-resource-name"))
        c.check(flags.get("records-owner") == flags.get("leader-elect-resource-name"),
                f"{where}: --records-owner is the release's Lease (uninstall deletes the records with it)",
                flags.get("records-owner"))
        lease = flags.get("leader-elect-resource-name") or ""
        c.check(lease.endswith("-updater") and flags.get("records-prefix") == lease[:-len("updater")] + "records-",
                f"{where}: --records-prefix is named after the release (<fullname>-records-)", flags.get("records-prefix"))
        for p in find(objs, "ValidatingAdmissionPolicy"):
            variables = {v.get("name"): v.get("expression", "").strip() for v in (p.get("spec") or {}).get("variables") or []}
            if "killSwitch" not in variables:
                continue
            want = {"prefix": flags.get("records-prefix"), "killSwitch": flags["config-map"].split("/", 1)[-1],
                    "lease": flags.get("records-owner")}
            got = {k: variables.get(k, "").strip("'") for k in want}
            c.check(got == want, f"{where}: {show(p)} names the release's records prefix, kill switch and Lease",
                    f"policy {got}, flags {want}")
    hooks = find(objs, "MutatingWebhookConfiguration") + find(objs, "ValidatingWebhookConfiguration")
    services = {ident(s)[2] for s in find(objs, "Service")}
    for h in hooks:
        for wh in h.get("webhooks") or []:
            svc = (wh.get("clientConfig") or {}).get("service") or {}
            c.check(svc.get("namespace") == namespace and svc.get("name") in services,
                    f"{where}: {show(h)} {wh.get('name')} calls a Service of the release", json.dumps(svc))
    if flags.get("cert-mode") == "self-managed":
        for key in ("cert-mutating-webhook-configurations", "cert-validating-webhook-configurations"):
            c.check(flags.get(key) in {ident(h)[2] for h in hooks} and flags.get(key) in named,
                    f"{where}: --{key} names a webhook configuration of the release, which its RBAC lets it patch",
                    flags.get(key))
        c.check(flags.get("cert-secret-namespace") == namespace and flags.get("cert-secret-name") in named,
                f"{where}: --cert-secret-name is the Secret its Role names", flags.get("cert-secret-name"))
        hosts = (flags.get("cert-hosts") or "").split(",")
        c.check(any(f"{s}.{namespace}.svc" in hosts for s in services), f"{where}: --cert-hosts names the webhook Service",
                flags.get("cert-hosts"))
    for cert in find(objs, "Certificate"):
        spec = cert.get("spec") or {}
        if spec.get("isCA"):
            continue
        c.check(any(f"{s}.{namespace}.svc" in (spec.get("dnsNames") or []) for s in services),
                f"{where}: {show(cert)} names the webhook Service", json.dumps(spec.get("dnsNames")))
        mounted = {(v.get("secret") or {}).get("secretName") for d in deps.values()
                   for v in d["spec"]["template"]["spec"].get("volumes") or []}
        c.check(spec.get("secretName") in mounted, f"{where}: {show(cert)} writes the Secret the admission controller mounts")
        for h in hooks:
            c.check(((h.get("metadata") or {}).get("annotations") or {}).get(INJECT_CA) == f"{namespace}/{ident(cert)[2]}",
                    f"{where}: {show(h)} takes its CA from {show(cert)}")
    for p in find(objs, "ValidatingAdmissionPolicy"):
        conds = (p.get("spec") or {}).get("matchConditions") or []
        users = re.findall(r"system:serviceaccount:([^:']+):([^']+)", json.dumps(conds))
        c.check(len(users) == 1 and users[0][0] == namespace and users[0][1] in dep_sas,
                f"{where}: {show(p)} matches the updater's ServiceAccount of the release", str(users))
    for b in find(objs, "ValidatingAdmissionPolicyBinding"):
        c.check(("ValidatingAdmissionPolicy", None, (b.get("spec") or {}).get("policyName")) in by_id,
                f"{where}: {show(b)} binds a policy of the release")
    for sm in find(objs, "ServiceMonitor"):
        sel = ((sm.get("spec") or {}).get("selector") or {}).get("matchLabels")
        c.check(len([s for s in find(objs, "Service") if selects(sel, (s.get("metadata") or {}).get("labels") or {})]) == 1,
                f"{where}: {show(sm)} selects one Service of the release")


def check_release(c, rendered_dir, load):
    """The chart installed as release "platform" in namespace "autoscaling"
    (hack/deploy/verify-manifests.sh): every object named after the release
    (platform-vpa-inplace-...), in that namespace, every name it gives
    another object resolving within the release; a second release in the
    same namespace shares no object and selects none of the first's pods;
    ServiceAccounts of your own are used and not created; as a subchart,
    the chart renders with the parent's global values."""
    namespace, prefix = "autoscaling", "platform-vpa-inplace"
    cases = {}
    for name in ("platform-default", "platform-full", "tenant-default", "platform-existing-sa", "subchart"):
        path = os.path.join(rendered_dir, name + ".yaml")
        if c.check(os.path.exists(path), f"chart release {name} is rendered"):
            cases[name] = [o for o in load.docs(path) if isinstance(o, dict)]
    for name in ("platform-default", "platform-full", "platform-existing-sa", "subchart"):
        objs = cases.get(name)
        if not objs:
            continue
        where = f"chart release {name}"
        for o in objs:
            md = o.get("metadata") or {}
            c.check(md.get("name", "").startswith(prefix), f"{where}: {show(o)} is named after the release")
            if o.get("kind") not in CLUSTER_SCOPED:
                c.check(md.get("namespace") == namespace, f"{where}: {show(o)} is in the release's namespace")
        text = json.dumps(objs)
        c.check(NAMESPACE not in text, f"{where}: nothing names {NAMESPACE}")
        release_refs(c, where, objs, namespace)
    full = cases.get("platform-full") or []
    c.check({"Certificate", "Issuer", "ServiceMonitor", "PrometheusRule", "NetworkPolicy", "ConfigMap"}
            <= {o.get("kind") for o in full}, "chart release platform-full renders every optional object")
    existing = cases.get("platform-existing-sa") or []
    if existing:
        c.check(not find(existing, "ServiceAccount"), "chart release platform-existing-sa creates no ServiceAccount")
        c.check({d["spec"]["template"]["spec"].get("serviceAccountName") for d in find(existing, "Deployment")}
                == {"autoscaler", "webhook-server"}, "chart release platform-existing-sa runs as the ServiceAccounts named")
    a, b = cases.get("platform-default") or [], cases.get("tenant-default") or []
    if a and b:
        shared = {ident(o) for o in a} & {ident(o) for o in b}
        c.check(not shared, "chart: two releases in one namespace share no object", str(sorted(shared))[:300])
        for d in find(a, "Deployment"):
            sel = d["spec"]["selector"]["matchLabels"]
            c.check(not any(selects(sel, e["spec"]["template"]["metadata"]["labels"]) for e in find(b, "Deployment")),
                    f"chart: {show(d)} of one release selects none of another's pods")


def check_components(c, rendered_dir, rendered, load):
    """The components no overlay uses, rendered on top of
    overlays/self-managed-certs: each changes only what it says."""
    base = rendered.get("overlays/self-managed-certs")
    path = os.path.join(rendered_dir, "quantity-check-fail-closed.yaml")
    if base is None or not c.check(os.path.exists(path), "components/quantity-check-fail-closed renders"):
        return
    objs = load.docs(path)
    hooks = find(objs, "ValidatingWebhookConfiguration", VPA_WEBHOOK)
    ok = len(hooks) == 1 and len(hooks[0]["webhooks"]) == 2
    c.check(ok and hooks[0]["webhooks"][1]["failurePolicy"] == "Fail" and hooks[0]["webhooks"][0]["failurePolicy"] == "Fail",
            "components/quantity-check-fail-closed: the quantity check fails closed")
    if ok:
        hooks[0]["webhooks"][1]["failurePolicy"] = "Ignore"
    c.check(canonical(objs) == canonical(base), "components/quantity-check-fail-closed changes nothing else")


def check_runbooks(c, where, rule, runbooks="docs/runbooks.md"):
    """Each alert links its section of docs/runbooks.md (a heading named
    after the alert, whose anchor is the name in lower case)."""
    try:
        with open(runbooks, encoding="utf-8") as f:
            headings = set(re.findall(r"(?m)^## (\w+)\s*$", f.read()))
    except OSError:
        headings = set()
    for group in (rule.get("spec") or {}).get("groups") or []:
        for r in group.get("rules") or []:
            alert = r.get("alert")
            url = (r.get("annotations") or {}).get("runbook_url", "")
            c.check(url.endswith(f"{runbooks}#{(alert or '').lower()}") and alert in headings,
                    f"{where}: {alert} links its runbook, a section of {runbooks}", url)


def metric_names(sources):
    """Metric names the Go sources define, with a histogram's series."""
    names = set()
    for path in sources:
        with open(path, encoding="utf-8") as f:
            for name in re.findall(r'"(vpa_inplace_[a-z0-9_]+)"', f.read()):
                names.add(name)
                if name.endswith("_seconds"):
                    names.update(name + s for s in ("_bucket", "_sum", "_count"))
    return names


def check_metric_names(c, where, text, known):
    used = set(re.findall(r"\b(vpa_inplace_[a-z0-9_]+|kube_[a-z0-9_]+)", text))
    unknown = sorted(used - known - EXTERNAL_METRICS)
    c.check(bool(used) and not unknown, f"{where}: uses only metrics the binaries export", ", ".join(unknown))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deploy-dir", required=True)
    ap.add_argument("--rendered-dir", required=True)
    ap.add_argument("--kustomized-dir")
    ap.add_argument("--json-mirror")
    ap.add_argument("--chart-dir")
    ap.add_argument("--chart-rendered-dir")
    ap.add_argument("--metrics-source", action="append", default=[])
    ap.add_argument("--vpa-module-dir", help="the source of k8s.io/autoscaler/vertical-pod-autoscaler (go list -m)")
    ap.add_argument("--release-rendered-dir", help="helm template output of the chart as other releases (check_release)")
    ap.add_argument("--component-rendered-dir", help="kustomize output of the components no overlay uses")
    ap.add_argument("--notes-rendered-dir", help="the chart's objects and NOTES, rendered per case (verify_notes.py)")
    ap.add_argument("--moved-rendered-dir", help="an overlay that sets namespace: alone, rendered (verify_namespace.py)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    c = Checker(args.verbose)
    load = Loader(args.json_mirror)

    # Every YAML file parses; kustomizations use resources only; no file is orphaned.
    used = set()
    with open(os.path.join(args.rendered_dir, "roots.txt"), encoding="utf-8") as f:
        roots = [line.strip() for line in f if line.strip()]
    kustomize_only = set()
    path = os.path.join(args.rendered_dir, "kustomize-only.txt")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            kustomize_only = {line.strip() for line in f if line.strip()}
    for root in roots:
        with open(os.path.join(args.rendered_dir, root + ".files"), encoding="utf-8") as f:
            used.update(line.strip() for line in f if line.strip())
    for dirpath, _, files in os.walk(args.deploy_dir):
        for name in sorted(files):
            if not name.endswith((".yaml", ".yml")):
                continue
            path = os.path.abspath(os.path.join(dirpath, name))
            try:
                docs = load.docs(path)
            except Exception as e:  # pylint: disable=broad-except
                c.check(False, f"{path} parses", str(e).splitlines()[0])
                continue
            c.check(True, f"{path} parses")
            root = os.path.relpath(dirpath, args.deploy_dir)
            if name == "kustomization.yaml" and root.startswith("components/"):
                c.check(docs and docs[0].get("kind") == "Component",
                        f"{path}: a kustomize Component, used by the overlays applied with kubectl apply -k alone")
            elif name == "kustomization.yaml" and root in kustomize_only:
                c.check(root.startswith("overlays/") and root not in ("overlays/local", "overlays/with-upstream-vpa"),
                        f"{path}: only overlays that scripts do not apply use more than resources:")
            elif name == "kustomization.yaml":
                keys = set(docs[0]) if docs else set()
                c.check(keys <= {"apiVersion", "kind", "resources"}, f"{path} uses only resources:",
                        f"also {sorted(keys - {'apiVersion', 'kind', 'resources'})}: hack/deploy/lib.sh cannot render that")
            else:
                c.check(path in used, f"{path} is used by a kustomization under deploy/")

    rendered = {}
    moved_roots = []
    for root in roots:
        try:
            objs = load.docs(os.path.join(args.rendered_dir, root + ".yaml"))
        except Exception as e:  # pylint: disable=broad-except
            c.check(False, f"{root}: rendered objects parse", str(e).splitlines()[0])
            continue
        if not c.check(all(isinstance(o, dict) for o in objs), f"{root}: every document is a mapping"):
            continue
        rendered[root] = objs
        # Every overlay: the policies match the updater's ServiceAccount as
        # rendered. One in another namespace is checked against its
        # reference overlay below, not against deploy/'s namespace.
        check_policy_identity(c, root, objs)
        if root_namespace(objs) != NAMESPACE:
            moved_roots.append(root)
            continue
        check_identity(c, root, objs)
        check_rbac_hygiene(c, root, objs)
        # The shards' Leases, the node room buckets and their Roles
        # (overlays/sharded), checked apart: the updater's own RBAC and Lease
        # are the same with or without them.
        shard_objs, plain = split_shards(objs)
        check_shards(c, root, shard_objs, plain, updater_shards(plain))
        check_node_room(c, root, shard_objs, plain, updater_shards(plain), updater_buckets(plain))
        if find(objs, "ServiceAccount", UPDATER_SA):
            check_updater_rbac(c, root, plain)
            check_lease(c, root, plain)
            check_admission_policies(c, root, objs, vpa_module_dir=args.vpa_module_dir)
        if find(objs, "ServiceAccount", ADMISSION_SA):
            # overlays/local grants both modes: the e2e suite runs both.
            check_admission_rbac(c, root, objs, self_managed_certs=root == "overlays/local" or self_managed(objs))
        if find(objs, "MutatingWebhookConfiguration") or find(objs, "ValidatingWebhookConfiguration"):
            check_webhooks(c, root, objs, local=root.endswith("overlays/local"), mode=ca_mode(root, objs))
        if root != "overlays/local":
            check_workloads(c, root, objs)
        if args.kustomized_dir:
            path = os.path.join(args.kustomized_dir, root + ".yaml")
            if os.path.exists(path):
                c.check(canonical(load.docs(path)) == canonical(objs),
                        f"{root}: kustomize renders the same objects as hack/deploy/lib.sh")

    base = rendered.get("base")
    if c.check(base is not None, "deploy/base is rendered"):
        check_crds(c, "base", base)
        for kind in ("Deployment", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Service"):
            c.check(len(find(base, kind)) >= 1, f"base: has a {kind}")
    local = rendered.get("overlays/local")
    if c.check(local is not None, "deploy/overlays/local is rendered") and base is not None:
        for kind in ("Deployment", "Service"):
            c.check(not find(local, kind), f"overlays/local: has no {kind} (binaries run outside the cluster)")
        c.check([ident(o)[2] for o in find(local, "Secret")] == [CERT_SECRET],
                f"overlays/local: no Secret but the empty certificate Secret of --cert-mode=self-managed",
                str([ident(o) for o in find(local, "Secret")]))
        shared = [o for o in local if o["kind"] not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")]
        base_by_id = {ident(o): o for o in base + rendered.get("overlays/self-managed-certs", [])}
        for o in shared:
            c.check(base_by_id.get(ident(o)) == o, f"overlays/local: {show(o)} is identical to base (or overlays/self-managed-certs)")
        for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                     "CustomResourceDefinition") + POLICY_KINDS:
            extra = {ident(o) for o in find(local, kind)} - {ident(o) for o in find(base, kind)}
            c.check({ident(o) for o in find(local, kind)} >= {ident(o) for o in find(base, kind)}
                    and all(i[2] == CERT_ROLE for i in extra),
                    f"overlays/local: has every {kind} of base, and only the RBAC of --cert-mode=self-managed besides",
                    str(sorted(extra)))
        hooks = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        c.check(canonical(strip_client_config([o for o in local if o["kind"] in hooks]))
                == canonical(strip_client_config([o for o in base if o["kind"] in hooks])),
                "overlays/local: webhooks equal base apart from clientConfig")
    upstream = rendered.get("overlays/with-upstream-vpa")
    if upstream is not None:
        for kind in ("CustomResourceDefinition", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            c.check(not find(upstream, kind), f"overlays/with-upstream-vpa: has no {kind} (upstream VPA owns it)")
        c.check(not find(upstream, "ServiceAccount", ADMISSION_SA),
                "overlays/with-upstream-vpa: has no admission controller")
        c.check(bool(find(upstream, "Deployment", "vpa-inplace-updater")),
                "overlays/with-upstream-vpa: has the updater")

    sharded_roots = [r for r in roots if r in rendered and r not in moved_roots and updater_shards(rendered[r]) > 1]
    c.check(bool(sharded_roots), "an overlay shards the updater (overlays/sharded)")
    for root in sorted(kustomize_only):
        if root in rendered and base is not None and root not in moved_roots and root not in sharded_roots:
            check_certificate_overlay(c, root, rendered[root], base)
    c.check(bool(moved_roots), "an overlay in another namespace is rendered (overlays/another-namespace)")
    for root in moved_roots:
        check_moved(c, root, rendered[root], rendered.get("overlays/self-managed-certs"))
    if args.moved_rendered_dir:
        path = os.path.join(args.moved_rendered_dir, "namespace-only.yaml")
        if c.check(os.path.exists(path), "an overlay that sets namespace: alone is rendered"):
            check_moved_without_replacements(c, "overlay with namespace: alone", load.docs(path))

    if args.chart_rendered_dir and base is not None:
        known = metric_names(args.metrics_source)
        c.check(len(known) > 20, "the metric names are read from the Go sources", str(sorted(known))[:200])
        with open(os.path.join(args.chart_rendered_dir, "cases.txt"), encoding="utf-8") as f:
            cases = [line.strip() for line in f if line.strip()]
        monitored = False
        for case in cases:
            values = {}
            if case != "default":
                values = load.docs(os.path.join(args.chart_dir, "ci", case + "-values.yaml"))[0]
            try:
                objs = load.docs(os.path.join(args.chart_rendered_dir, case + ".yaml"))
            except Exception as e:  # pylint: disable=broad-except
                c.check(False, f"chart ({case}): rendered objects parse", str(e).splitlines()[0])
                continue
            check_chart(c, case, objs, rendered, values)
            for rule in find(objs, "PrometheusRule"):
                monitored = True
                check_metric_names(c, f"chart ({case}): {show(rule)}", json.dumps(rule["spec"]), known)
                check_runbooks(c, f"chart ({case}): {show(rule)}", rule)
            for cm in find(objs, "ConfigMap", "vpa-inplace-dashboard"):
                monitored = True
                text = (cm.get("data") or {}).get("vpa-inplace.json", "")
                try:
                    json.loads(text)
                    c.check(True, f"chart ({case}): the dashboard is JSON")
                except ValueError as e:
                    c.check(False, f"chart ({case}): the dashboard is JSON", str(e))
                check_metric_names(c, f"chart ({case}): the dashboard", text, known)
                missing = [m for m in DASHBOARD_METRICS if m not in text]
                c.check(not missing, f"chart ({case}): the dashboard shows the leader, the certificate's expiry, suspended "
                        "Jobs, startup boosts, worker panics, records write failures, the shards' owners and work lag and the node room "
                        "reservations", ", ".join(missing))
        c.check(monitored, "chart: some values case renders the PrometheusRule and the dashboard")
        chart_sharded = None
        path = os.path.join(args.chart_rendered_dir, SHARDED_CHART_CASE + ".yaml")
        if c.check(os.path.exists(path), f"chart ({SHARDED_CHART_CASE}) is rendered, for the sharded overlays"):
            chart_sharded = [o for o in load.docs(path) if isinstance(o, dict)]
        for root in sharded_roots:
            check_sharded_overlay(c, root, rendered[root], rendered.get("overlays/self-managed-certs"), chart_sharded)

    if args.release_rendered_dir:
        check_release(c, args.release_rendered_dir, load)
    if args.component_rendered_dir:
        check_components(c, args.component_rendered_dir, rendered, load)
    if args.notes_rendered_dir:
        check_notes(c, args.notes_rendered_dir, load)

    if c.failed:
        print(f"verify-deploy: FAIL ({c.failed} of {c.total} checks failed)")
        return 1
    print(f"verify-deploy: manifests OK ({c.total} checks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
