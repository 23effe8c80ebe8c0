package resize

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

func TestPendingRestart(t *testing.T) {
	base := func() *corev1.Pod {
		return testpod.New("p").Container("c", "1", "1Gi").ResizePolicy("c", corev1.ResourceMemory, corev1.RestartContainer).Running().Obj()
	}
	tests := []struct {
		name   string
		change func(*corev1.Pod)
		want   bool
	}{
		{"settled", func(*corev1.Pod) {}, false},
		{"memory resize not taken up yet", func(p *corev1.Pod) {
			p.Generation = 2
			p.Spec.Containers[0].Resources.Requests = testpod.List("1", "2Gi")
		}, true},
		{"memory resize in progress", func(p *corev1.Pod) {
			p.Generation, p.Status.ObservedGeneration = 2, 2
			p.Spec.Containers[0].Resources.Requests = testpod.List("1", "2Gi")
			p.Status.ContainerStatuses[0].AllocatedResources = testpod.List("1", "2Gi")
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue})
		}, true},
		{"cpu resize, cpu restarts nothing", func(p *corev1.Pod) {
			p.Generation = 2
			p.Spec.Containers[0].Resources.Requests = testpod.List("2", "1Gi")
		}, false},
		{"memory resize Infeasible", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = testpod.List("1", "2Gi")
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible})
		}, false},
		{"a resize under way, the container reports no resources", func(p *corev1.Pod) {
			p.Generation = 2
			p.Status.ContainerStatuses[0].Resources = nil
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base()
			tt.change(p)
			assert.Equal(t, tt.want, PendingRestart(p))
		})
	}
}
