package updater

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
)

// newVPA is an InPlace VPA created age before the fixtures' clock.
func newVPA(age time.Duration, b *testvpa.Builder) *vpatypes.VerticalPodAutoscaler {
	v := b.Obj()
	v.CreationTimestamp = metav1.NewTime(t0.Add(-age))
	return v
}

// The demo's finding (issue #34): upstream's recommender answers a new VPA
// with its floor, lower bound, target and upper bound equal, before it has
// a single sample; the updater used to resize the running pod down to it at
// once. Now the decrease waits, the pod says why (state, event, condition)
// and is decided again when the VPA is old enough; the first real
// recommendation, an increase, goes at once.
func TestAFloorRecommendationOnANewVPAIsNotActedOn(t *testing.T) {
	vpa := newVPA(11*time.Second, testvpa.New("web").InPlace().Recommend("c", "10m", "10Mi"))
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa},
		fixtureOpts{decreaseMinHistory: time.Hour})
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.resizePatches(), "no resize to the floor")
	assert.Equal(t, "Held", f.podState("p"))
	after, queued := f.podQueue.of("default/p")
	require.True(t, queued, "decided again when the VPA is old enough")
	assert.Equal(t, time.Hour-11*time.Second, after)
	events := f.events()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], report.EventResizeHeld)
	assert.Contains(t, events[0], "cpu and memory decrease waits until")
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.events(), "said once")

	require.NoError(t, f.syncStatus("web"))
	cond := f.condition("web")
	require.NotNil(t, cond)
	assert.Equal(t, corev1.ConditionFalse, cond.Status, "held on purpose, not blocked")
	assert.Equal(t, condition.ReasonNotBlocked, cond.Reason)
	assert.Contains(t, cond.Message, "1 held back")
	assert.Contains(t, cond.Message, "Held back: p to c: requests cpu=10m memory=10Mi")

	// The first real recommendation: above the pod's requests, on a sample
	// (its upper bound at the recommender's maximum).
	v := f.getVPA("web")
	v.Status.Recommendation = testvpa.New("web").RecommendRange("c", "126m", "121Mi", "10m", "10Mi", "100", "100Gi").Obj().Status.Recommendation
	_, err := f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").UpdateStatus(context.Background(), v, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.waitCached("web", func(v *vpatypes.VerticalPodAutoscaler) bool {
		return v.Status.Recommendation.ContainerRecommendations[0].Target.Cpu().String() == "126m"
	})
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1, "the increase goes at once")
	assert.Contains(t, f.resizePatches()[0], `"cpu":"126m"`)
}

func TestAPointRecommendationOnAnOldVPAIsActedOn(t *testing.T) {
	vpa := newVPA(2*time.Hour, testvpa.New("web").InPlace().Recommend("c", "10m", "10Mi"))
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa},
		fixtureOpts{decreaseMinHistory: time.Hour})
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1)
}

func TestHeldDecreaseIsSentWhenTheVPAIsOldEnough(t *testing.T) {
	vpa := newVPA(time.Minute, testvpa.New("web").InPlace().Recommend("c", "50m", "50Mi"))
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa},
		fixtureOpts{decreaseMinHistory: time.Hour})
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.resizePatches())
	f.clock.Step(59 * time.Minute)
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1, "sent once the VPA is an hour old")
}

// The recommender's checkpoint says it holds no sample: its floor is not
// a measure, however old the VPA (the age rule alone would send it).
func TestACheckpointOfNoSampleHoldsTheFloorOnAnOldVPA(t *testing.T) {
	vpa := newVPA(2*time.Hour, testvpa.New("web").InPlace().Recommend("c", "10m", "10Mi"))
	cp := &vpatypes.VerticalPodAutoscalerCheckpoint{
		ObjectMeta: metav1.ObjectMeta{Name: "web-c", Namespace: "default"},
		Spec:       vpatypes.VerticalPodAutoscalerCheckpointSpec{VPAObjectName: "web", ContainerName: "c"},
	}
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa},
		fixtureOpts{decreaseMinHistory: time.Hour, checkpoints: []*vpatypes.VerticalPodAutoscalerCheckpoint{cp}})
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.resizePatches(), "no resize to the floor")
	assert.Equal(t, "Held", f.podState("p"))
	events := f.events()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "checkpoint holds no usage sample")
}

