// Package observe watches each pod after its resize: from the moment the
// resize is seen completed (the pod's resize status says none is pending or
// in progress, and the spec holds what was sent: pkg/resize.ReadStatus), for
// a window, it tells harm from what the pod shows (pkg/resize.HarmSince,
// NotReadySince). It reads nothing but the pods it is shown: the pod path
// shows it every update of a watched pod, and asks to be shown the pod again
// when its window ends or its grace for not being Ready runs out (Look.After,
// a delay on the pod queue). No polling, no read of the API server.
//
// A watch ends when harm is found, when the window ends without harm, when
// a new resize is sent to the pod (Sent replaces it), when the resize is not
// applied (Infeasible, or the spec changed by someone else), and when the
// pod is gone. The caller decides what harm means (a revert and a hold when
// the resize lowered values, a report when it raised them): this package
// only watches.
package observe

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// Resize is a resize sent to a pod, as the watch needs it.
type Resize struct {
	// VPA is the pod's VPA, namespace/name; VPAUID its UID.
	VPA    string
	VPAUID types.UID
	// Name is the pod's name.
	Name string
	// From and To are the cpu and memory requests and limits of the
	// containers the resize changed, before and after it (or, restored from
	// a record, only the values it lowered): the spec holds To's values
	// once it is applied.
	From, To resources.Resources
	// Window is how long the pod is watched once the resize completed.
	Window time.Duration
	// Canary: the resize is a canary of its VPA's decrease.
	Canary bool
	// ReportOnly: harm after it is reported, never reverted (the end of a
	// startup boost lowers CPU by design).
	ReportOnly bool
	// Before is what the pod showed when the resize was sent (none when
	// restored from a record): an OOM kill beyond it, seen when the watch
	// begins, is the resize's harm although it came before the resize was
	// seen completed (the kubelet applies a lowered limit, the container is
	// killed at once, and the first status the updater sees shows both). A
	// restart alone is not: a resize may restart containers by design.
	Before resize.Baseline
}

// Lowers tells whether the resize lowered any value.
func (r Resize) Lowers() bool {
	to, _ := resize.Lowered(r.From, r.To)
	return len(to) > 0
}

// State is where a watch stands after a look at its pod.
type State string

const (
	// StatePending: the resize is under way; the watch has not begun.
	StatePending State = "Pending"
	// StateWatching: the resize completed; the pod is watched until
	// Look.Until.
	StateWatching State = "Watching"
	// StateHarmed: harm was found (Look.Harm); the watch is over.
	StateHarmed State = "Harmed"
	// StatePassed: the window ended without harm; the watch is over.
	StatePassed State = "Passed"
	// StateNotApplied: the resize was not applied (Infeasible, or the
	// spec no longer holds it); the watch is over.
	StateNotApplied State = "NotApplied"
)

// Config holds the watcher's settings.
type Config struct {
	// NotReadyGrace is how long a watched pod may stay not Ready before it
	// counts as harm.
	NotReadyGrace time.Duration
}

// Watcher holds the watches. Safe for concurrent use: every method is one
// atomic step.
type Watcher struct {
	cfg   Config
	clock clock.PassiveClock

	mu      sync.Mutex
	watches map[types.UID]*watch
}

type watch struct {
	// Resize without its From and To, which from and to keep compact
	// for the window (resources.Values: a tenth of the memory, or less).
	Resize
	from, to resources.Values
	// since is when the resize was seen completed (zero while under way);
	// baseline what the pod showed then.
	since    time.Time
	baseline resize.Baseline
	// notReadyAt is when the pod was first seen not Ready since the watch
	// began, when its Ready condition tells no time.
	notReadyAt time.Time
}

func newWatch(r Resize) *watch {
	wt := &watch{Resize: r, from: resources.Compact(r.From), to: resources.Compact(r.To)}
	wt.Resize.From, wt.Resize.To = nil, nil
	return wt
}

// full returns the resize watched, with its From and To.
func (wt *watch) full() Resize {
	r := wt.Resize
	r.From, r.To = wt.from.Resources(), wt.to.Resources()
	return r
}

// New returns an empty Watcher.
func New(cfg Config, clk clock.PassiveClock) *Watcher {
	return &Watcher{cfg: cfg, clock: clk, watches: map[types.UID]*watch{}}
}

// Sent starts the watch of a resize sent to a pod; the watch of its
// previous resize, if any, ends (a new resize).
func (w *Watcher) Sent(uid types.UID, r Resize) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.watches[uid] = newWatch(r)
}

// Restore watches a resize sent before this process started (a canary's,
// from its record), from since (zero: not seen completed yet). A watch held
// already is kept.
func (w *Watcher) Restore(uid types.UID, r Resize, since time.Time, pod *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.watches[uid]; ok {
		return
	}
	wt := newWatch(r)
	wt.since = since
	if !since.IsZero() {
		// The pod as it is now is the baseline: what it showed in
		// between is not known.
		wt.baseline = resize.BaselineOf(pod)
	}
	w.watches[uid] = wt
}

