// Package canary is the gate of decreases, per VPA: a new lower target goes
// to a few pods first (the canaries), and to the others only once every
// canary has been watched for its window without harm; values harm was seen
// at are held for the whole VPA (the hold). The pod path asks before it
// lowers anything (Admit) and reports what became of it (Sent, Release,
// Started, Passed, Harmed, Gone); increases never ask.
//
// Admit checks and takes a canary's place in one step, under one lock with
// the hold: workers deciding on the pods of one VPA at once never lower more
// pods than the canaries before the canaries' windows end, nor lower a pod
// to held values once the hold is set. An admitted canary holds its place
// only for the sync that asked: the caller sends its resize (Sent) or gives
// the place back (Release) before it returns.
//
// What must survive a restart or a change of leader is a record in the
// safety store (pkg/records, StoreSafety): each canary sent (KindCanary:
// what it was lowered from and to, and, in its watch's canary lowering,
// when its watch began: records.CanarySince), a revert due
// after harm (KindRevert), and the hold (KindHarmHold, keyed by the VPA's
// UID). A VPA's records are read into the gate the first time it is asked
// about the VPA; a restarted updater finds the canaries and their windows
// where they were, and does not lower the other pods at once.
//
// canary.go holds the gate and Admit; pods.go what becomes of a canary;
// hold.go the hold and the revert after harm; status.go what the VPA's
// condition says.
package canary

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// Config holds the gate's settings.
type Config struct {
	// HarmHold is how long a first hold lasts (--harm-hold), unless the
	// recommendation rises above its values first; 0 means
	// records.DefaultHoldLength. Holds in a row last longer
	// (records.HoldLength).
	HarmHold time.Duration
}

// Gate holds, per VPA, its canaries and its hold. Safe for concurrent use:
// every method is one atomic step.
type Gate struct {
	cfg   Config
	store records.Store
	clock clock.PassiveClock

	mu   sync.Mutex
	vpas map[types.UID]*vpaState
}

// New returns a Gate whose records live in store (the safety store).
// A store that may take another writer's records (records.Merging) tells
// the gate of them.
func New(cfg Config, store records.Store, clk clock.PassiveClock) *Gate {
	if cfg.HarmHold <= 0 {
		cfg.HarmHold = records.DefaultHoldLength
	}
	g := &Gate{cfg: cfg, store: store, clock: clk, vpas: map[types.UID]*vpaState{}}
	if m, ok := store.(records.Merging); ok {
		m.OnMerged(g.merged)
	}
	return g
}

// vpaState is what the gate holds for one VPA.
type vpaState struct {
	owner records.Owner
	// hold is the VPA's hold record, nil when it has none.
	hold *records.Record
	// round is the decrease being proven, or proven (passed); nil when
	// none is.
	round *round
	// waiting holds the keys of the pods that wait for the round.
	waiting sets.Set[string]
	// pods and window are what the last Admit was told: the VPA's pods,
	// and its window.
	pods   int
	window time.Duration
}

// round is one decrease of a VPA, tried on its canaries.
type round struct {
	// to are the values the decrease lowers to (the lowest asked while it
	// runs).
	to       resources.Resources
	canaries map[types.UID]*canaryPod
	// passed: every canary has been watched for its window without harm
	// at values no higher than to. Pods may then be lowered to to, or to
	// anything above, at once.
	passed bool
}

// canaryPod is one canary of a round.
type canaryPod struct {
	key, name string
	// admitted: its place is taken by a sync that has not sent its resize
	// yet (Sent or Release follows).
	admitted bool
	sent     bool
	// from and to are what its resize lowered, before and after.
	from, to resources.Resources
	// since is when its watch began (zero: not yet); passed, that its
	// window ended without harm, running at ran.
	since  time.Time
	passed bool
	ran    resources.Resources
}

// ensure returns the state of owner's VPA, read from the store the first
// time. Callers hold g.mu.
func (g *Gate) ensure(owner records.Owner, window time.Duration) *vpaState {
	v, ok := g.vpas[owner.UID]
	if ok {
		if window > 0 {
			v.window = window
		}
		return v
	}
	v = &vpaState{owner: owner, waiting: sets.New[string](), window: window}
	g.vpas[owner.UID] = v
	for uid, r := range g.store.Of(owner) {
		v.take(uid, r)
	}
	if v.round != nil {
		v.round.passed = v.round.allPassed()
	}
	return v
}

// take holds what a record of the VPA's says: its hold, or a canary sent
// (whose window, when it began long enough ago, has passed). Callers hold
// g.mu.
func (v *vpaState) take(uid types.UID, r *records.Record) {
	switch {
	case r.Kind == records.KindHarmHold && uid == v.owner.UID:
		v.hold = r
	case r.Kind == records.KindCanary:
		if v.round == nil {
			v.round = &round{canaries: map[types.UID]*canaryPod{}}
		}
		v.round.to = resize.MergeMin(v.round.to, r.Attempted)
		cp := &canaryPod{sent: true, from: r.From, to: r.Attempted, since: r.CanarySince()}
		if old, ok := v.round.canaries[uid]; ok {
			// A sync may hold its place: Sent or Release follows.
			cp.key, cp.name, cp.admitted = old.key, old.name, old.admitted
		}
		// Not passed here, even when its window ended while no updater
		// ran: its watch, taken up from its record, looks at the pod first
		// (Passed).
		v.round.canaries[uid] = cp
	}
}