// historyCheckpoint is the recommender's checkpoint of web's container c:
// three hours of samples, last written at written.
func historyCheckpoint(written time.Time) *vpatypes.VerticalPodAutoscalerCheckpoint {
	return &vpatypes.VerticalPodAutoscalerCheckpoint{
		ObjectMeta: metav1.ObjectMeta{Name: "web-c", Namespace: "default"},
		Spec:       vpatypes.VerticalPodAutoscalerCheckpointSpec{VPAObjectName: "web", ContainerName: "c"},
		Status: vpatypes.VerticalPodAutoscalerCheckpointStatus{FirstSampleStart: metav1.NewTime(t0.Add(-3 * time.Hour)),
			LastSampleStart: metav1.NewTime(t0), TotalSamplesCount: 500, LastUpdateTime: metav1.NewTime(written)},
	}
}

// A checkpoint with hours of samples, written in the recommender's last
// loop, lets a decrease inside a wide range go.
func TestACheckpointWithHistoryLetsADecreaseGo(t *testing.T) {
	vpa := newVPA(10*time.Minute, testvpa.New("web").InPlace().RecommendRange("c", "50m", "50Mi", "20m", "20Mi", "10", "10Gi"))
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa},
		fixtureOpts{decreaseMinHistory: time.Hour, checkpoints: []*vpatypes.VerticalPodAutoscalerCheckpoint{historyCheckpoint(t0.Add(-30 * time.Second))}})
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1, "three hours of samples: the decrease goes")
}

// The same checkpoint, last written five minutes ago (the recommender
// stopped writing it: more than two of its 1-minute loops), proves nothing:
// the decrease waits, with no timer, and goes once the recommender writes
// the checkpoint again.
func TestAStaleCheckpointHoldsADecreaseUntilItIsWrittenAgain(t *testing.T) {
	vpa := newVPA(10*time.Minute, testvpa.New("web").InPlace().RecommendRange("c", "50m", "50Mi", "20m", "20Mi", "10", "10Gi"))
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa},
		fixtureOpts{decreaseMinHistory: time.Hour, checkpoints: []*vpatypes.VerticalPodAutoscalerCheckpoint{historyCheckpoint(t0.Add(-5 * time.Minute))}})
	for f.ctrl.vpaQueue.Len() > 0 {
		key, _ := f.ctrl.vpaQueue.Get()
		f.ctrl.vpaQueue.Done(key)
	}
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.resizePatches(), "the checkpoint proves nothing")
	assert.Equal(t, "Held", f.podState("p"))
	_, timer := f.podQueue.of("default/p")
	assert.False(t, timer, "no timer can tell when the recommender writes again")
	events := f.events()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "the recommender's checkpoint was last written at "+t0.Add(-5*time.Minute).UTC().Format(time.RFC3339))
	assert.Contains(t, events[0], "more than 2 recommender intervals (2m0s) ago")

	f.queued()                 // the pod's own add, drained
	f.ctrl.started.Store(true) // as Run does: the VPA's pods are found through its target
	got, err := f.vpa.AutoscalingV1().VerticalPodAutoscalerCheckpoints("default").Get(context.Background(), "web-c", metav1.GetOptions{})
	require.NoError(t, err)
	got.Status.LastUpdateTime = metav1.NewTime(t0)
	_, err = f.vpa.AutoscalingV1().VerticalPodAutoscalerCheckpoints("default").Update(context.Background(), got, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return f.ctrl.vpaQueue.Len() == 1 }, waitFor, 10*time.Millisecond, "the VPA is queued")
	key, _ := f.ctrl.vpaQueue.Get()
	require.NoError(t, f.ctrl.syncVPA(f.ctx, key))
	f.ctrl.vpaQueue.Done(key)
	assert.Contains(t, f.queued(), "default/p", "its pods are queued")
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1, "written again: the decrease goes")
	assert.Contains(t, f.resizePatches()[0], `"cpu":"50m"`)
}

// A checkpoint that still holds no sample while the recommender already
// wrote its first real recommendation (it writes the checkpoint later in
// its loop, or a loop later) holds no increase back.
func TestAnIncreaseGoesWhileTheCheckpointHoldsNoSample(t *testing.T) {
	vpa := newVPA(11*time.Second, testvpa.New("web").InPlace().RecommendRange("c", "126m", "121Mi", "10m", "10Mi", "100", "100Gi"))
	cp := &vpatypes.VerticalPodAutoscalerCheckpoint{
		ObjectMeta: metav1.ObjectMeta{Name: "web-c", Namespace: "default"},
		Spec:       vpatypes.VerticalPodAutoscalerCheckpointSpec{VPAObjectName: "web", ContainerName: "c"},
	}
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa},
		fixtureOpts{decreaseMinHistory: time.Hour, checkpoints: []*vpatypes.VerticalPodAutoscalerCheckpoint{cp}})
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1, "the increase goes at once")
	assert.Contains(t, f.resizePatches()[0], `"cpu":"126m"`)
}

