package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	vpafake "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/client/clientset/versioned/fake"

	"github.com/vpa-inplace/vpa-inplace/pkg/shard"
)

// One namespace keeps the name it always had; several are numbered, and
// the Deployments go round robin, the deferred one in the first.
func TestWorkloadSpreadsDeploymentsOverNamespaces(t *testing.T) {
	one := &Options{Namespace: "rb", Namespaces: 1, Deployments: 3}
	assert.Equal(t, []string{"rb"}, one.NamespaceNames())
	w := newWorkload(one, nil, nil, nil, nil)
	assert.Equal(t, "rb", w.namespace["app-0002"])
	assert.Equal(t, "rb", w.namespace[deferredApp])

	o := &Options{Namespace: "rb", Namespaces: 3, Deployments: 7}
	assert.Equal(t, []string{"000-rb", "001-rb", "002-rb"}, o.NamespaceNames())
	w = newWorkload(o, nil, nil, nil, nil)
	for app, ns := range map[string]string{"app-0000": "000-rb", "app-0001": "001-rb", "app-0003": "000-rb", "app-0005": "002-rb", "app-0006": "000-rb", deferredApp: "000-rb"} {
		assert.Equal(t, ns, w.namespace[app], app)
	}
	assert.Equal(t, []string{"app-0000", "app-0001", "app-0002"}, w.firstApps(func(string) bool { return true }))
	assert.Equal(t, []string{"app-0001"}, w.firstApps(func(ns string) bool { return ns == "001-rb" }))
}

func TestValidateBoundsNamespaces(t *testing.T) {
	for _, tc := range []struct {
		name        string
		namespaces  int
		deployments int
		ok          bool
	}{
		{"one", 1, 100, true},
		{"one per Deployment", 100, 100, true},
		{"more than Deployments", 101, 100, false},
		{"none", 0, 100, false},
		{"past the names' three digits", MaxNamespaces + 1, 10000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			o.Namespaces, o.Deployments, o.Pods = tc.namespaces, tc.deployments, 10*tc.deployments
			errs := o.Validate()
			if tc.ok {
				assert.Empty(t, errs)
			} else {
				assert.NotEmpty(t, errs)
			}
		})
	}
}

// validOptions are the defaults with what the driver needs to run.
func validOptions() *Options {
	o := NewOptions()
	o.Kubeconfig = "admin.kubeconfig"
	o.Ours.Binary, o.Ours.Kubeconfig = "updater", "updater.kubeconfig"
	o.Upstream.Binary, o.Upstream.Kubeconfig = "vpa-updater", "admin.kubeconfig"
	return o
}

// A Deployment and its VPA, and the VPA's recommendation, land in the
// app's namespace.
func TestCreateAppInItsNamespace(t *testing.T) {
	o := &Options{Namespace: "rb", Namespaces: 2, Deployments: 4, TokenVolume: true}
	kube, vpas := fake.NewClientset(), vpafake.NewSimpleClientset()
	w := newWorkload(o, kube, vpas, nil, func(string, ...any) {})
	ctx := t.Context()
	require.NoError(t, w.createApp(ctx, "app-0003", 10, false))
	_, err := kube.AppsV1().Deployments("001-rb").Get(ctx, "app-0003", metav1.GetOptions{})
	require.NoError(t, err)
	v, err := vpas.AutoscalingV1().VerticalPodAutoscalers("001-rb").Get(ctx, "app-0003", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, v.Status.Recommendation)
	assert.True(t, sameResources(v.Status.Recommendation.ContainerRecommendations[0].Target, baseline))
}

// With several namespaces the tracker watches every namespace but keeps
// the workload's pods only, and two pods of one name in two namespaces
// apart.
func TestTrackerOfSeveralNamespaces(t *testing.T) {
	pod := func(ns, name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), Labels: map[string]string{labelApp: "app-0000"}, Generation: 1},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: containerName, Resources: corev1.ResourceRequirements{Requests: baseline.DeepCopy()}}}},
		}
	}
	kube := fake.NewClientset(pod("000-rb", "p"), pod("001-rb", "p"), pod("other", "p"))
	tr, err := NewTracker(kube, []string{"000-rb", "001-rb"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	defer func() { cancel(); tr.Shutdown() }()
	require.NoError(t, tr.Start(ctx))
	all := func(string) bool { return true }
	require.True(t, waitUntil(ctx, 30*time.Second, func() bool { return len(tr.Pods(all)) == 2 }), "the two pods of the workload's namespaces")
	for _, p := range tr.Pods(all) {
		assert.NotEqual(t, "other", p.Namespace)
	}

	t0 := time.Now()
	require.Equal(t, 2, tr.Expect("burst", "app-0000", burst, t0))
	resized := pod("001-rb", "p")
	resized.Generation = 2
	resized.Spec.Containers[0].Resources.Requests = burst.DeepCopy()
	_, err = kube.CoreV1().Pods("001-rb").Update(ctx, resized, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.True(t, waitUntil(ctx, 30*time.Second, func() bool { return len(tr.Acceptances("burst")) == 1 }))
	got := tr.Acceptances("burst")
	assert.Equal(t, "001-rb", got[0].namespace, "the resize of 001-rb's pod, not 000-rb's of the same name")
	g := tr.Group("burst")
	assert.Equal(t, 2, g.Expected)
	assert.Len(t, g.Accepted, 1)
}

// The namespaces of the sharded profiles spread over the shards: every one
// of 12 holds some of 100, and 10 fall into more than a third of them.
// Numbered at the end, all 100 fall into one shard (FNV-1a's highest bits
// barely move with the last characters).
func TestNamespacesSpreadOverShards(t *testing.T) {
	layout, err := shard.NewLayout(12)
	require.NoError(t, err)
	for _, tc := range []struct {
		namespaces, atLeast int
	}{{100, 12}, {10, 5}} {
		o := &Options{Namespace: "resize-bench", Namespaces: tc.namespaces}
		held := map[int]int{}
		for _, ns := range o.NamespaceNames() {
			held[layout.Of(ns)]++
		}
		assert.GreaterOrEqual(t, len(held), tc.atLeast, "%d namespaces fall into %d shards of 12: %v", tc.namespaces, len(held), held)
	}
}
