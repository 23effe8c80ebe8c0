package disruption

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// preempted makes p a victim of the scheduler's preemption (for a new pod,
// or for the Deferred resize of a pod of higher priority, KEP-5836): the
// DisruptionTarget condition, then the deletion; the pod stays Ready until
// its containers stop.
func preempted(p *corev1.Pod) *corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler,
		Message: "default-scheduler: preempting to accommodate a higher priority pod",
	})
	now := metav1.NewTime(t0)
	p.DeletionTimestamp = &now
	return p
}

// A pod the scheduler preempts is not a restart of ours, and it does not
// enlarge the workload either: while it terminates (still Ready) and its
// replacement starts, it is down, and only the pods that stay count towards
// the tolerance's share. Counted as one more live pod, a preempted Ready
// pod of 3 made room for two of our restarts at once (floor(0.5 x 4) = 2),
// leaving one pod of three up.
func TestPreemptedSiblingIsDownNotOurs(t *testing.T) {
	tests := []struct {
		name      string
		tolerance float64
		siblings  []*corev1.Pod
		allowed   bool
	}{
		{name: "3 pods at 0.5: a victim terminating and its replacement starting hold our restart",
			tolerance: 0.5, siblings: []*corev1.Pod{pod("p0", true), preempted(pod("p1", true)), pod("p2", true), pod("p3", false)}},
		{name: "3 pods at 0.5: a victim terminating, not replaced yet, holds our restart",
			tolerance: 0.5, siblings: []*corev1.Pod{pod("p0", true), preempted(pod("p1", true)), pod("p2", true)}},
		{name: "10 pods at 0.5: a victim and its replacement leave room",
			tolerance: 0.5, siblings: append(pods(true, true, true, true, true, true, true, true, true, false), preempted(pod("v", true))), allowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(Config{Tolerance: tt.tolerance}, clocktesting.NewFakeClock(t0))
			v := b.Reserve(Request{Pod: tt.siblings[0], Workload: "w", Siblings: tt.siblings})
			assert.Equal(t, tt.allowed, v.Allowed, v.Message)
			if !tt.allowed {
				assert.Equal(t, "the eviction tolerance", v.Blocker)
			}
			for _, p := range tt.siblings[1:] {
				assert.False(t, b.Held(p.UID), "%s: another's disruption holds no place of ours", p.Name)
			}
		})
	}
}

// A victim's deletion is the scheduler's: it is never adopted as a restart
// under way, whatever its containers did before.
func TestPreemptedPodIsNoRestartUnderWay(t *testing.T) {
	p := pod("p", true)
	p.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	p.Status.ContainerStatuses[0].RestartCount = 1
	_, under := RestartUnderWay(preempted(p), 0, t0)
	assert.False(t, under)
}
