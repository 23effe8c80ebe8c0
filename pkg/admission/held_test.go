package admission

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

const recordsNamespace = "vpa-inplace-system"

var holdAt = time.Date(2026, 11, 26, 12, 30, 0, 0, time.UTC)

// safetyConfigMap is the updater's safety records ConfigMap of a VPA, as
// records.ConfigMapStore writes it: the hold, keyed by the VPA's UID, and a
// canary's record beside it.
func safetyConfigMap(t testing.TB, namespace, name string, uid types.UID, hold *records.Record) *corev1.ConfigMap {
	t.Helper()
	value, left, err := records.EncodeCompact(map[types.UID]*records.Record{
		uid: hold,
		"uid-pod-0": {Kind: records.KindCanary, Attempted: resources.Resources{"app": {Requests: testpod.List("", "50Mi")}},
			From: resources.Resources{"app": {Requests: testpod.List("", "100Mi")}}, RecordedAt: holdAt},
	}, records.DefaultMaxCompactBytes)
	require.NoError(t, err)
	require.Empty(t, left)
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: records.ConfigMapName(records.StoreSafety, uid), Namespace: recordsNamespace,
			Labels: map[string]string{records.LabelStore: records.StoreSafety},
			Annotations: map[string]string{records.AnnotationVPANamespace: namespace, records.AnnotationVPAName: name,
				records.AnnotationVPAUID: string(uid)},
		},
		Data: map[string]string{records.ConfigMapDataKey: value},
	}
}

// holdsOver returns Holds over an informer of the records namespace of a
// cluster holding objs, wired as the admission controller wires it for the
// records of the default prefix, and the informer and the cluster.
func holdsOver(t testing.TB, objs ...runtime.Object) (*Holds, cache.SharedIndexInformer, *fake.Clientset) {
	return holdsOfPrefix(t, records.DefaultConfigMapPrefix, objs...)
}

// holdsOfPrefix is holdsOver for the records of prefix (--records-prefix).
func holdsOfPrefix(t testing.TB, prefix string, objs ...runtime.Object) (*Holds, cache.SharedIndexInformer, *fake.Clientset) {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	kube := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithNamespace(recordsNamespace), informers.WithTransform(HoldsTransform(prefix)),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = HoldsSelector() }))
	informer := factory.Core().V1().ConfigMaps().Informer()
	holds, err := NewHolds(logger, informer)
	require.NoError(t, err)
	factory.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), holds.HasSynced))
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	return holds, informer, kube
}

// memoryHold holds app's memory request at 50Mi (from 100Mi) and its limit
// at 100Mi (from 200Mi), for 24h from holdAt.
func memoryHold() *records.Record {
	return &records.Record{Kind: records.KindHarmHold,
		Attempted: resources.Resources{"app": {Requests: testpod.List("", "50Mi"), Limits: testpod.List("", "100Mi")}},
		From:      resources.Resources{"app": {Requests: testpod.List("", "100Mi"), Limits: testpod.List("", "200Mi")}},
		Message:   "web-0: container app OOMKilled", RecordedAt: holdAt, Until: holdAt.Add(24 * time.Hour), Holds: 1}
}

