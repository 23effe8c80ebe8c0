// Package resources holds the cpu and memory requests and limits of a pod's
// containers, as the updater compares, records and reports them.
package resources

import (
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Resources are the cpu and memory requests and limits of each container,
// keyed by container name: the values that were, or would be, patched.
type Resources map[string]corev1.ResourceRequirements

// ForEachValue calls fn for every (container, requests|limits, resource)
// present in a or b, in a stable order. The quantities fn is given are
// valid only during that call (fn copies what it keeps): every decision
// compares values this way, so it allocates no set, and no quantity per
// value.
func ForEachValue(a, b Resources, fn func(container, list string, name corev1.ResourceName, av, bv *resource.Quantity)) {
	var buf [4]string
	names := buf[:0]
	for c := range a {
		names = append(names, c)
	}
	for c := range b {
		if _, both := a[c]; !both {
			names = append(names, c)
		}
	}
	slices.Sort(names)
	var aq, bq resource.Quantity
	for _, c := range names {
		ar, br := a[c], b[c]
		for _, list := range [2]string{"requests", "limits"} {
			al, bl := ar.Requests, br.Requests
			if list == "limits" {
				al, bl = ar.Limits, br.Limits
			}
			for _, name := range [2]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				fn(c, list, name, get(al, name, &aq), get(bl, name, &bq))
			}
		}
	}
}

// get copies l's value of name into slot, and returns slot; nil when l
// has none.
func get(l corev1.ResourceList, name corev1.ResourceName, slot *resource.Quantity) *resource.Quantity {
	q, ok := l[name]
	if !ok {
		return nil
	}
	*slot = q
	return slot
}

// Equal reports whether two Resources hold the same values.
func Equal(a, b Resources) bool {
	eq := true
	ForEachValue(a, b, func(_, _ string, _ corev1.ResourceName, av, bv *resource.Quantity) {
		if (av == nil) != (bv == nil) || (av != nil && av.Cmp(*bv) != 0) {
			eq = false
		}
	})
	return eq
}

// String renders Resources compactly and deterministically, for events,
// logs and status: "c: requests cpu=200m memory=200Mi, limits cpu=400m".
func (r Resources) String() string {
	names := make([]string, 0, len(r))
	for c := range r {
		names = append(names, c)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, c := range names {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(c)
		b.WriteString(":")
		for _, part := range []struct {
			label string
			list  corev1.ResourceList
		}{{"requests", r[c].Requests}, {"limits", r[c].Limits}} {
			if len(part.list) == 0 {
				continue
			}
			b.WriteString(" " + part.label)
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if q, ok := part.list[name]; ok {
					b.WriteString(" " + string(name) + "=" + q.String())
				}
			}
		}
	}
	return b.String()
}

// PodLevel is the key under which Resources holds the pod-level requests and
// limits (spec.resources, KEP-2837) of a pod whose resize changes them. It
// cannot be a container's name: container names are DNS labels, without
// parentheses. String renders it first.
const PodLevel = "(pod)"

// Values are Resources in compact form, for state kept long (the watch of
// each resize for its window, the last resize of every pod): one slice of
// values rather than a map per container and per list. One container's cpu
// and memory requests take 80 bytes this way, about 1,150 as Resources.
type Values []Value

// Value is one request or limit of one container, in 40 bytes rather than
// the 96 of a name and a resource.Quantity: the quantity is kept as an
// int64 count of units, thousandths or billionths, the first that holds it
// exactly (any value up to 2^63-1 units, to the thousandth up to 2^63-1
// thousandths, to the billionth up to 2^63-1 billionths); a quantity
// beyond that is kept whole.
type Value struct {
	Container string
	// amount × 10^scale is the quantity, in format; big holds it instead
	// when no amount does.
	amount int64
	big    *resource.Quantity
	scale  int8
	format uint8
	kind   uint8
}

// kind bits of a Value.
const (
	valueLimit uint8 = 1 << iota
	valueMemory
)

// formats are the quantity formats a Value knows by index.
var formats = [...]resource.Format{resource.DecimalSI, resource.BinarySI, resource.DecimalExponent}

// compactScales are the powers of ten a Value's amount may be counted in,
// tried in turn: the first that holds a quantity exactly is used.
var compactScales = [...]resource.Scale{0, resource.Milli, resource.Nano}

// newValue returns the value name=q of container's requests, or of its
// limits. name is cpu or memory: any other is kept as cpu.
func newValue(container string, limit bool, name corev1.ResourceName, q resource.Quantity) Value {
	v := Value{Container: container}
	if limit {
		v.kind |= valueLimit
	}
	if name == corev1.ResourceMemory {
		v.kind |= valueMemory
	}
	if f := slices.Index(formats[:], q.Format); f >= 0 {
		for _, scale := range compactScales {
			amount := q.ScaledValue(scale)
			if resource.NewScaledQuantity(amount, scale).Cmp(q) != 0 {
				continue
			}
			c := v
			c.amount, c.scale, c.format = amount, int8(scale), uint8(f)
			// A quantity parsed from text may render as that text
			// ("1.100"), not in canonical form ("1100m"): it is kept
			// whole, to render the same in events.
			if r := c.Quantity(); r.String() == q.String() {
				return c
			}
			break
		}
	}
	whole := q
	v.big = &whole
	return v
}

// Limit tells whether the value is a limit (else a request).
func (v Value) Limit() bool { return v.kind&valueLimit != 0 }

// Name is the value's resource: cpu or memory.
func (v Value) Name() corev1.ResourceName {
	if v.kind&valueMemory != 0 {
		return corev1.ResourceMemory
	}
	return corev1.ResourceCPU
}

// Quantity returns the value's quantity, equal to the one it was made of
// and rendered the same.
func (v Value) Quantity() resource.Quantity {
	if v.big != nil {
		return *v.big
	}
	q := *resource.NewScaledQuantity(v.amount, resource.Scale(v.scale))
	q.Format = formats[v.format]
	return q
}

// Compact returns r's values, in ForEachValue's order; nil when r has none.
func Compact(r Resources) Values {
	var out Values
	ForEachValue(r, nil, func(c, list string, name corev1.ResourceName, q, _ *resource.Quantity) {
		if q != nil {
			if out == nil {
				out = make(Values, 0, 2*len(r))
			}
			out = append(out, newValue(c, list == "limits", name, *q))
		}
	})
	return out
}

// Resources returns the values as Resources; nil when there are none.
func (v Values) Resources() Resources {
	if len(v) == 0 {
		return nil
	}
	out := Resources{}
	for _, x := range v {
		r := out[x.Container]
		l := &r.Requests
		if x.Limit() {
			l = &r.Limits
		}
		if *l == nil {
			*l = corev1.ResourceList{}
		}
		(*l)[x.Name()] = x.Quantity()
		out[x.Container] = r
	}
	return out
}

// Request returns the request name of container, and whether the values
// have it.
func (v Values) Request(container string, name corev1.ResourceName) (resource.Quantity, bool) {
	for _, x := range v {
		if !x.Limit() && x.Container == container && x.Name() == name {
			return x.Quantity(), true
		}
	}
	return resource.Quantity{}, false
}

// Containers returns the containers the values are of, as Resources with
// no value: what a function that reads a pod's values "like" these takes.
func (v Values) Containers() Resources {
	out := make(Resources, 1)
	for _, x := range v {
		out[x.Container] = corev1.ResourceRequirements{}
	}
	return out
}
