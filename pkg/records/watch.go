package records

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// Watch is what the watch after a resize keeps of a pod whose values a
// resize lowered (docs/safety-after-resize.md), so that a restart or a
// change of leader inside the window forgets none: the lowerings still
// watched, and the restart counts no harm is above.
type Watch struct {
	// Began is when the watch began: its first resize was seen completed.
	// Zero while that resize is under way.
	Began time.Time
	// Restarts are the restart counts of the pod's containers (init
	// containers among them) the watch takes as its baseline, with the
	// restarts its resizes cause allowed for: a restart beyond them is
	// harm. While the first resize is under way, the counts when it was
	// sent. Nil when not known.
	Restarts map[string]int32
	// Lowered are the lowerings still watched, oldest first; none on a
	// canary's record once its own lowering has passed.
	Lowered []Lowering
}

// Lowering is one resize's decrease, watched for its window.
type Lowering struct {
	// From and To are the values it lowered, before and as lowered.
	From, To resources.Resources
	// Since is when its resize was seen completed: its window runs from
	// then. Zero while the resize is under way.
	Since time.Time
	// Canary: the lowering is its VPA's canary.
	Canary bool
}

// Bounds of a Watch, the same for the encoders and the decoders.
const (
	// MaxWatchLowerings bounds the lowerings of one watch.
	MaxWatchLowerings = 8
	// MaxWatchRestarts bounds the containers a watch counts restarts of:
	// containers and init containers.
	MaxWatchRestarts = 2 * MaxContainers
	// maxContainerName bounds a container's name: a DNS label.
	maxContainerName = 63
	// maxWatchOffset bounds a time of a watch, in seconds from its
	// record's time (a record without a time, a canary's whose resize is
	// under way, counts from 1970): past the year 2500, no time.
	maxWatchOffset = 1 << 34
)

// NewWatchRecord returns the KindWatch record of w: Attempted and From are
// what its lowerings lowered, as lowered and before; RecordedAt is when the
// watch began or, while its first resize is under way, sent (at).
func NewWatchRecord(w *Watch, sent time.Time) *Record {
	r := &Record{Kind: KindWatch, Watch: w, RecordedAt: sent}
	if !w.Began.IsZero() {
		r.RecordedAt = w.Began
	}
	for _, l := range w.Lowered {
		r.Attempted = mergeValues(r.Attempted, l.To)
		r.From = mergeValues(r.From, l.From)
	}
	return r
}

