package observe

import (
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// Look is what a look at a watched pod found.
type Look struct {
	State State
	// Resize names the pod and its VPA (without values while nothing
	// ends: a look at a watched pod at every resync builds no copy of
	// them). With harm, it is what the harm is attributed to: the
	// lowerings open when it happened, merged (From and To: the values
	// they lowered; Canary: one was a canary's), or, when none was, the
	// last resize (no From: reported). When the resize sent last was seen
	// completed at this look (Started): its Canary and Window.
	Resize Resize
	// Since and Until: when the resize seen completed at this look was,
	// and when its window ends.
	Since, Until time.Time
	// Started: the resize sent last was seen completed at this look.
	Started bool
	// Harm is what was found (StateHarmed).
	Harm resize.Harm
	// Passed are the lowerings whose window ended without harm at this
	// look; Dropped those that ended without a verdict (their values
	// raised back by a later resize, or their resize not applied).
	Passed, Dropped []Ended
	// Over: the watch ended at this look.
	Over bool
	// After, while watching, is when to look at the pod again: a window
	// ends, or a grace for not being Ready runs out. 0: at its next
	// update.
	After time.Duration
}

// Ended is a lowering that ended at a look: its values, its canary role,
// when its window began and ended.
type Ended struct {
	Resize
	Since, Until time.Time
}

func (wt *watch) ended(l *lowering) Ended {
	r := wt.resizeOf(l.from, l.to, l.canary)
	r.Window = l.window
	return Ended{Resize: r, Since: l.since, Until: l.until()}
}

// Observe looks at a pod: the resize sent last begins its watch once it is
// seen completed; harm is told and attributed, and the end of windows.
// false when the pod is not watched.
func (w *Watcher) Observe(pod *corev1.Pod) (look Look, watched bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wt, ok := w.watches[pod.UID]
	if !ok {
		return Look{}, false
	}
	now := w.clock.Now()
	look = Look{State: StateWatching, Resize: wt.identity()}
	// Harm first, judged for what was open before this look: the resize
	// seen completed now is judged by what the pod showed when it was sent.
	if !wt.began.IsZero() {
		if h, harmed := wt.harm(pod); harmed {
			wt.harmed(&look, h, pod)
		} else if wt.countsUnknown {
			// Nothing since the watch began: counted from here on.
			wt.baseline, wt.countsUnknown = resize.BaselineOf(pod), false
		}
	}
	if p := wt.pending; p != nil {
		switch st := resize.ReadStatus(pod).State; {
		case st == resize.StateNone && holds(pod, p.to):
			first := wt.began.IsZero()
			started, dropped := wt.complete(now)
			if first {
				wt.baseline = resize.BaselineOf(pod)
			}
			wt.baseline = wt.baseline.Allowing(p.before, p.restarts)
			look.Started, look.Since, look.Until = true, now, now.Add(p.window)
			look.Resize.Canary, look.Resize.Window = started != nil && started.canary, p.window
			for _, l := range dropped {
				look.Dropped = append(look.Dropped, wt.ended(l))
			}
			if look.State != StateHarmed && p.before.Known() {
				if h, harmed := resize.HarmSince(pod, p.before); harmed && h.Kind == resize.HarmOOMKilled {
					// Its own harm, and of every lowering open.
					h.At = time.Time{}
					wt.harmed(&look, h, pod)
				}
			}
		case st == resize.StateNone, st == resize.StateInfeasible:
			wt.pending = nil
			if from, to := p.lowered(wt.open); len(to) > 0 {
				look.Dropped = append(look.Dropped, Ended{Resize: wt.resizeOf(from, to, p.canary)})
			}
			if wt.await != nil && wt.await.until.IsZero() {
				wt.await = nil
			}
		}
	}
	if wt.began.IsZero() {
		if wt.pending != nil {
			look.State = StatePending
			return look, true
		}
		delete(w.watches, pod.UID)
		look.State, look.Over = StateNotApplied, true
		return look, true
	}
	after := time.Duration(math.MaxInt64)
	if look.State != StateHarmed {
		after = w.readiness(wt, &look, pod, now)
	}
	kept := wt.open[:0]
	for _, l := range wt.open {
		if !now.Before(l.until()) {
			look.Passed = append(look.Passed, wt.ended(l))
			continue
		}
		kept = append(kept, l)
		after = min(after, l.until().Sub(now))
	}
	wt.open = kept
	if wt.lastTo != nil {
		if !now.Before(wt.lastUntil) {
			wt.lastTo, wt.lastUntil = nil, time.Time{}
		} else {
			after = min(after, wt.lastUntil.Sub(now))
		}
	}
	if a := wt.await; a != nil && !a.until.IsZero() {
		if now.Before(a.until) {
			after = min(after, a.until.Sub(now))
		} else {
			wt.await = nil
		}
	}
	if len(wt.open) == 0 && wt.pending == nil && wt.lastTo == nil && wt.await == nil {
		delete(w.watches, pod.UID)
		look.Over = true
		if look.State == StateWatching {
			look.State = StatePassed
		}
		return look, true
	}
	if after == time.Duration(math.MaxInt64) || after < 0 {
		after = 0
	}
	look.After = after
	return look, true
}

// harmed attributes harm h (at h.At, or at no known time) to what was
// open then, notes it in look, and takes the pod as it is now as the
// baseline: what it shows is acted on once.
func (wt *watch) harmed(look *Look, h resize.Harm, pod *corev1.Pod) {
	r, passed, ok := wt.attribute(h.At)
	for _, l := range passed {
		look.Passed = append(look.Passed, wt.ended(l))
	}
	wt.baseline, wt.countsUnknown = resize.BaselineOf(pod), false
	if !ok {
		// Outside every window: no resize's harm.
		return
	}
	if r.From == nil {
		// Reported after the last resize: once.
		wt.lastTo, wt.lastUntil = nil, time.Time{}
	}
	look.State, look.Harm, look.Resize = StateHarmed, h, r
}

// readiness looks at the pod's readiness: not Ready past the grace is
// harm (noted in look); not Ready after a restart a resize caused is none
// until the pod has been Ready once, or until that resize's window ends.
// It returns when to look again for it.
func (w *Watcher) readiness(wt *watch, look *Look, pod *corev1.Pod, now time.Time) time.Duration {
	after := time.Duration(math.MaxInt64)
	since, notReady := resize.NotReadySince(pod)
	if !notReady || pod.DeletionTimestamp != nil {
		wt.notReadyAt = time.Time{}
		if a := wt.await; a != nil && !a.until.IsZero() &&
			(resize.RestartedSince(pod, a.before, a.names) || readySince(pod, a.sentAt)) {
			wt.await = nil
		}
		return after
	}
	// The restart of a resize under way excuses from when it shows.
	if a := wt.await; a != nil && (!a.until.IsZero() || resize.RestartedSince(pod, a.before, a.names)) {
		switch {
		case a.until.IsZero():
		case now.Before(a.until):
			after = a.until.Sub(now)
		default:
			wt.await = nil
			wt.harmed(look, resize.Harm{Kind: resize.HarmNotReady, At: a.until,
				Message: "pod not Ready again after the restart its resize caused, by the end of its window (" + a.window.String() + ")"}, pod)
		}
		return after
	}
	if since.IsZero() || since.After(now) {
		if wt.notReadyAt.IsZero() {
			wt.notReadyAt = now
		}
		since = wt.notReadyAt
	}
	since = maxTime(since, wt.began)
	left := since.Add(w.cfg.NotReadyGrace).Sub(now)
	if left <= 0 {
		wt.harmed(look, resize.Harm{Kind: resize.HarmNotReady, At: since.Add(w.cfg.NotReadyGrace),
			Message: "pod not Ready for " + now.Sub(since).Round(time.Second).String() + " (grace " + w.cfg.NotReadyGrace.String() + ")"}, pod)
		return after
	}
	return left
}

// readySince tells whether the pod's Ready condition turned True at t or
// after.
func readySince(pod *corev1.Pod, t time.Time) bool {
	if t.IsZero() {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue && !c.LastTransitionTime.Time.Before(t)
		}
	}
	return false
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
