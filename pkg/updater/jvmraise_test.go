package updater

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
)

var dynamicHeap = corev1.EnvVar{Name: "STRIMZI_DYNAMIC_HEAP_PERCENTAGE", Value: "50"}

// raisingVPA recommends 2Gi for c: with the pods' ratio of 2, a 4Gi limit.
func raisingVPA() *vpatypes.VerticalPodAutoscaler {
	return testvpa.New("web").InPlace().Recommend("c", "500m", "2Gi").Obj()
}

// A memory raise in place is sent, and says that the heap stays until the
// container restarts.
func TestJVMMemoryRaiseInPlaceSaysTheHeapStays(t *testing.T) {
	f := newFixture(t, []*corev1.Pod{brokerPod("p", dynamicHeap)}, []*vpatypes.VerticalPodAutoscaler{raisingVPA()}, fixtureOpts{})
	require.NoError(t, f.sync("p"))
	require.Len(t, f.resizePatches(), 1)
	assert.JSONEq(t, `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"500m","memory":"2Gi"},"limits":{"memory":"4Gi"}}}]}}`, f.resizePatches()[0])
	events := f.events()
	require.Len(t, events, 1)
	assert.Contains(t, events[0], "Normal "+report.EventResizeSent+" Resizing in place to c: requests cpu=500m memory=2Gi limits memory=4Gi; container c: heap stays 1Gi until the container restarts (Strimzi's dynamic heap, 50% of the memory limit at start (2Gi))")
}

// With memory resizePolicy RestartContainer, a raise restarts the JVM,
// paced as every restarting resize is, and the heap follows: the new limit
// is recorded as the one it started with.
func TestJVMMemoryRaiseWithRestartIsPacedAndRecordsTheNewBasis(t *testing.T) {
	var pods []*corev1.Pod
	for i := range 2 {
		p := brokerPod(fmt.Sprintf("p%d", i), dynamicHeap)
		p.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
		pods = append(pods, p)
	}
	f := newFixture(t, pods, []*vpatypes.VerticalPodAutoscaler{raisingVPA()}, fixtureOpts{tolerance: 0.5})
	require.NoError(t, f.sync("p0"))
	require.NoError(t, f.sync("p1"))
	require.Len(t, f.resizePatches(), 1, "one broker restarted at a time")
	assert.Equal(t, []string{"p0"}, f.resizedPods())
	events := f.events()
	require.NotEmpty(t, events)
	assert.Contains(t, events[0], "; container c: heap 2Gi after the restart this resize causes (Strimzi's dynamic heap, 50% of the memory limit at start (4Gi))")

	r, ok := f.ctrl.jvmStore.GetFor(webOwner, "uid-p0")
	require.True(t, ok)
	limit, restarts, _ := r.ContainerStart("c")
	assert.Equal(t, "2Gi", limit.String())
	assert.Equal(t, int32(0), restarts)

	// The kubelet restarts it with its new limit: a start, and its basis.
	f.waitCachedMemory("p0", "2Gi")
	f.kubeletOn("p0", func(p *corev1.Pod) {
		p.Status.ObservedGeneration = p.Generation
		p.Status.ContainerStatuses[0].Resources = p.Spec.Containers[0].Resources.DeepCopy()
		p.Status.ContainerStatuses[0].RestartCount = 1
	})
	require.NoError(t, f.sync("p0"))
	r, _ = f.ctrl.jvmStore.GetFor(webOwner, "uid-p0")
	limit, restarts, _ = r.ContainerStart("c")
	assert.Equal(t, "4Gi", limit.String())
	assert.Equal(t, int32(1), restarts)
	assert.Equal(t, int64(4<<30), mustLimitAtStart(t, f, "p0"))
}

// mustLimitAtStart is the limit at start the updater reads for c of the
// named pod now.
func mustLimitAtStart(t *testing.T, f *fixture, name string) int64 {
	t.Helper()
	p, err := f.ctrl.pods.Pods("default").Get(name)
	require.NoError(t, err)
	v, err := f.ctrl.vpas.VerticalPodAutoscalers("default").Get("web")
	require.NoError(t, err)
	j := f.ctrl.jvmOf(f.ctx, p, v)
	require.NotNil(t, j)
	return j.LimitAtStart["c"]
}
