package admission

import (
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/recommendation"
	"github.com/vpa-inplace/vpa-inplace/pkg/records"
	"github.com/vpa-inplace/vpa-inplace/pkg/resize"
)

// HoldAnnotation is the pod annotation that says which values a new pod
// got from its VPA's hold after harm instead of the recommendation, and
// why: "held after harm (web-0: container app OOMKilled) until
// 2026-11-27T12:31:00Z: container app memory request 100Mi (recommended
// 50Mi)". Informational; nothing reads it back.
const HoldAnnotation = "vpa-inplace.dev/held-after-harm"

// maxHoldAnnotation bounds HoldAnnotation's value.
const maxHoldAnnotation = 1024

// heldValue is one value of a new pod that the hold changed.
type heldValue struct {
	container, list string
	name            corev1.ResourceName
	// got is what the pod gets; kept: the pod keeps its own (the hold
	// does not say what the value was before the harm).
	got         resource.Quantity
	kept        bool
	recommended resource.Quantity
}

// holding applies the VPA's hold after harm, when one stands at now, to
// the values desired gives a new pod, as the updater's gate holds a
// decrease back (records.IsHeld): a value at or below the held one is
// given what it was before the harm (the hold's From), or the
// recommendation when that is higher; a hold written before holds kept
// From leaves the pod's own value. A value above the held one is the
// recommendation's: it has risen above the hold. It returns desired
// (itself when nothing is held: it may be shared, and is never changed)
// and the annotation saying what was held, if anything was.
func holding(desired recommendation.Desired, hold *records.Record, now time.Time) (recommendation.Desired, []annotation) {
	if hold == nil || !now.Before(hold.HoldEnds(records.DefaultHoldLength)) {
		return desired, nil
	}
	var held []heldValue
	var out recommendation.Desired
	for _, c := range slices.Sorted(maps.Keys(desired)) {
		want := desired[c]
		requests, rh := holdList(c, "requests", want.Requests, hold)
		limits, lh := holdList(c, "limits", want.Limits, hold)
		if len(rh)+len(lh) == 0 {
			continue
		}
		held = append(append(held, rh...), lh...)
		// No limit below its request: the pod stays valid.
		copied := len(lh) > 0
		for name, q := range limits {
			if r, ok := requests[name]; ok && q.Cmp(r) < 0 {
				if !copied {
					limits, copied = limits.DeepCopy(), true
				}
				limits[name] = r.DeepCopy()
			}
		}
		if out == nil {
			out = make(recommendation.Desired, len(desired))
			for name, d := range desired {
				out[name] = d
			}
		}
		want.Requests, want.Limits = requests, limits
		out[c] = want
	}
	if out == nil {
		return desired, nil
	}
	return out, []annotation{{key: HoldAnnotation, value: holdNote(hold, held)}}
}

// holdList returns list with the values hold holds changed (a copy, when
// any is), and those values.
func holdList(c, which string, list corev1.ResourceList, hold *records.Record) (corev1.ResourceList, []heldValue) {
	var held []heldValue
	out := list
	for _, name := range slices.Sorted(maps.Keys(list)) {
		q := list[name]
		floor, ok := resize.Value(hold.Attempted, c, which, name)
		if !ok || !records.IsHeld(q, floor) {
			continue
		}
		if len(held) == 0 {
			out = list.DeepCopy()
		}
		v := heldValue{container: c, list: which, name: name, recommended: q}
		switch from, ok := resize.Value(hold.From, c, which, name); {
		case !ok:
			v.kept = true
			delete(out, name)
		case from.Cmp(q) > 0:
			v.got = from
			out[name] = from.DeepCopy()
		default:
			continue
		}
		held = append(held, v)
	}
	return out, held
}

// holdNote is HoldAnnotation's value: the hold and the values it changed,
// within maxHoldAnnotation bytes.
func holdNote(hold *records.Record, held []heldValue) string {
	var b strings.Builder
	b.WriteString("held after harm (")
	b.WriteString(hold.Message)
	b.WriteString(") until ")
	b.WriteString(hold.HoldEnds(records.DefaultHoldLength).UTC().Format(time.RFC3339))
	b.WriteString(":")
	for i, v := range held {
		if i > 0 {
			b.WriteString(";")
		}
		b.WriteString(" container ")
		b.WriteString(v.container)
		b.WriteString(" ")
		b.WriteString(string(v.name))
		b.WriteString(strings.TrimSuffix(" "+v.list, "s"))
		if v.kept {
			b.WriteString(" left as the pod has it")
		} else {
			b.WriteString(" ")
			b.WriteString(v.got.String())
		}
		b.WriteString(" (recommended ")
		b.WriteString(v.recommended.String())
		b.WriteString(")")
	}
	return truncateNote(b.String(), maxHoldAnnotation)
}

// truncateNote cuts s to at most n bytes, on a character boundary.
func truncateNote(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "..."
}
