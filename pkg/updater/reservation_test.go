package updater

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
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
	clienttesting "k8s.io/client-go/testing"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/report"
	"github.com/vpa-inplace/vpa-inplace/pkg/updater/state"
)

// How long a restarting resize keeps its place in the budget: until the pod
// is back, until nothing will restart, or for a bounded time while the
// kubelet holds it. Kafka's brokers are the case in mind: two brokers of
// three restarting at once is an outage.

// kafkaPDB allows one disruption, as Strimzi's PodDisruptionBudgets do.
func kafkaPDB() *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "kafka-pdb", Namespace: "default", UID: "uid-kafka-pdb", ResourceVersion: "1"},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 1},
	}
}

// kubeletOn changes a pod's status through the API, as the kubelet would,
// and waits until the controller's cache has it.
func (f *fixture) kubeletOn(name string, change func(*corev1.Pod)) {
	f.t.Helper()
	p, err := f.kube.CoreV1().Pods("default").Get(f.ctx, name, metav1.GetOptions{})
	require.NoError(f.t, err)
	change(p)
	written, err := f.kube.CoreV1().Pods("default").UpdateStatus(f.ctx, p, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	// Its handlers too, not only the store: what they enqueue is queued now.
	require.Eventually(f.t, func() bool {
		return f.pods.delivered("default/"+name, written.ResourceVersion)
	}, waitFor, 10*time.Millisecond)
}

// pending sets a PodResizePending condition for the pod's current spec.
func pending(reason, message string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ObservedGeneration = p.Generation
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
			Reason: reason, Message: message, ObservedGeneration: p.Generation})
	}
}

// waitCachedMemory waits until the cached pod's memory request is mem.
func (f *fixture) waitCachedMemory(name, mem string) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		c, err := f.ctrl.pods.Pods("default").Get(name)
		return err == nil && c.Spec.Containers[0].Resources.Requests.Memory().String() == mem
	}, waitFor, 10*time.Millisecond)
}

// applied returns the pods whose spec, on the API server, requests mem.
func (f *fixture) applied(mem string) []string {
	f.t.Helper()
	list, err := f.kube.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
	require.NoError(f.t, err)
	var out []string
	for _, p := range list.Items {
		if p.Spec.Containers[0].Resources.Requests.Memory().String() == mem {
			out = append(out, p.Name)
		}
	}
	return out
}

// TestAmbiguousPatchOutcomeKeepsTheReservation: a resize patch the API
// server applied but whose answer was lost must keep the pod's place, or the
// next broker is sent its restart while the first restarts. Many workers
// sync three brokers under a PodDisruptionBudget allowing one disruption;
// every resize patch is applied, then answered with the error.
func TestAmbiguousPatchOutcomeKeepsTheReservation(t *testing.T) {
	target := "https://127.0.0.1:6443/api/v1/namespaces/default/pods/p0/resize"
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"the client's timeout", &url.Error{Op: "Patch", URL: target, Err: context.DeadlineExceeded}},
		{"a reset connection", &url.Error{Op: "Patch", URL: target, Err: syscall.ECONNRESET}},
		{"the server's timeout (504)", apierrors.NewTimeoutError("request did not complete within requested timeout", 0)},
		{"an internal error (500)", apierrors.NewInternalError(errors.New("etcdserver: request timed out"))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, restartingPods(3), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "200Mi")},
				fixtureOpts{tolerance: 1, pdbs: []*policyv1.PodDisruptionBudget{kafkaPDB()}})
			var version atomic.Int64
			version.Store(1_000_000)
			tracker := f.kube.Tracker()
			f.kube.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "resize" {
					return false, nil, nil
				}
				obj, err := patched(tracker, a.(clienttesting.PatchAction))
				if err != nil {
					return true, nil, err
				}
				pod := obj.(*corev1.Pod)
				pod.ResourceVersion = strconv.FormatInt(version.Add(1), 10)
				require.NoError(t, tracker.Update(a.GetResource(), pod, pod.Namespace))
				time.Sleep(5 * time.Millisecond)
				return true, nil, tt.err
			})
			var wg sync.WaitGroup
			start := make(chan struct{})
			for w := range 12 {
				wg.Go(func() {
					<-start
					for i := range 3 {
						_ = f.sync(fmt.Sprintf("p%d", (w+i)%3))
					}
				})
			}
			close(start)
			wg.Wait()
			sent := f.applied("200Mi")
			require.NotEmpty(t, sent)
			for _, name := range sent {
				f.waitCachedMemory(name, "200Mi")
			}
			// The cache shows the applied resize now: once more, each pod.
			for i := range 3 {
				_ = f.sync(fmt.Sprintf("p%d", i))
			}
			assert.Len(t, f.applied("200Mi"), 1, "one broker restarts at a time, whatever the answer to its patch: %v", f.applied("200Mi"))
		})
	}
}

