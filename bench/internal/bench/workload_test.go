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
	assert.Equal(t, []string{"rb-000", "rb-001", "rb-002"}, o.NamespaceNames())
	w = newWorkload(o, nil, nil, nil, nil)
	for app, ns := range map[string]string{"app-0000": "rb-000", "app-0001": "rb-001", "app-0003": "rb-000", "app-0005": "rb-002", "app-0006": "rb-000", deferredApp: "rb-000"} {
		assert.Equal(t, ns, w.namespace[app], app)
	}
	assert.Equal(t, []string{"app-0000", "app-0001", "app-0002"}, w.firstApps(func(string) bool { return true }))
	assert.Equal(t, []string{"app-0001"}, w.firstApps(func(ns string) bool { return ns == "rb-001" }))
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
	_, err := kube.AppsV1().Deployments("rb-001").Get(ctx, "app-0003", metav1.GetOptions{})
	require.NoError(t, err)
	v, err := vpas.AutoscalingV1().VerticalPodAutoscalers("rb-001").Get(ctx, "app-0003", metav1.GetOptions{})
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
	kube := fake.NewClientset(pod("rb-000", "p"), pod("rb-001", "p"), pod("other", "p"))
	tr, err := NewTracker(kube, []string{"rb-000", "rb-001"})
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
	resized := pod("rb-001", "p")
	resized.Generation = 2
	resized.Spec.Containers[0].Resources.Requests = burst.DeepCopy()
	_, err = kube.CoreV1().Pods("rb-001").Update(ctx, resized, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.True(t, waitUntil(ctx, 30*time.Second, func() bool { return len(tr.Acceptances("burst")) == 1 }))
	got := tr.Acceptances("burst")
	assert.Equal(t, "rb-001", got[0].namespace, "the resize of rb-001's pod, not rb-000's of the same name")
	g := tr.Group("burst")
	assert.Equal(t, 2, g.Expected)
	assert.Len(t, g.Accepted, 1)
}
