package updater

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	vpautil "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/utils/vpa"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
)

// recommenderWrites does what upstream's recommender (v1.8) does with a VPA
// it loaded: it keeps every condition it found, sets its own, and writes the
// whole status with upstream's own UpdateVpaStatusIfNeeded (a JSON patch
// "add /status", no resourceVersion).
func recommenderWrites(t *testing.T, f *fixture, loaded *vpatypes.VerticalPodAutoscaler, cpu string) {
	t.Helper()
	status := loaded.Status.DeepCopy()
	status.Recommendation = testvpa.New("web").Recommend("c", cpu, "100Mi").Obj().Status.Recommendation
	found := false
	for i := range status.Conditions {
		if status.Conditions[i].Type == vpatypes.RecommendationProvided {
			status.Conditions[i].Status, found = corev1.ConditionTrue, true
		}
	}
	if !found {
		status.Conditions = append(status.Conditions, vpatypes.VerticalPodAutoscalerCondition{Type: vpatypes.RecommendationProvided, Status: corev1.ConditionTrue})
	}
	_, err := vpautil.UpdateVpaStatusIfNeeded(f.vpa.AutoscalingV1().VerticalPodAutoscalers("default"), loaded.Name, status, &loaded.Status)
	require.NoError(t, err)
}

func hasOurs(v *vpatypes.VerticalPodAutoscaler) bool { return condition.Has(v) }

func TestConditionForEachBlockedState(t *testing.T) {
	tests := []struct {
		name     string
		pod      *corev1.Pod
		vpa      *vpatypes.VerticalPodAutoscaler
		patchErr error
		reason   string
		contains []string
	}{
		{
			name:     "Infeasible: refused at admission with a NodeCapacity cause",
			pod:      webPod("p").Running().Obj(),
			vpa:      inPlaceVPA("8", "100Mi"),
			patchErr: nodeCapacityErr(),
			reason:   condition.ReasonInfeasible,
			contains: []string{"1 pod: 1 infeasible.", "p cannot get c: requests cpu=8 memory=100Mi", "NodeCapacity", "allocatable"},
		},
		{
			name: "Infeasible: marked by the kubelet",
			pod: testpod.New("p").Container("c", "4", "100Mi").OwnedBy("apps/v1", "ReplicaSet", "web-rs").Running().
				Condition(corev1.PodResizePending, corev1.PodReasonInfeasible, `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`).Obj(),
			vpa:      inPlaceVPA("4", "100Mi"),
			reason:   condition.ReasonInfeasible,
			contains: []string{"(Infeasible: Resize is infeasible", "CPU Manager"},
		},
		{
			name: "Deferred: with the oldest pending time",
			pod: webPod("p").Running().ConditionSince(corev1.PodResizePending, corev1.PodReasonDeferred,
				"Node didn't have enough resource: cpu, requested: 2000, used: 3000, capacity: 3500", t0.Add(-12*time.Minute)).Obj(),
			vpa:      inPlaceVPA("2", "100Mi"),
			reason:   condition.ReasonDeferred,
			contains: []string{"1 pod: 1 deferred.", "oldest pending p since 2027-01-15T07:48:00Z", "Node didn't have enough resource: cpu"},
		},
		{
			name:     "Invalid: with the reason",
			pod:      testpod.New("p").Container("c", "", "").OwnedBy("apps/v1", "ReplicaSet", "web-rs").Running().Obj(), // BestEffort
			vpa:      inPlaceVPA("300m", "100Mi"),
			reason:   condition.ReasonInvalid,
			contains: []string{"1 pod: 1 invalid.", "QoS class would change from BestEffort to Burstable"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, []*corev1.Pod{tc.pod}, []*vpatypes.VerticalPodAutoscaler{tc.vpa}, fixtureOpts{})
			if tc.patchErr != nil {
				f.failResize(tc.patchErr)
			}
			require.NoError(t, f.sync("p"))
			require.NoError(t, f.syncStatus("web"))
			c := f.condition("web")
			require.NotNil(t, c)
			assert.Equal(t, corev1.ConditionTrue, c.Status)
			assert.Equal(t, tc.reason, c.Reason)
			for _, s := range tc.contains {
				assert.Contains(t, c.Message, s)
			}
			assert.Equal(t, t0, c.LastTransitionTime.Time)
		})
	}
}

