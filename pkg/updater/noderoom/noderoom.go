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
// bound pod holds its room, checked or not. Each node has its own lock: one
// check on a full node (110 pods) holds it for about half a millisecond,
// most of it PodRequests (BenchmarkReserve), and checks on other nodes do
// not wait for it. A hold ends when the cache
// shows the resize (the pod's own requests count it from then on: Seen, from
// the cache's update handler, or the next check of the node), when
// the patch is refused or fails before it could be applied, when the pod
// goes, or after MaxHold. A patch whose answer was lost keeps its hold: it
// may have been applied.
//
// A node has an entry in the ledger only while it holds something or a
// call is at work on it: the entry goes with its last hold, so that nodes
// come and go (spot nodes, a cluster scaled up and down) without the ledger
// growing with every node a pod ever ran on.
package noderoom

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
// Safe for concurrent use: every method is one atomic step for the node it
// is about. Each node has its own lock: a check on one node never waits for
// another's.
type Ledger struct {
	clock clock.PassiveClock
	pods  Pods

	// mu guards nodes and every entry's users; it is taken before a
	// node's own lock, never after.
	mu    sync.Mutex
	nodes map[string]*nodeHolds
}

// nodeHolds holds the room held on one node.
type nodeHolds struct {
	// users counts the calls at work on the node (under Ledger.mu): the
	// entry is dropped by the last of them when it holds nothing, and
	// never while one may still add a hold to it.
	users int

	mu   sync.Mutex
	held map[types.UID]*hold
}

// hold is the room a resize sent to one pod takes.
type hold struct {
	// generation and spec are the pod's when the resize was decided: a
	// cached pod past them shows the resize.
	generation int64
	spec       string
	// room is what the pod requests of the node once resized
	// (resize.ResizedRequests), of what resize.FitsNode compares.
	room  room
	taken time.Time
}

// room is the cpu and memory a pod requests of its node: what
// resize.FitsNode compares, kept without a map (a burst of resizes holds
// one per pod resized).
type room struct {
	cpu, memory resource.Quantity
	hasCPU      bool
	hasMemory   bool
}

func roomOf(requests corev1.ResourceList) room {
	var r room
	r.cpu, r.hasCPU = requests[corev1.ResourceCPU]
	r.memory, r.hasMemory = requests[corev1.ResourceMemory]
	return r
}

// list returns the room as FitsNode takes it.
func (r room) list() corev1.ResourceList {
	out := make(corev1.ResourceList, 2)
	if r.hasCPU {
		out[corev1.ResourceCPU] = r.cpu
	}
	if r.hasMemory {
		out[corev1.ResourceMemory] = r.memory
	}
	return out
}

// larger returns, for cpu and memory, the larger of r and o.
func (r room) larger(o room) room {
	if o.hasCPU && (!r.hasCPU || o.cpu.Cmp(r.cpu) > 0) {
		r.cpu, r.hasCPU = o.cpu, true
	}
	if o.hasMemory && (!r.hasMemory || o.memory.Cmp(r.memory) > 0) {
		r.memory, r.hasMemory = o.memory, true
	}
	return r
}

// New returns a Ledger reading the cached pods of a node through pods.
func New(clk clock.PassiveClock, pods Pods) *Ledger {
	return &Ledger{clock: clk, pods: pods, nodes: map[string]*nodeHolds{}}
}

// node returns the holds of a node, creating them, for a call that ends
// with done.
func (l *Ledger) node(name string) *nodeHolds {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, ok := l.nodes[name]
	if !ok {
		n = &nodeHolds{held: map[types.UID]*hold{}}
		l.nodes[name] = n
	}
	n.users++
	return n
}

// existing returns the holds of a node if it has an entry, for a call that
// ends with done, and nil otherwise.
func (l *Ledger) existing(name string) *nodeHolds {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.nodes[name]
	if n != nil {
		n.users++
	}
	return n
}

// done ends a call on a node's holds (from node or existing), after its
// lock is released, and drops the node's entry when it was the last call
// and the node holds nothing.
func (l *Ledger) done(name string, n *nodeHolds) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n.users--
	if n.users > 0 {
		return
	}
	// No other call has the entry: none holds its lock or can take it
	// before this one lets go of l.mu.
	n.mu.Lock()
	empty := len(n.held) == 0
	n.mu.Unlock()
	if empty && l.nodes[name] == n {
		delete(l.nodes, name)
	}
}

