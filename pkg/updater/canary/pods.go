package canary

// What becomes of a canary once admitted: its resize sent or its place
// given back, its watch begun and passed, the pod gone; and the end of a
// round.

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

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
	g.putCanary(owner, uid, cp)
	return true
}

// putCanary writes the record of a canary sent: what it lowered, and its
// lowering, begun at cp.since (zero: under way), in the watch the pod's
// record keeps (records.Watch.WithCanary), the one place its start is
// kept. Callers hold g.mu.
func (g *Gate) putCanary(owner records.Owner, uid types.UID, cp *canaryPod) {
	now := g.clock.Now()
	g.store.Update(owner, uid, func(cur *records.Record, ok bool) *records.Record {
		var w *records.Watch
		if ok && (cur.Kind == records.KindCanary || cur.Kind == records.KindWatch) {
			w = cur.Watch
		}
		return &records.Record{Kind: records.KindCanary, Attempted: cp.to, From: cp.from, RecordedAt: now,
			Watch: w.WithCanary(cp.from, cp.to, cp.since)}
	})
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
	g.putCanary(owner, uid, cp)
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

// RetainVPAs drops what is held for the VPAs live says are gone: one a
// worker asked about after Forget (a sync that resolved the VPA just
// before it went) is not held for the life of the process.
func (g *Gate) RetainVPAs(live func(types.UID) bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for uid := range g.vpas {
		if !live(uid) {
			delete(g.vpas, uid)
		}
	}
}
