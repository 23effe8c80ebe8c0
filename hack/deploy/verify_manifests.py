#!/usr/bin/env python3
"""Checks the manifests in deploy/. Run through hack/deploy/verify-manifests.sh.

Each kustomization root (deploy/base, deploy/overlays/*), listed in
RENDERED_DIR/roots.txt as base, overlays/local, ..., has been rendered by
hack/deploy/lib.sh into RENDERED_DIR/<root>.yaml, with the list of files it
uses in RENDERED_DIR/<root>.files. When kubectl was found, KUSTOMIZED_DIR holds
the `kubectl kustomize` output of the same roots.

YAML is read with PyYAML when it is installed. Otherwise the driver has
converted every file to JSON under JSON_MIRROR (same absolute path plus .json).

Prints FAIL lines (and ok lines with -v) and exits 1 when any check failed.
"""

import argparse
import json
import os
import sys

NAMESPACE = "vpa-inplace-system"
UPDATER_SA = "vpa-inplace-updater"
ADMISSION_SA = "vpa-inplace-admission-controller"
SERVICE = "vpa-inplace-webhook"
TLS_SECRET = "vpa-inplace-admission-tls"
UPDATER_IMAGE = "vpa-inplace/updater:dev"
ADMISSION_IMAGE = "vpa-inplace/admission-controller:dev"
CA_BUNDLE = "__CA_BUNDLE__"
WEBHOOK_PORT = "__WEBHOOK_PORT__"
POD_WEBHOOK = "vpa-inplace-pods"
VPA_WEBHOOK = "vpa-inplace-vpas"
UPDATER_CONFIG = "vpa-inplace-updater-config"

