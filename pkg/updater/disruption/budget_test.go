package disruption

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vpa-inplace/vpa-inplace/pkg/testing/testpod"
)

var t0 = time.Unix(1_800_000_000, 0)

func pod(name string, ready bool) *corev1.Pod {
	b := testpod.New(name).UID("uid-"+name).Labels(map[string]string{"app": "kafka"}).Container("c", "1", "1Gi")
	if ready {
		b = b.Running()
	} else {
		b.Obj().Status.Phase = corev1.PodRunning
	}
	return b.Obj()
}

func pods(ready ...bool) []*corev1.Pod {
	out := make([]*corev1.Pod, len(ready))
	for i, r := range ready {
		out[i] = pod(fmt.Sprintf("p%d", i), r)
	}
	return out
}

func pdb(name string, allowed int32, version string) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), ResourceVersion: version},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "kafka"}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
}

func TestTolerance(t *testing.T) {
	tests := []struct {
		name      string
		tolerance float64
		siblings  []*corev1.Pod
		reserved  []int // indexes of siblings already reserved
		asking    int
		allowed   bool
	}{
		{name: "4 pods at 0.5: the first goes", tolerance: 0.5, siblings: pods(true, true, true, true), allowed: true},
		{name: "4 pods at 0.5: a second goes while one is reserved", tolerance: 0.5, siblings: pods(true, true, true, true), reserved: []int{1}, allowed: true},
		{name: "4 pods at 0.5: a third waits", tolerance: 0.5, siblings: pods(true, true, true, true), reserved: []int{1, 2}},
		{name: "a pod not Ready counts as down", tolerance: 0.5, siblings: pods(true, false, true, true), reserved: []int{2}},
		{name: "the asking pod not Ready does not count against itself", tolerance: 0.5, siblings: pods(false, true, true, true), reserved: []int{2}, allowed: true},
		{name: "tolerance 0 still lets one pod go", tolerance: 0, siblings: pods(true, true, true), allowed: true},
		{name: "tolerance 0: one at a time", tolerance: 0, siblings: pods(true, true, true), reserved: []int{2}},
		{name: "a single-replica workload may restart", tolerance: 0.5, siblings: pods(true), allowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(Config{Tolerance: tt.tolerance}, clocktesting.NewFakeClock(t0))
			for _, i := range tt.reserved {
				require.True(t, b.Reserve(Request{Pod: tt.siblings[i]}).Allowed)
			}
			v := b.Reserve(Request{Pod: tt.siblings[tt.asking], Workload: "w", Siblings: tt.siblings})
			assert.Equal(t, tt.allowed, v.Allowed, v.Message)
			if !tt.allowed {
				assert.Equal(t, "the eviction tolerance", v.Blocker)
				assert.False(t, b.Held(tt.siblings[tt.asking].UID), "a refused pod holds no reservation")
			}
		})
	}
}

