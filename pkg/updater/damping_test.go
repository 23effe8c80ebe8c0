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
)

// flappingVPA recommends mem for container c, inside a wide range.
func flappingVPA(mem string) *vpatypes.VerticalPodAutoscaler {
	return testvpa.New("web").InPlace().RecommendRange("c", "100m", mem, "50m", "50Mi", "1", "1Gi").Obj()
}

// The steady-noise finding of issue #23: the recommender's memory target
// flapped between two values 14 % apart and the pod was resized at every
// flap. The flap back within --resize-reversal-hold is held; after it the
// pod follows, and a change the same way is never held.
func TestAFlappingRecommendationIsNotFollowedBack(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{flappingVPA("145Mi")},
		fixtureOpts{reversalHold: 15 * time.Minute})
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1, "up to 145Mi")
	f.waitPodMemory("p", "145Mi")

	f.setMemoryRecommendation("web", "127Mi")
	f.clock.Step(2 * time.Minute)
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1, "the flap back is held")
	after, queued := f.podQueue.of("default/p")
	require.True(t, queued, "decided again when the hold ends")
	assert.Equal(t, 13*time.Minute, after)
	assert.Equal(t, "Resized", string(f.podState("p")), "a held reversal leaves the pod counted as resized")

	f.setMemoryRecommendation("web", "145Mi")
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 1, "back where the pod is: nothing to do")

	f.setMemoryRecommendation("web", "127Mi")
	f.clock.Step(14 * time.Minute)
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 2, "after the hold the pod follows")
}

func TestWithoutAReversalHoldEveryFlapIsFollowed(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{flappingVPA("145Mi")}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	f.waitPodMemory("p", "145Mi")
	f.setMemoryRecommendation("web", "127Mi")
	require.NoError(t, f.sync("p"))
	assert.Len(t, f.resizePatches(), 2)
}

// setMemoryRecommendation changes the memory target of container c of vpa,
// keeping its wide range, and waits for the cache to see it.
func (f *fixture) setMemoryRecommendation(vpa, mem string) {
	f.t.Helper()
	v := f.getVPA(vpa)
	v.Status.Recommendation = flappingVPA(mem).Status.Recommendation
	_, err := f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").UpdateStatus(context.Background(), v, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	f.waitCached(vpa, func(v *vpatypes.VerticalPodAutoscaler) bool {
		return v.Status.Recommendation.ContainerRecommendations[0].Target.Memory().String() == mem
	})
}

// waitPodMemory waits for the cache to see the pod's memory request at mem.
func (f *fixture) waitPodMemory(name, mem string) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		p, err := f.ctrl.pods.Pods("default").Get(name)
		return err == nil && p.Spec.Containers[0].Resources.Requests.Memory().String() == mem
	}, waitFor, 10*time.Millisecond)
}

// podState is the tracked state of a pod.
func (f *fixture) podState(name string) string {
	f.t.Helper()
	p, err := f.ctrl.pods.Pods("default").Get(name)
	require.NoError(f.t, err)
	st, ok := f.ctrl.tracker.Get(p.UID)
	require.True(f.t, ok)
	return string(st.State)
}