// Reserve holds the room pod, resized to target, takes of its node. With
// the node, it first checks that the resize fits it (resize.FitsNode,
// counting the other holds of the node) and holds nothing when it does not,
// saying what is short; without it (a resize sent whatever the node has
// free) it only holds. Check and hold are one step: concurrent callers
// never hold more than a node has.
func (l *Ledger) Reserve(pod *corev1.Pod, target resources.Resources, check *corev1.Node) (bool, string) {
	n := l.node(pod.Spec.NodeName)
	defer l.done(pod.Spec.NodeName, n)
	n.mu.Lock()
	defer n.mu.Unlock()
	now := l.clock.Now()
	if check != nil {
		// Read inside the node's lock: a hold settled by another caller
		// is in what is read here.
		others := l.pods(check.Name)
		n.settle(others, now)
		held := map[types.UID]corev1.ResourceList{}
		for uid, h := range n.held {
			if uid != pod.UID {
				held[uid] = h.room.list()
			}
		}
		if fits, why := resize.FitsNode(check, others, held, pod, target); !fits {
			if len(held) > 0 {
				why += "; counted: resizes sent to other pods of the node and not seen yet"
			}
			return false, why
		}
	}
	need := roomOf(resize.ResizedRequests(pod, target))
	spec := resize.SpecOf(pod)
	if h, ok := n.held[pod.UID]; ok && h.generation == pod.Generation && h.spec == spec {
		// An earlier resize decided on this same version of the pod may
		// still be applied (its answer was lost): the larger of both.
		need = h.room.larger(need)
	}
	n.held[pod.UID] = &hold{generation: pod.Generation, spec: spec, room: need, taken: now}
	return true, ""
}

// settle drops the holds that the cached pods of the node (others) show,
// and those past MaxHold. Callers hold n.mu.
func (n *nodeHolds) settle(others []*corev1.Pod, now time.Time) {
	byUID := make(map[types.UID]*corev1.Pod, len(others))
	for _, p := range others {
		byUID[p.UID] = p
	}
	for uid, h := range n.held {
		if now.Sub(h.taken) >= MaxHold {
			delete(n.held, uid)
			continue
		}
		if p, ok := byUID[uid]; ok && h.shownBy(p) {
			delete(n.held, uid)
		}
	}
}

// shownBy tells whether the cached pod shows the resize held for it.
func (h *hold) shownBy(pod *corev1.Pod) bool {
	return pod.Generation > h.generation || resize.SpecOf(pod) != h.spec
}

// Held returns the room held on a node by the resizes of pods other than
// except, by pod UID, as resize.FitsNode counts it: what a check of the
// node outside the ledger (pkg/updater/noderoom/buckets) adds to what the
// cache shows.
func (l *Ledger) Held(node string, except types.UID) map[types.UID]corev1.ResourceList {
	n := l.existing(node)
	if n == nil {
		return nil
	}
	defer l.done(node, n)
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[types.UID]corev1.ResourceList, len(n.held))
	for uid, h := range n.held {
		if uid != except {
			out[uid] = h.room.list()
		}
	}
	return out
}

// Seen drops the hold of a pod that the cache now shows resized, and
// reports whether it did. It is called by the update handler of the cache
// the ledger reads (Pods), which has the pod by then: a hold lasts while its
// resize is on its way, not until the next check of its node or Retain, so
// that a burst of resizes to pods no check reads keeps no room held.
// A pod without a hold costs a map lookup.
func (l *Ledger) Seen(pod *corev1.Pod) bool {
	n := l.existing(pod.Spec.NodeName)
	if n == nil {
		return false
	}
	defer l.done(pod.Spec.NodeName, n)
	n.mu.Lock()
	defer n.mu.Unlock()
	h, ok := n.held[pod.UID]
	if !ok || !h.shownBy(pod) {
		return false
	}
	delete(n.held, pod.UID)
	return true
}

// Release drops a pod's hold: its resize was refused or failed before it
// could be applied, or was not sent, or the pod is gone. It reports whether
// there was one. A node without holds is not looked at.
func (l *Ledger) Release(pod *corev1.Pod) bool {
	n := l.existing(pod.Spec.NodeName)
	if n == nil {
		return false
	}
	defer l.done(pod.Spec.NodeName, n)
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.held[pod.UID]
	delete(n.held, pod.UID)
	return ok
}

// Retain drops the holds of pods live says are gone, and settles every
// other against the cache (those past MaxHold go). A node left with no
// hold loses its entry.
func (l *Ledger) Retain(live func(types.UID) bool) {
	l.mu.Lock()
	names := make([]string, 0, len(l.nodes))
	for name := range l.nodes {
		names = append(names, name)
	}
	l.mu.Unlock()
	now := l.clock.Now()
	for _, name := range names {
		n := l.existing(name)
		if n == nil {
			continue
		}
		n.mu.Lock()
		for uid := range n.held {
			if !live(uid) {
				delete(n.held, uid)
			}
		}
		if len(n.held) > 0 {
			n.settle(l.pods(name), now)
		}
		n.mu.Unlock()
		l.done(name, n)
	}
}

// Nodes returns the number of nodes the ledger has an entry for: those
// holding room, and those a call is at work on.
func (l *Ledger) Nodes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.nodes)
}

// Len returns the number of holds.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	total := 0
	for _, n := range l.nodes {
		n.mu.Lock()
		total += len(n.held)
		n.mu.Unlock()
	}
	return total
}