// A definite refusal (the API server answered, nothing was applied) still
// gives the place back at once.
func TestDefiniteRefusalGivesThePlaceBack(t *testing.T) {
	for _, err := range []error{
		apierrors.NewTooManyRequests("too many requests", 1),
		apierrors.NewConflict(corev1.Resource("pods"), "p0", errors.New("changed")),
		&url.Error{Op: "Patch", URL: "https://127.0.0.1:6443", Err: syscall.ECONNREFUSED},
	} {
		t.Run(err.Error(), func(t *testing.T) {
			f := newFixture(t, restartingPods(2), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "200Mi")}, fixtureOpts{tolerance: 0.5})
			f.failResize(err)
			require.Error(t, f.sync("p0"))
			assert.Empty(t, f.ctrl.budget.Reserved())
		})
	}
}

// TestInfeasibleRestartingResizeGivesItsPlaceBack: the kubelet will never
// apply an Infeasible resize, so nothing restarts; holding the place would
// keep the rest of the workload (and every matching PodDisruptionBudget)
// waiting for as long as the pod lives.
func TestInfeasibleRestartingResizeGivesItsPlaceBack(t *testing.T) {
	f := newFixture(t, restartingPods(2), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "200Mi")},
		fixtureOpts{tolerance: 1, pdbs: []*policyv1.PodDisruptionBudget{kafkaPDB()}})
	require.NoError(t, f.sync("p0"))
	require.NoError(t, f.sync("p1"))
	require.Equal(t, []string{"p0"}, f.resizedPods())
	f.waitCachedMemory("p0", "200Mi")

	f.kubeletOn("p0", pending(corev1.PodReasonInfeasible, "Resize is infeasible for Guaranteed Pods alongside Memory Manager policy \"Static\""))
	f.queued()
	require.NoError(t, f.sync("p0"))
	assert.Empty(t, f.ctrl.budget.Reserved(), "nothing restarts")
	assert.Contains(t, f.queued(), "default/p1", "the waiting pod is looked at again at once")
	require.NoError(t, f.sync("p1"))
	assert.Equal(t, []string{"p0", "p1"}, f.resizedPods())
}

// TestDeferredRestartingResizeKeepsItsPlaceWhileItIsPending: a Deferred
// resize may still restart the pod whenever the node has room, so its place
// is held past --restart-reservation-timeout for as long as the pod shows it
// pending: no second pod of the workload restarts when the kubelet applies
// the first. Once it is applied and the pod is back, the others go.
func TestDeferredRestartingResizeKeepsItsPlaceWhileItIsPending(t *testing.T) {
	f := newFixture(t, restartingPods(2), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "200Mi")}, fixtureOpts{tolerance: 0.5})
	require.NoError(t, f.sync("p0"))
	f.waitCachedMemory("p0", "200Mi")
	f.kubeletOn("p0", pending(corev1.PodReasonDeferred, "Node didn't have enough resource: memory"))
	require.NoError(t, f.sync("p0"))
	require.NoError(t, f.sync("p1"))
	assert.Equal(t, []string{"p0"}, f.resizedPods(), "p0 may still restart: p1 waits")
	assert.Contains(t, f.events(), "Pod/p1 Normal "+report.EventResizeWaitingForBudget+
		" Resize restarts containers; waiting for the eviction tolerance: 1 of 2 pods of the workload are restarting, not Ready or being deleted, and the eviction tolerance allows 1 at once"+
		" (p0: resize Deferred by the kubelet, its place held until 2027-01-15T08:10:00Z at the latest)")
	wait, ok := f.podQueue.of("default/p0")
	require.True(t, ok, "p0 is looked at again when the timeout passes")
	assert.Equal(t, restartReservationTimeoutDefault, wait)

	f.clock.Step(restartReservationTimeoutDefault)
	require.Eventually(t, func() bool { return contains(f.queued(), "default/p0") }, waitFor, every)
	require.NoError(t, f.sync("p0"))
	assert.Equal(t, []types.UID{"uid-p0"}, f.ctrl.budget.Reserved(), "still pending: the kubelet may apply it at any time")
	assert.Empty(t, eventsWith(f.events(), report.EventRestartReservationExpired))
	require.NoError(t, f.sync("p1"))
	assert.Equal(t, []string{"p0"}, f.resizedPods(), "p1 still waits")
	assert.Contains(t, f.stateOfPod("p1").Message, "(p0: resize Deferred by the kubelet for more than 10m0s, its place held while the pod shows it pending)")
	assert.InDelta(t, 0, counter(t, f, report.MetricRestartReservationsEnded, "reason", "Expired"), 0)

	// The node has room at last: the kubelet applies it, p0 restarts and
	// comes back; once Ready for minReady, p1 goes.
	f.kubeletOn("p0", actuate)
	f.kubeletDone("p0")
	require.NoError(t, f.sync("p0"))
	f.clock.Step(restartMinReadyDefault)
	f.queued()
	require.NoError(t, f.sync("p0"))
	assert.Empty(t, f.ctrl.budget.Reserved())
	assert.Contains(t, f.queued(), "default/p1")
	require.NoError(t, f.sync("p1"))
	assert.Equal(t, []string{"p0", "p1"}, f.resizedPods())
	assert.InDelta(t, 1, counter(t, f, report.MetricRestartReservationsEnded, "reason", "Back"), 0)
}

