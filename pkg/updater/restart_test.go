package updater

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clienttesting "k8s.io/client-go/testing"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// restartingPods are n Running pods of one ReplicaSet whose memory
// resizePolicy is RestartContainer: a resize of memory restarts them.
func restartingPods(n int) []*corev1.Pod {
	var pods []*corev1.Pod
	for i := range n {
		pods = append(pods, webPod(fmt.Sprintf("p%d", i)).ResizePolicy("c", corev1.ResourceMemory, corev1.RestartContainer).Running().Obj())
	}
	return pods
}

// TestConcurrentWorkersNeverRestartMoreThanTheBudget syncs the pods of one
// workload from many workers at once, each pod several times. Resize patches
// take a while to answer, as they do under load: a budget checked before the
// patch and taken after it lets every worker through.
func TestConcurrentWorkersNeverRestartMoreThanTheBudget(t *testing.T) {
	const pods, budget = 8, 4 // floor(0.5 x 8)
	f := newFixture(t, restartingPods(pods), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "200Mi")}, fixtureOpts{tolerance: 0.5})
	var mu sync.Mutex
	restarted := sets.New[string]()
	f.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "resize" {
			return false, nil, nil
		}
		mu.Lock()
		restarted.Insert(a.(clienttesting.PatchAction).GetName())
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		return false, nil, nil
	})
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 * pods {
		wg.Go(func() {
			<-start
			assert.NoError(t, f.sync(fmt.Sprintf("p%d", w%pods)))
		})
	}
	close(start)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, budget, restarted.Len(), "pods restarted at once: %v", sets.List(restarted))
	assert.Len(t, f.ctrl.budget.Reserved(), budget)
}

func TestRefusedRestartingResizeGivesItsReservationBack(t *testing.T) {
	f := newFixture(t, restartingPods(2), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "200Mi")}, fixtureOpts{tolerance: 0.5})
	f.failResize(apierrors.NewTooManyRequests("quota", 1))
	require.Error(t, f.sync("p0"))
	assert.Empty(t, f.ctrl.budget.Reserved(), "nothing restarts when the patch fails")
	f.kube.ReactionChain = f.kube.ReactionChain[1:]
	require.NoError(t, f.sync("p1"))
	assert.Len(t, f.resizePatches(), 2, "the other pod may go")
	assert.Equal(t, []types.UID{"uid-p1"}, f.ctrl.budget.Reserved())
}

func TestRestartedPodHoldsTheBudgetUntilReadyForMinReady(t *testing.T) {
	f := newFixture(t, restartingPods(2), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "200Mi")}, fixtureOpts{tolerance: 0.5})
	require.NoError(t, f.sync("p0"))
	require.NoError(t, f.sync("p1"))
	require.Len(t, f.resizePatches(), 1, "one of two pods at once")
	assert.Contains(t, f.events(), "Pod/p1 Normal "+report.EventResizeWaitingForBudget+
		" Resize restarts containers; waiting for the eviction tolerance: 1 of 2 pods of the workload are restarting, not Ready or being deleted, and the eviction tolerance allows 1 at once"+
		" (p0: resize sent, not seen on the pod yet, its place held until 2027-01-15T08:10:00Z at the latest)")

	// The kubelet applied the resize and the containers are Ready again.
	f.kubeletDone("p0")
	require.NoError(t, f.sync("p0"))
	require.NoError(t, f.sync("p1"))
	assert.Len(t, f.resizePatches(), 1, "p0 has not been Ready for --restart-min-ready yet")
	// (Its watch after the resize asks for its window's end too.)
	assert.Contains(t, f.podQueue.asked("default/p0"), restartMinReadyDefault, "p0 is looked at again when its time is up")

	f.clock.Step(restartMinReadyDefault)
	require.Eventually(t, func() bool { return slices.Contains(f.queued(), "default/p0") }, waitFor, every, "p0's time is up on the queue's clock")
	require.NoError(t, f.sync("p0"))
	// p0 itself may come again (its own update event, late): p1 is what
	// p0's return queues.
	assert.Contains(t, f.queued(), "default/p1", "the waiting pod is queued as soon as p0 is back")
	require.NoError(t, f.sync("p1"))
	assert.Len(t, f.resizePatches(), 2)
}

func TestPodDisruptionBudgetPacesRestartingResizes(t *testing.T) {
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web-pdb", Namespace: "default", UID: "uid-pdb", ResourceVersion: "1"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1},
	}
	f := newFixture(t, restartingPods(4), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "200Mi")}, fixtureOpts{tolerance: 1, pdbs: []*policyv1.PodDisruptionBudget{pdb}})
	for i := range 4 {
		require.NoError(t, f.sync(fmt.Sprintf("p%d", i)))
	}
	assert.Len(t, f.resizePatches(), 1, "maxUnavailable 1: one pod at a time, whatever the tolerance")
	require.NoError(t, f.syncStatus("web"))
	assert.Contains(t, f.condition("web").Message, "Waiting: 3 pods wait for PodDisruptionBudget web-pdb.")

	t.Run("a resize that restarts nothing is not limited", func(t *testing.T) {
		f := newFixture(t, []*corev1.Pod{webPod("p").Running().Obj()}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "200Mi")},
			fixtureOpts{pdbs: []*policyv1.PodDisruptionBudget{func() *policyv1.PodDisruptionBudget {
				p := pdb.DeepCopy()
				p.Status.DisruptionsAllowed = 0
				return p
			}()}})
		require.NoError(t, f.sync("p"))
		assert.Len(t, f.resizePatches(), 1)
	})
}

// kubeletDone marks the pod's resize applied: spec resources actuated,
// observedGeneration caught up, Ready since now.
func (f *fixture) kubeletDone(name string) {
	f.t.Helper()
	p, err := f.kube.CoreV1().Pods("default").Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	p.Status.ObservedGeneration = p.Generation
	for i := range p.Status.ContainerStatuses {
		p.Status.ContainerStatuses[i].Resources = p.Spec.Containers[i].Resources.DeepCopy()
		p.Status.ContainerStatuses[i].AllocatedResources = p.Spec.Containers[i].Resources.Requests.DeepCopy()
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			p.Status.Conditions[i].LastTransitionTime = metav1.NewTime(f.clock.Now())
		}
	}
	written, err := f.kube.CoreV1().Pods("default").UpdateStatus(f.ctx, p, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	require.Eventually(f.t, func() bool {
		c, err := f.ctrl.pods.Pods("default").Get(name)
		return err == nil && c.ResourceVersion == written.ResourceVersion
	}, waitFor, 10*time.Millisecond)
}

// A withheld resize (dry run, paused) restarts nothing: it takes no place
// in the budget, and the other pods are not held back by it.
func TestWithheldRestartingResizeReservesNothing(t *testing.T) {
	f := newFixture(t, restartingPods(2), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "200Mi")}, fixtureOpts{tolerance: 0.5, dryRun: true})
	require.NoError(t, f.sync("p0"))
	require.NoError(t, f.sync("p1"))
	assert.Empty(t, f.resizePatches())
	assert.Empty(t, f.ctrl.budget.Reserved())
	assert.Len(t, f.ctrl.tracker.Of("default/web"), 2)
	for _, st := range f.ctrl.tracker.Of("default/web") {
		assert.Equal(t, state.PodWithheld, st.State, "%s is withheld, not waiting for the budget", st.Name)
	}
}