func TestConditionIsWrittenOnlyWhenItChanges(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj(), webPod("q").Running().Obj()},
		[]*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "100Mi")}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	require.NoError(t, f.sync("q"))
	require.NoError(t, f.syncStatus("web"))
	require.Len(t, f.statusWrites(), 1)
	c := f.condition("web")
	require.NotNil(t, c)
	assert.Equal(t, corev1.ConditionFalse, c.Status)
	assert.Equal(t, condition.ReasonNotBlocked, c.Reason)
	assert.Equal(t, "2 pods: 2 resized or resizing.", c.Message)

	f.waitCached("web", hasOurs)
	f.clock.Step(time.Hour)
	for range 3 {
		require.NoError(t, f.sync("p"))
		require.NoError(t, f.syncStatus("web"))
	}
	assert.Len(t, f.statusWrites(), 1, "nothing changed: no write, even as time passes")

	t.Run("the patch replaces only the condition list, guarded by resourceVersion", func(t *testing.T) {
		var patch map[string]map[string]any
		require.NoError(t, json.Unmarshal([]byte(f.statusWrites()[0]), &patch))
		assert.Contains(t, patch["metadata"], "resourceVersion")
		assert.Equal(t, []string{"conditions"}, keys(patch["status"]))
	})
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestConditionWritesAreRateLimitedPerVPA(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("8", "100Mi")},
		fixtureOpts{statusMinInterval: time.Minute})
	require.NoError(t, f.syncStatus("web"))
	require.Len(t, f.statusWrites(), 1)
	f.waitCached("web", hasOurs)

	f.failResize(nodeCapacityErr())
	require.NoError(t, f.sync("p"))
	f.clock.Step(10 * time.Second)
	require.NoError(t, f.syncStatus("web"))
	assert.Len(t, f.statusWrites(), 1, "changed, but written less than a minute ago")
	after, ok := f.statusQueue.of("default/web")
	require.True(t, ok)
	assert.Equal(t, 50*time.Second, after, "written when the minute is up")

	f.clock.Step(50 * time.Second)
	require.NoError(t, f.syncStatus("web"))
	require.Len(t, f.statusWrites(), 2)
	assert.Equal(t, condition.ReasonInfeasible, f.condition("web").Reason)
}

func TestConditionSurvivesTheRecommender(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("8", "100Mi")}, fixtureOpts{})
	f.failResize(nodeCapacityErr())
	require.NoError(t, f.sync("p"))
	require.NoError(t, f.syncStatus("web"))
	require.Len(t, f.statusWrites(), 1)

	t.Run("a recommender write after loading the condition keeps it", func(t *testing.T) {
		recommenderWrites(t, f, f.getVPA("web"), "9")
		c := f.condition("web")
		require.NotNil(t, c)
		assert.Equal(t, condition.ReasonInfeasible, c.Reason)
		f.waitCached("web", func(v *vpatypes.VerticalPodAutoscaler) bool {
			return v.Status.Recommendation.ContainerRecommendations[0].Target.Cpu().String() == "9"
		})
		require.NoError(t, f.syncStatus("web"))
		assert.Len(t, f.statusWrites(), 1, "nothing to put back")
	})

	t.Run("a recommender write from before the condition drops it; it is put back", func(t *testing.T) {
		stale := f.getVPA("web")
		stale.Status.Conditions = nil // loaded before the updater wrote its condition
		recommenderWrites(t, f, stale, "10")
		require.Nil(t, f.condition("web"))
		f.waitCached("web", func(v *vpatypes.VerticalPodAutoscaler) bool { return !hasOurs(v) })
		require.NoError(t, f.syncStatus("web"))
		require.Len(t, f.statusWrites(), 2)
		c := f.condition("web")
		require.NotNil(t, c)
		assert.Equal(t, condition.ReasonInfeasible, c.Reason)
		var provided bool
		for _, other := range f.getVPA("web").Status.Conditions {
			provided = provided || other.Type == vpatypes.RecommendationProvided
		}
		assert.True(t, provided, "the recommender's conditions are kept")
	})

	t.Run("the VPA update itself queues the check", func(t *testing.T) {
		queued := f.statusQueue.count("default/web")
		stale := f.getVPA("web")
		stale.Status.Conditions = nil
		recommenderWrites(t, f, stale, "11")
		require.Eventually(t, func() bool { return f.statusQueue.count("default/web") > queued }, waitFor, every,
			"the VPA update queues its condition")
		f.waitCached("web", func(v *vpatypes.VerticalPodAutoscaler) bool { return !hasOurs(v) })
		f.clock.Step(condition.Delay)
		require.True(t, f.ctrl.processNext(f.ctx, f.ctrl.statusQueue, "condition", f.ctrl.conditions.Sync))
		assert.NotNil(t, f.condition("web"), "put back")
	})
}

