package resize

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

func TestRestartedBy(t *testing.T) {
	pod := testpod.New("p").Container("app", "1", "2Gi").ResizePolicy("app", corev1.ResourceMemory, corev1.RestartContainer).
		Container("side", "100m", "100Mi").Obj()
	mem := func(app, side string) resources.Resources {
		return resources.Resources{"app": {Requests: testpod.List("1", app)}, "side": {Requests: testpod.List("100m", side)}}
	}
	assert.Equal(t, []string{"app"}, RestartedBy(pod, mem("2Gi", "100Mi"), mem("1Gi", "50Mi")), "memory of app: RestartContainer")
	assert.Empty(t, RestartedBy(pod, mem("2Gi", "100Mi"), mem("2Gi", "50Mi")), "side: NotRequired")
	cpu := resources.Resources{"app": {Requests: testpod.List("2", "2Gi")}}
	assert.Empty(t, RestartedBy(pod, mem("2Gi", "100Mi"), cpu), "cpu of app: NotRequired")

	t.Run("a pod-level limit a container inherits", func(t *testing.T) {
		p := testpod.New("p").Container("app", "1", "1Gi").ResizePolicy("app", corev1.ResourceMemory, corev1.RestartContainer).
			PodLevel("1", "1Gi", "2", "2Gi").Obj()
		from := resources.Resources{resources.PodLevel: {Limits: testpod.List("", "2Gi")}}
		to := resources.Resources{resources.PodLevel: {Limits: testpod.List("", "3Gi")}}
		assert.Equal(t, []string{"app"}, RestartedBy(p, from, to))
	})
}

func TestBaselineAllowingTheRestartAResizeCauses(t *testing.T) {
	pod := func(restarts int32) *corev1.Pod {
		p := testpod.New("p").Container("app", "1", "1Gi").Running().Obj()
		p.Status.ContainerStatuses[0].RestartCount = restarts
		p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 137, FinishedAt: metav1.NewTime(t0)}
		return p
	}
	before := BaselineOf(pod(2))
	seen := BaselineOf(pod(2)) // completed, the restart not shown yet
	allowing := seen.Allowing(before, []string{"app"})
	_, harmed := HarmSince(pod(3), allowing)
	assert.False(t, harmed, "the restart the resize causes")
	h, harmed := HarmSince(pod(4), allowing)
	assert.True(t, harmed, "one more")
	assert.Equal(t, HarmRestarted, h.Kind)
	assert.Equal(t, t0, h.At, "one beyond: its termination tells when")
	h, _ = HarmSince(pod(5), allowing)
	assert.True(t, h.At.IsZero(), "two beyond: which one was when is not told")
	assert.Equal(t, RestartCounts{"app": 3}, allowing.Counts())
	assert.Equal(t, RestartCounts{"app": 2}, seen.Counts(), "the baseline allowing it is another")

	shown := BaselineOf(pod(3)).Allowing(before, []string{"app"})
	assert.Equal(t, RestartCounts{"app": 3}, shown.Counts(), "shown already: allowed once, not twice")

	assert.True(t, RestartedSince(pod(3), before, []string{"app"}))
	assert.False(t, RestartedSince(pod(2), before, []string{"app"}))

	back := BaselineOfCounts(allowing.Counts())
	assert.Equal(t, allowing.Counts(), back.Counts())
	assert.False(t, BaselineOfCounts(nil).Known())
}

func TestTerminatedAfter(t *testing.T) {
	pod := func(reason string, at time.Time) *corev1.Pod {
		p := testpod.New("p").Container("app", "1", "1Gi").Running().Obj()
		p.Status.ContainerStatuses[0].RestartCount = 9
		p.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: reason, ExitCode: 137, FinishedAt: metav1.NewTime(at)}
		return p
	}
	_, harmed := TerminatedAfter(pod("OOMKilled", t0), t0)
	assert.False(t, harmed, "terminated before")
	h, harmed := TerminatedAfter(pod("OOMKilled", t0.Add(time.Second)), t0)
	assert.True(t, harmed)
	assert.Equal(t, HarmOOMKilled, h.Kind)
	assert.Equal(t, t0.Add(time.Second), h.At)
	h, _ = TerminatedAfter(pod("Error", t0.Add(time.Second)), t0)
	assert.Equal(t, HarmRestarted, h.Kind)
	assert.Contains(t, h.Message, "container app terminated (Error, exit code 137)")
}
