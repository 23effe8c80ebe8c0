package updater

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
	controllerfetcher "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/target/controller_fetcher"

	"github.com/vpa-inplace/vpa-inplace/pkg/target"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testvpa"
)

// The pods of a custom controller without /scale (a StrimziPodSet, say) are
// found through pkg/target's resolver, as in production: by their controller
// ownerReference.

const podSetAPIVersion = "e2e.vpa-inplace.dev/v1"

// podSetKinds: discovery serves PodSet without /scale.
type podSetKinds struct{}

func (podSetKinds) Lookup(_ context.Context, gk schema.GroupKind) (target.KindInfo, error) {
	if gk == (schema.GroupKind{Group: "e2e.vpa-inplace.dev", Kind: "PodSet"}) {
		return target.KindInfo{Served: true}, nil
	}
	return target.KindInfo{}, nil
}

// noSelectors fails every selector fetch, as upstream does for a custom
// resource without /scale.
type noSelectors struct{}

func (noSelectors) Fetch(context.Context, *vpatypes.VerticalPodAutoscaler) (labels.Selector, error) {
	return nil, errors.New("the server could not find the requested resource")
}

func podSetResolver(t testing.TB, vpas cache.Indexer) Resolver {
	r, err := target.NewResolver(vpas, noSelectors{}, controllerfetcher.NilControllerFetcher{}, podSetKinds{}, time.Now)
	require.NoError(t, err)
	return r
}

// podSetPod is a pod created by a custom controller: no labels the VPA could
// select on, a controller ownerReference to the PodSet.
func podSetPod(name, podSet string) *testpod.Builder {
	return testpod.New(name).Labels(nil).Container("c", "100m", "100Mi").OwnedBy(podSetAPIVersion, "PodSet", podSet)
}

func podSetVPA(cpu, mem string) *vpatypes.VerticalPodAutoscaler {
	return testvpa.New("kafka").Target(podSetAPIVersion, "PodSet", "kafka").InPlace().Recommend("c", cpu, mem).Obj()
}

func TestCustomControllerPodsAreResizedFromEvents(t *testing.T) {
	pods := []*corev1.Pod{
		podSetPod("kafka-0", "kafka").Running().Obj(),
		podSetPod("kafka-1", "kafka").Running().Obj(),
		podSetPod("zoo-0", "zoo").Running().Obj(),
		// Same kind and name in another group: not the target.
		testpod.New("other-0").Labels(nil).Container("c", "100m", "100Mi").OwnedBy("other.example.com/v1", "PodSet", "kafka").Running().Obj(),
	}
	f := newFixture(t, pods, []*vpatypes.VerticalPodAutoscaler{podSetVPA("100m", "100Mi")}, fixtureOpts{resolver: podSetResolver})
	f.run()

	_, err := f.vpa.AutoscalingV1().VerticalPodAutoscalers("default").Update(f.ctx, podSetVPA("300m", "100Mi"), metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(f.resizePatches()) == 2 }, waitFor, 20*time.Millisecond,
		"the VPA update alone resizes the PodSet's pods")
	assert.ElementsMatch(t, []string{"kafka-0", "kafka-1"}, f.resizedPods())
	for _, name := range []string{"zoo-0", "other-0"} {
		require.NoError(t, f.sync(name))
	}
	assert.Len(t, f.resizePatches(), 2, "pods of other controllers are not the VPA's")
}

// Upstream's updater counts the replicas of a custom controller as 0 and so
// lets every pod restart at once; here the budget is counted from the pods
// the controller owns.
func TestDisruptiveResizesOfCustomControllerPodsRespectEvictionTolerance(t *testing.T) {
	tests := []struct {
		name      string
		pods      int
		tolerance float64
		notReady  int
		want      int
	}{
		// A count from 0 would allow max(1, 0) = 1; approving all would send 4.
		{name: "floor(0.5 x 4) = 2 restart at once", pods: 4, tolerance: 0.5, want: 2},
		{name: "floor(0.5 x 5) = 2", pods: 5, tolerance: 0.5, want: 2},
		{name: "at least one, even when the fraction rounds to 0", pods: 3, tolerance: 0.2, want: 1},
		// p0 is not ready: it counts as disrupted, so the ready pods wait;
		// p0 itself sees one other disrupted pod, fewer than 2.
		{name: "pods not ready count as disrupted", pods: 4, tolerance: 0.5, notReady: 2, want: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pods []*corev1.Pod
			for i := range tc.pods {
				p := podSetPod(fmt.Sprintf("kafka-%d", i), "kafka").ResizePolicy("c", corev1.ResourceCPU, corev1.RestartContainer).Running().Obj()
				if i < tc.notReady {
					setReady(p, corev1.ConditionFalse)
				}
				pods = append(pods, p)
			}
			f := newFixture(t, pods, []*vpatypes.VerticalPodAutoscaler{podSetVPA("300m", "100Mi")}, fixtureOpts{tolerance: tc.tolerance, resolver: podSetResolver})
			for i := range tc.pods {
				require.NoError(t, f.sync(fmt.Sprintf("kafka-%d", i)))
			}
			assert.Len(t, f.resizePatches(), tc.want)
			if tc.notReady > 0 {
				assert.ElementsMatch(t, []string{"kafka-0", "kafka-1"}, f.resizedPods(), "only the pods already disrupted may restart")
			}
		})
	}
}

func setReady(p *corev1.Pod, status corev1.ConditionStatus) {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			p.Status.Conditions[i].Status = status
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: status})
}

// emptyTarget resolves every VPA to a target with neither selector nor owner.
type emptyTarget struct{ labelResolver }

func (emptyTarget) Target(context.Context, *vpatypes.VerticalPodAutoscaler) (target.Target, error) {
	return target.Target{}, nil
}

func TestEmptyTargetQueuesNothing(t *testing.T) {
	vpa := podSetVPA("300m", "100Mi")
	f := newFixture(t, nil, []*vpatypes.VerticalPodAutoscaler{vpa},
		fixtureOpts{resolver: func(testing.TB, cache.Indexer) Resolver { return emptyTarget{} }})
	require.NotPanics(t, func() { f.ctrl.enqueueVPAPods(f.ctx, vpa) })
	assert.Zero(t, f.ctrl.queue.Len())
}