// A pod created while its VPA's hold after harm stands is not given the
// values the hold holds: each value the recommendation puts at or below
// the held one gets what it was before the harm, as the updater holds the
// decrease of the pods it resizes, and the pod's annotation says so.
func TestNewPodsAreNotGivenHeldValues(t *testing.T) {
	list := testpod.List
	web := func(cpu, mem string) *vpatypes.VerticalPodAutoscaler {
		return testvpa.New("web").InPlace().Recommend("app", cpu, mem).Obj()
	}
	legacy := memoryHold()
	legacy.From, legacy.Until = nil, time.Time{}
	const platform = "platform-vpa-inplace-records-"
	named := func(prefix string) *corev1.ConfigMap {
		cm := safetyConfigMap(t, "default", "web", "uid-web", memoryHold())
		cm.Name = records.ConfigMapNameWithPrefix(prefix, records.StoreSafety, "uid-web")
		return cm
	}
	tests := []struct {
		name string
		// prefix is the admission controller's --records-prefix ("": the
		// default).
		prefix  string
		vpa     *vpatypes.VerticalPodAutoscaler
		cm      *corev1.ConfigMap
		now     time.Time
		want    corev1.ResourceRequirements
		wantAnn string
	}{
		{
			name: "the recommendation at the held values: the values before the harm",
			vpa:  web("300m", "50Mi"), cm: safetyConfigMap(t, "default", "web", "uid-web", memoryHold()), now: holdAt.Add(time.Hour),
			want: requirements(list("300m", "100Mi"), list("600m", "200Mi")),
			wantAnn: "held after harm (web-0: container app OOMKilled) until 2026-11-27T12:30:00Z: " +
				"container app memory request 100Mi (recommended 50Mi); container app memory limit 200Mi (recommended 100Mi)",
		},
		{
			name: "the recommendation below the held values: the same",
			vpa:  web("300m", "40Mi"), cm: safetyConfigMap(t, "default", "web", "uid-web", memoryHold()), now: holdAt.Add(time.Hour),
			want: requirements(list("300m", "100Mi"), list("600m", "200Mi")),
			wantAnn: "held after harm (web-0: container app OOMKilled) until 2026-11-27T12:30:00Z: " +
				"container app memory request 100Mi (recommended 40Mi); container app memory limit 200Mi (recommended 80Mi)",
		},
		{
			name: "the recommendation risen above the held values: it goes",
			vpa:  web("300m", "60Mi"), cm: safetyConfigMap(t, "default", "web", "uid-web", memoryHold()), now: holdAt.Add(time.Hour),
			want: requirements(list("300m", "60Mi"), list("600m", "120Mi")),
		},
		{
			name: "the hold has ended: the recommendation goes",
			vpa:  web("300m", "50Mi"), cm: safetyConfigMap(t, "default", "web", "uid-web", memoryHold()), now: holdAt.Add(24 * time.Hour),
			want: requirements(list("300m", "50Mi"), list("600m", "100Mi")),
		},
		{
			name: "a hold written before holds kept what they held from: the pod keeps its own values",
			vpa:  web("300m", "50Mi"), cm: safetyConfigMap(t, "default", "web", "uid-web", legacy), now: holdAt.Add(time.Hour),
			want: requirements(list("300m", "100Mi"), list("600m", "200Mi")),
			wantAnn: "held after harm (web-0: container app OOMKilled) until 2026-11-27T12:30:00Z: " +
				"container app memory request left as the pod has it (recommended 50Mi); container app memory limit left as the pod has it (recommended 100Mi)",
		},
		{
			name:   "the records of an install named after its release (--records-prefix) are read with its prefix",
			prefix: platform, vpa: web("300m", "50Mi"), now: holdAt.Add(time.Hour), cm: named(platform),
			want: requirements(list("300m", "100Mi"), list("600m", "200Mi")),
			wantAnn: "held after harm (web-0: container app OOMKilled) until 2026-11-27T12:30:00Z: " +
				"container app memory request 100Mi (recommended 50Mi); container app memory limit 200Mi (recommended 100Mi)",
		},
		{
			name: "another install's records (another prefix) are not read",
			vpa:  web("300m", "50Mi"), now: holdAt.Add(time.Hour), cm: named(platform),
			want: requirements(list("300m", "50Mi"), list("600m", "100Mi")),
		},
		{
			name:   "the records of the default name are not read by an install of another prefix",
			prefix: platform, vpa: web("300m", "50Mi"), now: holdAt.Add(time.Hour), cm: named(records.DefaultConfigMapPrefix),
			want: requirements(list("300m", "50Mi"), list("600m", "100Mi")),
		},
		{
			name: "a name that is no records prefix before the VPA's is not believed",
			vpa:  web("300m", "50Mi"), now: holdAt.Add(time.Hour),
			cm: func() *corev1.ConfigMap {
				cm := safetyConfigMap(t, "default", "web", "uid-web", memoryHold())
				cm.Name = records.StoreSafety + "-uid-web"
				return cm
			}(),
			want: requirements(list("300m", "50Mi"), list("600m", "100Mi")),
		},
		{
			name: "a ConfigMap naming another VPA of that UID is not believed",
			vpa:  web("300m", "50Mi"), cm: safetyConfigMap(t, "default", "db", "uid-web", memoryHold()), now: holdAt.Add(time.Hour),
			want: requirements(list("300m", "50Mi"), list("600m", "100Mi")),
		},
		{
			name: "a ConfigMap whose name is not its VPA's is not believed",
			vpa:  web("300m", "50Mi"), now: holdAt.Add(time.Hour),
			cm: func() *corev1.ConfigMap {
				cm := safetyConfigMap(t, "default", "web", "uid-web", memoryHold())
				cm.Name = records.ConfigMapName(records.StoreSafety, "uid-other")
				return cm
			}(),
			want: requirements(list("300m", "50Mi"), list("600m", "100Mi")),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.now
			prefix := tc.prefix
			if prefix == "" {
				prefix = records.DefaultConfigMapPrefix
			}
			holds, _, _ := holdsOfPrefix(t, prefix, tc.cm)
			h, _ := testHandler{vpas: []*vpatypes.VerticalPodAutoscaler{tc.vpa}, holds: holds,
				now: func() time.Time { return now }}.build(t)
			pod := podJSON("", appContainer)
			resp := response(t, post(t, h, MutatePodsPath, podReview("CREATE", pod)))
			require.True(t, resp.Allowed)
			got := applyPatch(t, pod, resp)
			assertResources(t, tc.want, got.Spec.Containers[0].Resources, "app")
			assert.Equal(t, tc.wantAnn, got.Annotations[HoldAnnotation])
		})
	}
}

