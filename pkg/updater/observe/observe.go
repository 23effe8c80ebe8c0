// Package observe watches each pod after its resize: from the moment the
// resize is seen completed (the pod's resize status says none is pending or
// in progress, and the spec holds what was sent: pkg/resize.ReadStatus), for
// a window, it tells harm from what the pod shows (pkg/resize.HarmSince,
// NotReadySince). It reads nothing but the pods it is shown: the pod path
// shows it every update of a watched pod, and asks to be shown the pod again
// when a window ends or its grace for not being Ready runs out (Look.After,
// a delay on the pod queue). No polling, no read of the API server.
//
// A pod's watch holds every lowering still open: each resize that lowered
// values keeps its own watch of them (what they were before, its window,
// whether it is its VPA's canary) until its window ends, whatever resizes
// follow; a later resize that raises a value back ends its lowering, one
// that lowers it further takes it over. Harm is attributed to every
// lowering open when it happened (the pod tells when, most of the time:
// the termination of the one restart beyond the baseline), or, when no
// lowering was open, reported as harm after the last resize. A restart a
// resize causes by design (resizePolicy RestartContainer) is no harm, nor is
// the pod not Ready after it until it has been Ready once: a pod not Ready
// again by the end of that resize's window is.
//
// A watch ends when nothing is left to watch: every window ended, or harm
// found; and when the pod is gone. A resize not applied (Infeasible, or the
// spec changed by someone else) ends its own watch. The caller decides what
// harm means (a revert and a hold when values were lowered, a report when
// none was) and keeps what the watch must not forget across a restart in a
// record (Saved, Restore): this package only watches.
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

