package resize

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

func node(cpu, mem string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{Allocatable: testpod.List(cpu, mem)}}
}

func TestFitsNode(t *testing.T) {
	broker := testpod.New("kafka-0").Container("kafka", "1", "1Gi").Running().Obj()
	other := func(name, cpu, mem string) *testpod.Builder { return testpod.New(name).Container("c", cpu, mem) }
	want := func(cpu, mem string) resources.Resources {
		return resources.Resources{"kafka": {Requests: testpod.List(cpu, mem)}}
	}
	tests := []struct {
		name   string
		node   *corev1.Node
		others []*corev1.Pod
		held   map[types.UID]corev1.ResourceList
		target resources.Resources
		fits   bool
		why    string
	}{
		{name: "room left", node: node("4", "8Gi"), others: []*corev1.Pod{broker, other("a", "1", "1Gi").Running().Obj()}, target: want("2", "2Gi"), fits: true},
		{name: "exactly full", node: node("4", "8Gi"), others: []*corev1.Pod{other("a", "2", "1Gi").Running().Obj()}, target: want("2", "2Gi"), fits: true},
		{name: "cpu short", node: node("4", "8Gi"), others: []*corev1.Pod{other("a", "2500m", "1Gi").Running().Obj()}, target: want("2", "2Gi"),
			why: "node node-1 has 1500m cpu free of 4 allocatable; the pod would request 2"},
		{name: "memory short", node: node("4", "4Gi"), others: []*corev1.Pod{other("a", "1", "3Gi").Running().Obj()}, target: want("1", "2Gi"),
			why: "node node-1 has 1Gi memory free of 4Gi allocatable; the pod would request 2Gi"},
		{name: "an init container's larger request counts for another pod",
			node: node("4", "8Gi"), others: []*corev1.Pod{func() *corev1.Pod {
				p := other("a", "500m", "1Gi").Running().Obj()
				p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: testpod.List("3", "")}}}
				return p
			}()}, target: want("2", "1Gi"), why: "node node-1 has 1 cpu free"},
		{name: "a sidecar adds to the pod's containers",
			node: node("4", "8Gi"), others: []*corev1.Pod{func() *corev1.Pod {
				p := other("a", "1", "1Gi").Running().Obj()
				p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
					Resources: corev1.ResourceRequirements{Requests: testpod.List("1500m", "")}}}
				return p
			}()}, target: want("2", "1Gi"), why: "node node-1 has 1500m cpu free"},
		{name: "pod overhead counts",
			node: node("4", "8Gi"), others: []*corev1.Pod{func() *corev1.Pod {
				p := other("a", "1", "1Gi").Running().Obj()
				p.Spec.Overhead = testpod.List("1500m", "")
				return p
			}()}, target: want("2", "1Gi"), why: "node node-1 has 1500m cpu free"},
		{name: "pod-level resources replace the containers' sum",
			node: node("4", "8Gi"), others: []*corev1.Pod{func() *corev1.Pod {
				p := other("a", "100m", "1Gi").Running().Obj()
				p.Spec.Resources = &corev1.ResourceRequirements{Requests: testpod.List("3", "1Gi")}
				return p
			}()}, target: want("2", "1Gi"), why: "node node-1 has 1 cpu free"},
		{name: "an allocation above the spec (a shrink under way) holds the larger",
			node: node("4", "8Gi"), others: []*corev1.Pod{func() *corev1.Pod {
				p := other("a", "1", "1Gi").Running().Obj()
				p.Status.ContainerStatuses[0].AllocatedResources = testpod.List("3", "1Gi")
				p.Status.ContainerStatuses[0].Resources.Requests = testpod.List("3", "1Gi")
				return p
			}()}, target: want("2", "1Gi"), why: "node node-1 has 1 cpu free"},
		{name: "a terminating pod still holds its resources",
			node: node("4", "8Gi"), others: []*corev1.Pod{func() *corev1.Pod {
				p := other("a", "3", "1Gi").Running().Obj()
				p.DeletionTimestamp = &metav1.Time{}
				return p
			}()}, target: want("2", "1Gi"), why: "node node-1 has 1 cpu free"},
		{name: "a terminated pod holds nothing",
			node: node("4", "8Gi"), others: []*corev1.Pod{func() *corev1.Pod {
				p := other("a", "3", "1Gi").Obj()
				p.Status.Phase = corev1.PodSucceeded
				return p
			}()}, target: want("2", "1Gi"), fits: true},
		{name: "a pod of another node does not count", node: node("4", "8Gi"), others: []*corev1.Pod{func() *corev1.Pod {
			p := other("a", "3", "1Gi").Running().Obj()
			p.Spec.NodeName = "node-2"
			return p
		}()}, target: want("2", "1Gi"), fits: true},
		{name: "the pod's own current allocation is not counted twice", node: node("2", "8Gi"), others: []*corev1.Pod{broker}, target: want("2", "1Gi"), fits: true},
		{name: "an empty node", node: node("4", "8Gi"), others: nil, target: want("2", "1Gi"), fits: true},
		{name: "a resize sent to another pod and not yet seen counts",
			node: node("4", "8Gi"), others: []*corev1.Pod{other("a", "1", "1Gi").Running().Obj()},
			held: map[types.UID]corev1.ResourceList{"uid-a": testpod.List("3", "1Gi")}, target: want("2", "1Gi"), why: "node node-1 has 1 cpu free"},
		{name: "a resize sent and seen is not counted twice",
			node: node("4", "8Gi"), others: []*corev1.Pod{other("a", "2", "1Gi").Running().Obj()},
			held: map[types.UID]corev1.ResourceList{"uid-a": testpod.List("2", "1Gi")}, target: want("2", "1Gi"), fits: true},
		{name: "a shrink sent counts at what the pod holds now",
			node: node("4", "8Gi"), others: []*corev1.Pod{other("a", "2", "1Gi").Running().Obj()},
			held: map[types.UID]corev1.ResourceList{"uid-a": testpod.List("500m", "1Gi")}, target: want("2", "1Gi"), fits: true},
		{name: "a held pod the cache does not have counts at what it holds",
			node: node("4", "8Gi"), held: map[types.UID]corev1.ResourceList{"uid-gone": testpod.List("3", "1Gi")}, target: want("2", "1Gi"),
			why: "node node-1 has 1 cpu free"},
		{name: "the pod's own hold is not counted",
			node: node("2", "8Gi"), others: []*corev1.Pod{broker}, held: map[types.UID]corev1.ResourceList{"uid-kafka-0": testpod.List("2", "1Gi")},
			target: want("2", "1Gi"), fits: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fits, why := FitsNode(tt.node, tt.others, tt.held, broker, tt.target)
			assert.Equal(t, tt.fits, fits, why)
			if !tt.fits {
				assert.Contains(t, why, tt.why)
			}
		})
	}

	t.Run("the pod's own overhead counts", func(t *testing.T) {
		p := broker.DeepCopy()
		p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
		fits, why := FitsNode(node("2", "8Gi"), nil, nil, p, want("2", "1Gi"))
		assert.False(t, fits)
		assert.Contains(t, why, "the pod would request 2500m")
	})
}

