//go:build e2e

package e2e

// The chart and a kustomize overlay, installed the way a platform team
// installs them, and run: TestChartInstall installs charts/vpa-inplace with
// the pinned helm as release "platform" in namespace "autoscaling" (not the
// manifests' vpa-inplace-system, not the default release name), with its
// default values; TestKustomizeInstall applies
// deploy/overlays/self-managed-certs as `kubectl apply -k --server-side`
// would (the kustomize output, applied object by object with server-side
// apply, through client-go). Both then run the two binaries with exactly the
// args, env and ServiceAccount of the Deployments that were installed
// (hostpod_test.go), so that a chart or overlay that drifts from what the
// binaries need fails here, and show a pod resized in place, a record that
// survives an updater restart, a new pod mutated by the webhook, an upgrade
// (helm upgrade; the overlay applied again with a component) and an
// uninstall that leaves nothing of theirs but the CRDs.
//
// The local cluster forces these adaptations, and no other:
//   - the webhooks call https://127.0.0.1:<port>/<path> instead of the
//     Service (the API server reaches nothing but this machine), as
//     hack/deploy/local-apply.sh does for the rest of the suite: a helm
//     post-renderer (this test binary, postRender) rewrites clientConfig
//     before helm installs or upgrades, and the overlay's output is rewritten
//     the same way before it is applied;
//   - each binary gets --kubeconfig with a token of its Deployment's
//     ServiceAccount (a pod gets it mounted), listens on loopback ports
//     (--address, --port, --bind-address), and the self-managed serving
//     certificate also names 127.0.0.1 (--cert-hosts), where the API server
//     calls it;
//   - one process per binary stands for the Deployment's replicas, with the
//     identity (POD_NAME) of one of its pods.
//
// The Deployments' pods are left to run on the hollow nodes (which run no
// process, and report the containers Ready): their rollout, under the
// restricted Pod Security Standard the namespace enforces, is what `helm
// install --wait` and the overlay's apply wait for, so the Deployments are
// shown admitted and scheduled, not just rendered.
//
// These tests need a cluster with no other vpa-inplace installed (the
// overlay uses the names and the namespace of deploy/): hack/e2e.sh runs them
// in a phase of their own, after the suite, with E2E_INSTALL_PHASE=1, and
// these environment variables:
//
//	E2E_HELM, E2E_KUSTOMIZE   the pinned tools (hack/tools/install.sh)
//	E2E_UPDATER_BINARY, E2E_ADMISSION_BINARY   the binaries
//	E2E_REPO_ROOT             the repository (chart and overlays)

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
)

// postRenderEnv, when set, makes this test binary a helm post-renderer that
// points the webhooks at https://127.0.0.1:<its value> (TestMain).
const postRenderEnv = "E2E_POST_RENDER_WEBHOOK_PORT"

// installPhase skips the test outside the install phase of hack/e2e.sh and
// returns the tools and binaries it needs.
func installPhase(t *testing.T) (helm, kustomize, updater, admission, repo string) {
	t.Helper()
	if os.Getenv("E2E_INSTALL_PHASE") != "1" {
		t.Skip("runs in the install phase of hack/e2e.sh (E2E_INSTALL_PHASE=1), on a cluster without the suite's deployment")
	}
	get := func(key string) string {
		v := os.Getenv(key)
		require.NotEmpty(t, v, "%s is required in the install phase", key)
		return v
	}
	return get("E2E_HELM"), get("E2E_KUSTOMIZE"), get("E2E_UPDATER_BINARY"), get("E2E_ADMISSION_BINARY"), get("E2E_REPO_ROOT")
}

