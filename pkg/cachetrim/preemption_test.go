package cachetrim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
)

// victimPod is heavyPod preempted by the scheduler: what the updater reads
// to tell a victim of a resize preemption (KEP-5836) apart, and the
// priorities it compares.
func victimPod() *corev1.Pod {
	p := heavyPod()
	p.Spec.Priority = ptr.To[int32](100)
	p.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever)
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonPreemptionByScheduler, Message: "default-scheduler: preempting to accommodate a higher priority pod", LastTransitionTime: started})
	return p
}

// Both caches keep what resize preemption reads: the victim's
// DisruptionTarget condition (before the cache dropped it, no victim was
// ever seen), each pod's priority and preemption policy.
func TestCachesKeepWhatResizePreemptionReads(t *testing.T) {
	for name, transform := range map[string]func(any) (any, error){"Transform": Transform, "NodeView": NodeView} {
		t.Run(name, func(t *testing.T) {
			out, err := transform(victimPod())
			require.NoError(t, err)
			p := out.(*corev1.Pod)
			since, ok := resize.PreemptedByScheduler(p)
			assert.True(t, ok, "the victim is seen as one")
			assert.True(t, since.Equal(started.Time), "since when: %s", since)
			assert.Equal(t, int32(100), resize.PodPriority(p))
			assert.Equal(t, ptr.To(corev1.PreemptNever), p.Spec.PreemptionPolicy)
			again, err := transform(p)
			require.NoError(t, err)
			assert.Equal(t, p, again, "idempotent")
		})
	}
}
