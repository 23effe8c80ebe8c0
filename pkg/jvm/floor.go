package jvm

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vpa-inplace/vpa-inplace/pkg/quantity"
)

// Overhead is the memory a JVM uses besides its heap: a fixed part and a
// share of the heap. The package comment gives the reasoning of
// DefaultOverhead.
type Overhead struct {
	// Fixed is what does not grow with the heap: metaspace, code cache,
	// thread stacks, the allocator's and native libraries' memory, bytes.
	Fixed int64
	// Percent of the heap is what grows with it: the collector's own
	// structures, direct buffers of a broker sized to its load.
	Percent float64
}

// DefaultOverhead is 512 MiB plus 15% of the heap, right for a Kafka
// broker (see the package comment).
var DefaultOverhead = Overhead{Fixed: 512 * MiB, Percent: 15}

// Bounds of an overhead.
const (
	// MaxOverheadPercent bounds Overhead.Percent.
	MaxOverheadPercent = 100
)

// Validate tells whether o is within bounds.
func (o Overhead) Validate() error {
	if o.Fixed < 0 || o.Fixed > MaxSize {
		return fmt.Errorf("overhead %s is not between 0 and %s", formatBytes(o.Fixed), formatBytes(MaxSize))
	}
	if !(o.Percent >= 0 && o.Percent <= MaxOverheadPercent) {
		return fmt.Errorf("overhead %s%% of the heap is not between 0 and %d%%", formatPercent(o.Percent), MaxOverheadPercent)
	}
	return nil
}

// String writes o as ParseOverhead reads it: "512Mi+15%", "1Gi", "20%".
func (o Overhead) String() string {
	switch {
	case o.Percent == 0:
		return formatBytes(o.Fixed)
	case o.Fixed == 0:
		return formatPercent(o.Percent) + "%"
	}
	return formatBytes(o.Fixed) + "+" + formatPercent(o.Percent) + "%"
}

// ParseOverhead reads an overhead: a Kubernetes quantity of memory, a
// percentage of the heap, or both joined by "+" ("512Mi+15%"). It is
// bounded before it is parsed.
func ParseOverhead(s string) (Overhead, error) {
	if len(s) > maxOverheadLength {
		return Overhead{}, fmt.Errorf("overhead is %d bytes long, more than %d", len(s), maxOverheadLength)
	}
	var o Overhead
	fixed, percent := false, false
	for term := range strings.SplitSeq(s, "+") {
		switch {
		case strings.HasSuffix(term, "%"):
			if percent {
				return Overhead{}, fmt.Errorf("overhead %s has two percentages", quote(s))
			}
			percent = true
			p, err := parsePercent(strings.TrimSuffix(term, "%"))
			if err != nil {
				return Overhead{}, fmt.Errorf("overhead %s: %w", quote(s), err)
			}
			o.Percent = p
		default:
			if fixed {
				return Overhead{}, fmt.Errorf("overhead %s has two sizes", quote(s))
			}
			fixed = true
			v, err := parseQuantity(term)
			if err != nil {
				return Overhead{}, fmt.Errorf("overhead %s: %w", quote(s), err)
			}
			o.Fixed = v
		}
	}
	return o, o.Validate()
}

// maxOverheadLength bounds an overhead's text.
const maxOverheadLength = 64

var maxSizeQuantity = resource.NewQuantity(MaxSize, resource.BinarySI)

// parseQuantity reads a Kubernetes quantity of bytes, bounded, rounded up
// to a whole byte, from 0 to MaxSize.
func parseQuantity(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("empty quantity")
	}
	q, err := quantity.Parse(s)
	if err != nil {
		return 0, err
	}
	if q.Sign() < 0 {
		return 0, fmt.Errorf("quantity %s is negative", quote(s))
	}
	if q.Cmp(*maxSizeQuantity) > 0 {
		return 0, fmt.Errorf("quantity %s is %w", quote(s), errTooLarge)
	}
	return q.Value(), nil
}

// Floor is the least memory limit a JVM with this heap may be lowered to in
// place: heap + o.Fixed + o.Percent of the heap, rounded up to a whole MiB.
// A limit under it lets the JVM reach its own heap and be OOM-killed under
// load.
func Floor(heap int64, o Overhead) (int64, error) {
	if heap < 0 || heap > MaxSize {
		return 0, fmt.Errorf("heap %d is not between 0 and %s", heap, formatBytes(MaxSize))
	}
	if err := o.Validate(); err != nil {
		return 0, err
	}
	// Each term is at most MaxSize (2^50): the sum cannot overflow.
	share := int64(float64(heap) * o.Percent / 100)
	if float64(share) < float64(heap)*o.Percent/100 {
		share++
	}
	f := heap + o.Fixed + share
	return (f + MiB - 1) / MiB * MiB, nil
}

// Floor is the floor of r's heap, given the memory limit in force when the
// container started (for a heap sized from it) and the overhead.
func (r Result) Floor(limitAtStart int64, o Overhead) (int64, error) {
	if !r.Known {
		return 0, fmt.Errorf("the heap is unknown: %s", r.Message)
	}
	heap, err := r.Heap.Bytes(limitAtStart)
	if err != nil {
		return 0, err
	}
	return Floor(heap, o)
}
