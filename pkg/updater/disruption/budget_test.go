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
			b := New(tt.tolerance, clocktesting.NewFakeClock(t0))
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
			b := New(1, clocktesting.NewFakeClock(t0))
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

func TestReservationHeldUntilReadyForMinReady(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	b := New(0.5, clk)
	p := pod("p", true)
	require.True(t, b.Reserve(Request{Pod: p, MinReady: 30 * time.Second}).Allowed)

	// Patched, still Ready: the kubelet has not restarted it yet.
	p.Generation, p.Status.ObservedGeneration = 2, 1
	ended, after := b.Observe(p)
	assert.False(t, ended)
	assert.Zero(t, after)

	// Restarting: not Ready.
	down := pod("p", false)
	down.Generation, down.Status.ObservedGeneration = 2, 2
	ended, _ = b.Observe(down)
	assert.False(t, ended)

	// Back and Ready since 5 s ago: 25 s to go.
	clk.Step(time.Minute)
	back := pod("p", true)
	back.Generation, back.Status.ObservedGeneration = 2, 2
	back.Status.Conditions[0].LastTransitionTime = metav1.NewTime(clk.Now().Add(-5 * time.Second))
	ended, after = b.Observe(back)
	assert.False(t, ended)
	assert.Equal(t, 25*time.Second, after)
	assert.True(t, b.Held(p.UID))

	clk.Step(25 * time.Second)
	ended, _ = b.Observe(back)
	assert.True(t, ended)
	assert.False(t, b.Held(p.UID))
}

// A restart too quick for the Ready condition to turn False leaves its
// lastTransitionTime before the resize: minReady counts from when the pod is
// seen back.
func TestReservationOfAPodThatNeverShowedNotReady(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	b := New(0.5, clk)
	p := pod("p", true)
	p.Status.Conditions[0].LastTransitionTime = metav1.NewTime(t0.Add(-time.Hour))
	require.True(t, b.Reserve(Request{Pod: p, MinReady: 10 * time.Second}).Allowed)
	clk.Step(time.Second)
	ended, after := b.Observe(p)
	assert.False(t, ended)
	assert.Equal(t, 10*time.Second, after)
	clk.Step(10 * time.Second)
	ended, _ = b.Observe(p)
	assert.True(t, ended)
}

func TestReleaseGivesTheReservationBack(t *testing.T) {
	b := New(0, clocktesting.NewFakeClock(t0))
	siblings := pods(true, true)
	require.True(t, b.Reserve(Request{Pod: siblings[0], Workload: "w", Siblings: siblings}).Allowed)
	require.False(t, b.Reserve(Request{Pod: siblings[1], Workload: "w", Siblings: siblings}).Allowed)
	b.Release(siblings[0].UID)
	assert.True(t, b.Reserve(Request{Pod: siblings[1], Workload: "w", Siblings: siblings}).Allowed)
}

// TestConcurrentReservationsNeverExceedTheBudget runs many workers on the
// pods of one workload at once; the number of reservations held must never
// exceed what the tolerance allows.
func TestConcurrentReservationsNeverExceedTheBudget(t *testing.T) {
	b := New(0.5, clocktesting.NewFakeClock(t0))
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
				b.Release(p.UID)
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