// Look is what a look at a watched pod found.
type Look struct {
	State State
	// Resize is the resize watched. While it is Pending or Watching, its
	// From and To are left out (a look at a watched pod at every resync
	// builds no copy of them); a look that ends the watch has them.
	Resize Resize
	// Since is when the resize was seen completed; Until when the window
	// ends.
	Since, Until time.Time
	// Started: the watch began at this look.
	Started bool
	// Harm is what was found (StateHarmed).
	Harm resize.Harm
	// After, while watching, is when to look at the pod again: its window
	// ends, or its grace for not being Ready runs out. 0: at its next
	// update.
	After time.Duration
}

// Observe looks at a pod: it begins the watch once the resize is seen
// completed, and tells harm, or the end of the window. false when the pod
// is not watched.
func (w *Watcher) Observe(pod *corev1.Pod) (look Look, watched bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt, ok := w.watches[pod.UID]
	if !ok {
		return Look{}, false
	}
	now := w.clock.Now()
	look = Look{Resize: wt.Resize}
	defer func() {
		if look.State != StatePending && look.State != StateWatching {
			look.Resize = wt.full()
		}
	}()
	if wt.since.IsZero() {
		switch st := resize.ReadStatus(pod).State; {
		case st == resize.StateNone && holds(pod, wt.to):
			wt.since, wt.baseline = now, resize.BaselineOf(pod)
			look.Started = true
			if wt.Before.Known() {
				if h, harmed := resize.HarmSince(pod, wt.Before); harmed && h.Kind == resize.HarmOOMKilled {
					delete(w.watches, pod.UID)
					look.Since, look.Until = wt.since, wt.since.Add(wt.Window)
					look.State, look.Harm = StateHarmed, h
					return look, true
				}
			}
		case st == resize.StateNone, st == resize.StateInfeasible:
			delete(w.watches, pod.UID)
			look.State = StateNotApplied
			return look, true
		default:
			look.State = StatePending
			return look, true
		}
	}
	look.Since, look.Until = wt.since, wt.since.Add(wt.Window)
	if h, harmed := resize.HarmSince(pod, wt.baseline); harmed {
		delete(w.watches, pod.UID)
		look.State, look.Harm = StateHarmed, h
		return look, true
	}
	after := look.Until.Sub(now)
	if since, notReady := resize.NotReadySince(pod); notReady && pod.DeletionTimestamp == nil {
		if since.IsZero() || since.After(now) {
			if wt.notReadyAt.IsZero() {
				wt.notReadyAt = now
			}
			since = wt.notReadyAt
		}
		since = maxTime(since, wt.since)
		left := since.Add(w.cfg.NotReadyGrace).Sub(now)
		if left <= 0 {
			delete(w.watches, pod.UID)
			look.State = StateHarmed
			look.Harm = resize.Harm{Kind: resize.HarmNotReady,
				Message: "pod not Ready for " + now.Sub(since).Round(time.Second).String() + " (grace " + w.cfg.NotReadyGrace.String() + ")"}
			return look, true
		}
		after = min(after, left)
	} else {
		wt.notReadyAt = time.Time{}
	}
	if after <= 0 {
		delete(w.watches, pod.UID)
		look.State = StatePassed
		return look, true
	}
	look.State, look.After = StateWatching, after
	return look, true
}

// Gone ends the watch of a pod that is gone, and tells the harm its last
// state shows (evicted or killed by the kubelet, OOM-killed without
// restart) when its resize had completed.
func (w *Watcher) Gone(pod *corev1.Pod) (Resize, resize.Harm, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt, ok := w.watches[pod.UID]
	if !ok {
		return Resize{}, resize.Harm{}, false
	}
	delete(w.watches, pod.UID)
	if wt.since.IsZero() {
		return wt.full(), resize.Harm{}, false
	}
	h, harmed := resize.HarmSince(pod, wt.baseline)
	return wt.full(), h, harmed
}

// Watching tells whether a pod is watched.
func (w *Watcher) Watching(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.watches[uid]
	return ok
}

// Forget ends a pod's watch.
func (w *Watcher) Forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.watches, uid)
}

// Retain ends the watches of pods live says are gone.
func (w *Watcher) Retain(live func(types.UID) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for uid := range w.watches {
		if !live(uid) {
			delete(w.watches, uid)
		}
	}
}

// Len counts the pods watched (their resize under way or completed).
func (w *Watcher) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.watches)
}

// holds tells whether the pod's spec holds to's values: each that the
// spec has is equal.
func holds(pod *corev1.Pod, to resources.Values) bool {
	now := resize.Current(pod, to.Containers())
	for _, v := range to {
		r := now[v.Container]
		l := r.Requests
		if v.Limit() {
			l = r.Limits
		}
		if q, ok := l[v.Name()]; ok && q.Cmp(v.Quantity()) != 0 {
			return false
		}
	}
	return true
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
