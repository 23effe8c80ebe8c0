package resize

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

func TestReadStatus(t *testing.T) {
	legacyNoGen := func(mutate func(p *corev1.Pod)) *corev1.Pod {
		p := testpod.New("p").Container("c", "100m", "100Mi").Limits("c", "200m", "200Mi").Running().ObservedGeneration(0).Obj()
		mutate(p)
		return p
	}
	tests := []struct {
		name  string
		pod   *corev1.Pod
		state State
	}{
		{"no conditions, observed generation current: none", testpod.New("p").Container("c", "1", "").Running().Obj(), StateNone},
		{"PodResizePending Deferred", testpod.New("p").Running().Condition(corev1.PodResizePending, corev1.PodReasonDeferred, "").Obj(), StateDeferred},
		{"PodResizePending Infeasible", testpod.New("p").Running().Condition(corev1.PodResizePending, corev1.PodReasonInfeasible, "").Obj(), StateInfeasible},
		{"PodResizePending with unknown reason", testpod.New("p").Running().Condition(corev1.PodResizePending, "OutOfcpu", "").Obj(), StateUnknown},
		{"PodResizeInProgress without reason", testpod.New("p").Running().Condition(corev1.PodResizeInProgress, "", "").Obj(), StateInProgress},
		{"PodResizeInProgress Error", testpod.New("p").Running().Condition(corev1.PodResizeInProgress, corev1.PodReasonError, "").Obj(), StateError},
		{"pending Infeasible wins over an older in-progress resize", testpod.New("p").Running().Condition(corev1.PodResizeInProgress, "", "").Condition(corev1.PodResizePending, corev1.PodReasonInfeasible, "").Obj(), StateInfeasible},
		// Kubernetes 1.34 (v1.34 e2e profile): the kubelet's Infeasible of
		// the last spec stays on the pod until it looks at the next one; a
		// resize sent since is not refused by it.
		{"PodResizePending Infeasible about an older generation", func() *corev1.Pod {
			p := testpod.New("p").Running().Generation(3).ObservedGeneration(2).Condition(corev1.PodResizePending, corev1.PodReasonInfeasible, "").Obj()
			p.Status.Conditions[len(p.Status.Conditions)-1].ObservedGeneration = 2
			return p
		}(), StateUnknown},
		{"PodResizePending Infeasible about the current generation", func() *corev1.Pod {
			p := testpod.New("p").Running().Generation(3).ObservedGeneration(3).Condition(corev1.PodResizePending, corev1.PodReasonInfeasible, "").Obj()
			p.Status.Conditions[len(p.Status.Conditions)-1].ObservedGeneration = 3
			return p
		}(), StateInfeasible},
		{"legacy status.resize Proposed", testpod.New("p").Running().LegacyResizeStatus("Proposed").Obj(), StateUnknown},
		{"observedGeneration behind generation", testpod.New("p").Running().Generation(2).ObservedGeneration(1).Obj(), StateUnknown},
		{"1.33 without observedGeneration, settled", legacyNoGen(func(*corev1.Pod) {}), StateNone},
		{"1.33 without observedGeneration, allocated request behind spec", legacyNoGen(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = testpod.List("150m", "100Mi")
		}), StateUnknown},
		{"1.33 without observedGeneration, actuated limit behind spec", legacyNoGen(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = testpod.List("200m", "300Mi")
		}), StateUnknown},
		{"1.33 without observedGeneration, cpu limit rounded by 1m", legacyNoGen(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].Resources.Limits = testpod.List("201m", "200Mi")
		}), StateNone},
		{"1.33 without observedGeneration, cpu limit below the kubelet minimum", legacyNoGen(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = testpod.List("5m", "200Mi")
			p.Spec.Containers[0].Resources.Requests = testpod.List("5m", "100Mi")
			p.Status.ContainerStatuses[0].AllocatedResources = testpod.List("5m", "100Mi")
		}), StateNone},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.state, ReadStatus(tc.pod).State)
		})
	}
}

func TestReadStatusSince(t *testing.T) {
	since := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		pod  *corev1.Pod
		want time.Time
	}{
		{"Deferred: the condition's lastTransitionTime", testpod.New("p").Running().ConditionSince(corev1.PodResizePending, corev1.PodReasonDeferred, "", since).Obj(), since},
		{"Infeasible: the condition's lastTransitionTime", testpod.New("p").Running().ConditionSince(corev1.PodResizePending, corev1.PodReasonInfeasible, "", since).Obj(), since},
		{"in progress: the condition's lastTransitionTime", testpod.New("p").Running().ConditionSince(corev1.PodResizeInProgress, "", "", since).Obj(), since},
		{"legacy status.resize: unknown", testpod.New("p").Running().LegacyResizeStatus(corev1.PodResizeStatusDeferred).Obj(), time.Time{}},
		{"no resize: none", testpod.New("p").Running().Obj(), time.Time{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.True(t, tc.want.Equal(ReadStatus(tc.pod).Since), "got %s", ReadStatus(tc.pod).Since)
		})
	}
}