// webhookClientConfigsToLoopback rewrites, in place, the clientConfig of
// every webhook of the webhook configurations among objs: the Service
// becomes https://127.0.0.1:port<path>; caBundle is kept. Other objects are
// left alone.
func webhookClientConfigsToLoopback(objs []*unstructured.Unstructured, port string) error {
	for _, o := range objs {
		if o.GetKind() != "MutatingWebhookConfiguration" && o.GetKind() != "ValidatingWebhookConfiguration" {
			continue
		}
		hooks, _, err := unstructured.NestedSlice(o.Object, "webhooks")
		if err != nil {
			return err
		}
		for i, h := range hooks {
			hook := h.(map[string]any)
			cc, _ := hook["clientConfig"].(map[string]any)
			svc, _ := cc["service"].(map[string]any)
			if svc == nil {
				return fmt.Errorf("%s %s: webhook %v calls no Service", o.GetKind(), o.GetName(), hook["name"])
			}
			path, _ := svc["path"].(string)
			delete(cc, "service")
			cc["url"] = "https://127.0.0.1:" + port + path
			hooks[i] = hook
		}
		if err := unstructured.SetNestedSlice(o.Object, hooks, "webhooks"); err != nil {
			return err
		}
	}
	return nil
}

// decodeObjects reads a YAML stream of Kubernetes objects.
func decodeObjects(r io.Reader) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(r), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(obj) > 0 {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

// postRender is the helm post-renderer: the manifests on stdin, their
// webhooks pointed at 127.0.0.1, on stdout.
func postRender(port string) int {
	objs, err := decodeObjects(os.Stdin)
	if err == nil {
		err = webhookClientConfigsToLoopback(objs, port)
	}
	for _, o := range objs {
		if err != nil {
			break
		}
		var data []byte
		if data, err = yaml.Marshal(o.Object); err == nil {
			_, err = fmt.Printf("---\n%s", data)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "post-render:", err)
		return 1
	}
	return 0
}

// release is one install under test: where it lives, how its Deployments are
// found, and where its updater keeps its records.
type release struct {
	// name is the release's name (its app.kubernetes.io/instance label).
	name      string
	namespace string
	selector  labels.Set
	// fullname is the prefix of its objects' names.
	fullname string
	// webhookPort is where its admission controller serves (the webhooks
	// call it there).
	webhookPort int
}

// running are the two binaries of a release, run as processes.
type running struct {
	updater, admission *hostPod
}

// run starts both binaries with the args, env and ServiceAccount of the
// release's Deployments, as they are installed now.
func (r release) run(t *testing.T, updaterBinary, admissionBinary string) running {
	t.Helper()
	deps := deploymentsOf(t, r.namespace, r.selector)
	require.Contains(t, deps, "updater", "the release's updater Deployment")
	require.Contains(t, deps, "admission-controller", "the release's admission controller Deployment")
	ac := deps["admission-controller"]
	var hosts string
	for _, a := range ac.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(a, "--cert-hosts="); ok {
			hosts = v
		}
	}
	require.NotEmpty(t, hosts, "the admission controller keeps its own certificate (--cert-hosts)")
	admission := newHostPod(t, ac, "admission-controller", deploymentPod(t, ac), admissionBinary, hostAdaptations{
		set: map[string]string{
			"--address":    fmt.Sprintf("127.0.0.1:%d", freePort(t)),
			"--port":       fmt.Sprint(r.webhookPort),
			"--cert-hosts": hosts + ",127.0.0.1",
		},
		add: []string{"--bind-address=127.0.0.1"},
	})
	upd := deps["updater"]
	updater := newHostPod(t, upd, "updater", deploymentPod(t, upd), updaterBinary, hostAdaptations{
		set: map[string]string{"--address": fmt.Sprintf("127.0.0.1:%d", freePort(t))},
	})
	admission.start()
	updater.start()
	waitFor(t, eventually, "the updater leads", func(context.Context) (bool, error) {
		return updater.metric("vpa_inplace_updater_leader", "") == 1, nil
	})
	return running{updater: updater, admission: admission}
}

func (r running) stop() {
	r.updater.stop()
	r.admission.stop()
}

