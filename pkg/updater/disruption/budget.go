// Package disruption paces resizes that restart containers. A resize whose
// changed resource has resizePolicy RestartContainer takes the pod down for
// a while: for our users that is a voluntary disruption, like an eviction,
// and it is limited the way operators already limit those:
//
//   - the eviction tolerance: at most max(1, floor(tolerance x pods)) pods of
//     a workload are down at once, counting pods that are not Ready and pods
//     whose restarting resize has not yet come back;
//   - every PodDisruptionBudget whose selector matches the pod: it must allow
//     one more disruption once the restarting resizes of ours it has not yet
//     counted are taken off its status.disruptionsAllowed.
//
// Check and reservation are one step (Reserve, under one lock), taken before
// the resize is sent: workers deciding on pods of one workload at the same
// time cannot all pass the check. A reservation is given back when the patch
// is refused or fails (Release), or held until the pod is really back
// (Observe): the resize completed, every container Ready, and the pod Ready
// for the workload's minReadySeconds.
package disruption

import (
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
)

// Request is what a restarting resize of one pod is checked against.
type Request struct {
	Pod *corev1.Pod
	// Workload identifies the pod's workload (its controller's UID); ""
	// when it has none: only PodDisruptionBudgets apply.
	Workload string
	// Siblings are the pods of the workload, the pod itself included.
	Siblings []*corev1.Pod
	// PDBs are the PodDisruptionBudgets of the pod's namespace; those whose
	// selector matches the pod apply.
	PDBs []*policyv1.PodDisruptionBudget
	// MinReady is how long the pod must stay Ready after its restart before
	// its reservation ends: the workload's minReadySeconds, or the default.
	MinReady time.Duration
}

// Verdict is the answer to a Request.
type Verdict struct {
	Allowed bool
	// Blocker names what holds the pod back, for events and the condition:
	// "PodDisruptionBudget kafka-pdb" or "the eviction tolerance".
	Blocker string
	// Message says why, in a sentence fragment.
	Message string
}

// reservation is a restarting resize of ours that has not come back yet.
type reservation struct {
	workload string
	ns       string
	labels   labels.Set
	// pdbVersions are the resourceVersions of the PDBs that applied when
	// the reservation was taken: while a PDB still has that version, its
	// status cannot have counted this disruption.
	pdbVersions map[types.UID]string
	minReady    time.Duration
	// taken is when the reservation was taken.
	taken time.Time
	// ready is whether the pod was Ready when last observed; readySince
	// when it became Ready again after its restart (zero: not yet back).
	ready      bool
	readySince time.Time
}

// Budget holds the reservations. Safe for concurrent use.
type Budget struct {
	tolerance float64
	clock     clock.PassiveClock

	mu       sync.Mutex
	reserved map[types.UID]*reservation
}

// New returns a Budget for the eviction tolerance (a fraction of a
// workload's pods).
func New(tolerance float64, clk clock.PassiveClock) *Budget {
	return &Budget{tolerance: tolerance, clock: clk, reserved: map[types.UID]*reservation{}}
}

// Reserve checks whether the pod may have its containers restarted now and,
// if so, reserves it: in the same step, so that concurrent callers never
// exceed a budget. A pod that already holds a reservation keeps it.
func (b *Budget) Reserve(req Request) Verdict {
	b.mu.Lock()
	defer b.mu.Unlock()
	uid := req.Pod.UID
	if _, ok := b.reserved[uid]; ok {
		return Verdict{Allowed: true}
	}
	if req.Workload != "" {
		if ok, down, allowed := b.toleranceAllows(req); !ok {
			return Verdict{Blocker: "the eviction tolerance",
				Message: fmt.Sprintf("%d of %d pods of the workload are restarting or not Ready, and the eviction tolerance allows %d at once", down, countLive(req.Siblings), allowed)}
		}
	}
	versions := map[types.UID]string{}
	for _, pdb := range matching(req.PDBs, req.Pod) {
		if ok, left := b.pdbAllows(pdb, uid); !ok {
			return Verdict{Blocker: "PodDisruptionBudget " + pdb.Name,
				Message: fmt.Sprintf("PodDisruptionBudget %s allows %d more disruptions (%d by its status, less %d restarts of ours it has not counted yet)",
					pdb.Name, max(left, 0), pdb.Status.DisruptionsAllowed, pdb.Status.DisruptionsAllowed-left)}
		}
		versions[pdb.UID] = pdb.ResourceVersion
	}
	b.reserved[uid] = &reservation{
		workload: req.Workload, ns: req.Pod.Namespace, labels: labels.Set(req.Pod.Labels),
		pdbVersions: versions, minReady: req.MinReady, ready: podReady(req.Pod), taken: b.clock.Now(),
	}
	return Verdict{Allowed: true}
}

