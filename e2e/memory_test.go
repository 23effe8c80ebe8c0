//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"
)

const (
	eventMemoryLimitRefused = "InPlaceResizeMemoryLimitRefused"
	// hollowMemoryUsage sets the memory usage of a pod's cgroup on a hollow
	// kubelet, the figure the kubelet checks a lower limit against; the
	// container's usage in the metrics API stays as it was
	// (hack/cluster/cmd/hollow-node).
	hollowMemoryUsage = "hollow-node.vpa-inplace.dev/memory-usage"
	metricFailures    = "vpa_inplace_updater_resize_failures_total"
	metricMemoryHeld  = "vpa_inplace_updater_memory_limit_decreases_held_total"
	metricMetricsAPI  = "vpa_inplace_updater_metrics_api_available"
)

// The memory in use is unknown to the updater: the pod's container reports
// 1Mi to the metrics API while its cgroup, which the kubelet checks, uses
// 150Mi (as when the metrics lag behind a rise), so the kubelet's own check
// (1.34+) is the last line. A pod
// using 150Mi, limited to 200Mi, is recommended a 100Mi limit with a CPU
// change: the kubelet refuses the decrease (PodResizeInProgress, reason
// Error, 10 to 16 s after the patch); the updater records and reports it,
// sends the resize once more with the 200Mi limit kept so that the CPU change
// completes, and never sends the refused limit again, not even for a new
// recommendation that asks for it.
func TestKubeletRefusedMemoryLimitDecrease(t *testing.T) {
	parallel(t)
	ns := newNamespace(t, nil)
	pods := deploy(t, ns, workload{name: "mem", requests: rl("100m", "100Mi"), limits: rl("", "200Mi"),
		annotation: map[string]string{hollowMemoryUsage: "150Mi"}})
	pod := pods[0]
	before := snap(pods)
	refusalsBefore := updaterSeries(metricFailures, `reason="KubeletMemoryLimitRefused"`)
	heldBefore := updaterSeries(metricMemoryHeld, `source="KubeletRefusal"`)
	newVPA(t, ns, "mem", vpatypes.UpdateModeInPlace, nil)

	// Requests 200m/50Mi; the 2:1 limit-to-request ratio makes it 100Mi.
	recommend(t, ns, "mem", "200m", "50Mi")
	waitFor(t, eventually, "the kubelet's refusal", func(context.Context) (bool, error) {
		return strings.Contains(resizeConditions(getPod(t, ns, pod.Name)), "cannot decrease memory limits") ||
			eventCount(t, ns, pod.Name, eventMemoryLimitRefused) > 0, nil
	})
	waitEvent(t, ns, pod.Name, eventMemoryLimitRefused, 1)
	e := events(t, ns, pod.Name, eventMemoryLimitRefused)
	require.NotEmpty(t, e)
	assert.Equal(t, corev1.EventTypeWarning, e[0].Type)
	assert.Contains(t, e[0].Message, "limits memory=100Mi")
	assert.Contains(t, e[0].Message, "cannot decrease memory limits")
	waitVPAEvent(t, ns, "mem", eventMemoryLimitRefused)

	// The CPU change completes with the running memory limit.
	got := waitLimits(t, ns, pod.Name, "200m", "50Mi", "200Mi")
	assert.Equal(t, pod.Generation+2, got.Generation, "two resize patches: the refused one, and the one keeping the limit")
	waitRecordWritten(t, ns, "mem", "memory", pod.UID)
	c := waitCondition(t, ns, "mem", "MemoryLimitKept")
	assert.Equal(t, corev1.ConditionTrue, c.Status)
	assert.Contains(t, c.Message, pod.Name)
	assert.Contains(t, c.Message, "limits memory=100Mi or lower is not sent")
	assert.InDelta(t, refusalsBefore+1, updaterSeries(metricFailures, `reason="KubeletMemoryLimitRefused"`), 0)
	assert.InDelta(t, heldBefore+1, updaterSeries(metricMemoryHeld, `source="KubeletRefusal"`), 0)

	// Not sent again: no new patch, no new refusal.
	requireStable(t, ns, pod.Name)
	assert.Equal(t, int32(1), eventCount(t, ns, pod.Name, eventMemoryLimitRefused))

	// A new recommendation asking for the refused limit again (the pod now
	// runs 50Mi under a 200Mi limit: 25Mi scales to 100Mi) with a CPU
	// change: the CPU change is sent with the limit kept, once, and the
	// kubelet has nothing to refuse.
	recommend(t, ns, "mem", "300m", "25Mi")
	got = waitLimits(t, ns, pod.Name, "300m", "25Mi", "200Mi")
	assert.Equal(t, pod.Generation+3, got.Generation, "one patch for the new recommendation")
	requireStable(t, ns, pod.Name)
	assert.Equal(t, int32(1), eventCount(t, ns, pod.Name, eventMemoryLimitRefused), "the refused limit was not sent again")
	assert.InDelta(t, refusalsBefore+1, updaterSeries(metricFailures, `reason="KubeletMemoryLimitRefused"`), 0)
	requireNotDisrupted(t, ns, "mem", before)
}

// waitLimits waits until the pod's spec and its actuated resources are cpu
// and mem requests and a memory limit lim, with no resize under way.
func waitLimits(t *testing.T, ns, pod, cpu, mem, lim string) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	want := corev1.ResourceRequirements{Requests: rl(cpu, mem), Limits: rl("", lim)}
	waitFor(t, eventually, fmt.Sprintf("pod %s running with requests %s/%s and memory limit %s", pod, cpu, mem, lim), func(context.Context) (bool, error) {
		p = getPod(t, ns, pod)
		if p.Status.ObservedGeneration < p.Generation || resizeConditions(p) != "" || len(p.Status.ContainerStatuses) == 0 {
			return false, nil
		}
		actual := p.Status.ContainerStatuses[0].Resources
		return actual != nil && sameResources(p.Spec.Containers[0].Resources, want) && sameResources(*actual, want), nil
	})
	return p
}

func sameResources(got, want corev1.ResourceRequirements) bool {
	for _, l := range []struct{ got, want corev1.ResourceList }{{got.Requests, want.Requests}, {got.Limits, want.Limits}} {
		for name, q := range l.want {
			if g, ok := l.got[name]; !ok || g.Cmp(q) != 0 {
				return false
			}
		}
	}
	return true
}