// proveWorking shows, in a namespace of its own, a pod resized in place, a
// new pod mutated by the webhook, and an infeasible resize recorded in the
// release's namespace, where the record survives an updater restart.
func (r release) proveWorking(t *testing.T, bins running) {
	t.Helper()
	ns := newNamespace(t, nil)

	// A pod resized in place, the same pod.
	pods := deploy(t, ns, workload{name: "web", requests: rl("100m", "100Mi")})
	before := snap(pods)
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, nil)
	recommend(t, ns, "web", "200m", "150Mi")
	waitResized(t, ns, pods[0].Name, "200m", "150Mi")
	requireNotDisrupted(t, ns, "web", before)

	// A new pod gets the recommendation from the webhook at creation: the
	// Deployment's template still asks for 100m.
	mutated := bins.admission.metric("vpa_inplace_admission_pod_mutations_total", "")
	dep, err := kube.AppsV1().Deployments(ns).Get(ctxFor(t), "web", metav1.GetOptions{})
	require.NoError(t, err)
	dep.Spec.Replicas = ptrInt32(2)
	_, err = kube.AppsV1().Deployments(ns).Update(ctxFor(t), dep, metav1.UpdateOptions{})
	require.NoError(t, err)
	var fresh corev1.Pod
	waitFor(t, eventually, "a second pod of web", func(context.Context) (bool, error) {
		for _, p := range podsOf(t, ns, "web") {
			if p.Name != pods[0].Name {
				fresh = p
				return true, nil
			}
		}
		return false, nil
	})
	c := fresh.Spec.Containers[0].Resources.Requests
	assert.Equal(t, "200m", c.Cpu().String(), "the new pod was created with the recommended CPU")
	assert.Equal(t, "150Mi", c.Memory().String(), "the new pod was created with the recommended memory")
	assert.Equal(t, int64(1), fresh.Generation, "set at creation, not by a resize")
	assert.Greater(t, bins.admission.metric("vpa_inplace_admission_pod_mutations_total", ""), mutated,
		"the release's admission controller mutated it")

	// A resize the node cannot take is recorded in the release's namespace,
	// and the record outlives the updater: after a restart, the resize is
	// not sent again.
	big := deploy(t, ns, workload{name: "big", requests: rl("100m", "100Mi")})
	newVPA(t, ns, "big", vpatypes.UpdateModeInPlace, nil)
	recommend(t, ns, "big", "8", "100Mi")
	waitEvent(t, ns, big[0].Name, eventInfeasible, 1)
	waitFor(t, eventually, "the infeasible record in "+r.namespace, func(ctx context.Context) (bool, error) {
		return recordWrittenIn(ctx, r.namespace, ns, "big", "infeasible", big[0].UID)
	})
	generation := getPod(t, ns, big[0].Name).Generation
	bins.updater.stop()
	bins.updater.start()
	waitFor(t, eventually, "the restarted updater leads and holds the record", func(context.Context) (bool, error) {
		return bins.updater.metric("vpa_inplace_updater_leader", "") == 1 &&
			bins.updater.metric(metricRecords, "") >= 1, nil
	})
	requireStable(t, ns, big[0].Name)
	assert.Equal(t, generation, getPod(t, ns, big[0].Name).Generation, "not sent again after the restart")
	assert.Equal(t, int32(1), eventCount(t, ns, big[0].Name, eventInfeasible), "recorded once, not tried again")
}

func ptrInt32(v int32) *int32 { return &v }

// recordWrittenIn tells whether the records ConfigMap of store of the VPA
// ns/name, in the updater's namespace recordsNS, holds a record of uid.
func recordWrittenIn(ctx context.Context, recordsNS, ns, name, store string, uid types.UID) (bool, error) {
	list, err := kube.CoreV1().ConfigMaps(recordsNS).List(ctx, metav1.ListOptions{LabelSelector: records.LabelStore})
	if err != nil {
		return false, err
	}
	v, err := vpas.AutoscalingV1().VerticalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	for _, cm := range list.Items {
		if strings.Contains(cm.Name, store) && strings.HasSuffix(cm.Name, string(v.UID)) &&
			strings.Contains(cm.Data["records"], string(uid)+":") {
			return true, nil
		}
	}
	return false, nil
}

