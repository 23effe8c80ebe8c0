// Package disruption paces resizes that restart containers. A resize whose
// changed resource has resizePolicy RestartContainer takes the pod down for
// a while: for our users that is a voluntary disruption, like an eviction,
// and it is limited the way operators already limit those:
//
//   - the eviction tolerance: at most max(1, floor(tolerance x pods)) pods of
//     a workload are down at once, counting pods that are not Ready, pods
//     being deleted and pods whose restarting resize has not yet come back;
//     a pod being deleted (evicted, preempted by the scheduler, replaced by a
//     rollout) is down but not one of the pods the share is taken of: its
//     replacement is;
//   - every PodDisruptionBudget whose selector matches the pod: it must allow
//     one more disruption once the restarting resizes of ours it has not yet
//     counted are taken off its status.disruptionsAllowed.
//
// Check and reservation are one step (Reserve, under one lock), taken before
// the resize is sent: workers deciding on pods of one workload at the same
// time cannot all pass the check. A reservation ends when nothing will
// restart: the patch is refused, a record says the resize cannot be made, or
// the kubelet marks it Infeasible (Release, Observe). It is held while a
// restart may still come: through a patch whose answer was lost (it may have
// been applied: Unconfirmed) until the pod shows what happened, and until
// the pod is really back (Observe): the resize shown on the pod and
// completed, every container Ready, and the pod Ready for the workload's
// minReadySeconds. A pod that stays Ready without the resize applied
// holds its place for Config.Timeout, and past it for as long as the pod
// shows a pending resize that restarts containers (Deferred by the kubelet,
// failing on the node: the kubelet may apply it, and restart the pod, at
// any time); one that shows none (the resize never seen on the pod, or not
// taken up) gives it back then. Restarts found under way at start, sent
// before this process led, are reserved too (Adopt, RestartUnderWay).
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

// Config holds the budget's settings.
type Config struct {
	// Tolerance is the eviction tolerance: the fraction of a workload's
	// pods that may be down at once.
	Tolerance float64
	// Timeout bounds how long a reservation is held while its pod stays
	// Ready and the kubelet has not applied the resize (not taken up, or
	// not shown by the cache); one the pod still shows pending and that
	// restarts containers (Deferred, failing on the node) is held past it
	// while the pod shows it. 0: no bound.
	Timeout time.Duration
}

// EndReason says why a reservation ended.
type EndReason string

const (
	// EndBack: the pod restarted and has been Ready for its minReady.
	EndBack EndReason = "Back"
	// EndInfeasible: the kubelet marked the resize Infeasible: it will not
	// apply it, so nothing restarts.
	EndInfeasible EndReason = "Infeasible"
	// EndExpired: the resize was still not applied after Config.Timeout
	// while the pod stayed Ready, and the pod shows no pending resize that
	// restarts containers.
	EndExpired EndReason = "Expired"
	// EndRefused: the API server refused the patch, or it failed before it
	// could be applied.
	EndRefused EndReason = "Refused"
	// EndRecorded: a record says the resize cannot be applied.
	EndRecorded EndReason = "Recorded"
	// EndWithheld: the resize was not sent after all (paused meanwhile).
	EndWithheld EndReason = "Withheld"
	// EndGone: the pod is gone.
	EndGone EndReason = "Gone"
)

// EndReasons lists every EndReason, in the order metrics list them.
var EndReasons = []EndReason{EndBack, EndInfeasible, EndExpired, EndRefused, EndRecorded, EndWithheld, EndGone}

// reservation is a restarting resize of ours that has not come back yet.
type reservation struct {
	name     string
	workload string
	ns       string
	labels   labels.Set
	// pdbVersions are the resourceVersions of the PDBs that applied when
	// the reservation was taken: while a PDB still has that version, its
	// status cannot have counted this disruption.
	pdbVersions map[types.UID]string
	minReady    time.Duration
	// generation and spec are the pod's metadata.generation and resources
	// when the resize was decided: a pod past that generation, or with
	// other resources, shows the resize (shown).
	generation int64
	spec       string
	shown      bool
	// unconfirmed: the answer to the patch was lost; it may have been
	// applied. Cleared once the pod shows it, or a patch is accepted.
	unconfirmed bool
	// adopted: found under way at start, not sent by this process.
	adopted bool
	// taken is when the reservation was taken (for an adopted one, when its
	// restart is counted from).
	taken time.Time
	// ready is whether the pod was Ready when last observed; readySince
	// when it became Ready again after its restart (zero: not yet back).
	ready      bool
	readySince time.Time
	// state is the pod's resize state when last observed.
	state resize.State
	// overdue: Config.Timeout passed while the pod showed a pending resize
	// that restarts containers; the place is kept (Observe).
	overdue bool
}

