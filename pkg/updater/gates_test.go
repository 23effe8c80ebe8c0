package updater

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// The gates a pod's resize meets, in their one order, and what each applies
// to: the table of docs/safety-after-resize.md#the-gates.
func TestTheGatesOfAResizeInTheirOrder(t *testing.T) {
	f := newFixture(t, webPods(1), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "100Mi")}, fixtureOpts{})
	var got []string
	for _, g := range f.ctrl.gates.Gates() {
		got = append(got, g.Name()+": "+g.Scope().String())
	}
	assert.Equal(t, []string{
		"evidence: every change",
		"resize windows: decreases, restarts",
		"kill switch: every change; boosts and reverts too",
		"pause: every change; boosts too",
		"canary: decreases",
		"node room: every change; boosts and reverts too",
		"disruption budget: restarts; boosts and reverts too",
	}, got)
}

// A restarting decrease passes the canary gate and the node room, and the
// disruption budget refuses it (another pod of the workload is down): the
// room and the canary's place it took are given back, in reverse order, and
// nothing is sent. Once the other pod is back, a canary goes.
func TestALaterGatesRefusalGivesBackWhatTheEarlierTook(t *testing.T) {
	pods := restartingPods(3)
	down := pods[2]
	for i := range down.Status.Conditions {
		if down.Status.Conditions[i].Type == corev1.PodReady {
			down.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{Allocatable: testpod.List("4", "16Gi")}}
	f := newFixture(t, pods, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "50Mi")},
		fixtureOpts{tolerance: 0.5, nodes: []*corev1.Node{node}})
	require.NoError(t, f.sync("p0"))
	require.NoError(t, f.sync("p1"))
	assert.Empty(t, f.resizePatches())
	for _, name := range []string{"p0", "p1"} {
		assert.Equal(t, state.PodWaiting, f.stateOfPod(name).State, "%s waits for the budget, not for a canary", name)
	}
	assert.Zero(t, f.ctrl.room.Len(), "the room taken is given back")
	assert.Empty(t, f.ctrl.budget.Reserved())
	assert.Empty(t, f.ctrl.canaries.StatusOf(webOwner).Canary, "no canary's place is kept")

	f.kubeletOn("p2", func(p *corev1.Pod) {
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == corev1.PodReady {
				p.Status.Conditions[i].Status = corev1.ConditionTrue
			}
		}
	})
	require.NoError(t, f.sync("p1"))
	require.NoError(t, f.sync("p0"))
	assert.Equal(t, []string{"p1"}, f.resizedPods(), "the first pod decided is the canary")
	assert.Equal(t, state.PodCanaryWait, f.stateOfPod("p0").State)
}