// toleranceAllows counts the pods of the workload that are down (not
// Ready, or reserved) besides the one asking. Callers hold b.mu.
func (b *Budget) toleranceAllows(req Request) (ok bool, down, allowed int) {
	total := 0
	for _, p := range req.Siblings {
		if terminal(p) {
			continue
		}
		total++
		if p.UID == req.Pod.UID {
			continue
		}
		if _, held := b.reserved[p.UID]; held || !podReady(p) {
			down++
		}
	}
	allowed = max(int(math.Floor(b.tolerance*float64(total))), 1)
	return down < allowed, down, allowed
}

// pdbAllows tells whether pdb allows one more disruption once the
// reservations of ours it has not counted yet are taken off, and how many
// it then allows. A reservation is not counted by the PDB while its pod is
// still Ready (the disruption controller sees it healthy) or while the PDB
// has not been written since the reservation was taken. Callers hold b.mu.
func (b *Budget) pdbAllows(pdb *policyv1.PodDisruptionBudget, self types.UID) (bool, int32) {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return false, 0
	}
	var uncounted int32
	for uid, r := range b.reserved {
		if uid == self || r.ns != pdb.Namespace || !sel.Matches(r.labels) {
			continue
		}
		version, seen := r.pdbVersions[pdb.UID]
		if r.ready || !seen || version == pdb.ResourceVersion {
			uncounted++
		}
	}
	left := pdb.Status.DisruptionsAllowed - uncounted
	return left > 0, left
}

// Release gives a reservation back: the resize was refused or failed, so
// nothing restarts.
func (b *Budget) Release(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.reserved, uid)
}

// Held reports whether the pod holds a reservation.
func (b *Budget) Held(uid types.UID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.reserved[uid]
	return ok
}

// Observe looks at a pod holding a reservation and ends the reservation once
// the pod is back: resize completed, every container Ready, and Ready for
// the reservation's minReady. It returns whether the reservation ended, and
// while held and the pod is Ready, how long until it may end (0 otherwise):
// the caller looks at the pod again then.
func (b *Budget) Observe(pod *corev1.Pod) (ended bool, after time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.reserved[pod.UID]
	if !ok {
		return false, 0
	}
	now := b.clock.Now()
	r.labels = labels.Set(pod.Labels)
	back := podReady(pod) && resize.ReadStatus(pod).State == resize.StateNone && pod.Status.ObservedGeneration >= pod.Generation
	r.ready = podReady(pod)
	if !back {
		r.readySince = time.Time{}
		return false, 0
	}
	if r.readySince.IsZero() {
		r.readySince = readySince(pod, now)
		if r.readySince.Before(r.taken) {
			// Ready since before the resize: the restart was too quick for
			// the Ready condition to show it (a kubelet reports the
			// restart, not always the blink). Counted from now.
			r.readySince = now
		}
	}
	if wait := r.readySince.Add(r.minReady).Sub(now); wait > 0 {
		return false, wait
	}
	delete(b.reserved, pod.UID)
	return true, 0
}

// Forget drops a pod's reservation (the pod is gone).
func (b *Budget) Forget(uid types.UID) { b.Release(uid) }

// Retain drops the reservations of pods live says are gone.
func (b *Budget) Retain(live func(types.UID) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for uid := range b.reserved {
		if !live(uid) {
			delete(b.reserved, uid)
		}
	}
}

// Reserved returns the UIDs holding a reservation, sorted.
func (b *Budget) Reserved() []types.UID {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]types.UID, 0, len(b.reserved))
	for uid := range b.reserved {
		out = append(out, uid)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// readySince is when the pod's Ready condition last turned True, or now when
// it does not say (or says a time after now).
func readySince(pod *corev1.Pod, now time.Time) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			if t := c.LastTransitionTime.Time; !t.After(now) {
				return t
			}
		}
	}
	return now
}

// matching returns the PDBs whose selector matches the pod, with
// policy/v1's meaning: an empty selector matches every pod of the namespace,
// a missing one none. A PDB whose selector cannot be read is included, and
// then refuses (pdbAllows): when in doubt, nothing restarts.
func matching(pdbs []*policyv1.PodDisruptionBudget, pod *corev1.Pod) []*policyv1.PodDisruptionBudget {
	var out []*policyv1.PodDisruptionBudget
	for _, pdb := range pdbs {
		if pdb.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || sel.Matches(labels.Set(pod.Labels)) {
			out = append(out, pdb)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func countLive(pods []*corev1.Pod) int {
	n := 0
	for _, p := range pods {
		if !terminal(p) {
			n++
		}
	}
	return n
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
