package observe

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// How the lowerings of a pod merge as resizes follow one another: each
// value is lowered by one lowering at most. A resize seen completed
//   - raises a lowered value back to what it was before, or above: that
//     value is no longer lowered, its lowering no longer watches it;
//   - raises it less than that: it stays lowered, to the new value, in its
//     lowering, for that lowering's window;
//   - lowers it further: the new resize's lowering takes it over, from what
//     it was before the first (a revert goes back there), for the new
//     window;
//   - lowers a value no lowering holds: its own lowering, for its window.
// A lowering left without values ends without a verdict.

// sameValue tells whether a and b are the same request or limit of the same
// container.
func sameValue(a, b resources.Value) bool {
	return a.Container == b.Container && a.Limit() == b.Limit() && a.Name() == b.Name()
}

// find returns the index of the value like v in vs, -1 if none.
func find(vs resources.Values, v resources.Value) int {
	for i := range vs {
		if sameValue(vs[i], v) {
			return i
		}
	}
	return -1
}

// less tells whether a's quantity is below b's.
func less(a, b resources.Value) bool {
	qa, qb := a.Quantity(), b.Quantity()
	return qa.Cmp(qb) < 0
}

// inOpen tells whether a lowering open holds the value like v.
func inOpen(open []*lowering, v resources.Value) bool {
	for _, l := range open {
		if find(l.to, v) >= 0 {
			return true
		}
	}
	return false
}

// originOf is what v's value was before the resizes not yet seen completed:
// before the one p replaced, or before p.
func (p *pendingResize) originOf(v resources.Value) (resources.Value, bool) {
	if i := find(p.origin, v); i >= 0 {
		return p.origin[i], true
	}
	if i := find(p.from, v); i >= 0 {
		return p.from[i], true
	}
	return resources.Value{}, false
}

// lowered returns the values p lowers that no open lowering holds, before
// and as lowered.
func (p *pendingResize) lowered(open []*lowering) (from, to resources.Values) {
	if p.reportOnly {
		return nil, nil
	}
	for _, v := range p.to {
		if inOpen(open, v) {
			continue
		}
		if o, ok := p.originOf(v); ok && less(v, o) {
			from, to = append(from, o), append(to, v)
		}
	}
	return from, to
}

// lowers returns, for a resize to next replacing p before p was seen
// completed, what the values p lowered that next keeps lowered (or leaves
// as p set them) were before p: next's origin.
func (p *pendingResize) lowers(open []*lowering, next resources.Values) resources.Values {
	from, to := p.lowered(open)
	var origin resources.Values
	for i, v := range to {
		if j := find(next, v); j < 0 || less(next[j], from[i]) {
			origin = append(origin, from[i])
		}
	}
	return origin
}

// complete notes that the pending resize was seen completed at now: the
// open lowerings merge with it (see the top of this file), and its own
// lowering, if any, opens. It returns that lowering and the lowerings left
// without values.
func (wt *watch) complete(now time.Time) (started *lowering, dropped []*lowering) {
	p := wt.pending
	wt.pending = nil
	low := &lowering{since: now, window: p.window, canary: p.canary}
	kept := wt.open[:0]
	for _, l := range wt.open {
		var from, to resources.Values
		moved := false
		for i, v := range l.to {
			j := find(p.to, v)
			switch {
			case j < 0:
				from, to = append(from, l.from[i]), append(to, v)
			case !less(p.to[j], l.from[i]):
				// Raised back: no longer lowered.
			case less(p.to[j], v) && !p.reportOnly:
				low.from, low.to = append(low.from, l.from[i]), append(low.to, p.to[j])
				low.canary = low.canary || l.canary
				moved = true
			default:
				from, to = append(from, l.from[i]), append(to, p.to[j])
			}
		}
		if len(to) == 0 {
			if !moved {
				dropped = append(dropped, l)
			}
			continue
		}
		l.from, l.to = from, to
		kept = append(kept, l)
	}
	wt.open = kept
	if f, t := p.lowered(wt.open); len(t) > 0 {
		for i, v := range t {
			if find(low.to, v) < 0 {
				low.from, low.to = append(low.from, f[i]), append(low.to, v)
			}
		}
	}
	if wt.began.IsZero() {
		wt.began = now
	}
	if wt.await != nil && wt.await.until.IsZero() {
		wt.await.until, wt.await.window = now.Add(p.window), p.window
	}
	if len(low.to) == 0 {
		wt.lastTo, wt.lastUntil, wt.lastReportOnly = p.to, now.Add(p.window), p.reportOnly
		return nil, dropped
	}
	if low.canary {
		// The gate knows a pod as one canary: of its newest decrease.
		for _, l := range wt.open {
			l.canary = false
		}
	}
	wt.open = append(wt.open, low)
	wt.bound()
	return low, dropped
}

// maxLowerings bounds the lowerings of one watch (records.MaxWatchLowerings).
const maxLowerings = 8

// bound merges the two oldest lowerings while there are more than
// maxLowerings: their values (disjoint), from the earlier start to the
// later end, a canary's if either was.
func (wt *watch) bound() {
	for len(wt.open) > maxLowerings {
		a, b := wt.open[0], wt.open[1]
		end := a.until()
		if b.until().After(end) {
			end = b.until()
		}
		since := a.since
		if b.since.Before(since) {
			since = b.since
		}
		m := &lowering{from: append(append(resources.Values{}, a.from...), b.from...), to: append(append(resources.Values{}, a.to...), b.to...),
			since: since, window: end.Sub(since), canary: a.canary || b.canary}
		wt.open = append([]*lowering{m}, wt.open[2:]...)
	}
}

// attribute returns what harm at t (zero: not known) is attributed to:
// the lowerings open then, merged, which end; those whose window had
// ended before it passed, and end. With none open then, the last resize
// when t is within its window (or not known): reported. false when the
// harm is no resize's.
func (wt *watch) attribute(t time.Time) (Resize, []*lowering, bool) {
	var from, to resources.Values
	canary := false
	var passed []*lowering
	kept := wt.open[:0]
	for _, l := range wt.open {
		switch {
		case !t.IsZero() && l.since.After(t):
			kept = append(kept, l)
		case !t.IsZero() && l.until().Before(t):
			passed = append(passed, l)
		default:
			from, to = append(from, l.from...), append(to, l.to...)
			canary = canary || l.canary
		}
	}
	wt.open = kept
	if len(to) > 0 {
		return wt.resizeOf(from, to, canary), passed, true
	}
	if wt.lastTo != nil && (t.IsZero() || !wt.lastUntil.Before(t)) {
		r := wt.identity()
		r.To, r.ReportOnly = wt.lastTo.Resources(), wt.lastReportOnly
		return r, passed, true
	}
	return wt.identity(), passed, false
}

// harm tells the harm the pod shows beyond the watch's baseline.
func (wt *watch) harm(pod *corev1.Pod) (resize.Harm, bool) {
	if wt.countsUnknown {
		return resize.TerminatedAfter(pod, wt.began)
	}
	return resize.HarmSince(pod, wt.baseline)
}
