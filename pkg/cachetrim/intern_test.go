package cachetrim

import (
	"encoding/json"
	"reflect"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func sameMap(a, b corev1.ResourceList) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// decoded returns a pod as an informer receives it: decoded from the wire,
// owning every map.
func decoded(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	data, err := pod.Marshal()
	require.NoError(t, err)
	out := &corev1.Pod{}
	require.NoError(t, out.Unmarshal(data))
	return out
}

func TestTransformSharesEqualResourceLists(t *testing.T) {
	a := decoded(t, heavyPod())
	b := decoded(t, heavyPod())
	want, err := json.Marshal(a)
	require.NoError(t, err)
	for _, p := range []*corev1.Pod{a, b} {
		_, err := Transform(p)
		require.NoError(t, err)
	}

	ca, cb := a.Spec.Containers[0], b.Spec.Containers[0]
	assert.True(t, sameMap(ca.Resources.Requests, cb.Resources.Requests), "equal requests are one map")
	assert.True(t, sameMap(ca.Resources.Limits, cb.Resources.Limits), "equal limits are one map")
	sa, sb := a.Status.ContainerStatuses[0], b.Status.ContainerStatuses[0]
	assert.True(t, sameMap(sa.Resources.Requests, sb.Resources.Requests))
	assert.True(t, sameMap(sa.AllocatedResources, sb.AllocatedResources))
	assert.True(t, sameMap(ca.Resources.Requests, sa.Resources.Requests), "a container's spec and status share equal lists")
	assert.True(t, sameMap(a.Spec.Resources.Limits, b.Spec.Resources.Limits), "pod-level resources are shared too")

	// Sharing changes nothing a reader sees: the trimmed pod's resources
	// marshal as they arrived.
	var before, after corev1.Pod
	require.NoError(t, json.Unmarshal(want, &before))
	got, err := json.Marshal(a)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(got, &after))
	assert.Equal(t, before.Spec.Containers[0].Resources, after.Spec.Containers[0].Resources)
	assert.Equal(t, before.Status.ContainerStatuses[0].AllocatedResources, after.Status.ContainerStatuses[0].AllocatedResources)

	// Whoever changes a cached pod copies it first; the copy owns its maps.
	c := a.DeepCopy()
	c.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("3")
	assert.Equal(t, "100m", b.Spec.Containers[0].Resources.Requests.Cpu().String(), "changing a copy leaves the shared list alone")
}

func TestTransformKeepsDifferentlyWrittenQuantitiesApart(t *testing.T) {
	withMemory := func(memory string) *corev1.Pod {
		p := heavyPod()
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse(memory)
		p = decoded(t, p)
		_, err := Transform(p)
		require.NoError(t, err)
		return p
	}
	binary, decimal, other := withMemory("1Gi"), withMemory("1073741824"), withMemory("2Gi")
	rb, rd, ro := binary.Spec.Containers[0].Resources.Requests, decimal.Spec.Containers[0].Resources.Requests, other.Spec.Containers[0].Resources.Requests
	assert.False(t, sameMap(rb, rd), "1Gi and 1073741824 are equal but written differently")
	assert.False(t, sameMap(rb, ro))
	for list, want := range map[*corev1.ResourceList]string{&rb: "1Gi", &rd: "1073741824", &ro: "2Gi"} {
		q := (*list)[corev1.ResourceMemory]
		assert.Equal(t, want, q.String(), "each pod's quantity is written as it arrived")
	}
	assert.True(t, sameMap(withMemory("1Gi").Spec.Containers[0].Resources.Requests, rb), "written alike, shared")
}

func TestTransformConcurrently(t *testing.T) {
	pods := make([]*corev1.Pod, 64)
	for i := range pods {
		pods[i] = decoded(t, heavyPod())
	}
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			_, err := Transform(p)
			assert.NoError(t, err)
			assert.Equal(t, "100m", p.Spec.Containers[0].Resources.Requests.Cpu().String())
		})
	}
	wg.Wait()
}
