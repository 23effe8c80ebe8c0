//go:build e2e

package e2e

// The chart's NOTES, as `helm install` prints them and `helm get notes`
// returns them, checked sentence by sentence against the release installed
// and, after `helm uninstall`, against what is left (TestChartInstall).
// hack/deploy/verify_notes.py checks the same text against the rendered
// objects without a cluster.

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// notes is a release's NOTES, as Helm printed them.
type notes struct {
	text string
	// flat is text with every run of white space one space.
	flat string
}

// notesOf returns the NOTES section of `helm install` or `helm get notes`
// output.
func notesOf(t *testing.T, out string) notes {
	t.Helper()
	_, text, ok := strings.Cut(out, "NOTES:\n")
	require.True(t, ok, "helm printed the release's NOTES:\n%s", out)
	text = strings.TrimSpace(text)
	return notes{text: text, flat: strings.Join(strings.Fields(text), " ")}
}

// find returns the submatches of re in the NOTES (flattened), failing when
// it is not there.
func (n notes) find(t *testing.T, re, what string) []string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(n.flat)
	require.NotNil(t, m, "the NOTES say %s (%s):\n%s", what, re, n.text)
	return m
}

// kubectlGet is one `kubectl [-n NS] get KIND NAME` of the NOTES.
type kubectlGet struct {
	namespace, kind, name string
}

