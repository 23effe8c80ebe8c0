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
// what it was lowered from and to, and when its watch began), a revert due
// after harm (KindRevert), and the hold (KindHarmHold, keyed by the VPA's
// UID). A VPA's records are read into the gate the first time it is asked
// about the VPA; a restarted updater finds the canaries and their windows
// where they were, and does not lower the other pods at once.
package canary

import (
	"fmt"
	"sort"
	"strings"
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
	// HarmHold is how long a hold lasts (--harm-hold), unless the
	// recommendation rises above its values first.
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
func New(cfg Config, store records.Store, clk clock.PassiveClock) *Gate {
	return &Gate{cfg: cfg, store: store, clock: clk, vpas: map[types.UID]*vpaState{}}
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
		switch {
		case r.Kind == records.KindHarmHold && uid == owner.UID:
			v.hold = r
		case r.Kind == records.KindCanary:
			if v.round == nil {
				v.round = &round{canaries: map[types.UID]*canaryPod{}}
			}
			v.round.to = resize.MergeMin(v.round.to, r.Attempted)
			// Not passed here, even when its window ended while no updater
			// ran: its watch, taken up from its record, looks at the pod
			// first (Passed).
			v.round.canaries[uid] = &canaryPod{sent: true, from: r.From, to: r.Attempted, since: r.RecordedAt}
		}
	}
	if v.round != nil {
		v.round.passed = v.round.allPassed()
	}
	return v
}

// holdNow returns the VPA's hold, nil once it has expired (then its record
// goes). Callers hold g.mu.
func (g *Gate) holdNow(v *vpaState) *records.Record {
	if v.hold == nil {
		return nil
	}
	if g.cfg.HarmHold > 0 && !g.clock.Now().Before(v.hold.RecordedAt.Add(g.cfg.HarmHold)) {
		v.hold = nil
		g.store.Delete(v.owner.UID)
		return nil
	}
	return v.hold
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
			return ok && q.Cmp(floor) <= 0
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

// Sent notes that the resize of a pod admitted as a canary was accepted (or
// may have been: its answer was lost): it lowered from to to. Its record is
// kept from now on. It tells whether the pod was admitted as a canary.
func (g *Gate) Sent(owner records.Owner, uid types.UID, from, to resources.Resources) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.vpas[owner.UID]
	if !ok || v.round == nil {
		return false
	}
	cp, ok := v.round.canaries[uid]
	if !ok || !cp.admitted {
		return false
	}
	cp.admitted, cp.sent, cp.from, cp.to = false, true, from, to
	cp.since, cp.passed, cp.ran = time.Time{}, false, nil
	g.store.Put(owner, uid, &records.Record{Kind: records.KindCanary, Attempted: to, From: from})
	return true
}

// Release gives back the place of a canary whose resize was not sent
// (withheld, refused, waiting for a budget or for room): another pod may
// take it. The pods waiting are not queued: they are when a canary's state
// changes.
func (g *Gate) Release(owner records.Owner, uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.vpas[owner.UID]
	if !ok || v.round == nil {
		return
	}
	if cp, ok := v.round.canaries[uid]; ok && cp.admitted {
		cp.admitted = false
		if !cp.sent {
			delete(v.round.canaries, uid)
			if len(v.round.canaries) == 0 && !v.round.passed {
				v.round = nil
			}
		}
	}
}

// Started notes that a canary's watch began at since; it returns when the
// pods waiting for the round may go, if that is known now.
func (g *Gate) Started(owner records.Owner, uid types.UID, since time.Time) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.ensure(owner, 0)
	if v.round == nil {
		return time.Time{}
	}
	cp, ok := v.round.canaries[uid]
	if !ok || !cp.sent {
		return time.Time{}
	}
	cp.since = since
	g.store.Put(owner, uid, &records.Record{Kind: records.KindCanary, Attempted: cp.to, From: cp.from, RecordedAt: since})
	return v.round.until(v.window)
}

// Passed notes that a canary's window ended without harm, the pod running
// at ran; once every canary of the round has, at values no higher than the
// round's, it returns the pods waiting, to be queued.
func (g *Gate) Passed(owner records.Owner, uid types.UID, ran resources.Resources) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.ensure(owner, 0)
	r := v.round
	if r == nil {
		return nil
	}
	cp, ok := r.canaries[uid]
	if !ok {
		return nil
	}
	cp.passed, cp.ran = true, ran
	if r.passed || !r.allPassed() {
		return nil
	}
	r.passed = true
	return g.takeWaiting(v)
}