// On a kubelet that does not report observedGeneration (1.33 with default
// gates), a restarted pod is back once its status shows the spec: its place
// must not be held for ever.
func TestRestartReservationEndsWithoutObservedGeneration(t *testing.T) {
	f := newFixture(t, restartingPods(2), []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "200Mi")}, fixtureOpts{tolerance: 0.5, serverMinor: 33})
	require.NoError(t, f.sync("p0"))
	f.waitCachedMemory("p0", "200Mi")
	f.kubeletDone("p0")
	f.kubeletOn("p0", func(p *corev1.Pod) { p.Status.ObservedGeneration = 0 })
	require.NoError(t, f.sync("p0"))
	f.clock.Step(restartMinReadyDefault)
	require.NoError(t, f.sync("p0"))
	assert.Empty(t, f.ctrl.budget.Reserved())
}

// TestNewLeaderCountsRestartsUnderWay: a new leader (or the updater after a
// restart) must count the restarts the one before it sent and that are not
// over yet, before it sends any: a resize not yet applied, or a pod back
// for less than its minReady.
func TestNewLeaderCountsRestartsUnderWay(t *testing.T) {
	vpas := []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "200Mi")}
	t.Run("a restarting resize not applied yet", func(t *testing.T) {
		pods := restartingPods(2)
		// The earlier leader's resize of p0: in the spec, not yet taken up.
		p0 := pods[0]
		p0.Spec.Containers[0].Resources.Requests = testpod.List("100m", "200Mi")
		p0.Generation = 2
		f := newFixture(t, pods, vpas, fixtureOpts{tolerance: 0.5})
		f.run()
		f.waitState("p1", state.PodWaiting)
		assert.Empty(t, f.resizedPods(), "p1 waits for p0's restart")
	})
	t.Run("a pod back for less than minReady", func(t *testing.T) {
		pods := restartingPods(2)
		p0 := pods[0]
		p0.Spec.Containers[0].Resources.Requests = testpod.List("100m", "200Mi")
		p0.Status.ContainerStatuses[0].AllocatedResources = testpod.List("100m", "200Mi")
		p0.Status.ContainerStatuses[0].Resources.Requests = testpod.List("100m", "200Mi")
		p0.Status.ContainerStatuses[0].RestartCount = 1
		p0.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(t0.Add(-5 * time.Second))
		p0.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(-3 * time.Second))
		f := newFixture(t, pods, vpas, fixtureOpts{tolerance: 0.5})
		f.run()
		f.waitState("p1", state.PodWaiting)
		assert.Empty(t, f.resizedPods())
		// p0 is looked at again when its minReady is up: once its own sync
		// has run, which p1's does not wait for.
		var wait time.Duration
		require.Eventually(t, func() bool {
			var ok bool
			wait, ok = f.podQueue.of("default/p0")
			return ok
		}, waitFor, every, "p0 is looked at again when its minReady is up")
		assert.Equal(t, restartMinReadyDefault-3*time.Second, wait, "minReady counts from when p0 turned Ready")

		f.clock.Step(wait)
		require.Eventually(t, func() bool { return contains(f.resizedPods(), "p1") }, waitFor, every, "p1 goes once p0 has been Ready for minReady")
	})
}

// A restart found under way on a pod of no InPlace VPA counts too (against
// the PodDisruptionBudgets matching it), and ends as any other: sync
// observes a place before it resolves the pod's VPA.
func TestAdoptedRestartOfAPodOfNoVPAEnds(t *testing.T) {
	db := testpod.New("db-0").Labels(map[string]string{"app": "db"}).Container("c", "100m", "100Mi").
		ResizePolicy("c", corev1.ResourceMemory, corev1.RestartContainer).OwnedBy("apps/v1", "StatefulSet", "db").Running().Obj()
	db.Status.ContainerStatuses[0].RestartCount = 1
	db.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(t0.Add(-3 * time.Second))
	db.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(-3 * time.Second))
	f := newFixture(t, []*corev1.Pod{db}, []*vpatypes.VerticalPodAutoscaler{inPlaceVPA("100m", "200Mi")}, fixtureOpts{})
	f.run()
	require.Eventually(t, func() bool {
		_, ok := f.podQueue.of("default/db-0")
		return ok
	}, waitFor, every, "db-0 is looked at again when its minReady is up")
	assert.Equal(t, []types.UID{"uid-db-0"}, f.ctrl.budget.Reserved())
	f.clock.Step(restartMinReadyDefault)
	require.Eventually(t, func() bool { return len(f.ctrl.budget.Reserved()) == 0 }, waitFor, every)
}

// waitState waits until the pod's tracked state is s.
func (f *fixture) waitState(name string, s state.PodState) {
	f.t.Helper()
	require.Eventually(f.t, func() bool {
		for _, st := range f.ctrl.tracker.Of("default/web") {
			if st.Name == name && st.State == s {
				return true
			}
		}
		return false
	}, waitFor, every, "pod %s never %s", name, s)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
