package disruption

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

// A sidecar that a resize of its memory restarts counts as an app
// container does: its restart is in status.initContainerStatuses.
func TestRestartUnderWayOfASidecar(t *testing.T) {
	now := t0
	pod := func() *corev1.Pod {
		p := testpod.New("p").Container("c", "1", "1Gi").Sidecar("proxy", "100m", "64Mi").
			ResizePolicy("proxy", corev1.ResourceMemory, corev1.RestartContainer).Running().Obj()
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-time.Hour))
		return p
	}
	p := pod()
	_, ok := RestartUnderWay(p, 10*time.Second, now)
	assert.False(t, ok, "settled")

	p = pod()
	p.Generation = 2
	p.Spec.InitContainers[0].Resources.Requests = testpod.List("100m", "128Mi")
	since, ok := RestartUnderWay(p, 10*time.Second, now)
	assert.True(t, ok, "a restarting resize of the sidecar not taken up yet")
	assert.Equal(t, now, since)

	p = pod()
	p.Status.InitContainerStatuses[0].RestartCount = 1
	p.Status.InitContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(now.Add(-5 * time.Second))
	since, ok = RestartUnderWay(p, 10*time.Second, now)
	assert.True(t, ok, "the sidecar restarted 5s ago, without the Ready condition showing it")
	assert.Equal(t, now.Add(-5*time.Second), since)

	p = pod()
	p.Spec.InitContainers[0].ResizePolicy = nil
	p.Status.InitContainerStatuses[0].RestartCount = 1
	p.Status.InitContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(now.Add(-5 * time.Second))
	_, ok = RestartUnderWay(p, 10*time.Second, now)
	assert.False(t, ok, "a sidecar no resize restarts restarted")
}