CLUSTER_SCOPED = {
    "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
    "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
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
            c.check(not rule_covers(rule, "", "secrets"),
                    f"{where}: {show(role)} grants nothing on secrets", json.dumps(rule))


def check_updater_rbac(c, where, objs):
    cluster, namespaced = bound_rules(c, where, objs, UPDATER_SA)
    rules = cluster + namespaced
    w = f"{where}: updater"
    for verb in ("delete", "deletecollection"):
        c.check(not allows(rules, "", "pods", verb), f"{w} cannot {verb} pods")
    c.check(not any(rule_covers(r, "", "pods/eviction") for r in rules),
            f"{w} has no access to pods/eviction")
    for verb in ("create", "update", "patch"):
        c.check(not allows(rules, "", "pods", verb), f"{w} cannot {verb} pods (only pods/resize)")
    c.check(allows(rules, "", "pods/resize", "patch"), f"{w} can patch pods/resize")
    c.check(allows(rules, "", "pods/resize", "get"), f"{w} can get pods/resize")
    for verb in READ:
        c.check(allows(rules, "", "pods", verb), f"{w} can {verb} pods")
        c.check(allows(rules, "autoscaling.k8s.io", "verticalpodautoscalers", verb),
                f"{w} can {verb} verticalpodautoscalers")
        c.check(allows(rules, "", "limitranges", verb), f"{w} can {verb} limitranges")
        for group, resource in CONTROLLERS:
            c.check(allows(rules, group, resource, verb), f"{w} can {verb} {group or 'core'}/{resource}")
    for verb in ("patch", "update"):
        c.check(allows(rules, "autoscaling.k8s.io", "verticalpodautoscalers/status", verb),
                f"{w} can {verb} verticalpodautoscalers/status")
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
    for verb in ("get", "list"):
        c.check(allows(rules, "metrics.k8s.io", "pods", verb), f"{w} can {verb} metrics.k8s.io/pods (memory in use)")
    for verb in ("create", "update", "patch", "delete"):
        c.check(not allows(rules, "metrics.k8s.io", "pods", verb), f"{w} cannot {verb} metrics.k8s.io/pods")
    for group in ("", "events.k8s.io"):
        for verb in ("create", "patch"):
            c.check(allows(rules, group, "events", verb), f"{w} can {verb} {group or 'core'} events")
    c.check(not any(rule_covers(r, "coordination.k8s.io", "leases") for r in cluster),
            f"{w} has no cluster-wide access to leases")
    for verb in ("get", "create", "update"):
        c.check(allows(namespaced, "coordination.k8s.io", "leases", verb),
                f"{w} can {verb} leases in {NAMESPACE}")
    c.check(not any(rule_covers(r, "", "configmaps") for r in cluster),
            f"{w} has no cluster-wide access to configmaps")
    for verb in READ:
        c.check(allows(namespaced, "", "configmaps", verb),
                f"{w} can {verb} configmaps in {NAMESPACE} (the kill switch)")
    for verb in ("create", "update", "patch", "delete", "deletecollection"):
        c.check(not allows(rules, "", "configmaps", verb), f"{w} cannot {verb} configmaps")
    c.check(all((r.get("resourceNames") or []) == [UPDATER_CONFIG]
                for r in namespaced if rule_covers(r, "", "configmaps")),
            f"{w} reads only the ConfigMap {UPDATER_CONFIG}")


def check_admission_rbac(c, where, objs):
    cluster, namespaced = bound_rules(c, where, objs, ADMISSION_SA)
    rules = cluster + namespaced
    w = f"{where}: admission controller"
    for verb in ("create", "update", "patch", "delete", "deletecollection"):
        c.check(not allows(rules, "", "pods", verb), f"{w} cannot {verb} pods")
    c.check(not any(rule_covers(r, "", "pods/eviction") for r in rules), f"{w} has no access to pods/eviction")
    c.check(not any(rule_covers(r, "", "pods/resize") for r in rules), f"{w} has no access to pods/resize")
    for resource in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
        c.check(not any(rule_covers(r, "admissionregistration.k8s.io", resource) for r in rules),
                f"{w} cannot touch {resource} (they ship in deploy/)")
    for verb in READ:
        c.check(allows(rules, "autoscaling.k8s.io", "verticalpodautoscalers", verb),
                f"{w} can {verb} verticalpodautoscalers")
        c.check(allows(rules, "", "limitranges", verb), f"{w} can {verb} limitranges")
        for group, resource in CONTROLLERS:
            c.check(allows(rules, group, resource, verb), f"{w} can {verb} {group or 'core'}/{resource}")
    c.check(allows(rules, "example.com", "widgets/scale", "get"), f"{w} can get */scale of any group")
    for verb in ("create", "update", "patch", "delete"):
        c.check(not allows(rules, "batch", "jobs", verb), f"{w} cannot {verb} jobs")
    for verb in ("create", "update", "patch", "delete"):
        c.check(not any(rule_allows(r, g, res, verb) for r in rules
                        for g, res in [("autoscaling.k8s.io", "verticalpodautoscalers"),
                                       ("autoscaling.k8s.io", "verticalpodautoscalers/status")]),
                f"{w} cannot {verb} verticalpodautoscalers")


# ---------------------------------------------------------------- webhooks

def check_webhooks(c, where, objs, local):
    def client_ok(webhook, path):
        cc = webhook.get("clientConfig") or {}
        ok = cc.get("caBundle") == CA_BUNDLE
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
        c.check(wh.get("failurePolicy") == "Ignore", f"{w} failurePolicy Ignore", wh.get("failurePolicy"))
        c.check(wh.get("sideEffects") == "None", f"{w} sideEffects None")
        c.check(wh.get("timeoutSeconds") == 5, f"{w} timeoutSeconds 5")
        c.check(wh.get("reinvocationPolicy") == "Never", f"{w} reinvocationPolicy Never")
        c.check(wh.get("admissionReviewVersions") == ["v1"], f"{w} admissionReviewVersions [v1]")
        c.check(wh.get("rules") == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                     "resources": ["pods"], "scope": "Namespaced"}],
                f"{w} matches pod CREATE only", json.dumps(wh.get("rules")))
        c.check(client_ok(wh, "/mutate-pods"), f"{w} calls /mutate-pods through {target}",
                json.dumps(wh.get("clientConfig")))
        sel = (wh.get("namespaceSelector") or {}).get("matchExpressions") or []
        excluded = {v for e in sel if e.get("key") == "kubernetes.io/metadata.name"
                    and e.get("operator") == "NotIn" for v in e.get("values") or []}
        c.check({"kube-system", NAMESPACE} <= excluded, f"{w} excludes kube-system and {NAMESPACE}",
                json.dumps(sel))
    vals = find(objs, "ValidatingWebhookConfiguration")
    if c.check(len(vals) == 1 and ident(vals[0])[2] == VPA_WEBHOOK and len(vals[0].get("webhooks") or []) == 2,
               f"{where}: one ValidatingWebhookConfiguration {VPA_WEBHOOK} with two webhooks"):
        in_place = "object.spec.updatePolicy.updateMode == 'InPlace'"
        for wh, path, negated in zip(vals[0]["webhooks"], ["/validate-vpas", "/validate-vpa-quantities"], [False, True]):
            w = f"{where}: {VPA_WEBHOOK} {wh.get('name')}"
            c.check(wh.get("failurePolicy") == "Fail", f"{w} failurePolicy Fail", wh.get("failurePolicy"))
            c.check(wh.get("sideEffects") == "None", f"{w} sideEffects None")
            c.check(wh.get("matchPolicy", "Equivalent") == "Equivalent", f"{w} matchPolicy Equivalent")
            c.check(wh.get("admissionReviewVersions") == ["v1"], f"{w} admissionReviewVersions [v1]")
            c.check(wh.get("rules") == [{"apiGroups": ["autoscaling.k8s.io"], "apiVersions": ["v1"],
                                         "operations": ["CREATE", "UPDATE"],
                                         "resources": ["verticalpodautoscalers"], "scope": "Namespaced"}],
                    f"{w} matches VPA CREATE/UPDATE", json.dumps(wh.get("rules")))
            c.check(client_ok(wh, path), f"{w} calls {path} through {target}",
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


def check_deployment(c, where, objs, name, sa, image, required_args):
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
    c.check(not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC"),
            f"{w} uses no host namespaces")
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


def check_workloads(c, where, objs):
    if find(objs, "ServiceAccount", UPDATER_SA):
        dep = check_deployment(c, where, objs, "vpa-inplace-updater", UPDATER_SA, UPDATER_IMAGE,
                               ["--feature-gates=InPlace=true", "--leader-elect=true"])
        if dep is not None:
            c.check(dep["spec"].get("replicas") == 1, f"{where}: updater runs 1 replica")
            c.check(flag(dep["spec"]["template"]["spec"]["containers"][0], "address") == ":8943",
                    f"{where}: updater serves health and metrics on :8943")
    if find(objs, "ServiceAccount", ADMISSION_SA):
        dep = check_deployment(c, where, objs, "vpa-inplace-admission-controller", ADMISSION_SA, ADMISSION_IMAGE,
                               ["--tls-cert-file=/etc/tls/tls.crt", "--tls-private-key-file=/etc/tls/tls.key",
                                "--feature-gates=InPlace=true", "--port=8000"])
        if dep is None:
            return
        spec = dep["spec"]["template"]["spec"]
        container = spec["containers"][0]
        vols = {v.get("name"): v for v in spec.get("volumes") or []}
        mounts = {m.get("mountPath"): m for m in container.get("volumeMounts") or []}
        tls = mounts.get("/etc/tls") or {}
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deploy-dir", required=True)
    ap.add_argument("--rendered-dir", required=True)
    ap.add_argument("--kustomized-dir")
    ap.add_argument("--json-mirror")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    c = Checker(args.verbose)
    load = Loader(args.json_mirror)

    # Every YAML file parses; kustomizations use resources only; no file is orphaned.
    used = set()
    with open(os.path.join(args.rendered_dir, "roots.txt"), encoding="utf-8") as f:
        roots = [line.strip() for line in f if line.strip()]
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
            if name == "kustomization.yaml":
                keys = set(docs[0]) if docs else set()
                c.check(keys <= {"apiVersion", "kind", "resources"}, f"{path} uses only resources:",
                        f"also {sorted(keys - {'apiVersion', 'kind', 'resources'})}: hack/deploy/lib.sh cannot render that")
            else:
                c.check(path in used, f"{path} is used by a kustomization under deploy/")

    rendered = {}
    for root in roots:
        try:
            objs = load.docs(os.path.join(args.rendered_dir, root + ".yaml"))
        except Exception as e:  # pylint: disable=broad-except
            c.check(False, f"{root}: rendered objects parse", str(e).splitlines()[0])
            continue
        if not c.check(all(isinstance(o, dict) for o in objs), f"{root}: every document is a mapping"):
            continue
        rendered[root] = objs
        check_identity(c, root, objs)
        check_rbac_hygiene(c, root, objs)
        if find(objs, "ServiceAccount", UPDATER_SA):
            check_updater_rbac(c, root, objs)
        if find(objs, "ServiceAccount", ADMISSION_SA):
            check_admission_rbac(c, root, objs)
        if find(objs, "MutatingWebhookConfiguration") or find(objs, "ValidatingWebhookConfiguration"):
            check_webhooks(c, root, objs, local=root.endswith("overlays/local"))
        if root != "overlays/local":
            check_workloads(c, root, objs)
        if args.kustomized_dir:
            path = os.path.join(args.kustomized_dir, root + ".yaml")
            if os.path.exists(path):
                c.check(canonical(load.docs(path)) == canonical(objs),
                        f"{root}: kubectl kustomize renders the same objects as hack/deploy/lib.sh")

    base = rendered.get("base")
    if c.check(base is not None, "deploy/base is rendered"):
        check_crds(c, "base", base)
        for kind in ("Deployment", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Service"):
            c.check(len(find(base, kind)) >= 1, f"base: has a {kind}")
    local = rendered.get("overlays/local")
    if c.check(local is not None, "deploy/overlays/local is rendered") and base is not None:
        for kind in ("Deployment", "Service", "Secret"):
            c.check(not find(local, kind), f"overlays/local: has no {kind} (binaries run outside the cluster)")
        shared = [o for o in local if o["kind"] not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")]
        base_by_id = {ident(o): o for o in base}
        for o in shared:
            c.check(base_by_id.get(ident(o)) == o, f"overlays/local: {show(o)} is identical to base")
        for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                     "CustomResourceDefinition"):
            c.check({ident(o) for o in find(local, kind)} == {ident(o) for o in find(base, kind)},
                    f"overlays/local: has every {kind} of base")
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

    if c.failed:
        print(f"verify-deploy: FAIL ({c.failed} of {c.total} checks failed)")
        return 1
    print(f"verify-deploy: manifests OK ({c.total} checks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
