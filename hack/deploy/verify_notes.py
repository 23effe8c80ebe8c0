"""Checks the chart's NOTES (charts/vpa-inplace/templates/NOTES.txt) against
the objects of the same release. Used by hack/deploy/verify_manifests.py.

hack/deploy/verify-manifests.sh renders, for each case of NOTES_CASES, the
chart's objects together with its NOTES, rendered by Helm's template engine
as `helm install` renders them (a copy of the chart where the template
templates/zz-rendered-notes.yaml renders notes/NOTES.txt with tpl into an
object of kind RenderedNotes), into NOTES_RENDERED_DIR/<case>.yaml, and
lists the cases, with their release and namespace, in its cases.txt.

What the NOTES say is then checked sentence by sentence against what the
release installs: every object a command names is the release's (or the
Secret its admission controller mounts), every object it says uninstall
deletes is the release's, the records' name is the updater's
--records-prefix and their owner its --records-owner, the kill switch it
says uninstall leaves is the updater's --config-map and not the release's,
each warning is printed when, and only when, what it warns about holds.
"""

import os
import re

NOTES_KIND = "RenderedNotes"
CRD_KIND = "CustomResourceDefinition"
# What `kubectl get <kind>` names in the NOTES, by kind.
KINDS = {
    "lease": "Lease", "secret": "Secret", "certificate": "Certificate",
    "validatingwebhookconfiguration": "ValidatingWebhookConfiguration",
    "mutatingwebhookconfiguration": "MutatingWebhookConfiguration",
    "configmap": "ConfigMap", "deployment": "Deployment",
}


def _flags(dep):
    out = {}
    for container in dep["spec"]["template"]["spec"]["containers"]:
        for a in container.get("args") or []:
            if a.startswith("--") and "=" in a:
                k, v = a[2:].split("=", 1)
                out[k] = v
    return out


def _names(objs, kind):
    return {(o.get("metadata") or {}).get("name") for o in objs if o.get("kind") == kind}


def _deployment(objs, container):
    for o in objs:
        if o.get("kind") == "Deployment" and o["spec"]["template"]["spec"]["containers"][0]["name"] == container:
            return o
    return None


def _mounted_secrets(dep):
    return {(v.get("secret") or {}).get("secretName") for v in dep["spec"]["template"]["spec"].get("volumes") or []} - {None}


def flat(text):
    """The text with every run of white space one space: sentences wrap."""
    return re.sub(r"\s+", " ", text).strip()