func TestPodDisruptionBudgets(t *testing.T) {
	other := pdb("other", 0, "1")
	other.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "zookeeper"}}
	tests := []struct {
		name     string
		pdbs     []*policyv1.PodDisruptionBudget
		reserved []*corev1.Pod
		// after the reservations, the PDBs are replaced by these (a status
		// update by the disruption controller); nil keeps them.
		updated []*policyv1.PodDisruptionBudget
		allowed bool
		blocker string
	}{
		{name: "no PDB", allowed: true},
		{name: "a PDB allowing one", pdbs: []*policyv1.PodDisruptionBudget{pdb("kafka-pdb", 1, "1")}, allowed: true},
		{name: "a PDB allowing none", pdbs: []*policyv1.PodDisruptionBudget{pdb("kafka-pdb", 0, "1")}, blocker: "PodDisruptionBudget kafka-pdb"},
		{name: "a PDB of other pods does not apply", pdbs: []*policyv1.PodDisruptionBudget{other}, allowed: true},
		{name: "several PDBs: the one allowing none holds the pod", pdbs: []*policyv1.PodDisruptionBudget{pdb("a", 3, "1"), pdb("b", 0, "1")}, blocker: "PodDisruptionBudget b"},
		{name: "our uncounted restart uses the only allowed disruption",
			pdbs: []*policyv1.PodDisruptionBudget{pdb("kafka-pdb", 1, "1")}, reserved: []*corev1.Pod{pod("r", true)}, blocker: "PodDisruptionBudget kafka-pdb"},
		{name: "our restart is uncounted while its pod is still Ready, even after a PDB write",
			pdbs: []*policyv1.PodDisruptionBudget{pdb("kafka-pdb", 1, "1")}, reserved: []*corev1.Pod{pod("r", true)},
			updated: []*policyv1.PodDisruptionBudget{pdb("kafka-pdb", 1, "2")}, blocker: "PodDisruptionBudget kafka-pdb"},
		{name: "our restart of a pod not Ready is uncounted until the PDB is written again",
			pdbs: []*policyv1.PodDisruptionBudget{pdb("kafka-pdb", 2, "1")}, reserved: []*corev1.Pod{pod("r", false)},
			allowed: true},
		{name: "once the PDB counted our pod down, its status alone decides",
			pdbs: []*policyv1.PodDisruptionBudget{pdb("kafka-pdb", 1, "1")}, reserved: []*corev1.Pod{pod("r", false)},
			updated: []*policyv1.PodDisruptionBudget{pdb("kafka-pdb", 1, "2")}, allowed: true},
		{name: "an unhealthy pod is already counted by the PDB's status",
			pdbs: []*policyv1.PodDisruptionBudget{pdb("kafka-pdb", 0, "1")}, blocker: "PodDisruptionBudget kafka-pdb"},
		{name: "a selector that cannot be read refuses",
			pdbs: []*policyv1.PodDisruptionBudget{func() *policyv1.PodDisruptionBudget {
				p := pdb("broken", 5, "1")
				p.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
				return p
			}()}, blocker: "PodDisruptionBudget broken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(Config{Tolerance: 1}, clocktesting.NewFakeClock(t0))
			for _, r := range tt.reserved {
				require.True(t, b.Reserve(Request{Pod: r, PDBs: tt.pdbs}).Allowed)
			}
			pdbs := tt.pdbs
			if tt.updated != nil {
				pdbs = tt.updated
			}
			v := b.Reserve(Request{Pod: pod("asking", true), PDBs: pdbs})
			assert.Equal(t, tt.allowed, v.Allowed, v.Message)
			assert.Equal(t, tt.blocker, v.Blocker)
		})
	}
}

// resized is p as the API server has it once the resize is in its spec
// (generation 2), the kubelet at observedGeneration observed and Ready or
// not.
func resized(p *corev1.Pod, observed int64, ready bool) *corev1.Pod {
	out := pod(p.Name, ready)
	out.Generation, out.Status.ObservedGeneration = 2, observed
	return out
}

func TestReservationHeldUntilReadyForMinReady(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	b := New(Config{Tolerance: 0.5}, clk)
	p := pod("p", true)
	require.True(t, b.Reserve(Request{Pod: p, MinReady: 30 * time.Second}).Allowed)

	// The cache does not show the resize yet: nothing to tell.
	assert.Equal(t, Observation{}, b.Observe(p))

	// Patched, still Ready: the kubelet has not restarted it yet.
	assert.Equal(t, Observation{}, b.Observe(resized(p, 1, true)))

	// Restarting: not Ready.
	assert.Equal(t, Observation{}, b.Observe(resized(p, 2, false)))

	// Back and Ready since 5 s ago: 25 s to go.
	clk.Step(time.Minute)
	back := resized(p, 2, true)
	back.Status.Conditions[0].LastTransitionTime = metav1.NewTime(clk.Now().Add(-5 * time.Second))
	assert.Equal(t, Observation{After: 25 * time.Second}, b.Observe(back))
	assert.True(t, b.Held(p.UID))
	assert.Equal(t, map[string]int{HeldBack: 1}, b.Counts())

	clk.Step(25 * time.Second)
	assert.Equal(t, Observation{Ended: EndBack}, b.Observe(back))
	assert.False(t, b.Held(p.UID))
}