// command runs a tool and returns its stdout; stderr goes into the failure.
func command(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctxFor(t), name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s %s: %s", filepath.Base(name), strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	require.NoError(t, err, "%s %v: %s", name, args, stderr.String())
	return stdout.String()
}

// createNamespace creates ns enforcing the restricted Pod Security
// Standard, as the install instructions say, and deletes it at the end.
func createNamespace(t *testing.T, ns string) {
	t.Helper()
	_, err := kube.CoreV1().Namespaces().Create(ctxFor(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
}

// TestChartInstall installs the chart as release "platform" in namespace
// "autoscaling" with its default values, runs it, upgrades it and
// uninstalls it.
func TestChartInstall(t *testing.T) {
	helm, _, updaterBinary, admissionBinary, repo := installPhase(t)
	const name, ns = "platform", "autoscaling"
	rel := release{name: name, namespace: ns, selector: labels.Set{"app.kubernetes.io/instance": name},
		fullname: "platform-vpa-inplace", webhookPort: freePort(t)}
	createNamespace(t, ns)
	home := t.TempDir()
	helmEnv := []string{"KUBECONFIG=" + os.Getenv("KUBECONFIG"), "HELM_CACHE_HOME=" + home + "/cache",
		"HELM_CONFIG_HOME=" + home + "/config", "HELM_DATA_HOME=" + home + "/data",
		fmt.Sprintf("%s=%d", postRenderEnv, rel.webhookPort)}
	chart := filepath.Join(repo, "charts", "vpa-inplace")
	// The post-renderer is this test binary (TestMain runs postRender).
	common := []string{"--namespace", ns, "--wait", "--timeout", "3m", "--post-renderer", os.Args[0]}

	installNotes := notesOf(t, command(t, helmEnv, helm, append([]string{"install", name, chart}, common...)...))
	installed := true
	t.Cleanup(func() {
		if installed {
			_ = exec.Command(helm, "uninstall", name, "--namespace", ns).Run()
		}
	})
	manifest, err := decodeObjects(strings.NewReader(command(t, helmEnv, helm, "get", "manifest", name, "--namespace", ns)))
	require.NoError(t, err)
	bins := rel.run(t, updaterBinary, admissionBinary)
	rel.proveWorking(t, bins)
	// What the NOTES say, as helm install printed them and helm get notes
	// returns them, is what is installed.
	n := notesOf(t, command(t, helmEnv, helm, "get", "notes", name, "--namespace", ns))
	assert.Equal(t, installNotes.text, n.text, "helm get notes returns what helm install printed")
	requireNotesTrueWhileInstalled(t, rel, n, deploymentsOf(t, ns, rel.selector)["updater"].Spec.Template.Spec.Containers[0].Args)
	claims := n.uninstallClaims(t, ns)

	// helm upgrade: a changed flag reaches the updater, objects switched off
	// are deleted, a webhook setting changes; the release keeps working.
	command(t, helmEnv, helm, append([]string{"upgrade", name, chart, "--reuse-values",
		"--set", "updater.extraArgs={--pod-update-threshold=0.05}",
		"--set", "updater.podDisruptionBudget.enabled=false",
		"--set", "admissionController.webhooks.quantities.failurePolicy=Fail"}, common...)...)
	_, err = kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctxFor(t), rel.fullname+"-updater", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the updater's PodDisruptionBudget is gone after the upgrade: %v", err)
	vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctxFor(t), rel.fullname+"-vpas", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, vwc.Webhooks, 2)
	assert.Equal(t, "Fail", string(*vwc.Webhooks[1].FailurePolicy), "the quantity webhook fails closed after the upgrade")
	bins.stop()
	bins = rel.run(t, updaterBinary, admissionBinary)
	assert.Contains(t, bins.updater.resolved, "--pod-update-threshold=0.05", "the upgraded Deployment's args")
	rel.proveWorking(t, bins)

	// helm uninstall: the processes stop with their pods. The kill switch
	// is created as the NOTES say, to show that uninstall leaves it.
	bins.stop()
	requireRecordsOwnedByTheLease(t, rel)
	createKillSwitch(t, claims)
	command(t, helmEnv, helm, "uninstall", name, "--namespace", ns, "--wait", "--timeout", "2m")
	installed = false
	requireGone(t, manifest)
	requireNotesTrueAfterUninstall(t, claims)
	requireOnlyCRDs(t, rel)
}

// requireRecordsOwnedByTheLease checks that the release's records exist (the
// infeasible resize proveWorking recorded) and are owned by the release's
// Lease, which the manifests ship, so that deleting it deletes them.
func requireRecordsOwnedByTheLease(t *testing.T, rel release) {
	t.Helper()
	lease, err := kube.CoordinationV1().Leases(rel.namespace).Get(ctxFor(t), rel.fullname+"-updater", metav1.GetOptions{})
	require.NoError(t, err, "the release's Lease")
	cms, err := kube.CoreV1().ConfigMaps(rel.namespace).List(ctxFor(t), metav1.ListOptions{LabelSelector: records.LabelStore})
	require.NoError(t, err)
	require.NotEmpty(t, cms.Items, "records written in the release's namespace")
	for _, cm := range cms.Items {
		assert.Equal(t, []metav1.OwnerReference{{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Name: lease.Name, UID: lease.UID}},
			cm.OwnerReferences, "the owner of records ConfigMap %s", cm.Name)
		assert.True(t, strings.HasPrefix(cm.Name, rel.fullname+"-records-"), "records ConfigMap %s is named after the release", cm.Name)
	}
}

// requireGone checks that none of objs exists any more.
func requireGone(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	mapper := restMapper()
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s", gvk)
		res := dyn.Resource(m.Resource)
		waitFor(t, eventually, fmt.Sprintf("%s %s/%s deleted", o.GetKind(), o.GetNamespace(), o.GetName()), func(ctx context.Context) (bool, error) {
			var err error
			if m.Scope.Name() == meta.RESTScopeNameNamespace {
				_, err = res.Namespace(o.GetNamespace()).Get(ctx, o.GetName(), metav1.GetOptions{})
			} else {
				_, err = res.Get(ctx, o.GetName(), metav1.GetOptions{})
			}
			return apierrors.IsNotFound(err), nil
		})
	}
}

