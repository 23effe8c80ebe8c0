package resize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resources"
)

// Safety after the resize, the pure part (docs/safety-after-resize.md): which
// values a resize lowers, the gate that holds decreases back (a hold after
// harm, a canary not yet proven), the per-VPA settings read from
// annotations, and what the watch after a resize calls harm (harm.go).

// Annotations on a VPA. Tenants write them: their values are bounded before
// they are parsed, and a bad one is reported and replaced by the updater's
// default.
const (
	// CanaryAnnotation: how many pods of the VPA get a lower target first,
	// "off", "N" or "P%" (of the VPA's pods, rounded up).
	CanaryAnnotation = "vpa-inplace.dev/canary"
	// ObservationWindowAnnotation: how long each pod is watched after its
	// resize completes, a duration ("15m") between MinObservationWindow and
	// MaxObservationWindow.
	ObservationWindowAnnotation = "vpa-inplace.dev/observation-window"
)

// Bounds of the annotations.
const (
	// maxAnnotationValue bounds what is parsed of either annotation.
	maxAnnotationValue = 32
	// MaxCanaryPods bounds N of the canary annotation.
	MaxCanaryPods = 1000
	// MinObservationWindow and MaxObservationWindow bound the window an
	// annotation may ask for.
	MinObservationWindow = 30 * time.Second
	MaxObservationWindow = 24 * time.Hour
)

// Canary says how many pods of a VPA get a lower target before the others.
type Canary struct {
	// Off: a decrease goes to every pod at once.
	Off bool
	// Pods is N; Percent is P when Pods is 0.
	Pods    int
	Percent int
}

// DefaultCanary is one pod.
var DefaultCanary = Canary{Pods: 1}

// String renders c as the annotation writes it.
func (c Canary) String() string {
	switch {
	case c.Off:
		return "off"
	case c.Pods > 0:
		return strconv.Itoa(c.Pods)
	default:
		return strconv.Itoa(c.Percent) + "%"
	}
}

// Of returns how many of a VPA's pods are canaries: 0 when a decrease goes
// to every pod at once (off, or one pod), otherwise at least one and at
// most all but one, so that a canary always has pods that wait for it.
func (c Canary) Of(pods int) int {
	if c.Off || pods <= 1 {
		return 0
	}
	n := c.Pods
	if n == 0 {
		n = int(math.Ceil(float64(c.Percent) * float64(pods) / 100))
	}
	return min(max(n, 1), pods-1)
}

