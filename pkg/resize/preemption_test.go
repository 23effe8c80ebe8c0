package resize

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

func TestPreemptedByScheduler(t *testing.T) {
	at := time.Date(2026, 9, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"a running pod", testpod.New("p").Running().Obj(), false},
		{"DisruptionTarget PreemptionByScheduler", testpod.New("p").Running().
			ConditionSince(corev1.DisruptionTarget, corev1.PodReasonPreemptionByScheduler, "default-scheduler: preempting to accommodate a higher priority pod", at).Obj(), true},
		{"DisruptionTarget of an eviction", testpod.New("p").Running().
			Condition(corev1.DisruptionTarget, "EvictionByEvictionAPI", "").Obj(), false},
		{"DisruptionTarget of the kubelet's critical-pod preemption", testpod.New("p").Running().
			Condition(corev1.DisruptionTarget, corev1.PodReasonTerminationByKubelet, "Pod was preempted by Kubelet to accommodate a critical pod.").Obj(), false},
		{"DisruptionTarget False", func() *corev1.Pod {
			p := testpod.New("p").Running().Condition(corev1.DisruptionTarget, corev1.PodReasonPreemptionByScheduler, "").Obj()
			p.Status.Conditions[len(p.Status.Conditions)-1].Status = corev1.ConditionFalse
			return p
		}(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			since, ok := PreemptedByScheduler(tc.pod)
			assert.Equal(t, tc.want, ok)
			if tc.want {
				assert.True(t, since.Equal(at), "since %s", since)
			}
		})
	}
}

func TestMayHavePreemptedFor(t *testing.T) {
	deferred := func(priority *int32) *testpod.Builder {
		b := testpod.New("broker").Container("c", "1", "1Gi").Running().Condition(corev1.PodResizePending, corev1.PodReasonDeferred, "Node didn't have enough resource: cpu")
		b.Obj().Spec.Priority = priority
		return b
	}
	victim := func(priority *int32) *corev1.Pod {
		p := testpod.New("batch").Container("c", "2", "1Gi").Running().Obj()
		p.Spec.Priority = priority
		return p
	}
	tests := []struct {
		name   string
		pod    *corev1.Pod
		victim *corev1.Pod
		want   bool
	}{
		{"higher priority, Deferred, same node", deferred(ptr.To[int32](1000)).Obj(), victim(ptr.To[int32](0)), true},
		{"higher priority against a victim without priority", deferred(ptr.To[int32](1)).Obj(), victim(nil), true},
		{"equal priority: the scheduler never preempts", deferred(ptr.To[int32](0)).Obj(), victim(nil), false},
		{"lower priority", deferred(ptr.To[int32](0)).Obj(), victim(ptr.To[int32](5)), false},
		{"preemptionPolicy Never", func() *corev1.Pod {
			p := deferred(ptr.To[int32](1000)).Obj()
			p.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever)
			return p
		}(), victim(nil), false},
		{"another node", deferred(ptr.To[int32](1000)).Obj(), func() *corev1.Pod {
			v := victim(nil)
			v.Spec.NodeName = "node-2"
			return v
		}(), false},
		{"resize not Deferred", testpod.New("broker").Container("c", "1", "1Gi").Running().Obj(), victim(nil), false},
		{"resize Infeasible: nothing to make room for", func() *corev1.Pod {
			p := testpod.New("broker").Container("c", "1", "1Gi").Running().Condition(corev1.PodResizePending, corev1.PodReasonInfeasible, "").Obj()
			p.Spec.Priority = ptr.To[int32](1000)
			return p
		}(), victim(nil), false},
		{"the pod itself", deferred(ptr.To[int32](1000)).Obj(), deferred(ptr.To[int32](1000)).Obj(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, MayHavePreemptedFor(tc.pod, tc.victim))
		})
	}
}
