// Package preemption remembers the pods the scheduler preempted to make
// room for the Deferred resizes of pods of InPlace VPAs (KEP-5836, alpha in
// Kubernetes 1.37), so that the updater can say so: an event on the pod and
// its VPA, a counter, and a sentence of the VPA condition while the resize
// is still Deferred. The preemptions are the scheduler's: the updater
// evicts nothing, and counts none of them as a disruption of its own.
//
// The scheduler names the pod it preempts for only in its Preempted event on
// the victim. From the pods, a victim (resize.PreemptedByScheduler) is
// attributed to every pod of an InPlace VPA on its node whose resize is
// Deferred and whose priority is above the victim's
// (resize.MayHavePreemptedFor) when the victim is marked. The updater's
// informer delivers the Deferred condition that made the scheduler act
// before the victim's condition (one watch, in resourceVersion order), so
// the preemptor is seen Deferred.
package preemption

import (
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Bounds: a victim marked by a tenant able to write pod status would
// otherwise grow the ledger without end.
const (
	// MaxVictimsPerPod bounds the victims remembered per preemptor; more
	// are counted, not kept.
	MaxVictimsPerPod = 8
	// MaxPods bounds the preemptors remembered; the one whose latest victim
	// is oldest goes first.
	MaxPods = 4096
	// Keep is how long a victim is remembered once it is gone.
	Keep = 15 * time.Minute
)

// Victim is a pod the scheduler preempted.
type Victim struct {
	UID       types.UID
	Namespace string
	Name      string
	Node      string
	Priority  int32
	// Marked is when the scheduler marked it (its DisruptionTarget
	// condition), or when it was seen marked.
	Marked time.Time
	// Gone is when it was seen deleted; zero while it terminates.
	Gone time.Time
}

// Preemptor is what is remembered of a pod whose Deferred resize victims
// were preempted for.
type Preemptor struct {
	UID types.UID
	// Key is the pod's namespace/name, VPA its VPA's.
	Key, VPA string
	Victims  []Victim
	// More counts the victims beyond MaxVictimsPerPod.
	More int
}

type entry struct {
	key, vpa string
	victims  []*Victim
	more     int
	// reported holds the victims already reported (TakeUnreported); at
	// most MaxVictimsPerPod.
	reported map[types.UID]bool
	latest   time.Time
}

// Ledger holds the preemptions seen. Safe for concurrent use: every method
// is one atomic step.
type Ledger struct {
	clock clock.PassiveClock

	mu       sync.Mutex
	byPod    map[types.UID]*entry
	byVictim map[types.UID][]types.UID
	// expired is when expire last ran: at most once a minute.
	expired time.Time
}

// New returns an empty Ledger.
func New(clk clock.PassiveClock) *Ledger {
	return &Ledger{clock: clk, byPod: map[types.UID]*entry{}, byVictim: map[types.UID][]types.UID{}}
}

// Add remembers that victim may have been preempted for the pod uid (key
// namespace/name, of VPA vpa). It reports whether the pair is new.
func (l *Ledger) Add(uid types.UID, key, vpa string, victim Victim) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	l.expire(now)
	e, ok := l.byPod[uid]
	if !ok {
		if len(l.byPod) >= MaxPods {
			l.dropOldest()
		}
		e = &entry{reported: map[types.UID]bool{}}
		l.byPod[uid] = e
	}
	e.key, e.vpa = key, vpa
	for _, v := range e.victims {
		if v.UID == victim.UID {
			return false
		}
	}
	if e.reported[victim.UID] {
		return false
	}
	if victim.Marked.IsZero() {
		victim.Marked = now
	}
	e.latest = now
	if len(e.victims) >= MaxVictimsPerPod {
		e.more++
		return true
	}
	v := victim
	e.victims = append(e.victims, &v)
	l.byVictim[victim.UID] = append(l.byVictim[victim.UID], uid)
	return true
}

// Ref names a pod a victim was attributed to, and its VPA.
type Ref struct{ Key, VPA string }

// Gone notes that a victim was deleted, and returns the pods it was
// attributed to.
func (l *Ledger) Gone(victim types.UID) []Ref {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	var refs []Ref
	for _, uid := range l.byVictim[victim] {
		e, ok := l.byPod[uid]
		if !ok {
			continue
		}
		for _, v := range e.victims {
			if v.UID == victim && v.Gone.IsZero() {
				v.Gone = now
			}
		}
		refs = append(refs, Ref{Key: e.key, VPA: e.vpa})
	}
	return refs
}

// Forget drops what is remembered of a pod as a preemptor (it is gone). As
// a victim it is kept (Gone) until it expires.
func (l *Ledger) Forget(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop(uid)
}

// TakeUnreported returns the victims of the pod not returned before, and
// marks them returned, in one step: each is reported once, whatever the
// number of workers asking.
func (l *Ledger) TakeUnreported(uid types.UID) []Victim {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.byPod[uid]
	if !ok {
		return nil
	}
	var out []Victim
	for _, v := range e.victims {
		if !e.reported[v.UID] {
			e.reported[v.UID] = true
			out = append(out, *v)
		}
	}
	return out
}

// Of returns what is remembered of the pods of a VPA, sorted by pod key.
func (l *Ledger) Of(vpa string) []Preemptor {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Preemptor
	for uid, e := range l.byPod {
		if e.vpa != vpa || len(e.victims) == 0 {
			continue
		}
		p := Preemptor{UID: uid, Key: e.key, VPA: e.vpa, More: e.more}
		for _, v := range e.victims {
			p.Victims = append(p.Victims, *v)
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Len counts the pods remembered.
func (l *Ledger) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byPod)
}

// expire drops the victims gone for longer than Keep, and the pods left
// with none, at most once a minute. Callers hold l.mu.
func (l *Ledger) expire(now time.Time) {
	if now.Sub(l.expired) < time.Minute {
		return
	}
	l.expired = now
	for uid, e := range l.byPod {
		kept := e.victims[:0]
		for _, v := range e.victims {
			if !v.Gone.IsZero() && now.Sub(v.Gone) > Keep {
				l.unlinkVictim(v.UID, uid)
				delete(e.reported, v.UID)
				continue
			}
			kept = append(kept, v)
		}
		e.victims = kept
		if len(e.victims) == 0 && now.Sub(e.latest) > Keep {
			delete(l.byPod, uid)
		}
	}
}

// dropOldest drops the pod whose latest victim is the oldest. Callers hold
// l.mu.
func (l *Ledger) dropOldest() {
	var oldest types.UID
	var at time.Time
	for uid, e := range l.byPod {
		if oldest == "" || e.latest.Before(at) {
			oldest, at = uid, e.latest
		}
	}
	if oldest != "" {
		l.drop(oldest)
	}
}

// drop forgets uid as a preemptor. Callers hold l.mu.
func (l *Ledger) drop(uid types.UID) {
	if e, ok := l.byPod[uid]; ok {
		for _, v := range e.victims {
			l.unlinkVictim(v.UID, uid)
		}
		delete(l.byPod, uid)
	}
}

// unlinkVictim removes pod from the pods a victim is attributed to. Callers
// hold l.mu.
func (l *Ledger) unlinkVictim(victim, pod types.UID) {
	ps := l.byVictim[victim]
	kept := ps[:0]
	for _, p := range ps {
		if p != pod {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		delete(l.byVictim, victim)
		return
	}
	l.byVictim[victim] = kept
}
