package resize

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

// t0 is the tests' clock.
var t0 = time.Date(2026, 11, 26, 12, 30, 0, 0, time.UTC)

func TestHarmSince(t *testing.T) {
	base := func() *corev1.Pod { return testpod.New("p").Container("app", "1", "1Gi").Running().Obj() }
	baseline := BaselineOf(base())
	restarted := func(reason string, exit int32) *corev1.Pod {
		p := base()
		s := &p.Status.ContainerStatuses[0]
		s.RestartCount = 1
		s.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{Reason: reason, ExitCode: exit, FinishedAt: metav1.NewTime(t0)}
		return p
	}
	tests := []struct {
		name    string
		pod     func() *corev1.Pod
		harm    HarmKind
		message string
	}{
		{"nothing happened", base, "", ""},
		{"OOM-killed and restarted", func() *corev1.Pod { return restarted("OOMKilled", 137) }, HarmOOMKilled, "container app OOMKilled (exit code 137)"},
		{"restarted for another reason", func() *corev1.Pod { return restarted("Error", 1) }, HarmRestarted, "container app restarted 1 times (last terminated: Error, exit code 1)"},
		{"OOM-killed and not restarted", func() *corev1.Pod {
			p := base()
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, FinishedAt: metav1.NewTime(t0)}}
			return p
		}, HarmOOMKilled, "container app OOMKilled"},
		{"evicted by the kubelet", func() *corev1.Pod {
			p := base()
			p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
			return p
		}, HarmEvicted, "pod evicted by the kubelet: The node was low on resource: memory."},
		{"terminated by the kubelet", func() *corev1.Pod {
			p := base()
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet"})
			return p
		}, HarmEvicted, "pod terminated by the kubelet"},
		{"a disruption by someone else is no harm of the resize", func() *corev1.Pod {
			p := base()
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"})
			return p
		}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, harmed := HarmSince(tt.pod(), baseline)
			assert.Equal(t, tt.harm != "", harmed)
			assert.Equal(t, tt.harm, h.Kind)
			assert.Contains(t, h.Message, tt.message)
		})
	}
	// A restart before the resize completed (a resize that restarts its
	// container) is in the baseline: no harm.
	p := restarted("OOMKilled", 137)
	_, harmed := HarmSince(p, BaselineOf(p))
	assert.False(t, harmed)
}

func TestNotReadySince(t *testing.T) {
	p := testpod.New("p").Container("app", "1", "1Gi").Running().Obj()
	_, notReady := NotReadySince(p)
	assert.False(t, notReady)
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0)
	since, notReady := NotReadySince(p)
	assert.True(t, notReady)
	assert.Equal(t, t0, since.UTC().Truncate(time.Second))
}