// A restart too quick for the Ready condition to turn False leaves its
// lastTransitionTime before the resize: minReady counts from when the pod is
// seen back.
func TestReservationOfAPodThatNeverShowedNotReady(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	b := New(Config{Tolerance: 0.5}, clk)
	p := pod("p", true)
	p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(-time.Hour))
	require.True(t, b.Reserve(Request{Pod: p, MinReady: 10 * time.Second}).Allowed)
	clk.Step(time.Second)
	back := resized(p, 2, true)
	back.Status.Conditions[0].LastTransitionTime = p.Status.Conditions[0].LastTransitionTime
	assert.Equal(t, Observation{After: 10 * time.Second}, b.Observe(back))
	clk.Step(10 * time.Second)
	assert.Equal(t, EndBack, b.Observe(back).Ended)
}

// A resize the kubelet will never apply restarts nothing: its place goes
// back at once.
func TestInfeasibleResizeEndsTheReservation(t *testing.T) {
	b := New(Config{Tolerance: 0.5, Timeout: time.Hour}, clocktesting.NewFakeClock(t0))
	p := pod("p", true)
	require.True(t, b.Reserve(Request{Pod: p}).Allowed)
	infeasible := resized(p, 2, true)
	infeasible.Status.Conditions = append(infeasible.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible})
	assert.Equal(t, Observation{Ended: EndInfeasible}, b.Observe(infeasible))
	assert.False(t, b.Held(p.UID))

	t.Run("an Infeasible resize from before ours, on a cache that does not show ours yet, ends nothing", func(t *testing.T) {
		b := New(Config{Tolerance: 0.5, Timeout: time.Hour}, clocktesting.NewFakeClock(t0))
		old := pod("p", true)
		old.Status.Conditions = append(old.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible})
		require.True(t, b.Reserve(Request{Pod: old}).Allowed)
		assert.Empty(t, b.Observe(old).Ended)
		assert.True(t, b.Held(old.UID))
	})
}

// A pod that stays Ready without its resize applied (Deferred, failing)
// holds its place for the timeout at most; one that is down holds it until
// it is back.
func TestPendingResizeHoldsItsPlaceForTheTimeout(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	b := New(Config{Tolerance: 0.5, Timeout: 10 * time.Minute}, clk)
	siblings := pods(true, true)
	p := siblings[0]
	require.True(t, b.Reserve(Request{Pod: p, Workload: "w", Siblings: siblings}).Allowed)
	deferred := resized(p, 2, true)
	deferred.Status.Conditions = append(deferred.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred})
	clk.Step(4 * time.Minute)
	assert.Equal(t, Observation{After: 6 * time.Minute}, b.Observe(deferred))
	assert.Equal(t, map[string]int{HeldPending: 1}, b.Counts())
	v := b.Reserve(Request{Pod: siblings[1], Workload: "w", Siblings: siblings})
	assert.False(t, v.Allowed)
	assert.Equal(t, "1 of 2 pods of the workload are restarting, not Ready or being deleted, and the eviction tolerance allows 1 at once"+
		" (p0: resize Deferred by the kubelet, its place held until 2027-01-15T08:10:00Z at the latest)", v.Message)

	clk.Step(6 * time.Minute)
	assert.Equal(t, Observation{Ended: EndExpired, Message: "resize Deferred by the kubelet"}, b.Observe(deferred))
	assert.True(t, b.Reserve(Request{Pod: siblings[1], Workload: "w", Siblings: siblings}).Allowed)

	t.Run("a pod that is not Ready is down: no timeout", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		b := New(Config{Tolerance: 0.5, Timeout: 10 * time.Minute}, clk)
		p := pod("p", true)
		require.True(t, b.Reserve(Request{Pod: p}).Allowed)
		clk.Step(time.Hour)
		assert.Equal(t, Observation{}, b.Observe(resized(p, 2, false)))
		assert.True(t, b.Held(p.UID))
	})
}

