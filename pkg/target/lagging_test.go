package target

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	controllerfetcher "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target/controller_fetcher"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// cachedWalk stands for upstream's controller fetcher over informer caches
// holding what cached holds (by kind/name: the object's controller, nil
// for none): as upstream's, the walk fails on a controller missing from
// them.
type cachedWalk struct {
	cached map[string]*metav1.OwnerReference
}

func (w cachedWalk) FindTopMostWellKnownOrScalable(_ context.Context, key *controllerfetcher.ControllerKeyWithAPIVersion) (*controllerfetcher.ControllerKeyWithAPIVersion, error) {
	for range MaxOwnerDepth {
		parent, ok := w.cached[key.Kind+"/"+key.Name]
		if !ok {
			return nil, fmt.Errorf("%s %s/%s does not exist", key.Kind, key.Namespace, key.Name)
		}
		if parent == nil {
			return key, nil
		}
		key = &controllerfetcher.ControllerKeyWithAPIVersion{
			ControllerKey: controllerfetcher.ControllerKey{Namespace: key.Namespace, Kind: parent.Kind, Name: parent.Name},
			ApiVersion:    parent.APIVersion,
		}
	}
	return nil, fmt.Errorf("too deep")
}

// A pod created by a ReplicaSet that the informer caches have not seen yet
// (a Deployment's new ReplicaSet creates its pods at once) still finds its
// VPA: the controllers missing from the caches are read from the API
// server, each once, their UID checked. Nothing is read while the caches
// hold the pod's controllers, nor for a controller of a made-up API group.
func TestVPAForPodPastLaggingCaches(t *testing.T) {
	deployment := ref("apps", "Deployment", "web", true)
	rsOfDeployment := object{uid: "uid-web-1", refs: []metav1.OwnerReference{deployment}}
	bareDeployment := object{uid: "uid-web"}
	bareRS := object{uid: "uid-web-1"}
	byDeployment := testvpa.New("by-deployment").Target("apps/v1", "Deployment", "web").InPlace().Obj()
	byRS := testvpa.New("by-rs").Target("apps/v1", "ReplicaSet", "web-1").InPlace().Obj()
	byRS.CreationTimestamp.Time = byDeployment.CreationTimestamp.Add(time.Hour)
	pod := testpod.New("p").OwnedBy("apps/v1", "ReplicaSet", "web-1").Obj()

	for _, tc := range []struct {
		name    string
		pod     *metav1.ObjectMeta
		cached  map[string]*metav1.OwnerReference
		objects map[string]object
		errs    map[string]error
		want    string
		reads   []string
		retry   bool
	}{{
		name:    "both in the caches",
		cached:  map[string]*metav1.OwnerReference{"ReplicaSet/web-1": &deployment, "Deployment/web": nil},
		objects: map[string]object{key("apps", "ReplicaSet", "web-1"): rsOfDeployment, key("apps", "Deployment", "web"): bareDeployment},
		want:    "by-deployment",
	}, {
		name:    "the ReplicaSet not cached yet",
		cached:  map[string]*metav1.OwnerReference{"Deployment/web": nil},
		objects: map[string]object{key("apps", "ReplicaSet", "web-1"): rsOfDeployment, key("apps", "Deployment", "web"): bareDeployment},
		want:    "by-deployment",
		reads:   []string{"web-1"},
	}, {
		name:    "neither cached yet",
		cached:  map[string]*metav1.OwnerReference{},
		objects: map[string]object{key("apps", "ReplicaSet", "web-1"): rsOfDeployment, key("apps", "Deployment", "web"): bareDeployment},
		want:    "by-deployment",
		reads:   []string{"web-1", "web"},
	}, {
		name:    "a ReplicaSet without a controller, not cached yet",
		cached:  map[string]*metav1.OwnerReference{},
		objects: map[string]object{key("apps", "ReplicaSet", "web-1"): bareRS},
		want:    "by-rs",
		reads:   []string{"web-1"},
	}, {
		name:    "the ReplicaSet gone",
		cached:  map[string]*metav1.OwnerReference{"Deployment/web": nil},
		objects: map[string]object{key("apps", "Deployment", "web"): bareDeployment},
		reads:   []string{"web-1"},
	}, {
		name:    "another ReplicaSet of that name",
		cached:  map[string]*metav1.OwnerReference{"Deployment/web": nil},
		objects: map[string]object{key("apps", "ReplicaSet", "web-1"): {uid: "uid-recreated", refs: rsOfDeployment.refs}},
		reads:   []string{"web-1"},
	}, {
		name:    "a ReplicaSet of a made-up API group",
		pod:     &testpod.New("p").OwnedBy("evil.example/v1", "ReplicaSet", "web-1").Obj().ObjectMeta,
		cached:  map[string]*metav1.OwnerReference{"Deployment/web": nil},
		objects: map[string]object{key("evil.example", "ReplicaSet", "web-1"): rsOfDeployment},
	}, {
		name:   "the namespace's reads in use",
		cached: map[string]*metav1.OwnerReference{"Deployment/web": nil},
		errs:   map[string]error{key("apps", "ReplicaSet", "web-1"): fmt.Errorf("reading: %w", ErrNamespaceBusy)},
		reads:  []string{"web-1"},
		retry:  true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			owners := &fakeOwners{objects: tc.objects, errs: tc.errs}
			fetcher := &countingFetcher{selectors: map[string]labels.Selector{
				"by-deployment": labels.SelectorFromSet(labels.Set{"app": "web"}),
				"by-rs":         labels.SelectorFromSet(labels.Set{"app": "web"}),
			}}
			vpas := []*vpatypes.VerticalPodAutoscaler{byDeployment}
			if tc.want == "by-rs" {
				vpas = []*vpatypes.VerticalPodAutoscaler{byRS}
			}
			r := newResolver(t, vpas, fetcher, cachedWalk{cached: tc.cached}, clusterKinds, time.Now, WithOwners(owners))
			p := pod.DeepCopy()
			if tc.pod != nil {
				p.ObjectMeta = *tc.pod
			}
			ctx := context.Background()
			got, err := r.VPAForPod(ctx, p)
			if tc.retry {
				require.Error(t, err)
				assert.True(t, RetryLater(ctx, err), "%v", err)
			} else {
				require.NoError(t, err)
			}
			if tc.want == "" {
				assert.Nil(t, got)
			} else if assert.NotNil(t, got) {
				assert.Equal(t, tc.want, got.Name)
			}
			assert.Equal(t, tc.reads, owners.reads, "controllers read from the API server")
		})
	}
}