var resources = map[string]schema.GroupVersionResource{
	"lease":                          {Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
	"secret":                         {Version: "v1", Resource: "secrets"},
	"certificate":                    {Group: "cert-manager.io", Version: "v1", Resource: "certificates"},
	"validatingwebhookconfiguration": {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
	"mutatingwebhookconfiguration":   {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
}

func (n notes) gets() []kubectlGet {
	var out []kubectlGet
	for _, m := range regexp.MustCompile(`kubectl (?:-n (\S+) )?get (\w+) (\S+)`).FindAllStringSubmatch(n.flat, -1) {
		if _, ok := resources[m[2]]; ok {
			out = append(out, kubectlGet{namespace: m[1], kind: m[2], name: m[3]})
		}
	}
	return out
}

// requireNotesTrueWhileInstalled checks, with the release installed and
// its binaries run, what the NOTES say is there: every object a command
// names exists, the Lease names a leader, the self-managed certificate's
// Secret is filled in and its CA patched into the webhooks, the kill switch
// they tell how to create is the updater's --config-map, and the records
// they name carry the updater's --records-prefix.
func requireNotesTrueWhileInstalled(t *testing.T, rel release, n notes, updaterArgs []string) {
	t.Helper()
	ctx := ctxFor(t)
	assert.Contains(t, n.flat, "is installed in namespace "+rel.namespace+".")

	m := n.find(t, `kubectl -n (\S+) get deployments,pods -l (\S+)`, "how to see the pods")
	assert.Equal(t, rel.namespace, m[1])
	deps, err := kube.AppsV1().Deployments(rel.namespace).List(ctx, metav1.ListOptions{LabelSelector: m[2]})
	require.NoError(t, err)
	assert.Len(t, deps.Items, 2, "the NOTES' selector %s finds the release's two Deployments", m[2])
	pods, err := kube.CoreV1().Pods(rel.namespace).List(ctx, metav1.ListOptions{LabelSelector: m[2]})
	require.NoError(t, err)
	assert.NotEmpty(t, pods.Items, "and their pods")

	gets := n.gets()
	require.NotEmpty(t, gets)
	for _, g := range gets {
		res := dyn.Resource(resources[g.kind])
		var err error
		if g.namespace != "" {
			assert.Equal(t, rel.namespace, g.namespace, "kubectl get %s %s", g.kind, g.name)
			_, err = res.Namespace(g.namespace).Get(ctx, g.name, metav1.GetOptions{})
		} else {
			_, err = res.Get(ctx, g.name, metav1.GetOptions{})
		}
		assert.NoError(t, err, "the NOTES' `kubectl get %s %s` finds it", g.kind, g.name)
	}

	m = n.find(t, `One updater replica leads; the Lease names it \(HOLDER\): kubectl -n \S+ get lease (\S+)`, "which Lease names the leader")
	lease, err := kube.CoordinationV1().Leases(rel.namespace).Get(ctx, m[1], metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", "the Lease %s names the leader", m[1])

	m = n.find(t, `keeps them in Secret (\S+) \(shipped empty\), and patches the CA into the caBundle of (\S+) and (\S+):`,
		"where the self-managed certificate is kept")
	secret, err := kube.CoreV1().Secrets(rel.namespace).Get(ctx, m[1], metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, secret.Data, "the admission controller filled Secret %s in", m[1])
	mwc, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, m[2], metav1.GetOptions{})
	require.NoError(t, err)
	vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, m[3], metav1.GetOptions{})
	require.NoError(t, err)
	for _, w := range mwc.Webhooks {
		assert.NotEmpty(t, w.ClientConfig.CABundle, "%s %s: the CA is patched in", mwc.Name, w.Name)
	}
	for _, w := range vwc.Webhooks {
		assert.NotEmpty(t, w.ClientConfig.CABundle, "%s %s: the CA is patched in", vwc.Name, w.Name)
	}

	m = n.find(t, `not part of the release: helm uninstall leaves it\): kubectl -n (\S+) create configmap (\S+) --from-literal=paused=true`,
		"how to create the kill switch")
	assert.Contains(t, updaterArgs, "--config-map="+m[1]+"/"+m[2], "the kill switch of the NOTES is the updater's")

	m = n.find(t, `The updater's records \(ConfigMaps (\S+)\*, labelled vpa-inplace\.dev/records\) are owned by that Lease`,
		"how the records are named and who owns them")
	assert.Contains(t, updaterArgs, "--records-prefix="+m[1], "the records of the NOTES are named as the updater names them")
	assert.Contains(t, updaterArgs, "--records-owner="+lease.Name, "and owned by the Lease the NOTES name")
}

// uninstallClaims is what the NOTES say `helm uninstall` deletes (the
// objects it names, the records' prefix) and leaves (the kill switch).
type uninstallClaims struct {
	deleted       []kubectlGet
	recordsPrefix string
	killSwitch    kubectlGet
}

func (n notes) uninstallClaims(t *testing.T, namespace string) uninstallClaims {
	t.Helper()
	var c uninstallClaims
	m := n.find(t, `Uninstall: helm uninstall deletes every object of the release, these included \(the binaries fill them in, the release owns them\):(.*?) The updater's records`,
		"what helm uninstall deletes")
	for _, d := range regexp.MustCompile(`\b(Lease|Secret) (\S+)`).FindAllStringSubmatch(m[1], -1) {
		c.deleted = append(c.deleted, kubectlGet{namespace: namespace, kind: strings.ToLower(d[1]), name: d[2]})
	}
	c.recordsPrefix = n.find(t, `The updater's records \(ConfigMaps (\S+)\*`, "the records' name")[1]
	k := n.find(t, `helm uninstall leaves it\): kubectl -n (\S+) create configmap (\S+) `, "what uninstall leaves")
	c.killSwitch = kubectlGet{namespace: k[1], kind: "configmap", name: k[2]}
	assert.Len(t, regexp.MustCompile(`uninstall leaves \w+`).FindAllString(n.flat, -1), 1,
		"the NOTES say helm uninstall leaves nothing but the kill switch")
	assert.Contains(t, n.flat, "The CRDs of the chart's crds/ stay")
	return c
}

// createKillSwitch creates the kill switch as the NOTES say, so that the
// uninstall can be shown to leave it.
func createKillSwitch(t *testing.T, c uninstallClaims) {
	t.Helper()
	_, err := kube.CoreV1().ConfigMaps(c.killSwitch.namespace).Create(ctxFor(t), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: c.killSwitch.name}, Data: map[string]string{"paused": "true"},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "creating the kill switch as the NOTES say")
}

// requireNotesTrueAfterUninstall checks, after `helm uninstall`, what the
// NOTES said of it: the objects they name are gone, no records of the
// release's name are left, and the kill switch they said uninstall leaves
// is there; it is then deleted, as the release's user would.
func requireNotesTrueAfterUninstall(t *testing.T, c uninstallClaims) {
	t.Helper()
	require.NotEmpty(t, c.deleted)
	for _, d := range c.deleted {
		waitFor(t, eventually, "the NOTES' "+d.kind+" "+d.name+" deleted by helm uninstall", func(ctx context.Context) (bool, error) {
			_, err := dyn.Resource(resources[d.kind]).Namespace(d.namespace).Get(ctx, d.name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
	waitFor(t, eventually, "no ConfigMap "+c.recordsPrefix+"* left (the garbage collector)", func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().ConfigMaps(c.killSwitch.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, cm := range list.Items {
			if strings.HasPrefix(cm.Name, c.recordsPrefix) {
				return false, nil
			}
		}
		return true, nil
	})
	ks, err := kube.CoreV1().ConfigMaps(c.killSwitch.namespace).Get(ctxFor(t), c.killSwitch.name, metav1.GetOptions{})
	require.NoError(t, err, "helm uninstall leaves the kill switch, as the NOTES say")
	assert.Equal(t, "true", ks.Data["paused"])
	require.NoError(t, kube.CoreV1().ConfigMaps(c.killSwitch.namespace).Delete(ctxFor(t), c.killSwitch.name, metav1.DeleteOptions{}))
}