// A restarting resize the kubelet holds Deferred may still be applied, and
// restart the pod, at any time: its place is kept past the timeout while
// the pod shows it pending (a resource whose resizePolicy is
// RestartContainer differs between the spec and what the container runs
// with), so that no second pod of the workload restarts when the kubelet
// applies the first. Once applied, it ends as any restart does.
func TestPendingRestartKeepsItsPlacePastTheTimeout(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	b := New(Config{Tolerance: 0.5, Timeout: 10 * time.Minute}, clk)
	restarting := func(name string) *corev1.Pod {
		return testpod.New(name).UID("uid-"+name).Labels(map[string]string{"app": "kafka"}).Container("c", "1", "1Gi").
			ResizePolicy("c", corev1.ResourceMemory, corev1.RestartContainer).Running().Obj()
	}
	siblings := []*corev1.Pod{restarting("p0"), restarting("p1")}
	p := siblings[0]
	require.True(t, b.Reserve(Request{Pod: p, Workload: "w", Siblings: siblings, MinReady: 10 * time.Second}).Allowed)

	// The resize is in the spec, the container still runs with 1Gi, and the
	// kubelet defers it.
	deferred := p.DeepCopy()
	deferred.Generation, deferred.Status.ObservedGeneration = 2, 2
	deferred.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = testpod.List("", "2Gi")[corev1.ResourceMemory]
	deferred.Status.Conditions = append(deferred.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonDeferred, ObservedGeneration: 2})
	assert.Equal(t, Observation{After: 10 * time.Minute}, b.Observe(deferred))

	clk.Step(10 * time.Minute)
	o := b.Observe(deferred)
	assert.Empty(t, o.Ended, "the kubelet may still apply it: the place is kept")
	assert.True(t, o.Overdue, "said once, when the timeout passes")
	assert.Equal(t, "resize Deferred by the kubelet", o.Message)
	assert.True(t, b.Held(p.UID))
	clk.Step(time.Hour)
	assert.Equal(t, Observation{}, b.Observe(deferred), "still pending an hour later: kept, and said no more")
	v := b.Reserve(Request{Pod: siblings[1], Workload: "w", Siblings: siblings})
	assert.False(t, v.Allowed, "no second pod restarts while the first may")
	assert.Contains(t, v.Message, "p0: resize Deferred by the kubelet for more than 10m0s, its place held while the pod shows it pending")

	// The kubelet applies it: the container restarts, then is back.
	applied := deferred.DeepCopy()
	applied.Status.Conditions = applied.Status.Conditions[:1]
	applied.Status.ContainerStatuses[0].Resources.Requests[corev1.ResourceMemory] = testpod.List("", "2Gi")[corev1.ResourceMemory]
	applied.Status.ContainerStatuses[0].AllocatedResources[corev1.ResourceMemory] = testpod.List("", "2Gi")[corev1.ResourceMemory]
	applied.Status.Conditions[0].Status = corev1.ConditionFalse
	assert.Equal(t, Observation{}, b.Observe(applied), "restarting")
	applied.Status.Conditions[0].Status = corev1.ConditionTrue
	applied.Status.Conditions[0].LastTransitionTime = metav1.NewTime(clk.Now())
	assert.Equal(t, Observation{After: 10 * time.Second}, b.Observe(applied))
	clk.Step(10 * time.Second)
	assert.Equal(t, EndBack, b.Observe(applied).Ended)
	assert.True(t, b.Reserve(Request{Pod: siblings[1], Workload: "w", Siblings: siblings}).Allowed)

	t.Run("a pending resize that restarts nothing expires", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		b := New(Config{Tolerance: 0.5, Timeout: 10 * time.Minute}, clk)
		p := restarting("p0")
		require.True(t, b.Reserve(Request{Pod: p}).Allowed)
		cpu := p.DeepCopy()
		cpu.Generation, cpu.Status.ObservedGeneration = 2, 2
		cpu.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = testpod.List("2", "")[corev1.ResourceCPU]
		cpu.Status.Conditions = append(cpu.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
			Reason: corev1.PodReasonDeferred, ObservedGeneration: 2})
		clk.Step(10 * time.Minute)
		assert.Equal(t, EndExpired, b.Observe(cpu).Ended, "its cpu restarts nothing")
	})
}