// fakeSelectors serves the selectors it holds, by kind/name; it counts
// reads.
type fakeSelectors struct {
	selectors map[string]labels.Selector
	err       error
	reads     []string
}

func (f *fakeSelectors) Selector(_ context.Context, _, kind, name string) (labels.Selector, bool, error) {
	f.reads = append(f.reads, kind+"/"+name)
	if f.err != nil {
		return nil, false, f.err
	}
	sel, ok := f.selectors[kind+"/"+name]
	return sel, ok, nil
}

// A VPA whose Deployment the informer caches have not seen yet (created
// just after the VPA) resolves its target from the API server; one whose
// Deployment does not exist at all, or whose target is of a made-up API
// group, keeps upstream's error.
func TestTargetPastLaggingCaches(t *testing.T) {
	web := labels.SelectorFromSet(labels.Set{"app": "web"})
	for _, tc := range []struct {
		name    string
		target  string // apiVersion
		live    map[string]labels.Selector
		err     error
		want    labels.Selector
		wantErr string
		reads   []string
		retry   bool
	}{{
		name:   "not cached yet",
		target: "apps/v1",
		live:   map[string]labels.Selector{"Deployment/web": web},
		want:   web,
		reads:  []string{"Deployment/web"},
	}, {
		name:    "missing",
		target:  "apps/v1",
		wantErr: "no such target",
		reads:   []string{"Deployment/web"},
	}, {
		name:    "of a made-up API group",
		target:  "evil.example/v1",
		live:    map[string]labels.Selector{"Deployment/web": web},
		wantErr: "no such target",
	}, {
		name:    "the namespace's reads in use",
		target:  "apps/v1",
		err:     fmt.Errorf("reading: %w", ErrNamespaceBusy),
		wantErr: ErrNamespaceBusy.Error(),
		reads:   []string{"Deployment/web"},
		retry:   true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			vpa := testvpa.New("web").Target(tc.target, "Deployment", "web").InPlace().Obj()
			live := &fakeSelectors{selectors: tc.live, err: tc.err}
			// The upstream fetcher knows no target: its caches lag.
			r := newResolver(t, []*vpatypes.VerticalPodAutoscaler{vpa}, &countingFetcher{}, upstreamWalk{}, clusterKinds, time.Now,
				WithSelectorReader(live))
			ctx := context.Background()
			got, err := r.Target(ctx, vpa)
			assert.Equal(t, tc.reads, live.reads, "selectors read from the API server")
			assert.Equal(t, tc.retry, RetryLater(ctx, err), "%v", err)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want.String(), got.Selector.String())
		})
	}
}

