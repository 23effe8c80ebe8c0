package jvm

import (
	"errors"
	"fmt"
)

// ErrNoLimit is Heap.Bytes' answer for a heap sized from the memory limit
// when the container had none: the JVM then sized it from the node's memory,
// which this package does not know.
var ErrNoLimit = errors.New("the heap is a share of the memory limit, and the container had none")

// The JVM's defaults (HotSpot, 64-bit), used when no flag sets them.
const (
	// DefaultMaxRAMPercentage is the share of the memory limit the JVM
	// takes for its heap when nothing sets it.
	DefaultMaxRAMPercentage = 25.0
	// defaultMinRAMPercentage is the share it takes instead under a small
	// limit (see ergonomic).
	defaultMinRAMPercentage = 50.0
	// defaultMaxHeapSize is HotSpot's default MaxHeapSize on 64-bit: 96 MiB
	// scaled by 13/10 and aligned down to a word (about 124.8 MiB). Its
	// ergonomics never give less outside small memory.
	defaultMaxHeapSize int64 = 130862280
)

type heapKind uint8

const (
	heapFixed     heapKind = iota + 1 // -Xmx, -XX:MaxHeapSize
	heapErgonomic                     // the JVM's share of the memory limit
	heapStrimzi                       // Strimzi's image: -Xmx computed from the limit at start
)

// Heap is the bound of a JVM's heap: a fixed size, or a share of the memory
// limit in force when the container started (the JVM sizes its heap once,
// then). The zero Heap is no heap.
type Heap struct {
	kind heapKind
	// size is the fixed heap; for Strimzi's dynamic heap,
	// STRIMZI_DYNAMIC_HEAP_MAX (0 for none).
	size int64
	// maxPct and minPct are MaxRAMPercentage and MinRAMPercentage in force.
	maxPct, minPct float64
	// maxRAM is -XX:MaxRAM: the memory the JVM sizes from instead of the
	// limit (0: the limit).
	maxRAM int64
	// initial is the largest -Xms, -XX:InitialHeapSize or -XX:MinHeapSize:
	// without -Xmx, the JVM's heap is never smaller.
	initial int64
}

// FixedHeap is a heap of a fixed size, as -Xmx sets it.
func FixedHeap(bytes int64) Heap { return Heap{kind: heapFixed, size: bytes} }

// PercentHeap is a heap sized from the memory limit at start as
// -XX:MaxRAMPercentage=pct sizes it.
func PercentHeap(pct float64) Heap {
	return Heap{kind: heapErgonomic, maxPct: pct, minPct: defaultMinRAMPercentage}
}

// IsZero tells whether h is no heap.
func (h Heap) IsZero() bool { return h.kind == 0 }

// FromLimit tells whether the heap was sized from the memory limit in force
// when the container started: a raise in place gives it nothing until the
// container restarts, and the floor depends on that limit.
func (h Heap) FromLimit() bool {
	return (h.kind == heapErgonomic || h.kind == heapStrimzi) && h.maxRAM == 0
}

// Percent is the share of the memory limit the heap was sized as
// (MaxRAMPercentage in force), 0 for a fixed heap.
func (h Heap) Percent() float64 {
	if h.kind == heapFixed {
		return 0
	}
	return h.maxPct
}

// Bytes is the most heap the JVM reserves, given the memory limit in force
// when the container started (ignored for a fixed heap). It is rounded up to
// a bound of the JVM's heap alignment, so never less than the JVM's own
// figure; where the JVM caps its ergonomic heap further (compressed oops,
// 128 GiB of memory at most without a RAM flag) it may be more.
func (h Heap) Bytes(limitAtStart int64) (int64, error) {
	switch h.kind {
	case heapFixed:
		return alignHeap(h.size), nil
	case heapErgonomic:
		return h.ergonomic(limitAtStart)
	case heapStrimzi:
		// The image asks a JVM for its heap at this percentage, reads
		// back the printed figure, caps it and passes it as -Xmx.
		e, err := h.ergonomic(limitAtStart)
		if err != nil {
			return 0, err
		}
		p := printedHeap(e)
		if h.size > 0 && h.size < p {
			p = h.size
		}
		return alignHeap(p), nil
	}
	return 0, errors.New("no heap")
}

// ergonomic is HotSpot's sizing of a heap no -Xmx sets: a share of the
// memory (MaxRAM, else the limit); under a small memory, where
// MinRAMPercentage of it would be less than the default MaxHeapSize, that
// smaller share instead; otherwise never less than the default
// MaxHeapSize; and never less than the initial heap.
func (h Heap) ergonomic(limit int64) (int64, error) {
	phys := h.maxRAM
	if phys == 0 {
		if limit <= 0 {
			return 0, ErrNoLimit
		}
		if limit > MaxSize {
			return 0, errTooLarge
		}
		phys = limit
	}
	// As the JVM computes it: the size times the percentage, in floating
	// point, over 100, truncated.
	reasonableMax := int64(float64(phys) * h.maxPct / 100)
	reasonableMin := int64(float64(phys) * h.minPct / 100)
	if reasonableMin < defaultMaxHeapSize {
		reasonableMax = reasonableMin
	} else {
		reasonableMax = max(reasonableMax, defaultMaxHeapSize)
	}
	return alignHeap(max(reasonableMax, h.initial)), nil
}

// String describes h for a message: "1Gi", "25% of the memory limit at
// start", "50% of the memory limit at start, at most 5Gi".
func (h Heap) String() string {
	switch h.kind {
	case heapFixed:
		return formatBytes(h.size)
	case heapErgonomic, heapStrimzi:
		s := formatPercent(h.maxPct) + "% of the memory limit at start"
		if h.maxRAM > 0 {
			s = fmt.Sprintf("%s%% of %s (-XX:MaxRAM)", formatPercent(h.maxPct), formatBytes(h.maxRAM))
		}
		if h.initial > 0 {
			s += ", at least " + formatBytes(h.initial)
		}
		if h.kind == heapStrimzi && h.size > 0 {
			s += ", at most " + formatBytes(h.size)
		}
		return s
	}
	return "no heap"
}