// requireOnlyCRDs checks that nothing of the release is left in the
// cluster but the CRDs: in its namespace, nothing but what every namespace
// has (the Lease and the certificate Secret went with the release, the
// records with the Lease, through the garbage collector); cluster-wide,
// nothing with the release's labels (rel.selector), and for a release of
// another name than deploy/'s, nothing named after it.
func requireOnlyCRDs(t *testing.T, rel release) {
	t.Helper()
	selector := labels.SelectorFromSet(rel.selector)
	var left []string
	start := time.Now()
	for {
		left = nil
		for _, o := range clusterObjects(t, rel.namespace) {
			if o.GetNamespace() == rel.namespace && !namespaceDefault(o) {
				left = append(left, describe(o))
			}
			if o.GetNamespace() == "" && o.GetKind() != "CustomResourceDefinition" && o.GetKind() != "Namespace" &&
				(selector.Matches(labels.Set(o.GetLabels())) || (rel.fullname != "vpa-inplace" && strings.Contains(o.GetName(), rel.fullname))) {
				left = append(left, describe(o))
			}
		}
		if len(left) == 0 || time.Since(start) > eventually {
			break
		}
		time.Sleep(time.Second)
	}
	require.Empty(t, left, "nothing of the release left but the CRDs, %s after the uninstall", time.Since(start).Round(time.Millisecond))
	t.Logf("nothing but the CRDs left %s after the uninstall", time.Since(start).Round(time.Millisecond))
}