// merged takes the records of a VPA another writer made (a deposed
// leader's last canary, or its hold), met by the store after a conflict
// (records.Merging): the gate holds them as if it had read them at first.
func (g *Gate) merged(owner records.Owner, taken map[types.UID]*records.Record) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.vpas[owner.UID]
	if !ok {
		return // read from the store when first asked about
	}
	for uid, r := range taken {
		v.take(uid, r)
	}
	if v.round != nil {
		v.round.passed = v.round.allPassed()
	}
}

// Request is a pod's resize that lowers values.
type Request struct {
	Owner records.Owner
	// Pod, Key (namespace/name) and Name name the pod.
	Pod       types.UID
	Key, Name string
	// To are the values the resize lowers, as lowered (resize.Lowered).
	To resources.Resources
	// Pods counts the VPA's pods; Canary and Window are its settings.
	Pods   int
	Canary resize.Canary
	Window time.Duration
}

// Verdict says which of a pod's decreases may go now.
type Verdict struct {
	// Gate holds back what may not go (the hold, a canary's wait); nil
	// when everything may.
	Gate *resize.Gate
	// Canary: the pod goes as a canary; its place is held until Sent or
	// Release.
	Canary bool
	// Until is when the pods waiting for the canaries may go, if known.
	Until time.Time
}

// Admit tells which of a pod's decreases may go now, and takes a canary's
// place for it when it is to be one: in one step, so that concurrent
// callers never take more places than the VPA has canaries, nor lower a pod
// past the hold.
func (g *Gate) Admit(req Request) Verdict {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.ensure(req.Owner, req.Window)
	v.pods = req.Pods
	var gate resize.Gate
	to := req.To
	if hold := g.holdNow(v); hold != nil {
		gate.Hold, gate.HoldWhy = hold.Attempted, g.holdWhy(hold)
		to = resize.Without(to, func(c, list string, name corev1.ResourceName, q resource.Quantity) bool {
			floor, ok := resize.Value(hold.Attempted, c, list, name)
			return ok && records.IsHeld(q, floor)
		})
	}
	verdict := func(wait string) Verdict {
		gate.Wait = wait
		if gate.Hold == nil && wait == "" {
			return Verdict{}
		}
		return Verdict{Gate: &gate}
	}
	want := req.Canary.Of(req.Pods)
	if len(to) == 0 || want == 0 {
		return verdict("")
	}
	r := v.round
	if r != nil {
		if _, canary := r.canaries[req.Pod]; !canary && !covers(r.to, to) {
			if r.passed {
				// A decrease below what was proven: a new round.
				g.endRound(v, "")
				r = nil
			} else {
				r.to = resize.MergeMin(r.to, to)
			}
		}
	}
	if r == nil {
		r = &round{to: to, canaries: map[types.UID]*canaryPod{}}
		v.round = r
	}
	if cp, ok := r.canaries[req.Pod]; ok {
		if !covers(r.to, to) {
			r.to, r.passed = resize.MergeMin(r.to, to), false
		}
		cp.admitted = true
		return Verdict{Gate: verdict("").Gate, Canary: true}
	}
	if r.passed {
		return verdict("")
	}
	if len(r.canaries) < want {
		r.canaries[req.Pod] = &canaryPod{key: req.Key, name: req.Name, admitted: true}
		return Verdict{Gate: verdict("").Gate, Canary: true}
	}
	v.waiting.Insert(req.Key)
	until := r.until(v.window)
	return Verdict{Gate: verdict(g.waitWhy(v, r, until)).Gate, Until: until}
}

// covers tells whether a round lowering to floor covers a decrease to to:
// every value of to is at least floor's (values floor lacks are not
// covered).
func covers(floor, to resources.Resources) bool {
	ok := true
	resources.ForEachValue(to, floor, func(_, _ string, _ corev1.ResourceName, want, f *resource.Quantity) {
		if want != nil && (f == nil || want.Cmp(*f) < 0) {
			ok = false
		}
	})
	return ok
}

// until is when the round's canaries' windows all end; zero when one has
// not begun.
func (r *round) until(window time.Duration) time.Time {
	var last time.Time
	for _, cp := range r.canaries {
		if cp.since.IsZero() {
			return time.Time{}
		}
		if end := cp.since.Add(window); end.After(last) {
			last = end
		}
	}
	return last
}

// allPassed tells whether every canary has passed at values no higher than
// the round's.
func (r *round) allPassed() bool {
	if len(r.canaries) == 0 {
		return false
	}
	for _, cp := range r.canaries {
		if !cp.passed || !ranAtMost(cp.ran, r.to) {
			return false
		}
	}
	return true
}

// ranAtMost tells whether a canary ran, for every value of to it has, at no
// more than to's.
func ranAtMost(ran, to resources.Resources) bool {
	ok := true
	resources.ForEachValue(to, ran, func(_, _ string, _ corev1.ResourceName, want, had *resource.Quantity) {
		if want != nil && had != nil && had.Cmp(*want) > 0 {
			ok = false
		}
	})
	return ok
}
