package policytest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const chartDir = "../../../charts/vpa-inplace"

// helm is the pinned helm: $HELM (hack/deploy/verify-manifests.sh passes
// the one it uses), else the one hack/tools/install.sh builds (once).
func helm(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	out, err := exec.Command("../../tools/install.sh", "helm").Output()
	if err != nil {
		t.Fatalf("building the pinned helm (hack/tools/install.sh helm): %v", err)
	}
	return strings.TrimSpace(string(out))
}

// releasePolicies renders the chart's admission policies as release name in
// namespace, and compiles them.
func releasePolicies(t *testing.T, i install, release string) map[string]*Policy {
	t.Helper()
	cmd := exec.Command(helm(t), "template", release, chartDir, "--namespace", i.namespace,
		"--show-only", "templates/updater/admission-policy.yaml")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template %s: %v: %s", release, err, stderr.String())
	}
	path := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(path, stdout.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if p[i.fullname+"-updater-configmaps"] == nil {
		t.Fatalf("release %s: no policy %s-updater-configmaps among %d", release, i.fullname, len(p))
	}
	return p
}

// installRecordsNamed is a records ConfigMap of i, named name.
func installRecordsNamed(i install, store, name string) *corev1.ConfigMap {
	cm := installRecords(i, store)
	cm.Name = name
	return cm
}

func ownedBy(cm *corev1.ConfigMap, refs ...metav1.OwnerReference) *corev1.ConfigMap {
	cm.OwnerReferences = refs
	return cm
}

// A release of the chart writes its own records (named with its
// --records-prefix, <fullname>-records-), deletes those of the default name
// its Lease owns or nothing does (it moves them), writes its own node room
// buckets (<fullname>-updater-noderoom-<b>), and nothing else: not the
// default name otherwise, not another release's records or buckets, not its
// kill switch. Its policies match its own ServiceAccount only.
func TestReleaseConfigMapChanges(t *testing.T) {
	platform := install{namespace: "autoscaling", fullname: "platform-vpa-inplace"}
	tenant := install{namespace: "autoscaling", fullname: "tenant-vpa-inplace"}
	p := releasePolicies(t, platform, "platform")[platform.fullname+"-updater-configmaps"]
	own := installRecords(platform, "infeasible")
	// The records of the release before its prefix was set: the default
	// name, owned by the release's Lease.
	earlier := installRecordsNamed(platform, "infeasible", "vpa-inplace-records-infeasible-4c1f3c9e-0000-4000-8000-000000000002")
	as := func(r Request) Request { return r.by(platform.user()) }
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"its records created", as(cmCreate(own)), ""},
		{"its records rewritten", as(cmUpdate(own, func(cm *corev1.ConfigMap) { cm.Data["records"] = "v2\n" })), ""},
		{"its records deleted", as(cmDelete(own)), ""},
		{"its memory records created", as(cmCreate(installRecords(platform, "memory"))), ""},
		{"the records of the default name it owns, deleted once moved", as(cmDelete(earlier)), ""},
		{"the records of the default name without an owner, deleted once moved", as(cmDelete(ownedBy(earlier.DeepCopy()))), ""},
		{"the default name created", as(cmCreate(earlier)), cmName},
		{"the default name rewritten", as(cmUpdate(earlier, func(cm *corev1.ConfigMap) { cm.Data["records"] = "" })), cmName},
		{"the default name of another release's Lease deleted", as(cmDelete(ownedBy(earlier.DeepCopy(), deployInstall.lease()))), cmOwner},
		{"another release's records created", as(cmCreate(installRecords(tenant, "infeasible"))), cmName},
		{"another release's records rewritten", as(cmUpdate(installRecords(tenant, "infeasible"),
			func(cm *corev1.ConfigMap) { cm.Data["records"] = "" })), cmName},
		{"another release's records deleted", as(cmDelete(installRecords(tenant, "infeasible"))), cmName},
		{"its node room bucket written", as(cmUpdate(installBucket(platform, 5), func(cm *corev1.ConfigMap) { cm.Data = nil })), ""},
		{"its missing node room bucket created", as(cmCreate(installBucket(platform, 15))), ""},
		{"its node room bucket deleted", as(cmDelete(installBucket(platform, 5))), cmName},
		{"another release's node room bucket written", as(cmUpdate(installBucket(tenant, 5), func(cm *corev1.ConfigMap) { cm.Data = nil })), cmName},
		{"the node room bucket of deploy/'s name written", as(cmUpdate(installBucket(deployInstall, 5), func(cm *corev1.ConfigMap) { cm.Data = nil })), cmName},
		{"its kill switch turned off", as(cmUpdate(platform.killSwitch(), func(cm *corev1.ConfigMap) { cm.Data["paused"] = "false" })), cmKillSwitch},
		{"its kill switch deleted", as(cmDelete(platform.killSwitch())), cmKillSwitch},
		{"another release's kill switch deleted", as(cmDelete(tenant.killSwitch())), cmName},
		{"its kill switch, by another release's updater", cmDelete(platform.killSwitch()).by(tenant.user()), ""},
		{"its kill switch, by the updater of deploy/", cmDelete(platform.killSwitch()).by(deployInstall.user()), ""},
	} {
		t.Run(tc.name, func(t *testing.T) { check(t, p, tc.req, tc.want) })
	}
}

// A release named vpa-inplace-records (its fullname, since it holds the
// chart's name) has the kill switch vpa-inplace-records-updater-config,
// whose name begins as the default name of the records does: it is refused
// by name, labelled or not, and the label is read before the update too.
// Before, the policy checked the prefix vpa-inplace-records- and the label
// of the object written, so the updater's token could label the kill switch
// and then rewrite it.
func TestReleaseKillSwitchOfARecordsLikeName(t *testing.T) {
	rel := install{namespace: "autoscaling", fullname: "vpa-inplace-records"}
	p := releasePolicies(t, rel, "vpa-inplace-records")[rel.fullname+"-updater-configmaps"]
	labelled := rel.killSwitch()
	labelled.Labels = map[string]string{"vpa-inplace.dev/records": "updater"}
	as := func(r Request) Request { return r.by(rel.user()) }
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"its records created", as(cmCreate(installRecords(rel, "infeasible"))), ""},
		{"its records deleted", as(cmDelete(installRecords(rel, "safety"))), ""},
		{"its kill switch labelled as records", as(cmUpdate(rel.killSwitch(), func(cm *corev1.ConfigMap) {
			cm.Labels = map[string]string{"vpa-inplace.dev/records": "updater"}
		})), cmKillSwitch},
		{"its kill switch, once labelled, turned off", as(cmUpdate(labelled, func(cm *corev1.ConfigMap) { cm.Data["paused"] = "false" })), cmKillSwitch},
		{"its kill switch, once labelled, deleted", as(cmDelete(labelled)), cmKillSwitch},
		{"its kill switch created with the records label", as(cmCreate(labelled)), cmKillSwitch},
		{"a ConfigMap of the default records name labelled", as(cmUpdate(
			installRecordsNamed(rel, "updater", "vpa-inplace-records-updater-x"), func(cm *corev1.ConfigMap) {
				cm.Labels = map[string]string{"vpa-inplace.dev/records": "updater"}
			})), cmName},
	} {
		t.Run(tc.name, func(t *testing.T) { check(t, p, tc.req, tc.want) })
	}
}