def check_notes_case(c, where, notes, objs, release, namespace):
    """One rendered NOTES against the objects of the same release."""
    text = flat(notes)
    updater = _deployment(objs, "updater")
    admission = _deployment(objs, "admission-controller")
    uflags = _flags(updater) if updater else {}
    aflags = _flags(admission) if admission else {}
    c.check(f"is installed in namespace {namespace}." in text, f"{where}: the NOTES name the release's namespace")

    # 1. The selector of the first command selects every Deployment's pods.
    m = re.search(r"kubectl -n (\S+) get deployments,pods -l (\S+)=(\S+)", text)
    deps = [o for o in objs if o.get("kind") == "Deployment"]
    c.check(m is not None and m.group(1) == namespace and deps and all(
        (d["spec"]["template"]["metadata"].get("labels") or {}).get(m.group(2)) == m.group(3)
        and (d["metadata"].get("labels") or {}).get(m.group(2)) == m.group(3) for d in deps),
        f"{where}: the NOTES' selector finds the release's Deployments and pods", m.group(0) if m else "no command")

    # Every object a kubectl get names is the release's, or the Secret its
    # admission controller mounts (cert-manager's, or the user's).
    mounted = _mounted_secrets(admission) if admission else set()
    for m in re.finditer(r"kubectl (?:-n (\S+) )?get (\w+) (\S+)", text):
        ns, kind, name = m.group(1), KINDS.get(m.group(2)), m.group(3)
        if kind is None:
            continue
        ok = name in _names(objs, kind) or (kind == "Secret" and name in mounted)
        c.check(ok and (ns is None or ns == namespace), f"{where}: the NOTES' `{m.group(0)}` names an object of the release",
                f"{kind} {name} in {ns}")

    # The Lease: named when leader election is on, and it is the Lease the
    # updater elects with.
    lease = uflags.get("leader-elect-resource-name")
    shown = re.search(r"One updater replica leads; the Lease names it \(HOLDER\): kubectl -n \S+ get lease (\S+)", text)
    # With shards, the replicas share them instead: the Leases the command
    # lists are the release's, among them every shard's.
    shards = int(uflags.get("shards") or 1)
    sharing = re.search(r"The updater replicas share (\d+) shards of the namespaces; each shard's Lease names the "
                        r"replica holding it \(HOLDER\): kubectl -n (\S+) get leases -l (\S+)", text)
    if updater and uflags.get("leader-elect") == "true" and shards > 1:
        c.check(shown is None, f"{where}: no single leader named when the replicas share shards")
        selector = dict(kv.split("=", 1) for kv in sharing.group(3).split(",")) if sharing else {}
        leases = [o for o in objs if o.get("kind") == "Lease"
                  and all(((o.get("metadata") or {}).get("labels") or {}).get(k) == v for k, v in selector.items())]
        names = {o["metadata"]["name"] for o in leases}
        want = {f"{uflags.get('shard-lease-prefix')}-shard-{i}" for i in range(shards)}
        c.check(sharing is not None and int(sharing.group(1)) == shards and sharing.group(2) == namespace and selector
                and want <= names and all(o["metadata"].get("namespace") == namespace for o in leases),
                f"{where}: the NOTES list the release's Leases, every shard's among them",
                sharing.group(0) if sharing else "missing")
    elif updater and uflags.get("leader-elect") == "true":
        c.check(shown is not None and shown.group(1) == lease, f"{where}: the NOTES name the updater's Lease",
                shown.group(0) if shown else "missing")
        c.check(sharing is None, f"{where}: no shards named without them")
    else:
        c.check(shown is None and sharing is None, f"{where}: no leader named without leader election")

    # The node room buckets: as many as the updater's --node-room-buckets,
    # named as it names them, the release's.
    room = re.search(r"first reserves that node's room in one of (\d+) node room buckets, ConfigMaps (\S+) to (\S+), "
                     r"so that the replicas never together send more than a node holds", text)
    if updater and shards > 1:
        n = int(uflags.get("node-room-buckets") or 0)
        prefix = f"{uflags.get('shard-lease-prefix')}-noderoom-"
        c.check(room is not None and int(room.group(1)) == n and room.group(2) == f"{prefix}0"
                and room.group(3) == f"{prefix}{n - 1}"
                and {f"{prefix}{b}" for b in range(n)} <= _names(objs, "ConfigMap"),
                f"{where}: the NOTES name the updater's node room buckets, which the release ships",
                room.group(0) if room else "missing")
    else:
        c.check(room is None, f"{where}: no node room buckets named without shards")

    # The certificate.
    if admission and aflags.get("cert-mode") == "self-managed":
        secret = aflags.get("cert-secret-name")
        c.check(f"keeps them in Secret {secret} (shipped empty)" in text and secret in _names(objs, "Secret"),
                f"{where}: the NOTES name the self-managed certificate's Secret, which the release ships", secret)
        hooks = sorted(_names(objs, "MutatingWebhookConfiguration") | _names(objs, "ValidatingWebhookConfiguration"))
        c.check(len(hooks) == 2 and f"patches the CA into the caBundle of {hooks[0]} and {hooks[1]}" in text,
                f"{where}: the NOTES name the webhook configurations whose caBundle it patches", str(hooks))
        c.check(f"It rotates them {aflags.get('cert-rotate-before')} before they expire (validity {aflags.get('cert-validity')})" in text,
                f"{where}: the NOTES give the certificate's rotation and validity the admission controller runs with")
    elif admission:
        tls = sorted(mounted)
        c.check(len(tls) == 1 and f"Secret {tls[0]}" in text, f"{where}: the NOTES name the TLS Secret the admission controller mounts",
                str(tls))
        for cert in (o for o in objs if o.get("kind") == "Certificate" and not (o.get("spec") or {}).get("isCA")):
            c.check(cert["spec"].get("secretName") in tls and f"get certificate {cert['metadata']['name']}" in text,
                    f"{where}: the NOTES name the Certificate that writes it")
        services = _names(objs, "Service")
        for m in re.finditer(r"for (\S+)\.(\S+)\.svc", text):
            c.check(m.group(1) in services and m.group(2) == namespace, f"{where}: the NOTES name the webhook Service", m.group(0))
    else:
        c.check("2. " not in text, f"{where}: no certificate step without the admission controller")

    # The kill switch: the updater's --config-map, which the release does
    # not ship and uninstall leaves.
    m = re.search(r"not part of the release: helm uninstall leaves it\): kubectl -n (\S+) create configmap (\S+) "
                  r"--from-literal=paused=true", text)
    if updater:
        c.check(m is not None and f"{m.group(1)}/{m.group(2)}" == uflags.get("config-map")
                and m.group(2) not in _names(objs, "ConfigMap"),
                f"{where}: the NOTES' kill switch is the updater's --config-map, not an object of the release",
                m.group(0) if m else "missing")
    else:
        c.check(m is None, f"{where}: no kill switch without the updater")

    # Uninstall: what it says goes is the release's; the records are named
    # with the updater's prefix and owned by that Lease.
    m = re.search(r"Uninstall: helm uninstall deletes every object of the release(.*?)(?= The updater's records| The CRDs)", text)
    c.check(m is not None, f"{where}: the NOTES say what helm uninstall deletes")
    listed = re.findall(r"\b(Lease|Secret) (\S+)", m.group(1)) if m else []
    for kind, name in listed:
        c.check(name in _names(objs, kind), f"{where}: the NOTES say uninstall deletes {kind} {name}, an object of the release")
    want = set()
    if updater:
        want.add(("Lease", lease))
    if admission and aflags.get("cert-mode") == "self-managed":
        want.add(("Secret", aflags.get("cert-secret-name")))
    c.check(set(listed) == want, f"{where}: the NOTES list the objects the binaries fill in among those uninstall deletes",
            f"listed {sorted(listed)}, want {sorted(want)}")
    m = re.search(r"The updater's records \(ConfigMaps (\S+)\*, labelled vpa-inplace\.dev/records\) are owned by that Lease", text)
    if updater:
        c.check(m is not None and m.group(1) == uflags.get("records-prefix") and uflags.get("records-owner") == lease,
                f"{where}: the NOTES name the records with the updater's --records-prefix, owned by its --records-owner Lease",
                f"{m.group(1) if m else None} vs --records-prefix={uflags.get('records-prefix')}, "
                f"--records-owner={uflags.get('records-owner')}")
    else:
        c.check(m is None, f"{where}: no records without the updater")
    # Only the kill switch ("it", checked above) is said to be left.
    left = re.findall(r"(?:helm )?uninstall leaves (\w+)", text)
    c.check(left == (["it"] if updater else []),
            f"{where}: the NOTES say uninstall leaves nothing but the kill switch (and the CRDs)", str(left))
    c.check("The CRDs of the chart's crds/ stay" in text, f"{where}: the NOTES say the CRDs stay")

    # Warnings, when and only when they hold.
    gates = set((uflags or aflags).get("feature-gates", "").split(","))
    c.check(("WARNING: featureGates.InPlace is false" in text) == ("InPlace=true" not in gates),
            f"{where}: the InPlace warning when the gate is off, only then")
    policies = [o for o in objs if o.get("kind") == "ValidatingAdmissionPolicy"]
    c.check(("WARNING: updater.admissionPolicy.enabled is false" in text) == bool(updater and not policies),
            f"{where}: the admission policy warning when the updater runs without its policies, only then")
    c.check(("Only the updater is installed" in text) == bool(updater and not admission),
            f"{where}: the updater-only note when the admission controller is not installed, only then")


def check_notes(c, rendered_dir, load):
    """Every case rendered by hack/deploy/verify-manifests.sh."""
    path = os.path.join(rendered_dir, "cases.txt")
    if not c.check(os.path.exists(path), "chart NOTES: the cases are rendered"):
        return
    with open(path, encoding="utf-8") as f:
        cases = [line.split() for line in f if line.strip()]
    c.check(len(cases) >= 5, "chart NOTES: several value cases are rendered", str(len(cases)))
    for name, release, namespace in (case[:3] for case in cases):
        where = f"chart NOTES ({name})"
        try:
            docs = [o for o in load.docs(os.path.join(rendered_dir, name + ".yaml")) if isinstance(o, dict)]
        except Exception as e:  # pylint: disable=broad-except
            c.check(False, f"{where}: rendered", str(e).splitlines()[0])
            continue
        notes = [o for o in docs if o.get("kind") == NOTES_KIND]
        if not c.check(len(notes) == 1 and isinstance(notes[0].get("notes"), str), f"{where}: the NOTES are rendered"):
            continue
        objs = [o for o in docs if o.get("kind") not in (NOTES_KIND, CRD_KIND)]
        check_notes_case(c, where, notes[0]["notes"], objs, release, namespace)
