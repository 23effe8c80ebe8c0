package updater

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/condition"
)

// A pod with pod-level resources (requests cpu 1, memory 1Gi; limits 2,
// 2Gi) whose container c asks 800m, 512Mi and a sidecar-like container
// sharing the pod's resources; the VPA recommends c 1200m, 768Mi: it only
// fits if the pod level moves too. What is sent depends on what the pod's
// node declares, read through the updater's caches (trimmed as the binary
// trims them: the pod-level status must survive).
func TestPodLevelResizeFollowsTheNode(t *testing.T) {
	pod := func() *corev1.Pod {
		return testpod.New("p").Container("c", "800m", "512Mi").Container("shared", "", "").
			OwnedBy("apps/v1", "ReplicaSet", "web-rs").PodLevel("1", "1Gi", "2", "2Gi").Running().PodLevelStatus().Obj()
	}
	vpa := testvpa.New("web").InPlace().Recommend("c", "1200m", "768Mi").Obj()
	node := func(features ...string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
			Status: corev1.NodeStatus{Allocatable: testpod.List("8", "16Gi"), DeclaredFeatures: features}}
	}
	tests := []struct {
		name   string
		pod    *corev1.Pod
		nodes  []*corev1.Node
		minor  int
		patch  string
		events string
	}{
		{
			name: "1.37, the node declaring the feature: containers and pod level together", minor: 37,
			pod: pod(), nodes: []*corev1.Node{node(resize.FeaturePodLevelResize)},
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1200m","memory":"768Mi"}}}],` +
				`"resources":{"requests":{"cpu":"1400m","memory":"1280Mi"},"limits":{"cpu":"2800m","memory":"2560Mi"}}}}`,
		},
		{
			name: "1.37, the node not declaring it: the container kept within the pod level", minor: 37,
			pod: pod(), nodes: []*corev1.Node{node("InPlacePodVerticalScalingInitContainers")},
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1","memory":"768Mi"}}}]}}`,
		},
		{
			name: "no node cache, the pod's status showing its pod-level resources: together", minor: 37,
			pod: pod(),
			patch: `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1200m","memory":"768Mi"}}}],` +
				`"resources":{"requests":{"cpu":"1400m","memory":"1280Mi"},"limits":{"cpu":"2800m","memory":"2560Mi"}}}}`,
		},
		{
			name: "1.34: nothing sent", minor: 34,
			pod: pod(), nodes: []*corev1.Node{node()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, []*corev1.Pod{tt.pod}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{nodes: tt.nodes, serverMinor: tt.minor})
			require.NoError(t, f.sync("p"))
			patches := f.resizePatches()
			if tt.patch == "" {
				assert.Empty(t, patches)
				return
			}
			require.Len(t, patches, 1, strings.Join(f.events(), "\n"))
			assert.JSONEq(t, tt.patch, patches[0])
		})
	}
}

// A container at its pod-level request, on a node that cannot resize the
// pod level: nothing is sent, and the VPA says what cannot be had in place.
func TestPodLevelBoundIsReported(t *testing.T) {
	p := testpod.New("p").Container("c", "1", "512Mi").OwnedBy("apps/v1", "ReplicaSet", "web-rs").
		PodLevel("1", "1Gi", "", "").Running().PodLevelStatus().Obj()
	vpa := testvpa.New("web").InPlace().Recommend("c", "1500m", "512Mi").Obj()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{Allocatable: testpod.List("8", "16Gi")}}
	f := newFixture(t, []*corev1.Pod{p}, []*vpatypes.VerticalPodAutoscaler{vpa}, fixtureOpts{nodes: []*corev1.Node{node}})
	require.NoError(t, f.sync("p"))
	assert.Empty(t, f.resizePatches())
	require.NoError(t, f.syncStatus("web"))
	c := f.condition("web")
	require.NotNil(t, c)
	assert.Equal(t, condition.ReasonInvalid, c.Reason, c.Message)
	assert.Contains(t, c.Message, "p cannot be resized in place to c: requests cpu=1500m")
	assert.Contains(t, c.Message, "does not declare the feature "+resize.FeaturePodLevelResize)
}