// ParseCanary reads the canary annotation: "off", a number of pods from 1
// to MaxCanaryPods, or a percentage from 1% to 100%.
func ParseCanary(value string) (Canary, error) {
	if len(value) > maxAnnotationValue {
		return Canary{}, fmt.Errorf("%s: %d bytes, more than %d", CanaryAnnotation, len(value), maxAnnotationValue)
	}
	v := strings.TrimSpace(value)
	if v == "off" {
		return Canary{Off: true}, nil
	}
	if p, ok := strings.CutSuffix(v, "%"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 100 {
			return Canary{}, fmt.Errorf("%s: %q is no percentage from 1%% to 100%%", CanaryAnnotation, v)
		}
		return Canary{Percent: n}, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxCanaryPods {
		return Canary{}, fmt.Errorf(`%s: %q is neither "off", a number of pods from 1 to %d, nor a percentage ("25%%")`, CanaryAnnotation, v, MaxCanaryPods)
	}
	return Canary{Pods: n}, nil
}

// ParseObservationWindow reads the observation window annotation: a Go
// duration between MinObservationWindow and MaxObservationWindow.
func ParseObservationWindow(value string) (time.Duration, error) {
	if len(value) > maxAnnotationValue {
		return 0, fmt.Errorf("%s: %d bytes, more than %d", ObservationWindowAnnotation, len(value), maxAnnotationValue)
	}
	v := strings.TrimSpace(value)
	d, err := time.ParseDuration(v)
	if err != nil || d < MinObservationWindow || d > MaxObservationWindow {
		return 0, fmt.Errorf("%s: %q is no duration from %s to %s", ObservationWindowAnnotation, v, MinObservationWindow, MaxObservationWindow)
	}
	return d, nil
}

// Lowered returns the values target lowers, as lowered (to) and as they are
// now (from): for each container, request and limit of cpu and memory that
// both hold and target's is the lower. Nil when target lowers nothing.
func Lowered(current, target resources.Resources) (to, from resources.Resources) {
	resources.ForEachValue(current, target, func(c, list string, name corev1.ResourceName, now, want *resource.Quantity) {
		if now == nil || want == nil || want.Cmp(*now) >= 0 {
			return
		}
		if to == nil {
			to, from = resources.Resources{}, resources.Resources{}
		}
		setValue(to, c, list, name, *want)
		setValue(from, c, list, name, *now)
	})
	return to, from
}

// Above tells whether every value of values is above (held) the same value
// of floor; values floor does not hold count as above.
func Above(values, floor resources.Resources) bool {
	above := true
	resources.ForEachValue(values, floor, func(_, _ string, _ corev1.ResourceName, v, f *resource.Quantity) {
		if v != nil && f != nil && v.Cmp(*f) <= 0 {
			above = false
		}
	})
	return above
}

// AtLeast tells whether every value of values is at least the same value of
// floor; values floor does not hold count.
func AtLeast(values, floor resources.Resources) bool {
	ok := true
	resources.ForEachValue(values, floor, func(_, _ string, _ corev1.ResourceName, v, f *resource.Quantity) {
		if v != nil && f != nil && v.Cmp(*f) < 0 {
			ok = false
		}
	})
	return ok
}

// MergeMax returns the values of a and b, the higher of the two where both
// hold one.
func MergeMax(a, b resources.Resources) resources.Resources {
	return merge(a, b, 1)
}

// MergeMin returns the values of a and b, the lower of the two where both
// hold one.
func MergeMin(a, b resources.Resources) resources.Resources {
	return merge(a, b, -1)
}

func merge(a, b resources.Resources, keep int) resources.Resources {
	out := resources.Resources{}
	resources.ForEachValue(a, b, func(c, list string, name corev1.ResourceName, av, bv *resource.Quantity) {
		switch {
		case av == nil && bv == nil:
		case av == nil:
			setValue(out, c, list, name, *bv)
		case bv == nil || av.Cmp(*bv) == keep:
			setValue(out, c, list, name, *av)
		default:
			setValue(out, c, list, name, *bv)
		}
	})
	return out
}

// Without returns the values of a that drop does not say to drop.
func Without(a resources.Resources, drop func(container, list string, name corev1.ResourceName, q resource.Quantity) bool) resources.Resources {
	out := resources.Resources{}
	resources.ForEachValue(a, nil, func(c, list string, name corev1.ResourceName, q, _ *resource.Quantity) {
		if q != nil && !drop(c, list, name, *q) {
			setValue(out, c, list, name, *q)
		}
	})
	if len(out) == 0 {
		return nil
	}
	return out
}

// Value returns the value of r for a container, list ("requests" or
// "limits") and resource.
func Value(r resources.Resources, container, list string, name corev1.ResourceName) (resource.Quantity, bool) {
	l := r[container].Requests
	if list == "limits" {
		l = r[container].Limits
	}
	q, ok := l[name]
	return q, ok
}

func setValue(r resources.Resources, container, list string, name corev1.ResourceName, q resource.Quantity) {
	req := r[container]
	l := &req.Requests
	if list == "limits" {
		l = &req.Limits
	}
	if *l == nil {
		*l = corev1.ResourceList{}
	}
	(*l)[name] = q.DeepCopy()
	r[container] = req
}

// Gate holds decreases back: the watch after a resize decides it, per VPA,
// and Decide applies it to the values a resize would lower. Values it does
// not hold back, and every increase, go as they would without it.
type Gate struct {
	// Hold holds values harm was seen at: no value is lowered to its value
	// of Hold, or below. HoldWhy says why.
	Hold    resources.Resources
	HoldWhy string
	// Wait, when set, holds every decrease back, and says why (a canary has
	// not been watched long enough).
	Wait string
}

// apply returns target with the values the gate holds back kept at their
// current value, the reason (ReasonCanaryWait when a canary holds any back,
// ReasonHeldAfterHarm when only the hold does; "" when none is held) and
// what was held and why.
func (g *Gate) apply(current, target resources.Resources) (resources.Resources, Reason, string) {
	if g == nil {
		return target, "", ""
	}
	to, _ := Lowered(current, target)
	if len(to) == 0 {
		return target, "", ""
	}
	var byHold, byWait []string
	out := target
	resources.ForEachValue(to, nil, func(c, list string, name corev1.ResourceName, want, _ *resource.Quantity) {
		if want == nil {
			return
		}
		what := fmt.Sprintf("%s %s %s", c, list, name)
		floor, held := Value(g.Hold, c, list, name)
		switch {
		case held && records.IsHeld(*want, floor):
			byHold = append(byHold, what)
		case g.Wait != "":
			byWait = append(byWait, what)
		default:
			return
		}
		if len(byHold)+len(byWait) == 1 {
			out = copyResources(target)
		}
		now, _ := Value(current, c, list, name)
		setValue(out, c, list, name, now)
	})
	var parts []string
	if len(byWait) > 0 {
		parts = append(parts, strings.Join(byWait, ", ")+" not lowered yet: "+g.Wait)
	}
	if len(byHold) > 0 {
		parts = append(parts, strings.Join(byHold, ", ")+" not lowered: "+g.HoldWhy)
	}
	switch {
	case len(byWait) > 0:
		return out, ReasonCanaryWait, strings.Join(parts, "; ")
	case len(byHold) > 0:
		return out, ReasonHeldAfterHarm, strings.Join(parts, "; ")
	}
	return target, "", ""
}

// RevertDesired is what a pod is resized back to after harm: from, the
// values its resize lowered as they were before, raised back where the pod
// has them lower; everything else is left as the pod has it.
func RevertDesired(current, from resources.Resources) resources.Resources {
	out := resources.Resources{}
	resources.ForEachValue(from, current, func(c, list string, name corev1.ResourceName, was, now *resource.Quantity) {
		if was != nil && now != nil && now.Cmp(*was) < 0 {
			setValue(out, c, list, name, *was)
		}
	})
	if len(out) == 0 {
		return nil
	}
	return out
}
