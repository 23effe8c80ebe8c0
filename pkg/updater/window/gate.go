// Package window tells the updater, for one VPA at one moment, what its
// resize windows and freezes allow: the annotations vpa-inplace.dev/resize-window,
// vpa-inplace.dev/resize-window-scope and vpa-inplace.dev/freeze-until on
// the VPA and on its namespace (pkg/window parses them). The VPA's and the
// namespace's combine: a resize waits while either holds it, so a VPA can
// narrow its namespace's windows, never widen them. An annotation that
// cannot be read freezes the VPA until it is corrected: a typo never lifts
// a restriction.
//
// The pod path calls For before deciding (resize.Input.Windows) and treats
// a freeze as it treats a pause (Verdict.Frozen); Gate reaches nothing
// back. It reads only caches: the namespace lister.
package window

import (
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"

	vpatypes "k8s.io/autoscaler/vertical-pod-autoscaler/pkg/apis/autoscaling.k8s.io/v1"

	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
	"github.com/vpa-inplace/vpa-inplace/pkg/window"
)

// Verdict is what a VPA's windows and freezes allow at one moment.
type Verdict struct {
	// Frozen: no resize of the VPA's pods is sent (nor a suspended Job's
	// template written) until FrozenUntil, or, when that is zero, until
	// the annotation is corrected.
	Frozen      bool
	FrozenUntil time.Time
	// Invalid: frozen because an annotation cannot be read.
	Invalid bool
	// Why says why it is frozen, for events and the condition.
	Why string
	// Windows are the resize windows, for resize.Decide.
	Windows resize.Windows
}

// Config holds the Gate's settings.
type Config struct {
	// MaxFreeze is --max-freeze: how far ahead a freeze may end.
	MaxFreeze time.Duration
}

// Gate reads the windows and freezes of VPAs and their namespaces. It is
// safe for concurrent use.
type Gate struct {
	cfg Config
	// namespaces reads the namespaces' annotations; nil: only the VPAs'.
	namespaces corelisters.NamespaceLister

	mu sync.Mutex
	// parsed holds parsed resize-window values by value: loading a time
	// zone reads and parses its rules.
	parsed map[string]parsedSchedule
	// reported holds, by VPA, the invalid annotations last reported.
	reported map[types.UID]string
}

type parsedSchedule struct {
	schedule window.Schedule
	err      error
}

// maxParsed bounds the parsed values kept: past it they are dropped and
// parsed again as they come.
const maxParsed = 4096

// New returns a Gate reading namespaces through lister (nil: namespaces
// are not looked at).
func New(cfg Config, lister corelisters.NamespaceLister) *Gate {
	if cfg.MaxFreeze <= 0 {
		cfg.MaxFreeze = window.DefaultMaxFreeze
	}
	return &Gate{cfg: cfg, namespaces: lister, parsed: map[string]parsedSchedule{}, reported: map[types.UID]string{}}
}

// source is one object whose annotations count: the VPA or its namespace.
type source struct {
	// namespace is the namespace's name; "" for the VPA.
	namespace   string
	annotations map[string]string
}

// where names the source in messages; built only when one is written.
func (s source) where() string {
	if s.namespace == "" {
		return "on the VPA"
	}
	return "on namespace " + s.namespace
}

type scheduled struct {
	schedule window.Schedule
	scope    window.Scope
	why      string
}