// Budget holds the reservations. Safe for concurrent use: every method is
// one atomic step.
type Budget struct {
	cfg   Config
	clock clock.PassiveClock

	mu       sync.Mutex
	reserved map[types.UID]*reservation
}

// New returns a Budget.
func New(cfg Config, clk clock.PassiveClock) *Budget {
	return &Budget{cfg: cfg, clock: clk, reserved: map[types.UID]*reservation{}}
}

// Reserve checks whether the pod may have its containers restarted now and,
// if so, reserves it: in the same step, so that concurrent callers never
// exceed a budget. A pod that already holds a reservation keeps it, now for
// the resize decided on this version of the pod.
func (b *Budget) Reserve(req Request) Verdict {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	uid := req.Pod.UID
	if r, ok := b.reserved[uid]; ok {
		r.sentFrom(req.Pod, now)
		return Verdict{Allowed: true}
	}
	if req.Workload != "" {
		if ok, down, allowed, holders := b.toleranceAllows(req, now); !ok {
			return Verdict{Blocker: "the eviction tolerance",
				Message: fmt.Sprintf("%d of %d pods of the workload are restarting, not Ready or being deleted, and the eviction tolerance allows %d at once%s",
					down, countLive(req.Siblings), allowed, holders)}
		}
	}
	versions := map[types.UID]string{}
	for _, pdb := range matching(req.PDBs, req.Pod) {
		if ok, left, holders := b.pdbAllows(pdb, uid, now); !ok {
			return Verdict{Blocker: "PodDisruptionBudget " + pdb.Name,
				Message: fmt.Sprintf("PodDisruptionBudget %s allows %d more disruptions (%d by its status, less %d restarts of ours it has not counted yet)%s",
					pdb.Name, max(left, 0), pdb.Status.DisruptionsAllowed, pdb.Status.DisruptionsAllowed-left, holders)}
		}
		versions[pdb.UID] = pdb.ResourceVersion
	}
	r := b.newReservation(req, versions)
	r.sentFrom(req.Pod, now)
	b.reserved[uid] = r
	return Verdict{Allowed: true}
}

func (b *Budget) newReservation(req Request, versions map[types.UID]string) *reservation {
	return &reservation{
		name: req.Pod.Name, workload: req.Workload, ns: req.Pod.Namespace, labels: labels.Set(req.Pod.Labels),
		pdbVersions: versions, minReady: req.MinReady, ready: podReady(req.Pod),
	}
}

// sentFrom makes r the reservation of a resize decided on pod now.
func (r *reservation) sentFrom(pod *corev1.Pod, now time.Time) {
	r.generation, r.spec, r.shown, r.adopted = pod.Generation, resize.SpecOf(pod), false, false
	r.taken, r.readySince, r.state, r.overdue = now, time.Time{}, "", false
}

// Adopt reserves, without any check, a restart found under way that this
// process did not send: one an earlier leader sent, or one that was under
// way when the updater restarted (RestartUnderWay). Its restart is counted
// from since. A pod already holding a reservation keeps it.
func (b *Budget) Adopt(req Request, since time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.reserved[req.Pod.UID]; ok {
		return
	}
	versions := map[types.UID]string{}
	for _, pdb := range matching(req.PDBs, req.Pod) {
		versions[pdb.UID] = pdb.ResourceVersion
	}
	r := b.newReservation(req, versions)
	r.adopted, r.shown, r.taken = true, true, since
	b.reserved[req.Pod.UID] = r
}

// toleranceAllows counts the pods of the workload that are down (not
// Ready, being deleted, or reserved) besides the one asking, and describes
// the reservations among them. The share is taken of the pods not being
// deleted: one on its way out (a scheduler's preemption, an eviction, a
// rollout) is down, and counted once more in the workload's size it would
// make room for one more restart of ours than the pods that stay allow.
// Callers hold b.mu.
func (b *Budget) toleranceAllows(req Request, now time.Time) (ok bool, down, allowed int, holders string) {
	total := 0
	var held []*reservation
	for _, p := range req.Siblings {
		if terminal(p) {
			continue
		}
		leaving := p.DeletionTimestamp != nil
		if !leaving {
			total++
		}
		if p.UID == req.Pod.UID {
			continue
		}
		r, isHeld := b.reserved[p.UID]
		if isHeld {
			held = append(held, r)
		}
		if isHeld || leaving || !podReady(p) {
			down++
		}
	}
	allowed = max(int(math.Floor(b.cfg.Tolerance*float64(total))), 1)
	return down < allowed, down, allowed, b.describe(held, now)
}