// Resize is a resize sent to a pod, as the watch needs it; what a look
// attributes harm to, or ends, is told as one too.
type Resize struct {
	// VPA is the pod's VPA, namespace/name; VPAUID its UID.
	VPA    string
	VPAUID types.UID
	// Name is the pod's name.
	Name string
	// From and To are the cpu and memory requests and limits of the
	// containers the resize changed, before and after it (of a lowering a
	// look tells of, only the values it lowered): the spec holds To's
	// values once it is applied.
	From, To resources.Resources
	// Window is how long the pod is watched once the resize completed.
	Window time.Duration
	// Canary: the resize is a canary of its VPA's decrease.
	Canary bool
	// ReportOnly: the resize lowers nothing to be reverted (the end of a
	// startup boost lowers CPU by design): harm after it is reported.
	ReportOnly bool
	// Before is what the pod showed when the resize was sent: an OOM kill
	// beyond it, seen when the resize is seen completed, is the resize's
	// harm although it came before (the kubelet applies a lowered limit,
	// the container is killed at once, and the first status the updater
	// sees shows both).
	Before resize.Baseline
	// Restarts names the containers the resize restarts
	// (resize.RestartedBy): one restart of each is no harm, and the pod
	// not Ready after it is none until it has been Ready once.
	Restarts []string
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
	// StateWatching: the pod is watched; Look.After says when to look
	// again.
	StateWatching State = "Watching"
	// StateHarmed: harm was found (Look.Harm, attributed to Look.Resize).
	// What was not open when it happened is still watched (Look.Over).
	StateHarmed State = "Harmed"
	// StatePassed: every window ended without harm; the watch is over.
	StatePassed State = "Passed"
	// StateNotApplied: the resize was not applied (Infeasible, or the
	// spec no longer holds it), and nothing else was watched: the watch is
	// over.
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

// watch is one pod's watch. Values are kept compact for the windows
// (resources.Values: a tenth of the memory of Resources, or less).
type watch struct {
	vpa    string
	vpaUID types.UID
	name   string
	// pending is the resize sent last, until it is seen completed.
	pending *pendingResize
	// open are the lowerings watched, oldest first; their values are
	// disjoint.
	open []*lowering
	// lastTo and lastUntil are the values and the window's end of the
	// last resize seen completed that lowered nothing to revert: harm
	// within it, when no lowering was open, is reported.
	lastTo         resources.Values
	lastUntil      time.Time
	lastReportOnly bool
	// began is when the first resize was seen completed; zero until then.
	began time.Time
	// baseline is what no harm is above. countsUnknown: a watch taken up
	// from a record that kept none: a termination after began is harm.
	baseline      resize.Baseline
	countsUnknown bool
	// await is the restart a resize caused, until the pod has been Ready
	// after it.
	await *awaitReady
	// notReadyAt is when the pod was first seen not Ready since the watch
	// began, when its Ready condition tells no time.
	notReadyAt time.Time
}

// pendingResize is a resize sent and not seen completed yet.
type pendingResize struct {
	// from and to are the values of the resize, before and after;
	// origin, of values a resize it replaced (sent, not completed)
	// lowered, what they were before that one.
	from, to, origin   resources.Values
	window             time.Duration
	canary, reportOnly bool
	before             resize.Baseline
	restarts           []string
}

// lowering is the decrease of some values by one resize, watched for its
// window. from and to hold the same values, in the same order.
type lowering struct {
	from, to resources.Values
	since    time.Time
	window   time.Duration
	canary   bool
}

func (l *lowering) until() time.Time { return l.since.Add(l.window) }

// awaitReady is the restart of containers a resize causes: the pod not
// Ready after it is no harm until it has been Ready once, or until the
// resize's window ends.
type awaitReady struct {
	names  []string
	before resize.Baseline
	sentAt time.Time
	// until is the end of the resize's window; zero while it is under
	// way.
	until  time.Time
	window time.Duration
}

// New returns an empty Watcher.
func New(cfg Config, clk clock.PassiveClock) *Watcher {
	return &Watcher{cfg: cfg, clock: clk, watches: map[types.UID]*watch{}}
}

// Sent notes a resize sent to a pod. The pod's lowerings still open keep
// their watch; a resize sent before and not seen completed is replaced
// (what it lowered and this one keeps lowered stays lowered, from where it
// was). It returns the lowerings that end without a verdict: a canary's
// resize replaced by one that is none.
func (w *Watcher) Sent(uid types.UID, r Resize) []Resize {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt, ok := w.watches[uid]
	if !ok {
		wt = &watch{}
		w.watches[uid] = wt
	}
	wt.vpa, wt.vpaUID, wt.name = r.VPA, r.VPAUID, r.Name
	p := &pendingResize{from: resources.Compact(r.From), to: resources.Compact(r.To), window: r.Window,
		canary: r.Canary, reportOnly: r.ReportOnly, before: r.Before, restarts: r.Restarts}
	var dropped []Resize
	if old := wt.pending; old != nil {
		p.origin = old.lowers(wt.open, p.to)
		// Values the new resize does not change stay as the old one set
		// them, in the spec.
		for _, o := range p.origin {
			if find(p.to, o) < 0 {
				if i := find(old.to, o); i >= 0 {
					p.to = append(p.to, old.to[i])
				}
			}
		}
		if old.canary && !p.canary {
			if from, to := old.lowered(wt.open); len(to) > 0 {
				dropped = append(dropped, wt.resizeOf(from, to, true))
			}
		}
		p.canary = p.canary || old.canary && len(p.origin) > 0
	}
	wt.pending = p
	if len(r.Restarts) > 0 {
		wt.await = &awaitReady{names: r.Restarts, before: r.Before, sentAt: w.clock.Now()}
	}
	return dropped
}

// Saved is what a watch keeps in its record, to be taken up again after a
// restart or a change of leader (Restore).
type Saved struct {
	// Began is when the watch began; zero while its first resize is under
	// way.
	Began time.Time
	// Restarts are the restart counts no harm is above (while the first
	// resize is under way, those when it was sent); nil when not known.
	Restarts resize.RestartCounts
	// Lowered are the lowerings watched, oldest first, the resize under
	// way last (its Since zero).
	Lowered []SavedLowering
}

// SavedLowering is one lowering of a Saved watch.
type SavedLowering struct {
	From, To resources.Resources
	Since    time.Time
	Canary   bool
}

// Saved returns what the pod's watch keeps; false when it watches nothing
// lowered.
func (w *Watcher) Saved(uid types.UID) (Saved, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt, ok := w.watches[uid]
	if !ok {
		return Saved{}, false
	}
	s := Saved{Began: wt.began}
	if !wt.countsUnknown {
		s.Restarts = wt.baseline.Counts()
	}
	for _, l := range wt.open {
		s.Lowered = append(s.Lowered, SavedLowering{From: l.from.Resources(), To: l.to.Resources(), Since: l.since, Canary: l.canary})
	}
	if p := wt.pending; p != nil {
		if from, to := p.lowered(wt.open); len(to) > 0 {
			s.Lowered = append(s.Lowered, SavedLowering{From: from.Resources(), To: to.Resources(), Canary: p.canary})
		}
		if wt.began.IsZero() {
			s.Restarts = p.before.Counts()
		}
	}
	return s, len(s.Lowered) > 0
}

// Restore takes up the watch of a pod's lowerings from its record (s),
// each watched for window from its Since; pod is the pod as it is now. A
// watch held already is kept.
func (w *Watcher) Restore(uid types.UID, id Resize, window time.Duration, s Saved, pod *corev1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.watches[uid]; ok || len(s.Lowered) == 0 {
		return
	}
	wt := &watch{vpa: id.VPA, vpaUID: id.VPAUID, name: id.Name, began: s.Began}
	counts := resize.BaselineOfCounts(s.Restarts)
	for _, l := range s.Lowered {
		from, to := resources.Compact(l.From), resources.Compact(l.To)
		if l.Since.IsZero() {
			if wt.pending == nil {
				wt.pending = &pendingResize{from: from, to: to, window: window, canary: l.Canary}
			}
			continue
		}
		wt.open = append(wt.open, &lowering{from: from, to: to, since: l.Since, window: window, canary: l.Canary})
		if wt.began.IsZero() || l.Since.Before(wt.began) {
			wt.began = l.Since
		}
		// Not Ready since before the resize completed, after a restart
		// it caused: not Ready again since, it has its window to be.
		if names := resize.RestartedBy(pod, l.From, l.To); len(names) > 0 {
			if since, notReady := resize.NotReadySince(pod); notReady && !since.After(l.Since) {
				wt.await = &awaitReady{names: names, until: l.Since.Add(window), window: window}
			}
		}
	}
	switch {
	case wt.began.IsZero() && wt.pending != nil:
		wt.pending.before = counts
	case !counts.Known():
		wt.countsUnknown = true
	default:
		wt.baseline = counts
	}
	w.watches[uid] = wt
}

// Gone ends the watch of a pod that is gone, and tells the harm its last
// state shows (evicted or killed by the kubelet, OOM-killed without
// restart), attributed as Observe attributes it. The Resize returned names
// the pod's VPA whatever it tells.
func (w *Watcher) Gone(pod *corev1.Pod) (Resize, resize.Harm, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt, ok := w.watches[pod.UID]
	if !ok {
		return Resize{}, resize.Harm{}, false
	}
	delete(w.watches, pod.UID)
	if wt.began.IsZero() {
		return wt.identity(), resize.Harm{}, false
	}
	h, harmed := wt.harm(pod)
	if !harmed {
		return wt.identity(), resize.Harm{}, false
	}
	r, _, ok := wt.attribute(h.At)
	if !ok {
		return wt.identity(), resize.Harm{}, false
	}
	return r, h, true
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

// identity is the Resize naming the pod and its VPA, with no values.
func (wt *watch) identity() Resize {
	return Resize{VPA: wt.vpa, VPAUID: wt.vpaUID, Name: wt.name}
}

// resizeOf is the Resize telling of values lowered.
func (wt *watch) resizeOf(from, to resources.Values, canary bool) Resize {
	r := wt.identity()
	r.From, r.To, r.Canary = from.Resources(), to.Resources(), canary
	return r
}