// The hold goes with its ConfigMap: when the updater deletes the record
// (the hold lifted, or the VPA gone), new pods get the recommendation.
func TestHoldsFollowTheirConfigMaps(t *testing.T) {
	cm := safetyConfigMap(t, "default", "web", "uid-web", memoryHold())
	holds, informer, kube := holdsOver(t, cm)

	vpa := testvpa.New("web").InPlace().Obj()
	hold, ok := holds.HoldOf(vpa)
	require.True(t, ok)
	assert.Equal(t, "app: requests memory=50Mi limits memory=100Mi", hold.Attempted.String())
	cached, ok, err := informer.GetStore().GetByKey(recordsNamespace + "/" + cm.Name)
	require.NoError(t, err)
	require.True(t, ok)
	trimmed := cached.(*corev1.ConfigMap)
	d, err := records.DecodeCompact(trimmed.Data[records.ConfigMapDataKey], records.DecodeOptions{})
	require.NoError(t, err)
	assert.Len(t, d.Records, 1, "the cache keeps the hold alone, not the canaries beside it")

	require.NoError(t, kube.CoreV1().ConfigMaps(recordsNamespace).Delete(context.Background(), cm.Name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { _, ok := holds.HoldOf(vpa); return !ok }, 10*time.Second, 10*time.Millisecond)
}

// Holds is synced only once its handler has had every ConfigMap of the
// first list, not when the informer's store has them: a webhook that
// answered on the informer's word could give a new pod the held values
// (and holdsOfPrefix's callers would read no hold).
func TestHoldsAreSyncedWhenTheirHandlerIs(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	inf := &handlerSyncInformer{}
	holds, err := NewHolds(logger, inf)
	require.NoError(t, err)
	assert.False(t, holds.HasSynced(), "synced before the handler has the first list")
	inf.synced.Store(true)
	assert.True(t, holds.HasSynced())
	assert.False(t, (*Holds)(nil).HasSynced(), "a nil Holds is never synced")
}

// handlerSyncInformer is an informer whose store has synced (HasSynced)
// and whose handler registration says synced only once told.
type handlerSyncInformer struct {
	cache.SharedIndexInformer
	synced atomic.Bool
}

func (i *handlerSyncInformer) HasSynced() bool { return true }

func (i *handlerSyncInformer) AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return handlerRegistration{i: i}, nil
}

type handlerRegistration struct {
	cache.ResourceEventHandlerRegistration
	i *handlerSyncInformer
}

func (r handlerRegistration) HasSynced() bool { return r.i.synced.Load() }