func TestConditionIsRemovedWhenTheVPALeavesInPlaceMode(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "100Mi")}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	require.NoError(t, f.syncStatus("web"))
	require.NotNil(t, f.condition("web"))

	off := f.getVPA("web")
	mode := vpatypes.UpdateModeOff
	off.Spec.UpdatePolicy.UpdateMode = &mode
	_, err := f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").Update(context.Background(), off, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.waitCached("web", func(v *vpatypes.VerticalPodAutoscaler) bool { return !isInPlace(v) })
	require.NoError(t, f.sync("p"))
	require.NoError(t, f.syncStatus("web"))
	assert.Nil(t, f.condition("web"))
	assert.Len(t, f.statusWrites(), 2)
}

func TestConditionWriteErrors(t *testing.T) {
	gr := schema.GroupResource{Group: "autoscaling.k8s.io", Resource: "verticalpodautoscalers"}
	tests := []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"conflict: retried once the cache caught up", apierrors.NewConflict(gr, "web", nil), true},
		{"server error: retried", apierrors.NewInternalError(errors.New("etcd leader changed")), true},
		{"VPA gone: dropped", apierrors.NewNotFound(gr, "web"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "100Mi")}, fixtureOpts{})
			f.vpa.PrependReactor("patch", "verticalpodautoscalers", func(a clienttesting.Action) (bool, runtime.Object, error) {
				return a.GetSubresource() == "status", nil, tc.err
			})
			err := f.syncStatus("web")
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
		})
	}
}

func TestConditionReportsPause(t *testing.T) {
	vpa := inPlaceVPA("300m", "100Mi")
	vpa.Annotations = map[string]string{PausedAnnotation: "true"}
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	require.NoError(t, f.syncStatus("web"))
	c := f.condition("web")
	require.NotNil(t, c)
	assert.Equal(t, corev1.ConditionTrue, c.Status)
	assert.Equal(t, condition.ReasonPaused, c.Reason)
	assert.Contains(t, c.Message, `annotation vpa-inplace.dev/paused="true" on the VPA`)
	assert.Contains(t, c.Message, "p would be resized to c: requests cpu=300m memory=100Mi")
}

// The first condition after a start counts every pod: it is not written
// before the first pass over the pods has decided them (written earlier, it
// would say "No pods." or count some, and be rewritten moments later).
func TestFirstConditionWaitsForTheFirstPass(t *testing.T) {
	var pods []*corev1.Pod
	for _, name := range []string{"p1", "p2", "p3", "p4", "p5", "p6"} {
		pods = append(pods, webPod(name).Running().Obj())
	}
	// The first pod's decision is held until the condition is due: the
	// pass takes longer than the condition's own delay (condition.Delay).
	gate := &gatedResolver{entered: make(chan struct{}), release: make(chan struct{})}
	f := newFixture(t, pods, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "100Mi")}, fixtureOpts{
		wrapResolver: func(r Resolver) Resolver { gate.Resolver = r; return gate },
	})
	f.run()
	t.Cleanup(gate.open) // before the controller stops, should the test fail
	select {
	case <-gate.entered:
	case <-time.After(waitFor):
		t.Fatal("the first pass did not start")
	}
	f.stepUntil(condition.Delay, func() bool { return f.ctrl.statusQueue.Len() == 1 },
		"the condition is due, and waits for the first pass")
	gate.open()
	require.Eventually(t, func() bool { return len(f.statusWrites()) > 0 }, waitFor, every)
	// Later changes would be written after condition.Delay, which does not
	// pass on the test's clock: the first write is the only one.
	writes := f.statusWrites()
	require.Len(t, writes, 1, "one condition write: %v", writes)
	assert.Equal(t, "6 pods: 6 resized or resizing.", f.condition("web").Message)
}

// failingWrites is a store whose writes of one VPA's records keep failing.
type failingWrites struct {
	*records.InMemoryStore
	vpa types.UID
}

func (s failingWrites) WriteError(owner records.Owner) error {
	if owner.UID == s.vpa {
		return errors.New(`writing the records of VPA default/web into ConfigMap vpa-inplace-system/vpa-inplace-records-infeasible-uid-web: configmaps is forbidden`)
	}
	return nil
}

// Issue #32, item 5: while a VPA's records cannot be written, its condition
// says that they are not durable and what a restart would repeat.
func TestConditionSaysWhenRecordsAreNotDurable(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("8", "100Mi")},
		fixtureOpts{store: failingWrites{InMemoryStore: records.NewInMemoryStore(), vpa: "uid-web"}})
	f.failResize(nodeCapacityErr())
	require.NoError(t, f.sync("p"))
	require.NoError(t, f.syncStatus("web"))
	c := f.condition("web")
	require.NotNil(t, c)
	assert.Equal(t, condition.ReasonInfeasible, c.Reason)
	assert.Contains(t, c.Message, "Records not durable: writing the records of VPA default/web")
	assert.Contains(t, c.Message, "they are held in memory only, and after a restart or a change of leader the resizes they hold back are tried once more")
}
