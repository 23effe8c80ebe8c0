// Package noderoom holds the room on nodes that resizes sent by the updater
// will take and that the pod cache does not show yet.
//
// A VPA that sends only what fits (resize-when: fits-node, the default for
// Strimzi's brokers) checks each resize against its node: the node's
// allocatable less what the pods bound to it hold (resize.FitsNode). Two
// brokers of one node decided at the same moment each fit alone, and
// together would not; the first resize sent is not in the cache when the
// second is checked. So the check and the hold it allows are one step
// (Ledger.Reserve, under one lock, with the node's pods read inside it),
// taken before the resize is sent, and every resize the updater sends to a
// bound pod holds its room, checked or not. A hold ends when the cache
// shows the resize (the pod's own requests count it from then on), when
// the patch is refused or fails before it could be applied, when the pod
// goes, or after MaxHold. A patch whose answer was lost keeps its hold: it
// may have been applied.
package noderoom

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// MaxHold bounds a hold whose resize the cache never shows (a patch whose
// lost answer hid a refusal, and that was not sent again; a watch that
// stopped): far longer than a resize takes to reach the cache.
const MaxHold = 5 * time.Minute

// Pods returns the cached pods bound to a node.
type Pods func(node string) []*corev1.Pod

// Ledger holds the room of resizes sent and not yet shown by the cache.
// Safe for concurrent use: every method is one atomic step.
type Ledger struct {
	clock clock.PassiveClock
	pods  Pods

	mu   sync.Mutex
	held map[types.UID]*hold
}

// hold is the room a resize sent to one pod takes.
type hold struct {
	node string
	// generation and spec are the pod's when the resize was decided: a
	// cached pod past them shows the resize.
	generation int64
	spec       string
	// requests is what the pod requests of the node once resized
	// (resize.ResizedRequests).
	requests corev1.ResourceList
	taken    time.Time
}

// New returns a Ledger reading the cached pods of a node through pods.
func New(clk clock.PassiveClock, pods Pods) *Ledger {
	return &Ledger{clock: clk, pods: pods, held: map[types.UID]*hold{}}
}

// Reserve holds the room pod, resized to target, takes of its node. With a
// node, it first checks that the resize fits it (resize.FitsNode, counting
// the other holds of the node) and holds nothing when it does not, saying
// what is short; without one (a resize sent whatever the node has free) it
// only holds. Check and hold are one step: concurrent callers never hold
// more than a node has.
func (l *Ledger) Reserve(pod *corev1.Pod, target resources.Resources, node *corev1.Node) (bool, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	need := resize.ResizedRequests(pod, target)
	if node != nil {
		// Read inside the lock: a hold settled by another caller is in
		// what is read here.
		others := l.pods(node.Name)
		l.settle(node.Name, others, now)
		held := map[types.UID]corev1.ResourceList{}
		for uid, h := range l.held {
			if h.node == node.Name && uid != pod.UID {
				held[uid] = h.requests
			}
		}
		if fits, why := resize.FitsNode(node, others, held, pod, target); !fits {
			if len(held) > 0 {
				why += " (counting resizes sent to other pods of the node and not seen yet)"
			}
			return false, why
		}
	}
	spec := resize.SpecOf(pod)
	if h, ok := l.held[pod.UID]; ok && h.generation == pod.Generation && h.spec == spec {
		// An earlier resize decided on this same version of the pod may
		// still be applied (its answer was lost): the larger of both.
		need = resize.Larger(h.requests, need)
	}
	l.held[pod.UID] = &hold{node: pod.Spec.NodeName, generation: pod.Generation, spec: spec, requests: need, taken: now}
	return true, ""
}

// settle drops the holds of node that the cached pods (others) show, and
// those past MaxHold. Callers hold l.mu.
func (l *Ledger) settle(node string, others []*corev1.Pod, now time.Time) {
	byUID := make(map[types.UID]*corev1.Pod, len(others))
	for _, p := range others {
		byUID[p.UID] = p
	}
	for uid, h := range l.held {
		if h.node != node {
			continue
		}
		if now.Sub(h.taken) >= MaxHold {
			delete(l.held, uid)
			continue
		}
		if p, ok := byUID[uid]; ok && (p.Generation > h.generation || resize.SpecOf(p) != h.spec) {
			delete(l.held, uid)
		}
	}
}

// Release drops a pod's hold: its resize was refused or failed before it
// could be applied, or was not sent. It reports whether there was one.
func (l *Ledger) Release(uid types.UID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.held[uid]
	delete(l.held, uid)
	return ok
}

// Retain drops the holds of pods live says are gone, and settles every
// other against the cache.
func (l *Ledger) Retain(live func(types.UID) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	nodes := map[string]bool{}
	for uid, h := range l.held {
		if !live(uid) {
			delete(l.held, uid)
			continue
		}
		nodes[h.node] = true
	}
	for node := range nodes {
		l.settle(node, l.pods(node), now)
	}
}

// Len returns the number of holds.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}
