package jvm

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Annotation, on a VPA, declares which of its target's containers are JVMs,
// for images whose options the spec does not show, and may set a
// container's overhead and heap:
//
//	vpa-inplace.dev/jvm: "kafka overhead=768Mi+10%; connect heap=2Gi; *"
//
// Entries are separated by ";". Each names a container ("*" for every
// container the others do not name), then options: overhead= an overhead as
// ParseOverhead reads it (instead of DefaultOverhead), heap= a Kubernetes
// quantity or a percentage of the memory limit at start (as
// -XX:MaxRAMPercentage), the heap where the spec states none.
const Annotation = "vpa-inplace.dev/jvm"

// Bounds of the annotation's value.
const (
	// MaxAnnotationLength bounds the value, in bytes.
	MaxAnnotationLength = 2048
	// MaxDeclarations bounds its entries.
	MaxDeclarations = 64
)

// Declaration is the annotation's entry for one container: it is a JVM.
type Declaration struct {
	// Heap is the heap where the spec states none (nil: the JVM's
	// default there).
	Heap *Heap
	// Overhead replaces DefaultOverhead (nil: the default).
	Overhead *Overhead
}

// OverheadOrDefault is d's overhead, or DefaultOverhead.
func (d Declaration) OverheadOrDefault() Overhead {
	if d.Overhead != nil {
		return *d.Overhead
	}
	return DefaultOverhead
}

// Declarations is a parsed annotation. The zero value declares nothing.
type Declarations struct {
	byName map[string]Declaration
	all    *Declaration
}

// For returns the declaration for a container: its own entry, else "*"'s.
func (ds Declarations) For(container string) (Declaration, bool) {
	if d, ok := ds.byName[container]; ok {
		return d, true
	}
	if ds.all != nil {
		return *ds.all, true
	}
	return Declaration{}, false
}

// Inspect is Inspect of c with the declaration for c's name, if any.
func (ds Declarations) Inspect(c *corev1.Container) Result {
	if d, ok := ds.For(c.Name); ok {
		return Inspect(c, &d)
	}
	return Inspect(c, nil)
}

// Len is the number of entries.
func (ds Declarations) Len() int {
	n := len(ds.byName)
	if ds.all != nil {
		n++
	}
	return n
}

// String writes ds as ParseAnnotation reads it, entries sorted by name,
// "*" last.
func (ds Declarations) String() string {
	names := make([]string, 0, len(ds.byName))
	for n := range ds.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var entries []string
	for _, n := range names {
		entries = append(entries, ds.byName[n].entry(n))
	}
	if ds.all != nil {
		entries = append(entries, ds.all.entry("*"))
	}
	return strings.Join(entries, "; ")
}

func (d Declaration) entry(name string) string {
	s := name
	if d.Overhead != nil {
		s += " overhead=" + d.Overhead.String()
	}
	if d.Heap != nil {
		if d.Heap.kind == heapFixed {
			s += " heap=" + formatBytes(d.Heap.size)
		} else {
			s += " heap=" + formatPercent(d.Heap.maxPct) + "%"
		}
	}
	return s
}

// ParseAnnotation reads the annotation's value, bounded (length, entries,
// quantities) before anything else.
func ParseAnnotation(value string) (Declarations, error) {
	if len(value) > MaxAnnotationLength {
		return Declarations{}, fmt.Errorf("%s is %d bytes long, more than %d", Annotation, len(value), MaxAnnotationLength)
	}
	if n := strings.Count(value, ";") + 1; n > MaxDeclarations {
		return Declarations{}, fmt.Errorf("%s has %d entries, more than %d", Annotation, n, MaxDeclarations)
	}
	ds := Declarations{byName: map[string]Declaration{}}
	for entry := range strings.SplitSeq(value, ";") {
		fields := strings.Fields(entry)
		if len(fields) == 0 {
			continue
		}
		name := fields[0]
		d, err := parseEntry(fields[1:])
		if err != nil {
			return Declarations{}, fmt.Errorf("%s entry %s: %w", Annotation, quote(strings.TrimSpace(entry)), err)
		}
		switch {
		case name == "*":
			if ds.all != nil {
				return Declarations{}, fmt.Errorf("%s names * twice", Annotation)
			}
			ds.all = &d
		case len(validation.IsDNS1123Label(name)) > 0:
			return Declarations{}, fmt.Errorf("%s entry %s: %s is not a container name", Annotation, quote(strings.TrimSpace(entry)), quote(name))
		default:
			if _, ok := ds.byName[name]; ok {
				return Declarations{}, fmt.Errorf("%s names container %s twice", Annotation, quote(name))
			}
			ds.byName[name] = d
		}
	}
	if ds.Len() == 0 {
		return Declarations{}, fmt.Errorf("%s names no container", Annotation)
	}
	return ds, nil
}

func parseEntry(options []string) (Declaration, error) {
	var d Declaration
	for _, opt := range options {
		key, value, ok := strings.Cut(opt, "=")
		switch {
		case !ok:
			return Declaration{}, fmt.Errorf("option %s: want overhead=... or heap=...", quote(opt))
		case key == "overhead":
			if d.Overhead != nil {
				return Declaration{}, fmt.Errorf("overhead given twice")
			}
			o, err := ParseOverhead(value)
			if err != nil {
				return Declaration{}, err
			}
			d.Overhead = &o
		case key == "heap":
			if d.Heap != nil {
				return Declaration{}, fmt.Errorf("heap given twice")
			}
			h, err := parseDeclaredHeap(value)
			if err != nil {
				return Declaration{}, err
			}
			d.Heap = &h
		default:
			return Declaration{}, fmt.Errorf("option %s: want overhead=... or heap=...", quote(opt))
		}
	}
	return d, nil
}

// parseDeclaredHeap reads heap=: a quantity ("1Gi"), or a percentage of
// the memory limit at start ("50%").
func parseDeclaredHeap(s string) (Heap, error) {
	if pct, ok := strings.CutSuffix(s, "%"); ok {
		p, err := parsePercent(pct)
		if err != nil || p == 0 {
			return Heap{}, fmt.Errorf("heap %s: want a percentage above 0 and at most 100", quote(s))
		}
		return PercentHeap(p), nil
	}
	v, err := parseQuantity(s)
	if err != nil {
		return Heap{}, fmt.Errorf("heap %s: %w", quote(s), err)
	}
	if v == 0 {
		return Heap{}, fmt.Errorf("heap %s is zero", quote(s))
	}
	return FixedHeap(v), nil
}