// namespaceDefault tells the objects every namespace has, and events.
func namespaceDefault(o unstructured.Unstructured) bool {
	return (o.GetKind() == "ServiceAccount" && o.GetName() == "default") ||
		(o.GetKind() == "ConfigMap" && o.GetName() == "kube-root-ca.crt") || o.GetKind() == "Event"
}

func describe(o unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
	return o.GetKind() + " " + o.GetName()
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// clusterObjects lists every object of every listable resource: the
// cluster-scoped ones, and the namespaced ones of ns.
func clusterObjects(t *testing.T, ns string) []unstructured.Unstructured {
	t.Helper()
	lists, err := kube.Discovery().ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		require.NoError(t, err)
	}
	var out []unstructured.Unstructured
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		require.NoError(t, err)
		for _, r := range l.APIResources {
			if !slices.Contains(r.Verbs, "list") || strings.Contains(r.Name, "/") {
				continue
			}
			if gv.Group == "" && (r.Name == "componentstatuses" || r.Name == "endpoints") {
				// Deprecated (a warning per list); EndpointSlices are listed.
				continue
			}
			res := dyn.Resource(gv.WithResource(r.Name))
			var list *unstructured.UnstructuredList
			if r.Namespaced {
				list, err = res.Namespace(ns).List(context.Background(), metav1.ListOptions{})
			} else {
				list, err = res.List(context.Background(), metav1.ListOptions{})
			}
			if err != nil {
				// Aggregated APIs (metrics.k8s.io) list nothing of ours.
				continue
			}
			for _, o := range list.Items {
				o.SetKind(r.Kind)
				out = append(out, o)
			}
		}
	}
	return out
}

func restMapper() meta.RESTMapper {
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
}

// TestKustomizeInstall applies deploy/overlays/self-managed-certs as
// `kubectl apply -k --server-side` would, runs it, applies it again with a
// component, and deletes it (all but the CRDs).
func TestKustomizeInstall(t *testing.T) {
	_, kustomize, updaterBinary, admissionBinary, repo := installPhase(t)
	rel := release{name: "vpa-inplace", namespace: "vpa-inplace-system", selector: labels.Set{"app.kubernetes.io/part-of": "vpa-inplace"},
		fullname: "vpa-inplace", webhookPort: freePort(t)}
	// The suite's objects are deleted before this phase; its namespace may
	// still be terminating.
	waitFor(t, 2*eventually, "namespace "+rel.namespace+" gone", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Namespaces().Get(ctx, rel.namespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	overlay := filepath.Join(repo, "deploy", "overlays", "self-managed-certs")
	applied := applyKustomization(t, kustomize, overlay, rel.webhookPort)
	t.Cleanup(func() { deleteObjects(t, applied, false) })
	waitDeploymentsAvailable(t, rel)
	bins := rel.run(t, updaterBinary, admissionBinary)
	rel.proveWorking(t, bins)

	// Applied again, with the component that makes the quantity check fail
	// closed: an upgrade of the kustomize install.
	// kustomize takes relative paths only.
	dir := t.TempDir()
	relTo := func(path string) string {
		r, err := filepath.Rel(dir, path)
		require.NoError(t, err)
		return r
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(fmt.Sprintf(
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\ncomponents:\n  - %s\n",
		relTo(overlay), relTo(filepath.Join(repo, "deploy", "components", "quantity-check-fail-closed")))), 0o644))
	applyKustomization(t, kustomize, dir, rel.webhookPort)
	vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctxFor(t), "vpa-inplace-vpas", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, vwc.Webhooks, 2)
	assert.Equal(t, "Fail", string(*vwc.Webhooks[1].FailurePolicy), "the quantity webhook fails closed after the apply")
	bins.stop()
	bins = rel.run(t, updaterBinary, admissionBinary)
	rel.proveWorking(t, bins)

	// Deleted, all but the CRDs: first all but the namespace, after which
	// nothing is left in it (the records go with the Lease), then the
	// namespace.
	bins.stop()
	requireRecordsOwnedByTheLease(t, rel)
	var namespace, rest []*unstructured.Unstructured
	for _, o := range withoutCRDs(applied) {
		if o.GetKind() == "Namespace" {
			namespace = append(namespace, o)
		} else {
			rest = append(rest, o)
		}
	}
	require.Len(t, namespace, 1, "the overlay's namespace")
	deleteObjects(t, rest, true)
	requireGone(t, rest)
	requireOnlyCRDs(t, rel)
	deleteObjects(t, namespace, true)
	requireGone(t, namespace)
	var left []string
	for _, o := range clusterObjects(t, rel.namespace) {
		if o.GetNamespace() == "" && o.GetKind() != "CustomResourceDefinition" && o.GetLabels()["app.kubernetes.io/part-of"] == "vpa-inplace" {
			left = append(left, describe(o))
		}
	}
	assert.Empty(t, left, "nothing of the overlay is left but the CRDs")
}