// pdbAllows tells whether pdb allows one more disruption once the
// reservations of ours it has not counted yet are taken off, and how many
// it then allows. A reservation is not counted by the PDB while its pod is
// still Ready (the disruption controller sees it healthy) or while the PDB
// has not been written since the reservation was taken. Callers hold b.mu.
func (b *Budget) pdbAllows(pdb *policyv1.PodDisruptionBudget, self types.UID, now time.Time) (bool, int32, string) {
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return false, 0, ""
	}
	var uncounted int32
	var held []*reservation
	for uid, r := range b.reserved {
		if uid == self || r.ns != pdb.Namespace || !sel.Matches(r.labels) {
			continue
		}
		version, seen := r.pdbVersions[pdb.UID]
		if r.ready || !seen || version == pdb.ResourceVersion {
			uncounted++
			held = append(held, r)
		}
	}
	left := pdb.Status.DisruptionsAllowed - uncounted
	return left > 0, left, b.describe(held, now)
}

// Sent notes that the pod's patch was accepted.
func (b *Budget) Sent(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.reserved[uid]; ok {
		r.unconfirmed = false
	}
}

// Unconfirmed notes that the answer to the pod's patch was lost: it may have
// been applied. The reservation is kept until the pod shows what happened,
// a later patch of it is answered, or Config.Timeout passes.
func (b *Budget) Unconfirmed(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.reserved[uid]; ok {
		r.unconfirmed = true
	}
}

// Release gives a reservation back, for reason: nothing restarts. It
// reports whether the pod held one.
func (b *Budget) Release(uid types.UID, _ EndReason) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.reserved[uid]
	delete(b.reserved, uid)
	return ok
}

// Held reports whether the pod holds a reservation.
func (b *Budget) Held(uid types.UID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.reserved[uid]
	return ok
}

// Observation is what Observe tells of a reservation.
type Observation struct {
	// Ended is why the reservation ended; "" while it is held (or the pod
	// holds none).
	Ended EndReason
	// After, while held, is when to look at the pod again: its minReady is
	// up, or its reservation expires. 0: at its next update.
	After time.Duration
	// Message says, for EndExpired and Overdue, where the resize stood.
	Message string
	// Overdue: Config.Timeout passed, and the place is kept because the
	// pod still shows a pending resize that restarts containers
	// (resize.PendingRestart): the kubelet may apply it at any time. Told
	// once per reservation.
	Overdue bool
}

// Observe looks at a pod holding a reservation and ends the reservation
// once the pod is back: the resize shown on the pod and completed, the pod
// Ready, and Ready for the reservation's minReady. It also ends it when
// nothing will restart (the kubelet marked the resize Infeasible), and when
// the pod has stayed Ready without the resize applied for Config.Timeout
// and shows no pending resize that restarts containers.
func (b *Budget) Observe(pod *corev1.Pod) Observation {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.reserved[pod.UID]
	if !ok {
		return Observation{}
	}
	now := b.clock.Now()
	r.labels = labels.Set(pod.Labels)
	r.ready = podReady(pod)
	if !r.shown && (pod.Generation > r.generation || resize.SpecOf(pod) != r.spec) {
		r.shown, r.unconfirmed = true, false
	}
	if r.shown {
		r.state = resize.ReadStatus(pod).State
		if r.state == resize.StateInfeasible {
			delete(b.reserved, pod.UID)
			return Observation{Ended: EndInfeasible}
		}
	}
	// The resize status tells completion: on a kubelet that reports
	// observedGeneration, only once it has caught up (ReadStatus).
	back := r.shown && r.ready && r.state == resize.StateNone
	if !back {
		r.readySince = time.Time{}
		if !r.ready || b.cfg.Timeout <= 0 {
			// Down: counted as such until it is back, however long.
			return Observation{}
		}
		deadline := r.taken.Add(b.cfg.Timeout)
		if wait := deadline.Sub(now); wait > 0 {
			return Observation{After: wait}
		}
		if resize.PendingRestart(pod) {
			// The kubelet may still apply it, and restart the pod: the
			// place is kept while the pod shows it pending. Its next
			// update (applied, Infeasible, the spec changed) ends it.
			first := !r.overdue
			r.overdue = true
			if first {
				return Observation{Overdue: true, Message: r.what()}
			}
			return Observation{}
		}
		delete(b.reserved, pod.UID)
		return Observation{Ended: EndExpired, Message: r.what()}
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
		return Observation{After: wait}
	}
	delete(b.reserved, pod.UID)
	return Observation{Ended: EndBack}
}

// Forget drops a pod's reservation (the pod is gone) and reports whether it
// held one.
func (b *Budget) Forget(uid types.UID) bool { return b.Release(uid, EndGone) }

// Retain drops the reservations of pods live says are gone, and returns how
// many it dropped.
func (b *Budget) Retain(live func(types.UID) bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for uid := range b.reserved {
		if !live(uid) {
			delete(b.reserved, uid)
			n++
		}
	}
	return n
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
