package owner

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// The work of the spans of shards, measured by client-go's workqueue
// metrics (workqueue.MetricsProvider) on the queues of each span's
// controller. Two of them are kept, the others dropped: how long an item
// waited in its queue before a worker took it (the lag an operator alerts
// on), and how long the longest running worker has been at its item (a
// worker stuck on one item takes no more, and its queue's lag shows
// nothing until it returns). A span's queues hold the keys of all its
// shards, unlabelled, so each measure counts under every shard of the span:
// the label set stays bounded by the number of shards (and the four queues),
// whatever spans the shards are held in. Aggregate over shards with max,
// not sum.

// workLagBuckets are the lag's buckets: a few milliseconds when workers
// keep up, up to the resync interval (a minute by default) and past it when
// they do not.
var workLagBuckets = []float64{0.01, 0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 900}

// Work is the metrics of the work queues of one span's controller. A nil
// *Work measures nothing.
type Work struct {
	m      *Metrics
	shards []string

	mu sync.Mutex
	// longest are the gauges its queues set, zeroed by Stop.
	longest []prometheus.Gauge
}

// Work returns the metrics of the work queues of the controller of a span
// of shards; nil when m is nil.
func (m *Metrics) Work(shards []int) *Work {
	if m == nil {
		return nil
	}
	w := &Work{m: m, shards: make([]string, 0, len(shards))}
	for _, k := range shards {
		w.shards = append(w.shards, strconv.Itoa(k))
	}
	return w
}

// Queue returns the metrics provider of the span's queue named queue, for
// its workqueue config; nil (the library's default: none) when w is nil.
func (w *Work) Queue(queue string) workqueue.MetricsProvider {
	if w == nil {
		return nil
	}
	return queueMetrics{w: w, queue: queue}
}

// Stop zeroes the longest running work of the span's shards, once its
// queues are shut down (nothing sets them then): a shard given up shows
// no worker at work here.
func (w *Work) Stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, g := range w.longest {
		g.Set(0)
	}
}

// queueMetrics is the provider of one queue of a span.
type queueMetrics struct {
	w     *Work
	queue string
}

var _ workqueue.MetricsProvider = queueMetrics{}

// NewLatencyMetric is the lag: the library observes it when a worker takes
// an item, from when the item was queued.
func (q queueMetrics) NewLatencyMetric(string) workqueue.HistogramMetric {
	out := make(observers, 0, len(q.w.shards))
	for _, s := range q.w.shards {
		out = append(out, q.w.m.lag.WithLabelValues(s, q.queue))
	}
	return out
}

// NewLongestRunningProcessorSecondsMetric is the longest running work: the
// library sets it every half second while the queue runs.
func (q queueMetrics) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	out := make(gauges, 0, len(q.w.shards))
	for _, s := range q.w.shards {
		out = append(out, q.w.m.longest.WithLabelValues(s, q.queue))
	}
	q.w.mu.Lock()
	defer q.w.mu.Unlock()
	q.w.longest = append(q.w.longest, out...)
	return out
}

func (queueMetrics) NewDepthMetric(string) workqueue.GaugeMetric { return noMetric{} }

func (queueMetrics) NewAddsMetric(string) workqueue.CounterMetric { return noMetric{} }

func (queueMetrics) NewWorkDurationMetric(string) workqueue.HistogramMetric { return noMetric{} }

func (queueMetrics) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noMetric{}
}

func (queueMetrics) NewRetriesMetric(string) workqueue.CounterMetric { return noMetric{} }

// observers observe into the histograms of every shard of a span.
type observers []prometheus.Observer

func (o observers) Observe(v float64) {
	for _, h := range o {
		h.Observe(v)
	}
}

// gauges set the gauges of every shard of a span.
type gauges []prometheus.Gauge

func (g gauges) Set(v float64) {
	for _, x := range g {
		x.Set(v)
	}
}

// noMetric is a metric the spans do not keep.
type noMetric struct{}

func (noMetric) Inc()            {}
func (noMetric) Dec()            {}
func (noMetric) Set(float64)     {}
func (noMetric) Observe(float64) {}