// For tells what vpa's windows and freezes allow at now.
func (g *Gate) For(vpa *vpatypes.VerticalPodAutoscaler, now time.Time) Verdict {
	var all [2]source
	sources := append(all[:0], source{annotations: vpa.Annotations})
	if ns := g.namespace(vpa.Namespace); ns != nil {
		sources = append(sources, source{namespace: ns.Name, annotations: ns.Annotations})
	}
	var v Verdict
	var invalid, frozen []string
	var schedules []scheduled
	for _, s := range sources {
		if value, ok := s.annotations[window.FreezeAnnotation]; ok {
			until, err := window.ParseFreeze(value, now, g.cfg.MaxFreeze)
			switch {
			case err != nil:
				invalid = append(invalid, err.Error()+" ("+s.where()+")")
			case now.Before(until):
				frozen = append(frozen, fmt.Sprintf("until %s by %s %s", until.UTC().Format(time.RFC3339), window.FreezeAnnotation, s.where()))
				if until.After(v.FrozenUntil) {
					v.FrozenUntil = until
				}
			}
		}
		value, ok := s.annotations[window.WindowAnnotation]
		if !ok {
			continue
		}
		schedule, err := g.parse(value)
		if err != nil {
			invalid = append(invalid, err.Error()+" ("+s.where()+")")
			continue
		}
		scope, err := window.ParseScope(s.annotations[window.ScopeAnnotation])
		if err != nil {
			invalid = append(invalid, err.Error()+" ("+s.where()+")")
			continue
		}
		schedules = append(schedules, scheduled{schedule: schedule, scope: scope, why: fmt.Sprintf("%q %s", strings.TrimSpace(value), s.where())})
	}
	switch {
	case len(invalid) > 0:
		v.Frozen, v.Invalid, v.FrozenUntil = true, true, time.Time{}
		v.Why = "frozen until corrected: " + strings.Join(invalid, "; ")
	case len(frozen) > 0:
		v.Frozen = true
		v.Why = "frozen " + strings.Join(frozen, " and ")
	}
	v.Windows.Decreases = hold(now, schedules, func(scheduled) bool { return true })
	v.Windows.All = hold(now, schedules, func(s scheduled) bool { return s.scope == window.ScopeAll })
	return v
}

// hold tells whether the schedules pick selects hold resizes at now, and
// until when.
func hold(now time.Time, schedules []scheduled, pick func(scheduled) bool) resize.WindowHold {
	var picked []window.Schedule
	var why []string
	for _, s := range schedules {
		if pick(s) {
			picked = append(picked, s.schedule)
			why = append(why, s.why)
		}
	}
	if len(picked) == 0 {
		return resize.WindowHold{}
	}
	opens, ok := window.NextOpen(now, picked...)
	if ok && !opens.After(now) {
		return resize.WindowHold{}
	}
	h := resize.WindowHold{Held: true, Why: strings.Join(why, " and ")}
	if ok {
		h.Until = opens
	}
	return h
}

func (g *Gate) parse(value string) (window.Schedule, error) {
	g.mu.Lock()
	p, ok := g.parsed[value]
	g.mu.Unlock()
	if ok {
		return p.schedule, p.err
	}
	// Parsed outside the lock: two workers may parse one value at once,
	// and agree.
	s, err := window.Parse(value)
	g.mu.Lock()
	if len(g.parsed) >= maxParsed {
		clear(g.parsed)
	}
	g.parsed[value] = parsedSchedule{schedule: s, err: err}
	g.mu.Unlock()
	return s, err
}

func (g *Gate) namespace(name string) *corev1.Namespace {
	if g.namespaces == nil {
		return nil
	}
	ns, err := g.namespaces.Get(name)
	if err != nil {
		// Not cached (gone, or not yet seen): the VPA's own annotations
		// apply.
		return nil
	}
	return ns
}

// FirstReport tells whether the invalid annotations why are new for the
// VPA (not reported since they last changed), and remembers them; "" says
// that the VPA's annotations are valid again.
func (g *Gate) FirstReport(uid types.UID, why string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reported[uid] == why {
		return false
	}
	g.reported[uid] = why
	return true
}

// Forget drops what is remembered of a deleted VPA.
func (g *Gate) Forget(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.reported, uid)
}

// Changed tells whether an update of an object's annotations changes what
// its windows and freezes allow.
func Changed(old, new map[string]string) bool {
	for _, k := range []string{window.WindowAnnotation, window.ScopeAnnotation, window.FreezeAnnotation} {
		if old[k] != new[k] {
			return true
		}
		_, a := old[k]
		_, b := new[k]
		if a != b {
			return true
		}
	}
	return false
}
