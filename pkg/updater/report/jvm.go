package report

import "github.com/prometheus/client_golang/prometheus"

// JVMs (docs/jvm.md): the memory of a JVM is not lowered in place under
// its heap floor, nor at all while its heap is unknown.

// Event reasons of JVMs, on the pod and on its VPA.
const (
	// EventJVMHeapFloor: a JVM container's memory is kept at its heap
	// floor (heap + overhead) instead of the lower value recommended; the
	// rest of the resize is sent. Normal, once per pod and recommendation.
	EventJVMHeapFloor = "InPlaceResizeJVMHeapFloor"
	// EventJVMHeapUnknown: a JVM container's heap is unknown (set from a
	// ConfigMap or a Secret, in a file, by a shell, or the VPA's
	// annotation cannot be read): its memory is not lowered in place.
	// Warning, once per pod and recommendation.
	EventJVMHeapUnknown = "InPlaceResizeJVMHeapUnknown"
	// EventJVMAnnotationInvalid: the VPA's vpa-inplace.dev/jvm annotation
	// cannot be read; no memory of its pods is lowered in place until it
	// can. Warning on the VPA, once per value.
	EventJVMAnnotationInvalid = "InPlaceJVMAnnotationInvalid"
)

// MetricJVMMemoryFloored counts what EventJVMHeapFloor and
// EventJVMHeapUnknown report.
const MetricJVMMemoryFloored = "vpa_inplace_updater_jvm_memory_floored_total"

// Reasons of MetricJVMMemoryFloored.
const (
	JVMHeapFloor   = "HeapFloor"
	JVMHeapUnknown = "HeapUnknown"
)

func newJVMFloored() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricJVMMemoryFloored,
		Help: "Recommendations whose memory for a JVM container was not lowered as recommended, once per pod and recommendation, by reason: HeapFloor (kept at heap + overhead), HeapUnknown (not lowered: the heap is unknown).",
	}, []string{"reason"})
	for _, r := range []string{JVMHeapFloor, JVMHeapUnknown} {
		c.WithLabelValues(r)
	}
	return c
}

// JVMFloored counts one recommendation whose memory a JVM's floor kept
// (unknown: the heap is unknown).
func (m *Metrics) JVMFloored(unknown bool) {
	if m == nil {
		return
	}
	reason := JVMHeapFloor
	if unknown {
		reason = JVMHeapUnknown
	}
	m.jvmFloored.WithLabelValues(reason).Inc()
}
