package state

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// Sent is a resize the updater sent to a pod and has not seen completed.
type Sent struct {
	// Target may be shared with the pods sent an equal one: read it, never
	// change it.
	Target resources.Resources
	At     time.Time
	key    string
}

// sharedTarget is a target of resizes under way and how many pods hold it.
type sharedTarget struct {
	target resources.Resources
	pods   int
}

// MarkSent remembers a resize sent to a pod, from what it had to target,
// tracking the pod under vpa if it is not yet. The target is only read from
// then on, and may be shared with other pods: the pods of a workload are
// sent the same one, and a burst keeps a target per pod until each resize is
// seen completed. The resize stays the pod's last (LastResize) after that.
func (t *Tracker[S]) MarkSent(uid types.UID, vpa, name string, from, target resources.Resources, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, deleted := t.gone[uid]; deleted {
		return
	}
	e := t.entryFor(uid, vpa, name)
	t.release(e)
	defer func() { e.last = &resize.LastResize{At: at, From: resources.Compact(from), To: e.sent.Target} }()
	if !t.shareTargets {
		e.sent = &Sent{Target: target, At: at}
		return
	}
	// Equal renderings are equal targets: String writes all a Resources
	// holds, each quantity in its canonical form.
	key := target.String()
	shared := t.targets[key]
	if shared == nil {
		shared = &sharedTarget{target: target}
		t.targets[key] = shared
	}
	shared.pods++
	e.sent = &Sent{Target: shared.target, At: at, key: key}
}

// release forgets the resize under way of a pod, dropping its target when no
// other pod holds it. Callers hold t.mu.
func (t *Tracker[S]) release(e *entry[S]) {
	if e.sent == nil {
		return
	}
	if shared := t.targets[e.sent.key]; e.sent.key != "" && shared != nil {
		if shared.pods--; shared.pods <= 0 {
			delete(t.targets, e.sent.key)
		}
	}
	e.sent = nil
}

// Outcomes of a resize under way (metric labels).
const (
	OutcomeCompleted                 = "Completed"
	OutcomeSuperseded                = "Superseded"
	OutcomeKubeletInfeasible         = "KubeletInfeasible"
	OutcomeKubeletMemoryLimitRefused = "KubeletMemoryLimitRefused"
)

// Settle tells what became of a resize sent to a pod, given its resize
// status now and its current resources: "" while still under way.
func (t *Tracker[S]) Settle(uid types.UID, st resize.State, current func(resources.Resources) resources.Resources) (string, *Sent) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[uid]
	if !ok || e.sent == nil {
		return "", nil
	}
	sent := e.sent
	switch st {
	case resize.StateNone:
		t.release(e)
		if resources.Equal(current(sent.Target), sent.Target) {
			return OutcomeCompleted, sent
		}
		return OutcomeSuperseded, sent
	case resize.StateInfeasible:
		t.release(e)
		return OutcomeKubeletInfeasible, sent
	case resize.StateMemoryLimitRefused:
		t.release(e)
		return OutcomeKubeletMemoryLimitRefused, sent
	}
	return "", nil
}

// LastResize returns the last resize sent to a pod, nil when none is known
// (none sent since the pod was first tracked by this process).
func (t *Tracker[S]) LastResize(uid types.UID) *resize.LastResize {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.entries[uid]; ok {
		return e.last
	}
	return nil
}