// A patch whose answer was lost may have been applied: the place is kept
// until the pod shows it (then as any restart), or a patch sent again is
// answered.
func TestUnconfirmedResizeKeepsItsPlace(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	b := New(Config{Tolerance: 0.5, Timeout: 10 * time.Minute}, clk)
	siblings := pods(true, true)
	p := siblings[0]
	require.True(t, b.Reserve(Request{Pod: p, Workload: "w", Siblings: siblings}).Allowed)
	b.Unconfirmed(p.UID)
	assert.Equal(t, map[string]int{HeldUnconfirmed: 1}, b.Counts())
	assert.Equal(t, Observation{After: 10 * time.Minute}, b.Observe(p), "the cache shows nothing yet")
	v := b.Reserve(Request{Pod: siblings[1], Workload: "w", Siblings: siblings})
	assert.False(t, v.Allowed)
	assert.Contains(t, v.Message, "p0: the answer to its resize was lost")

	// The pod shows the resize: it was applied, and restarts.
	assert.Equal(t, Observation{}, b.Observe(resized(p, 2, false)))
	assert.Equal(t, map[string]int{HeldRestarting: 1}, b.Counts())

	t.Run("sent again and accepted", func(t *testing.T) {
		b := New(Config{Tolerance: 0.5, Timeout: 10 * time.Minute}, clk)
		require.True(t, b.Reserve(Request{Pod: p}).Allowed)
		b.Unconfirmed(p.UID)
		require.True(t, b.Reserve(Request{Pod: p}).Allowed, "the pod keeps its place")
		b.Sent(p.UID)
		assert.Equal(t, map[string]int{HeldRestarting: 1}, b.Counts())
	})
}

// A new leader adopts the restarts under way: no check, and the restart
// counts from when it began.
func TestAdoptedRestart(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	b := New(Config{Tolerance: 0.5, Timeout: 10 * time.Minute}, clk)
	siblings := pods(true, true)
	p := siblings[0]
	p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(-4 * time.Second))
	b.Adopt(Request{Pod: p, Workload: "w", Siblings: siblings, MinReady: 10 * time.Second}, t0.Add(-4*time.Second))
	assert.False(t, b.Reserve(Request{Pod: siblings[1], Workload: "w", Siblings: siblings}).Allowed)
	assert.Equal(t, Observation{After: 6 * time.Second}, b.Observe(p))
	clk.Step(6 * time.Second)
	assert.Equal(t, Observation{Ended: EndBack}, b.Observe(p))
}

