//go:build e2e

package e2e

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

// A pod admitted before its namespace's LimitRange was tightened, resized
// in place by the rule of its API server's LimitRanger. The pod's cpu limit
// is 10 times its request; then a LimitRange allows 4. The VPA controls the
// requests only, keeps the cpu and raises the memory. Up to 1.37 LimitRanger
// checks the resized pod whole: the updater raises the cpu request to 250m
// (limit / 4) in the same resize, else the resize would be refused. From
// 1.38 it checks only what a resize changes: the cpu, left as it is, is not
// checked, and the updater leaves it at 100m. Either way the resize is
// accepted at once, in place. The container has no memory limit, which the
// hollow kubelets (their runtime reports no resources) report as
// limits.memory: 0: the memory request still follows the recommendation,
// not that 0.
func TestResizeFollowsTheServersLimitRanger(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	pods := deploy(t, ns, workload{name: "web", requests: rl("100m", "100Mi"), limits: rl("1", "")})
	before := snap(pods)
	_, err := kube.CoreV1().LimitRanges(ns).Create(ctxFor(t), &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "ratio"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	requestsOnly := vpatypes.ContainerControlledValuesRequestsOnly
	newVPA(t, ns, "web", vpatypes.UpdateModeInPlace, &vpatypes.PodResourcePolicy{ContainerPolicies: []vpatypes.ContainerResourcePolicy{{
		ContainerName: "app", ControlledValues: &requestsOnly,
	}}})
	recommend(t, ns, "web", "100m", "200Mi")

	cpu := "250m"
	if limitRangerChecksOnlyChanges(t) {
		cpu = "100m"
	}
	got := waitResized(t, ns, pods[0].Name, cpu, "200Mi")
	assert.Equal(t, "1", ptr.To(got.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]).String(), "the limit is the container's own")
	assert.NotContains(t, got.Spec.Containers[0].Resources.Limits, corev1.ResourceMemory, "no memory limit")
	assert.Equal(t, pods[0].Generation+1, got.Generation, "one resize")
	waitEvent(t, ns, pods[0].Name, eventSent, 1)
	requireNotDisrupted(t, ns, "web", before)
}