// Ending a startup boost lowers CPU from the boost back to what the pod was
// admitted with: on a VPA minutes old, outside its resize window, it goes
// all the same.
func TestEndingABoostIsHeldNeitherByEvidenceNorByAWindow(t *testing.T) {
	pod := boostedPod(t, "p", t0)
	vpa := boostVPA("150m", 20)
	vpa.CreationTimestamp = metav1.NewTime(t0.Add(-2 * time.Minute))
	vpa.Annotations = map[string]string{"vpa-inplace.dev/resize-window": "* 09:00-10:00 UTC"}
	f := newFixture(t, []*corev1.Pod{pod}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{boost: true, decreaseMinHistory: time.Hour})
	f.clock.Step(20 * time.Second)
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1, "the boost ends")
	assert.Contains(t, f.resizePatches()[0], `"cpu":"150m"`)
}

// A decrease on a container the recommender has no sample of yet is held
// with no timer: the checkpoint's first sample queues the VPA, whose pods
// are decided again at once (before, the pod waited for the recommender's
// next status write or the resync: one recommender interval in the demo).
// Later samples, written in the recommender's rhythm, queue nothing.
func TestTheFirstSampleOfACheckpointDecidesTheHeldPodsAgain(t *testing.T) {
	vpa := newVPA(11*time.Second, testvpa.New("web").InPlace().RecommendRange("c", "50m", "50Mi", "10m", "10Mi", "100", "100Gi"))
	cp := &vpatypes.VerticalPodAutoscalerCheckpoint{
		ObjectMeta: metav1.ObjectMeta{Name: "web-c", Namespace: "default"},
		Spec:       vpatypes.VerticalPodAutoscalerCheckpointSpec{VPAObjectName: "web", ContainerName: "c"},
	}
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{vpa},
		fixtureOpts{checkpoints: []*vpatypes.VerticalPodAutoscalerCheckpoint{cp}})
	// What the VPA's own add queued, and the pod decided once.
	for f.ctrl.vpaQueue.Len() > 0 {
		key, _ := f.ctrl.vpaQueue.Get()
		f.ctrl.vpaQueue.Done(key)
	}
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.resizePatches(), "no sample yet: held")
	assert.Equal(t, "Held", f.podState("p"))
	_, timer := f.podQueue.of("default/p")
	assert.False(t, timer, "no timer can tell when a sample comes")

	setSamples := func(n int, written time.Time) {
		t.Helper()
		got, err := f.vpa.AutoscalingV1().VerticalPodAutoscalerCheckpoints("default").Get(context.Background(), "web-c", metav1.GetOptions{})
		require.NoError(t, err)
		got.Status.TotalSamplesCount = n
		got.Status.FirstSampleStart, got.Status.LastSampleStart = metav1.NewTime(t0), metav1.NewTime(t0)
		got.Status.LastUpdateTime = metav1.NewTime(written)
		_, err = f.vpa.AutoscalingV1().VerticalPodAutoscalerCheckpoints("default").Update(context.Background(), got, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	f.queued()                 // the pod's own add, drained
	f.ctrl.started.Store(true) // as Run does: the VPA's pods are found through its target
	setSamples(1, t0)
	require.Eventually(t, func() bool { return f.ctrl.vpaQueue.Len() == 1 }, waitFor, 10*time.Millisecond, "the VPA is queued")
	key, _ := f.ctrl.vpaQueue.Get()
	assert.Equal(t, "default/web", key)
	require.NoError(t, f.ctrl.syncVPA(f.ctx, key))
	f.ctrl.vpaQueue.Done(key)
	assert.Contains(t, f.queued(), "default/p", "its pods are queued")
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1, "the decrease goes on the first sample (no minimum history)")
	assert.Contains(t, f.resizePatches()[0], `"cpu":"50m"`)

	setSamples(2, t0.Add(time.Minute))
	require.Eventually(t, func() bool {
		cached, ok, _ := f.ctrl.checkpoints.GetByKey("default/web-c")
		return ok && cached.(*vpatypes.VerticalPodAutoscalerCheckpoint).Status.TotalSamplesCount == 2
	}, waitFor, 10*time.Millisecond)
	assert.Zero(t, f.ctrl.vpaQueue.Len(), "a later sample queues nothing")
}