// mergeValues returns the values of a and b, b's where both hold one.
func mergeValues(a, b resources.Resources) resources.Resources {
	out := resources.Resources{}
	resources.ForEachValue(a, b, func(c, list string, name corev1.ResourceName, av, bv *resource.Quantity) {
		q := bv
		if q == nil {
			q = av
		}
		if q == nil {
			return
		}
		req := out[c]
		l := &req.Requests
		if list == "limits" {
			l = &req.Limits
		}
		if *l == nil {
			*l = corev1.ResourceList{}
		}
		(*l)[name] = q.DeepCopy()
		out[c] = req
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// A value holds a Watch in its record's attempt, its times in seconds from
// the record's own (the time each pod's entry carries), so that the pods a
// recommendation lowered at once share one attempt as other records do:
//
//	{"kind":"Watch","resources":{"app":{"requests":{"memory":"1Gi"}}},"from":{"app":{"requests":{"memory":"2Gi"}}},
//	 "watch":{"began":0,"restarts":{"app":0},"lowered":[{"since":0}]},"pods":"<uid>:1767323045"}
//
// A lowering's "to" and "from" are left out when they are the record's
// (one lowering, the common case).
type attemptWatch struct {
	Began    *int64            `json:"began,omitempty"`
	Restarts map[string]int32  `json:"restarts,omitempty"`
	Lowered  []attemptLowering `json:"lowered"`
}

type attemptLowering struct {
	From   resources.Resources `json:"from,omitempty"`
	To     resources.Resources `json:"to,omitempty"`
	Since  *int64              `json:"since,omitempty"`
	Canary bool                `json:"canary,omitempty"`
}

// rawWatch is attemptWatch as read, its resources as strings.
type rawWatch struct {
	Began    *int64           `json:"began"`
	Restarts map[string]int32 `json:"restarts"`
	Lowered  []rawLowering    `json:"lowered"`
}

type rawLowering struct {
	From   map[string]rawRequirements `json:"from"`
	To     map[string]rawRequirements `json:"to"`
	Since  *int64                     `json:"since"`
	Canary bool                       `json:"canary"`
}

// relWatch is a Watch parsed from an attempt, its times still relative to
// the record's.
type relWatch struct {
	began    *int64
	restarts map[string]int32
	lowered  []relLowering
}

type relLowering struct {
	from, to resources.Resources
	since    *int64
	canary   bool
}

// baseSeconds is the time a record's watch times count from: the record's
// own, to the second, as both formats write it; 0 for a record without.
func baseSeconds(at time.Time) int64 {
	if at.IsZero() {
		return 0
	}
	return at.Unix()
}

// offset returns t in seconds from base; nil for a zero t.
func offset(t time.Time, base int64) *int64 {
	if t.IsZero() {
		return nil
	}
	o := t.Unix() - base
	return &o
}

// relative returns the attempt's form of r's watch; nil without one.
func relative(r *Record) *attemptWatch {
	w := r.Watch
	if w == nil {
		return nil
	}
	base := baseSeconds(r.RecordedAt)
	out := &attemptWatch{Began: offset(w.Began, base), Restarts: w.Restarts, Lowered: make([]attemptLowering, len(w.Lowered))}
	single := len(w.Lowered) == 1 && resources.Equal(w.Lowered[0].To, r.Attempted) && resources.Equal(w.Lowered[0].From, r.From)
	for i, l := range w.Lowered {
		out.Lowered[i] = attemptLowering{Since: offset(l.Since, base), Canary: l.Canary}
		if !single {
			out.Lowered[i].From, out.Lowered[i].To = l.From, l.To
		}
	}
	return out
}

// watchKey is what r's watch adds to its attemptKey: records share an
// attempt only when their watches read back the same.
func watchKey(r *Record) string {
	w := relative(r)
	if w == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString("watch")
	if w.Began != nil {
		b.WriteString(" began=" + strconv.FormatInt(*w.Began, 10))
	}
	names := make([]string, 0, len(w.Restarts))
	for name := range w.Restarts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(&b, " %s=%d", name, w.Restarts[name])
	}
	for _, l := range w.Lowered {
		b.WriteString(" [" + l.From.String() + "|" + l.To.String())
		if l.Since != nil {
			b.WriteString(" since=" + strconv.FormatInt(*l.Since, 10))
		}
		if l.Canary {
			b.WriteString(" canary")
		}
		b.WriteString("]")
	}
	return b.String()
}

// encodableWatch tells whether parseWatch would accept r's watch.
func encodableWatch(r *Record) bool {
	w := r.Watch
	if w == nil {
		return r.Kind != KindWatch
	}
	if r.Kind != KindWatch && r.Kind != KindCanary || len(w.Lowered) > MaxWatchLowerings || len(w.Restarts) > MaxWatchRestarts {
		return false
	}
	for name, n := range w.Restarts {
		if name == "" || len(name) > maxContainerName || n < 0 {
			return false
		}
	}
	base := baseSeconds(r.RecordedAt)
	if !inOffset(offset(w.Began, base)) {
		return false
	}
	for _, l := range w.Lowered {
		if len(l.To) == 0 || !encodableResources(l.To) || len(l.From) > 0 && !encodableResources(l.From) || !inOffset(offset(l.Since, base)) {
			return false
		}
	}
	return true
}

// parseWatch checks an attempt's watch and parses its quantities;
// attempted and from are the attempt's own, which a lowering without "to"
// or "from" takes. A KindWatch attempt must have one; only it and
// KindCanary may.
func parseWatch(kind Kind, raw *rawWatch, attempted, from resources.Resources) (*relWatch, DropReason) {
	if raw == nil {
		if kind == KindWatch {
			return nil, DropBadWatch
		}
		return nil, ""
	}
	if kind != KindWatch && kind != KindCanary || len(raw.Lowered) > MaxWatchLowerings || len(raw.Restarts) > MaxWatchRestarts ||
		!inOffset(raw.Began) {
		return nil, DropBadWatch
	}
	for name, n := range raw.Restarts {
		if name == "" || len(name) > maxContainerName || n < 0 {
			return nil, DropBadWatch
		}
	}
	w := &relWatch{began: raw.Began, restarts: raw.Restarts, lowered: make([]relLowering, 0, len(raw.Lowered))}
	for _, l := range raw.Lowered {
		if !inOffset(l.Since) {
			return nil, DropBadWatch
		}
		rl := relLowering{from: from, to: attempted, since: l.Since, canary: l.Canary}
		var ok bool
		if len(l.To) > 0 {
			if rl.to, ok = parseResources(l.To); !ok || len(rl.to) == 0 {
				return nil, DropBadResources
			}
		}
		if len(l.From) > 0 {
			if rl.from, ok = parseResources(l.From); !ok {
				return nil, DropBadResources
			}
		}
		w.lowered = append(w.lowered, rl)
	}
	return w, ""
}

func inOffset(o *int64) bool {
	return o == nil || *o <= maxWatchOffset && *o >= -maxWatchOffset
}

// latest is the latest time of a watch: none may be further ahead than
// the records' own (FutureSkew).
func (w *Watch) latest() time.Time {
	last := w.Began
	for _, l := range w.Lowered {
		if l.Since.After(last) {
			last = l.Since
		}
	}
	return last
}

// at returns the watch of a record whose time is at. Each record gets its
// own; the lowerings' resources are shared, never modified.
func (w *relWatch) at(at time.Time) *Watch {
	base := baseSeconds(at)
	abs := func(o *int64) time.Time {
		if o == nil {
			return time.Time{}
		}
		return time.Unix(base+*o, 0).UTC()
	}
	out := &Watch{Began: abs(w.began), Restarts: w.restarts, Lowered: make([]Lowering, len(w.lowered))}
	for i, l := range w.lowered {
		out.Lowered[i] = Lowering{From: l.from, To: l.to, Since: abs(l.since), Canary: l.canary}
	}
	return out
}

// CanarySince returns when the watch of the canary's lowering of r began:
// the Since of the newest lowering of r.Watch flagged Canary; zero when
// there is none (r is no canary's, or its lowering has passed) or its
// resize is under way. It is the one place a canary's watch start is kept.
func (r *Record) CanarySince() time.Time {
	if r == nil || r.Watch == nil {
		return time.Time{}
	}
	for i := len(r.Watch.Lowered) - 1; i >= 0; i-- {
		if l := r.Watch.Lowered[i]; l.Canary {
			return l.Since
		}
	}
	return time.Time{}
}

// WithCanary returns a copy of w (nil: a watch of nothing yet) with a
// canary's lowering from to to in it, flagged Canary, the newest and the
// only one so flagged. With since zero its resize was just sent: it
// replaces any lowering whose resize is under way. With since set its
// watch began then: the canary's lowering under way takes it, or the
// lowering is added, and the watch begins then if it had not. At most
// MaxWatchLowerings are kept, the oldest dropped. w is not changed.
func (w *Watch) WithCanary(from, to resources.Resources, since time.Time) *Watch {
	out := &Watch{}
	if w != nil {
		out.Began, out.Restarts = w.Began, w.Restarts
		out.Lowered = make([]Lowering, 0, len(w.Lowered)+1)
	}
	pending := -1
	if w != nil {
		for _, l := range w.Lowered {
			switch {
			case l.Since.IsZero() && since.IsZero():
				continue // replaced by the resize just sent
			case l.Since.IsZero() && l.Canary:
				pending = len(out.Lowered)
			default:
				l.Canary = false
			}
			out.Lowered = append(out.Lowered, l)
		}
	}
	mine := Lowering{From: from, To: to, Since: since, Canary: true}
	if pending >= 0 {
		out.Lowered = append(append(out.Lowered[:pending:pending], out.Lowered[pending+1:]...), mine)
	} else {
		out.Lowered = append(out.Lowered, mine)
	}
	if len(out.Lowered) > MaxWatchLowerings {
		out.Lowered = out.Lowered[len(out.Lowered)-MaxWatchLowerings:]
	}
	if !since.IsZero() && out.Began.IsZero() {
		out.Began = since
	}
	return out
}

// foldCanarySince returns the watch of a canary's record read in an
// earlier version's shape: w (nil when the record kept none) with its
// canary's lowering, from to to, begun at since (zero: under way). A
// watch whose canary lowering has passed (none is flagged) keeps no
// place for since, which is then of no use.
func foldCanarySince(w *Watch, from, to resources.Resources, since time.Time) *Watch {
	if w == nil {
		return (*Watch)(nil).WithCanary(from, to, since)
	}
	for i := len(w.Lowered) - 1; i >= 0; i-- {
		if l := w.Lowered[i]; l.Canary {
			if l.Since.IsZero() && !since.IsZero() {
				return w.WithCanary(l.From, l.To, since)
			}
			return w
		}
	}
	return w
}