// applyKustomization renders dir with kustomize, points its webhooks at
// 127.0.0.1:port and applies every object, in kustomize's order, with
// server-side apply, as `kubectl apply -k --server-side` does (field manager
// kubectl, no forced conflicts). It returns the objects applied.
func applyKustomization(t *testing.T, kustomize, dir string, port int) []*unstructured.Unstructured {
	t.Helper()
	objs, err := decodeObjects(strings.NewReader(command(t, nil, kustomize, "build", dir)))
	require.NoError(t, err)
	require.NoError(t, webhookClientConfigsToLoopback(objs, fmt.Sprint(port)))
	mapper := restMapper()
	start := time.Now()
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		var m *meta.RESTMapping
		waitFor(t, eventually, "the resource of "+gvk.String(), func(context.Context) (bool, error) {
			m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				mapper.(*restmapper.DeferredDiscoveryRESTMapper).Reset()
				return false, nil
			}
			return true, nil
		})
		data, err := o.MarshalJSON()
		require.NoError(t, err)
		res := dyn.Resource(m.Resource)
		opts := metav1.PatchOptions{FieldManager: "kubectl", Force: ptrBool(false)}
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			_, err = res.Namespace(o.GetNamespace()).Patch(ctxFor(t), o.GetName(), types.ApplyPatchType, data, opts)
		} else {
			_, err = res.Patch(ctxFor(t), o.GetName(), types.ApplyPatchType, data, opts)
		}
		require.NoError(t, err, "server-side apply of %s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
	t.Logf("applied %d objects of %s in %s", len(objs), dir, time.Since(start).Round(time.Millisecond))
	return objs
}

func ptrBool(v bool) *bool { return &v }

// deleteObjects deletes objs in reverse order, all but the CRDs (and with
// them every VPA); wait waits for each to be gone.
func deleteObjects(t *testing.T, objs []*unstructured.Unstructured, wait bool) {
	mapper := restMapper()
	for i := len(objs) - 1; i >= 0; i-- {
		o := objs[i]
		if o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			continue
		}
		res := dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			err = res.Namespace(o.GetNamespace()).Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
		} else {
			err = res.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
		}
		if wait {
			require.NoError(t, ignoreNotFound(err), "deleting %s %s", o.GetKind(), o.GetName())
		}
	}
}

func withoutCRDs(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			out = append(out, o)
		}
	}
	return out
}

// waitDeploymentsAvailable waits for the rollout of the release's
// Deployments, as `kubectl rollout status` would.
func waitDeploymentsAvailable(t *testing.T, rel release) {
	t.Helper()
	waitFor(t, 2*eventually, "the Deployments rolled out", func(ctx context.Context) (bool, error) {
		list, err := kube.AppsV1().Deployments(rel.namespace).List(ctx, metav1.ListOptions{LabelSelector: rel.selector.String()})
		if err != nil || len(list.Items) != 2 {
			return false, err
		}
		for _, d := range list.Items {
			if d.Status.ObservedGeneration < d.Generation || d.Status.AvailableReplicas < *d.Spec.Replicas {
				return false, nil
			}
		}
		return true, nil
	})
}