// Canary tells whether a pod is a canary whose resize was sent, and what it
// lowered from and to and since when it has been watched (zero: not yet):
// a restarted updater watches it again from there.
func (g *Gate) Canary(owner records.Owner, uid types.UID, window time.Duration) (from, to resources.Resources, since time.Time, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.ensure(owner, window)
	if v.round == nil {
		return nil, nil, time.Time{}, false
	}
	cp, ok := v.round.canaries[uid]
	if !ok || !cp.sent || cp.passed {
		return nil, nil, time.Time{}, false
	}
	return cp.from, cp.to, cp.since, true
}

// Gone notes that a pod is gone, or that its resize was not applied: a
// canary's place is given back (its record goes) and the pods waiting are
// returned, to be queued: one of them takes the place.
func (g *Gate) Gone(owner records.Owner, uid types.UID) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.vpas[owner.UID]
	if !ok || v.round == nil {
		return nil
	}
	if _, ok := v.round.canaries[uid]; !ok {
		return nil
	}
	delete(v.round.canaries, uid)
	g.store.Delete(uid)
	if len(v.round.canaries) == 0 {
		v.round = nil
	} else if !v.round.passed {
		v.round.passed = v.round.allPassed()
	}
	return g.takeWaiting(v)
}

// Harm is harm seen after a resize that lowered values.
type Harm struct {
	Pod  types.UID
	Name string
	// From and To are what the resize lowered, before and after.
	From, To resources.Resources
	// Why says what harm, for the hold's message.
	Why string
}

// Harmed holds the values a resize lowered before harm was seen, for the
// whole VPA, and ends its round: no pod of the VPA is lowered to them, or
// below, until the recommendation rises above them or the hold expires.
// The pod is due a revert to what it had (Revert) when it is still there.
// It returns the pods waiting, to be queued: they are decided again against
// the hold.
func (g *Gate) Harmed(owner records.Owner, h Harm, podLeft bool) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.ensure(owner, 0)
	now := g.clock.Now()
	held := h.To
	if old := g.holdNow(v); old != nil {
		held = resize.MergeMax(old.Attempted, h.To)
	}
	v.hold = &records.Record{Kind: records.KindHarmHold, Attempted: held,
		Message: truncate(h.Name+": "+h.Why, maxHoldMessage), RecordedAt: now}
	g.store.Put(owner, owner.UID, v.hold)
	g.endRound(v, h.Pod)
	if podLeft && len(h.From) > 0 {
		g.store.Put(owner, h.Pod, &records.Record{Kind: records.KindRevert, Attempted: h.To, From: h.From,
			Message: truncate(h.Why, maxHoldMessage), RecordedAt: now})
	} else {
		g.store.Delete(h.Pod)
	}
	return g.takeWaiting(v)
}

// maxHoldMessage bounds what a hold's or a revert's record says.
const maxHoldMessage = 300

// endRound forgets the VPA's round and the records of its canaries, but
// for keep's.
func (g *Gate) endRound(v *vpaState, keep types.UID) {
	if v.round == nil {
		return
	}
	for uid, cp := range v.round.canaries {
		if cp.sent && uid != keep {
			g.store.Delete(uid)
		}
	}
	v.round = nil
}

// takeWaiting returns and forgets the pods waiting, sorted.
func (g *Gate) takeWaiting(v *vpaState) []string {
	out := sets.List(v.waiting)
	v.waiting.Clear()
	return out
}

// Revert tells whether a pod is due a revert after harm: what its resize
// lowered, from what, and the harm.
func (g *Gate) Revert(owner records.Owner, uid types.UID) (from, to resources.Resources, why string, ok bool) {
	r, ok := g.store.GetFor(owner, uid)
	if !ok || r.Kind != records.KindRevert {
		return nil, nil, "", false
	}
	return r.From, r.Attempted, r.Message, true
}

// Reverted notes that a pod's revert was sent (or is moot): its record
// goes.
func (g *Gate) Reverted(uid types.UID) {
	if r, ok := g.store.Get(uid); ok && r.Kind == records.KindRevert {
		g.store.Delete(uid)
	}
}

// Lift forgets the held values the recommendation (what desired returns:
// what a pod of the VPA would be given) has risen above, and the hold once
// none is left; and a proven round whose values it has risen above: a
// decrease back to them is tried on canaries again. It returns whether the
// VPA still has a hold. desiredFor is called only when the VPA has a hold or
// a proven round, so most decisions never compute it.
func (g *Gate) Lift(owner records.Owner, desiredFor func() resources.Resources) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.vpas[owner.UID]
	if !ok {
		v = g.ensure(owner, 0)
	}
	if v.hold == nil && (v.round == nil || !v.round.passed) {
		return false
	}
	desired := desiredFor()
	if r := v.round; r != nil && r.passed && risen(desired, r.to) {
		g.endRound(v, "")
	}
	hold := g.holdNow(v)
	if hold == nil {
		return false
	}
	left := resize.Without(hold.Attempted, func(c, list string, name corev1.ResourceName, q resource.Quantity) bool {
		want, ok := resize.Value(desired, c, list, name)
		return ok && want.Cmp(q) > 0
	})
	switch {
	case left == nil:
		v.hold = nil
		g.store.Delete(owner.UID)
		return false
	case !resources.Equal(left, hold.Attempted):
		v.hold = &records.Record{Kind: records.KindHarmHold, Attempted: left, Message: hold.Message, RecordedAt: hold.RecordedAt}
		g.store.Put(owner, owner.UID, v.hold)
	}
	return true
}

