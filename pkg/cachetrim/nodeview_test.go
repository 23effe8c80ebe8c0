package cachetrim

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"
)

// The node view must count a pod as the pod itself counts: every variant of
// what PodRequests reads gives the same requests, trimmed or not.
func TestNodeViewCountsAsThePodDoes(t *testing.T) {
	variants := map[string]func(*corev1.Pod){
		"a resize Deferred": func(*corev1.Pod) {},
		"a resize Infeasible counts at what the pod has": func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("8")
			p.Status.Conditions[1].Reason = corev1.PodReasonInfeasible
		},
		"a grow under way counts at the spec": func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("3")
		},
		"a shrink under way counts at the allocation": func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("10m")
			p.Status.ContainerStatuses[0].AllocatedResources[corev1.ResourceCPU] = resource.MustParse("2")
		},
		"a plain init container counts at its peak": func(p *corev1.Pod) {
			p.Spec.InitContainers[0].RestartPolicy = nil
			p.Spec.InitContainers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("4")
		},
		"overhead": func(p *corev1.Pod) {
			p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
		},
		"pod-level requests": func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
		},
		"a pod-level grow under way counts at the spec": func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
			p.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}
			p.Status.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
		},
		"a pod-level shrink under way counts at the allocation": func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
			p.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")}
			p.Status.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
		},
		"no container status yet": func(p *corev1.Pod) {
			p.Status.ContainerStatuses, p.Status.InitContainerStatuses = nil, nil
		},
	}
	// As the updater counts (resize.FitsNode).
	opts := resourcehelper.PodResourcesOptions{UseStatusResources: true, InPlacePodLevelResourcesVerticalScalingEnabled: true}
	for name, change := range variants {
		t.Run(name, func(t *testing.T) {
			full := heavyPod()
			change(full)
			want := resourcehelper.PodRequests(full, opts)
			out, err := NodeView(full.DeepCopy())
			require.NoError(t, err)
			view := out.(*corev1.Pod)
			assert.Equal(t, want, resourcehelper.PodRequests(view, opts))
			again, err := NodeView(view)
			require.NoError(t, err)
			assert.Equal(t, view, again, "idempotent")
			assert.Equal(t, full.UID, view.UID)
			assert.Equal(t, full.Generation, view.Generation)
			assert.Equal(t, full.Spec.NodeName, view.Spec.NodeName)
			assert.Equal(t, full.Status.Phase, view.Status.Phase)
		})
	}
}

func TestNodeViewDropsTheRest(t *testing.T) {
	full := heavyPod()
	out, err := NodeView(full.DeepCopy())
	require.NoError(t, err)
	view := out.(*corev1.Pod)
	assert.Nil(t, view.Labels)
	assert.Nil(t, view.Annotations)
	assert.Nil(t, view.OwnerReferences)
	assert.Nil(t, view.ManagedFields)
	assert.Nil(t, view.Spec.Containers[0].Resources.Limits)
	assert.Nil(t, view.Spec.Containers[0].ResizePolicy)
	assert.Equal(t, ptr.To(corev1.ContainerRestartPolicyAlways), view.Spec.InitContainers[0].RestartPolicy, "a sidecar stays a sidecar")
	assert.Equal(t, []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred}}, view.Status.Conditions)
	trimmed, err := Transform(heavyPod())
	require.NoError(t, err)
	before, _ := json.Marshal(full)
	after, _ := json.Marshal(trimmed)
	viewed, _ := json.Marshal(view)
	t.Logf("one pod as JSON: %d bytes whole, %d as the updater's pods cache it, %d in the node view", len(before), len(after), len(viewed))
	// About half: the pod-level status (two request lists, kept for the
	// count) is in both.
	assert.Less(t, len(viewed), len(after)*11/20)
}