func TestRestartUnderWay(t *testing.T) {
	now := t0
	restarting := func() *corev1.Pod {
		p := testpod.New("p").Container("c", "1", "1Gi").ResizePolicy("c", corev1.ResourceMemory, corev1.RestartContainer).Running().Obj()
		p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-time.Hour))
		return p
	}
	tests := []struct {
		name   string
		change func(*corev1.Pod)
		since  time.Time
		ok     bool
	}{
		{name: "settled", change: func(*corev1.Pod) {}},
		{name: "a restarting resize not taken up yet", ok: true, since: now, change: func(p *corev1.Pod) {
			p.Generation = 2
			p.Spec.Containers[0].Resources.Requests = testpod.List("1", "2Gi")
		}},
		{name: "a restarting resize Deferred", ok: true, since: now, change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = testpod.List("1", "2Gi")
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred})
		}},
		{name: "a resize that restarts nothing", change: func(p *corev1.Pod) {
			p.Generation = 2
			p.Spec.Containers[0].Resources.Requests = testpod.List("2", "1Gi")
		}},
		{name: "a restarting resize Infeasible", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = testpod.List("1", "2Gi")
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonInfeasible})
		}},
		{name: "restarted, Ready again 3s ago", ok: true, since: now.Add(-3 * time.Second), change: func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].RestartCount = 1
			p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(now.Add(-5 * time.Second))
			p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-3 * time.Second))
		}},
		{name: "restarted 5s ago without the Ready condition showing it", ok: true, since: now.Add(-5 * time.Second), change: func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].RestartCount = 1
			p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(now.Add(-5 * time.Second))
		}},
		{name: "restarted, not Ready", ok: true, since: now, change: func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].RestartCount = 1
			p.Status.Conditions[0].Status = corev1.ConditionFalse
		}},
		{name: "restarted long ago", change: func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].RestartCount = 3
			p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(now.Add(-time.Hour))
		}},
		{name: "a container no resize restarts restarted", change: func(p *corev1.Pod) {
			p.Spec.Containers[0].ResizePolicy = nil
			p.Status.ContainerStatuses[0].RestartCount = 1
			p.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(now.Add(-time.Second))
		}},
		{name: "terminated", change: func(p *corev1.Pod) {
			p.Generation = 2
			p.Spec.Containers[0].Resources.Requests = testpod.List("1", "2Gi")
			p.Status.Phase = corev1.PodSucceeded
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := restarting()
			tt.change(p)
			since, ok := RestartUnderWay(p, 10*time.Second, now)
			assert.Equal(t, tt.ok, ok)
			assert.True(t, tt.since.Equal(since), "since %s, want %s", since, tt.since)
		})
	}
}

func TestReleaseGivesTheReservationBack(t *testing.T) {
	b := New(Config{Tolerance: 0}, clocktesting.NewFakeClock(t0))
	siblings := pods(true, true)
	require.True(t, b.Reserve(Request{Pod: siblings[0], Workload: "w", Siblings: siblings}).Allowed)
	require.False(t, b.Reserve(Request{Pod: siblings[1], Workload: "w", Siblings: siblings}).Allowed)
	b.Release(siblings[0].UID, EndRefused)
	assert.True(t, b.Reserve(Request{Pod: siblings[1], Workload: "w", Siblings: siblings}).Allowed)
}

// TestConcurrentReservationsNeverExceedTheBudget runs many workers on the
// pods of one workload at once; the number of reservations held must never
// exceed what the tolerance allows.
func TestConcurrentReservationsNeverExceedTheBudget(t *testing.T) {
	b := New(Config{Tolerance: 0.5}, clocktesting.NewFakeClock(t0))
	siblings := pods(true, true, true, true, true, true, true, true) // budget: 4
	var inFlight, peak atomic.Int32
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := range 200 {
				p := siblings[(w+i)%len(siblings)]
				if !b.Reserve(Request{Pod: p, Workload: "w", Siblings: siblings}).Allowed || !tryEnter(p.UID, &inFlight, &peak) {
					continue
				}
				// The restart is under way; then the pod is back.
				inFlight.Add(-1)
				leave(p.UID)
				b.Release(p.UID, EndRefused)
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, peak.Load(), int32(4))
	assert.Positive(t, peak.Load())
}

var holders sync.Map

// tryEnter counts a pod in flight once (a pod already reserved by another
// worker is the same restart).
func tryEnter(uid types.UID, inFlight, peak *atomic.Int32) bool {
	if _, loaded := holders.LoadOrStore(uid, true); loaded {
		return false
	}
	n := inFlight.Add(1)
	for {
		p := peak.Load()
		if n <= p || peak.CompareAndSwap(p, n) {
			return true
		}
	}
}

func leave(uid types.UID) { holders.Delete(uid) }