// risen tells whether desired is above floor for any value both hold.
func risen(desired, floor resources.Resources) bool {
	above := false
	resources.ForEachValue(desired, floor, func(_, _ string, _ corev1.ResourceName, d, f *resource.Quantity) {
		if d != nil && f != nil && d.Cmp(*f) > 0 {
			above = true
		}
	})
	return above
}

// Hold returns the VPA's hold, if it has one that has not expired.
func (g *Gate) Hold(owner records.Owner) (*records.Record, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.vpas[owner.UID]
	if !ok {
		return nil, false
	}
	h := g.holdNow(v)
	return h, h != nil
}

// HoldEnds is when a hold expires.
func (g *Gate) HoldEnds(hold *records.Record) time.Time {
	return hold.RecordedAt.Add(g.cfg.HarmHold)
}

// holdWhy says why held values are not lowered to.
func (g *Gate) holdWhy(hold *records.Record) string {
	return fmt.Sprintf("held for the VPA after harm (%s) until the recommendation rises above %s, or %s",
		hold.Message, hold.Attempted.String(), stamp(g.HoldEnds(hold)))
}

// waitWhy says why a pod's decrease waits: "canary: 1 of 4 lowered, 3
// wait until 2026-11-26T12:40:00Z".
func (g *Gate) waitWhy(v *vpaState, r *round, until time.Time) string {
	sent := 0
	var names []string
	for _, cp := range r.canaries {
		if cp.sent {
			sent++
		}
		if cp.name != "" {
			names = append(names, cp.name)
		}
	}
	sort.Strings(names)
	others := max(v.pods-len(r.canaries), 0)
	s := fmt.Sprintf("canary: %d of %d lowered, %d wait", sent, v.pods, others)
	switch {
	case !until.IsZero():
		s += " until " + stamp(until)
	case sent < len(r.canaries):
		s += " until the canary's resize is sent, completes and is watched for " + v.window.String()
	default:
		s += " until the canary's resize completes and is watched for " + v.window.String()
	}
	if len(names) > 0 {
		s += " (" + strings.Join(names, ", ") + ")"
	}
	return s
}

// Status is what the VPA's condition says of the gate.
type Status struct {
	// Canary says how a round stands: "canary: 1 of 4 lowered, 3 wait
	// until ..."; "" when none runs.
	Canary string
	// Hold is the hold, nil without one.
	Hold *records.Record
	// HoldEnds is when it expires.
	HoldEnds time.Time
}

// StatusOf tells what the VPA's condition says of the gate.
func (g *Gate) StatusOf(owner records.Owner) Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.vpas[owner.UID]
	if !ok {
		return Status{}
	}
	var s Status
	if h := g.holdNow(v); h != nil {
		s.Hold, s.HoldEnds = h, g.HoldEnds(h)
	}
	if r := v.round; r != nil && !r.passed && len(r.canaries) > 0 {
		s.Canary = g.waitWhy(v, r, r.until(v.window))
	}
	return s
}

// Retain gives back the places of canaries live says are gone (a pod
// deleted while no worker watched it, after a restart), and returns the
// pods waiting for them, to be queued.
func (g *Gate) Retain(live func(types.UID) bool) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, v := range g.vpas {
		if v.round == nil {
			continue
		}
		gone := false
		for uid := range v.round.canaries {
			if !live(uid) {
				delete(v.round.canaries, uid)
				g.store.Delete(uid)
				gone = true
			}
		}
		if !gone {
			continue
		}
		if len(v.round.canaries) == 0 {
			v.round = nil
		} else if !v.round.passed {
			v.round.passed = v.round.allPassed()
		}
		out = append(out, g.takeWaiting(v)...)
	}
	return out
}

// Forget drops what is held for a VPA that is gone (its records went with
// it: records.Store.ForgetOwner).
func (g *Gate) Forget(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.vpas, uid)
}

// Holds counts the VPAs with a hold, for the gauge.
func (g *Gate) Holds() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, v := range g.vpas {
		if g.holdNow(v) != nil {
			n++
		}
	}
	return n
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}