// ResizedRequests counts target's requests of containers, sidecars and the
// pod level, and leaves the pod it reads (an informer's object) as it was:
// the requests it writes go into copies.
func TestResizedRequestsLeavesThePodAlone(t *testing.T) {
	pod := testpod.New("p").InitContainer("setup", "700m", "").Container("app", "500m", "500Mi").Sidecar("proxy", "300m", "100Mi").
		PodLevel("2", "1Gi", "", "").Running().Obj()
	pod.Spec.Overhead = testpod.List("50m", "10Mi")
	before := pod.DeepCopy()

	got := ResizedRequests(pod, resources.Resources{
		"app":              {Requests: testpod.List("600m", "700Mi")},
		"proxy":            {Requests: testpod.List("400m", "")},
		resources.PodLevel: {Requests: testpod.List("3", "2Gi")},
	})
	assert.Equal(t, "3050m", ptrQ(got[corev1.ResourceCPU]).String(), "the pod level's 3 CPUs and the overhead")
	assert.Equal(t, "2058Mi", ptrQ(got[corev1.ResourceMemory]).String())
	assert.Equal(t, before, pod, "the pod read is not changed")

	pod.Spec.Resources = nil
	before = pod.DeepCopy()
	got = ResizedRequests(pod, resources.Resources{"app": {Requests: testpod.List("600m", "700Mi")}, "proxy": {Requests: testpod.List("400m", "")}})
	assert.Equal(t, "1050m", ptrQ(got[corev1.ResourceCPU]).String(), "app 600m + sidecar 400m + overhead 50m")
	assert.Equal(t, "810Mi", ptrQ(got[corev1.ResourceMemory]).String(), "app 700Mi + sidecar 100Mi + overhead 10Mi")
	assert.Equal(t, before, pod, "the pod read is not changed")
}