// APISelectors reads each well-known controller's selector as upstream's
// fetch makes it from the informer caches.
func TestAPISelectors(t *testing.T) {
	ns := "default"
	ls := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}, MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}},
	}}
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "cron"}}}
	objects := []runtime.Object{
		&appsv1.Deployment{ObjectMeta: meta("d"), Spec: appsv1.DeploymentSpec{Selector: ls}},
		&appsv1.ReplicaSet{ObjectMeta: meta("rs"), Spec: appsv1.ReplicaSetSpec{Selector: ls}},
		&appsv1.StatefulSet{ObjectMeta: meta("sts"), Spec: appsv1.StatefulSetSpec{Selector: ls}},
		&appsv1.DaemonSet{ObjectMeta: meta("ds"), Spec: appsv1.DaemonSetSpec{Selector: ls}},
		&batchv1.Job{ObjectMeta: meta("job"), Spec: batchv1.JobSpec{Selector: ls}},
		&batchv1.CronJob{ObjectMeta: meta("cron"), Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template}}}},
		&corev1.ReplicationController{ObjectMeta: meta("rc"), Spec: corev1.ReplicationControllerSpec{Selector: map[string]string{"app": "rc"}}},
	}
	a := NewAPISelectors(fake.NewClientset(objects...), NewReadBudget(4, 1))
	ctx := context.Background()
	for kind, tc := range map[string]struct{ name, want string }{
		"Deployment":            {"d", "app=web,tier in (a,b)"},
		"ReplicaSet":            {"rs", "app=web,tier in (a,b)"},
		"StatefulSet":           {"sts", "app=web,tier in (a,b)"},
		"DaemonSet":             {"ds", "app=web,tier in (a,b)"},
		"Job":                   {"job", "app=web,tier in (a,b)"},
		"CronJob":               {"cron", "app=cron"},
		"ReplicationController": {"rc", "app=rc"},
	} {
		sel, found, err := a.Selector(ctx, ns, kind, tc.name)
		require.NoError(t, err, kind)
		require.True(t, found, kind)
		assert.Equal(t, tc.want, sel.String(), kind)

		_, found, err = a.Selector(ctx, ns, kind, "missing")
		require.NoError(t, err, kind)
		assert.False(t, found, kind)
	}

	_, _, err := a.Selector(ctx, ns, "Pod", "p")
	assert.ErrorContains(t, err, "not a well-known controller")

	budget := NewReadBudget(4, 1)
	release, err := budget.Acquire(ctx, ns)
	require.NoError(t, err)
	defer release()
	_, _, err = NewAPISelectors(fake.NewClientset(objects...), budget).Selector(ctx, ns, "Deployment", "d")
	assert.ErrorIs(t, err, ErrNamespaceBusy, "the namespace's share is taken")
}
